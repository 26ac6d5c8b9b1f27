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

// TestUserEventsMatchNaiveTrail: over imports split into many segments
// and small blocks, every user's events (whole and in pages) are exactly
// the naive trail — time order, ties by arrival — with their properties
// and insert ids, and their current user properties are the latest
// writes (ties to the later arrival). It reads only blocks that hold the
// user.
func TestUserEventsMatchNaiveTrail(t *testing.T) {
	ctx := context.Background()
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 21))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_600_000_000_000_000)
		var all []event.Event
		for imp := range 3 {
			evs := randomEvents(r, 50+r.IntN(300), 1+r.IntN(30), t0)
			for i := range evs {
				if r.IntN(4) == 0 {
					evs[i].InsertID = fmt.Sprintf("i%d-%d", imp, i)
				}
				if r.IntN(3) == 0 {
					evs[i].Props = append(evs[i].Props, event.Prop{Name: "plan", Value: event.String([]string{"free", "pro"}[r.IntN(2)])})
				}
			}
			all = append(all, evs...)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 20 + r.IntN(200), BlockRows: 1 + r.IntN(40)}); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string][]event.Event{}
		for _, e := range all {
			want[e.UserID] = append(want[e.UserID], e)
		}
		type write struct {
			t int64
			v string
		}
		latest := map[string]write{}
		for part := range 2 {
			var ws []event.Event
			for i := range 40 {
				w := event.Event{UserID: fmt.Sprintf("u%d", r.IntN(35)), Time: t0 + int64(r.IntN(3))*1e6,
					Props: []event.Prop{{Name: "tier", Value: event.String(fmt.Sprintf("t%d-%d", part, i))}}, Pos: event.Pos{File: "users", Line: int64(i + 1)}}
				ws = append(ws, w)
				if l, ok := latest[w.UserID]; !ok || w.Time >= l.t {
					latest[w.UserID] = write{w.Time, w.Props[0].Value.Str}
				}
			}
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws}}, ImportOptions{Kind: KindUsers, BlockRows: 1 + r.IntN(8)}); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := st.App("app")
		snap := snapOf(t, a)
		blocks := 0
		for _, ref := range snap.Segments {
			rd, err := snap.Reader(ref)
			if err != nil {
				t.Fatal(err)
			}
			blocks += len(rd.Meta().Blocks)
		}
		for u := range 36 {
			id := fmt.Sprintf("u%d", u)
			w := want[id]
			slices.SortStableFunc(w, func(a, b event.Event) int { return cmp.Compare(a.Time, b.Time) })
			tr, err := snap.UserEvents(ctx, id, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Total != int64(len(w)) || len(tr.Events) != len(w) {
				t.Fatalf("seed %d user %s: %d events (total %d), want %d", seed, id, len(tr.Events), tr.Total, len(w))
			}
			for i, e := range tr.Events {
				if e.Time != w[i].Time || e.Event != w[i].Name || e.InsertID != w[i].InsertID || !sameProps(e.Props, w[i].Props) {
					t.Fatalf("seed %d user %s event %d: %+v, want %+v", seed, id, i, e, w[i])
				}
			}
			if len(w) > 0 && tr.BlocksRead >= blocks && blocks > 8 {
				t.Fatalf("seed %d user %s: read %d of %d blocks", seed, id, tr.BlocksRead, blocks)
			}
			for _, pg := range [][2]int{{0, 1}, {1, 3}, {len(w) - 1, 5}, {len(w), 2}, {len(w) + 3, 2}} {
				if pg[0] < 0 {
					continue
				}
				p, err := snap.UserEvents(ctx, id, pg[0], pg[1])
				if err != nil {
					t.Fatal(err)
				}
				end := min(len(w), pg[0]+pg[1])
				if p.Total != int64(len(w)) || len(p.Events) != max(0, end-pg[0]) {
					t.Fatalf("seed %d user %s page %v: %d events", seed, id, pg, len(p.Events))
				}
				for i, e := range p.Events {
					if e.Time != tr.Events[pg[0]+i].Time || e.Event != tr.Events[pg[0]+i].Event || !sameProps(e.Props, tr.Events[pg[0]+i].Props) {
						t.Fatalf("seed %d user %s page %v event %d differs", seed, id, pg, i)
					}
				}
			}
			props, err := snap.UserProperties(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			l, ok := latest[id]
			if ok != (len(props) == 1) || ok && (props[0].Name != "tier" || props[0].Value.Str != l.v) {
				t.Fatalf("seed %d user %s: properties %+v, want %+v", seed, id, props, l)
			}
		}
	}
	st := openTest(t, 1)
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: randomEvents(rand.New(rand.NewPCG(1, 1)), 10, 2, 1e15)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	if _, err := snapOf(t, a).UserEvents(ctx, "u0", -1, 10); err == nil {
		t.Fatal("negative offset accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := snapOf(t, a).UserEvents(cctx, "u0", 0, 10); err == nil {
		t.Fatal("cancelled context ignored")
	}
}

// sameProps compares properties as sets (got is sorted by name).
func sameProps(got, want []event.Prop) bool {
	w := slices.Clone(want)
	slices.SortFunc(w, func(a, b event.Prop) int { return cmp.Compare(a.Name, b.Name) })
	return slices.Equal(got, w)
}

// TestUserEventsDropsCopies: a copy of an event imported again (same user,
// event, timestamp and insert id; other properties) is not in the user's
// trail while the two are in different segments (docs/ingest.md §3: the
// first stored wins), nor is anything else lost.
func TestUserEventsDropsCopies(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, 1)
	t0 := int64(1_600_000_000_000_000)
	first := event.Event{UserID: "u", Name: "buy", Time: t0, InsertID: "x", Props: []event.Prop{{Name: "plan", Value: event.String("free")}}}
	copyEv := first
	copyEv.Props = []event.Prop{{Name: "plan", Value: event.String("pro")}}
	imports := [][]event.Event{
		{first, {UserID: "u", Name: "buy", Time: t0}},
		{copyEv, {UserID: "u", Name: "buy", Time: t0}, {UserID: "u", Name: "view", Time: t0 + 1}},
	}
	for _, evs := range imports {
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	v := snapOf(t, a)
	tr, err := v.UserEvents(ctx, "u", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: the first "buy x" (plan free), both "buy" without an insert
	// id (never copies), "view".
	if tr.Total != 4 || len(tr.Events) != 4 {
		t.Fatalf("%d events (%+v), want 4", tr.Total, tr.Events)
	}
	for _, ev := range tr.Events {
		if ev.InsertID == "x" && (len(ev.Props) != 1 || ev.Props[0].Value.Str != "free") {
			t.Fatalf("the copy won: %+v", ev)
		}
	}
}
