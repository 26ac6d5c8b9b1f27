package storage

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
)

// TestSchemaSummarisesSegments imports random events and users in several
// segments and blocks and checks Schema against a naive count of the input.
func TestSchemaSummarisesSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	st := openTest(t, 4)
	colors := []string{"red", "green", "blue", "black", "white"}
	type want struct {
		count    int64
		values   map[string]int64
		min, max float64
		ranged   bool
	}
	evNames := map[string]int64{}
	props := map[string]*want{"color": {values: map[string]int64{}}, "n": {}, "f": {}, "ok": {values: map[string]int64{}}, "plan": {values: map[string]int64{}}}
	num := func(w *want, v float64) {
		w.count++
		if !w.ranged || v < w.min {
			w.min = v
		}
		if !w.ranged || v > w.max {
			w.max = v
		}
		w.ranged = true
	}
	var batches [][]event.Event
	for b := range 3 {
		var evs []event.Event
		for i := range 300 {
			ev := event.Event{UserID: fmt.Sprintf("u%d", r.IntN(40)), Time: int64(1_700_000_000_000_000 + r.IntN(1e9)),
				Name: names[r.IntN(len(names))], Pos: event.Pos{File: "mem", Line: int64(i + 1)}}
			if b == 1 && i%7 == 0 {
				ev.InsertID = fmt.Sprintf("id%d", i)
			}
			evNames[ev.Name]++
			if r.IntN(3) > 0 {
				c := colors[r.IntN(r.IntN(len(colors))+1)]
				ev.Props = append(ev.Props, event.Prop{Name: "color", Value: event.String(c)})
				props["color"].count++
				props["color"].values[c]++
			}
			if r.IntN(2) == 0 {
				n := int64(r.IntN(1000) - 500)
				ev.Props = append(ev.Props, event.Prop{Name: "n", Value: event.Int(n)})
				num(props["n"], float64(n))
			}
			if r.IntN(4) == 0 {
				f := r.Float64()*10 - 3
				ev.Props = append(ev.Props, event.Prop{Name: "f", Value: event.Float(f)})
				num(props["f"], f)
			}
			if r.IntN(5) == 0 {
				ok := r.IntN(3) == 0
				ev.Props = append(ev.Props, event.Prop{Name: "ok", Value: event.Bool(ok)})
				props["ok"].count++
				props["ok"].values[fmt.Sprint(ok)]++
			}
			evs = append(evs, ev)
		}
		batches = append(batches, evs)
	}
	for _, evs := range batches {
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 100, BlockRows: 16}); err != nil {
			t.Fatal(err)
		}
	}
	var users []event.Event
	for i := range 50 {
		p := []string{"free", "pro"}[i%3/2]
		users = append(users, event.Event{UserID: fmt.Sprintf("u%d", i), Time: 1_700_000_000_000_000, Pos: event.Pos{File: "users", Line: int64(i + 1)},
			Props: []event.Prop{{Name: "plan", Value: event.String(p)}}})
		props["plan"].count++
		props["plan"].values[p]++
	}
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: users}}, ImportOptions{Kind: KindUsers}); err != nil {
		t.Fatal(err)
	}
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	const topN = 3
	sc, err := snapOf(t, a).Schema(context.Background(), topN)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapOf(t, a).SegmentsOf(KindEvents)) < 6 {
		t.Fatalf("want several segments per shard, got %d", len(snapOf(t, a).SegmentsOf(KindEvents)))
	}

	var wantNames []NameCount
	for n, c := range evNames {
		wantNames = append(wantNames, NameCount{n, c})
	}
	sortCounts(wantNames)
	if !slices.Equal(sc.EventNames, wantNames) || sc.Events != 900 {
		t.Errorf("event names %v (events %d), want %v (900)", sc.EventNames, sc.Events, wantNames)
	}
	got := map[string]PropSummary{}
	for _, p := range sc.EventProps {
		got[p.Name] = p
	}
	if _, ok := got[InsertIDProp]; ok || len(sc.EventProps) != 4 {
		t.Errorf("event props %v: want color, n, f, ok without %s", sc.EventProps, InsertIDProp)
	}
	if len(sc.UserProps) != 1 || sc.UserProps[0].Name != "plan" {
		t.Fatalf("user props %v", sc.UserProps)
	}
	got["plan"] = sc.UserProps[0]
	for name, w := range props {
		g := got[name]
		if g.Count != w.count {
			t.Errorf("%s: count %d, want %d", name, g.Count, w.count)
		}
		if w.values != nil {
			var top []NameCount
			for v, c := range w.values {
				top = append(top, NameCount{v, c})
			}
			sortCounts(top)
			if g.Distinct != int64(len(top)) || !slices.Equal(g.Top, top[:min(topN, len(top))]) {
				t.Errorf("%s: distinct %d top %v, want %d %v", name, g.Distinct, g.Top, len(top), top[:min(topN, len(top))])
			}
		}
		if w.ranged != (g.Min != nil) || w.ranged && (*g.Min != w.min || *g.Max != w.max) {
			t.Errorf("%s: range %v..%v, want %v..%v", name, g.Min, g.Max, w.min, w.max)
		}
	}
	if g := got["f"]; g.Type != event.TypeFloat || got["color"].Type != event.TypeString || got["ok"].Type != event.TypeBool {
		t.Errorf("types: %v %v %v", g.Type, got["color"].Type, got["ok"].Type)
	}
	if !slices.IsSortedFunc(sc.EventNames, func(a, b NameCount) int { return cmp.Compare(b.Count, a.Count) }) {
		t.Error("event names not sorted by count")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := snapOf(t, a).Schema(ctx, topN); err == nil {
		t.Error("Schema ignored a cancelled context")
	}
}
