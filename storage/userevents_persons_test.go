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

// TestPersonEventsMergesTrails: the merged trail of several distinct ids
// (in several shards and segments) is every id's trail ordered by (time,
// distinct id, position in the id's trail), whatever order the ids are
// given in and with repeats, each event tagged with its distinct id;
// pages are exact slices of it; a person of one id answers as
// UserEvents.
func TestPersonEventsMergesTrails(t *testing.T) {
	ctx := context.Background()
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 27))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_600_000_000_000_000)
		for range 3 {
			evs := randomEvents(r, 50+r.IntN(200), 1+r.IntN(12), t0)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 20 + r.IntN(100), BlockRows: 1 + r.IntN(30)}); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := st.App("app")
		v := snapOf(t, a)
		ids := []string{"u3", "u0", "u7", "u3", "nobody"}
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		var want []UserEvent
		for _, id := range []string{"nobody", "u0", "u3", "u7"} { // sorted
			tr, err := v.UserEvents(ctx, id, 0, MaxUserTrailRows)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tr.Events {
				e.DistinctID = id
				want = append(want, e)
			}
		}
		slices.SortStableFunc(want, func(a, b UserEvent) int { return cmp.Compare(a.Time, b.Time) })
		got, err := v.PersonEvents(ctx, ids, 0, MaxUserTrailRows)
		if err != nil {
			t.Fatal(err)
		}
		if got.Total != int64(len(want)) || !slices.EqualFunc(got.Events, want, sameUserEvent) {
			t.Fatalf("seed %d: merged trail of %v: %d events (total %d), want %d\n%+v\n%+v", seed, ids, len(got.Events), got.Total, len(want), got.Events, want)
		}
		for _, pg := range [][2]int{{0, 1}, {2, 7}, {len(want) - 3, 10}, {len(want), 4}, {1, 0}} {
			if pg[0] < 0 {
				continue
			}
			p, err := v.PersonEvents(ctx, ids, pg[0], pg[1])
			if err != nil {
				t.Fatal(err)
			}
			end := min(len(want), pg[0]+pg[1])
			if p.Total != int64(len(want)) || !slices.EqualFunc(p.Events, want[min(pg[0], end):end], sameUserEvent) {
				t.Fatalf("seed %d page %v: %+v", seed, pg, p.Events)
			}
		}
		one, err := v.PersonEvents(ctx, []string{"u0"}, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := v.UserEvents(ctx, "u0", 0, 1000)
		for i := range plain.Events {
			plain.Events[i].DistinctID = "u0"
		}
		if !slices.EqualFunc(one.Events, plain.Events, sameUserEvent) {
			t.Fatalf("seed %d: a person of one id differs from its user's trail", seed)
		}
	}
	st := openTest(t, 1)
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: randomEvents(rand.New(rand.NewPCG(1, 1)), 10, 2, 1e15)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	if _, err := snapOf(t, a).PersonEvents(ctx, []string{"u0", "u1"}, 0, -1); err == nil {
		t.Fatal("negative limit accepted")
	}
}

// sameUserEvent compares two events of a trail.
func sameUserEvent(a, b UserEvent) bool {
	return a.Time == b.Time && a.Event == b.Event && a.InsertID == b.InsertID && a.DistinctID == b.DistinctID && slices.Equal(a.Props, b.Props)
}

// TestPersonPropertiesFold: a person's properties fold the writes of all
// of its ids (docs/identity.md §3): the latest set wins across ids, a
// property only ever set once has the earliest set-once write, a set
// beats any set-once; ties between ids go by the ids (a set to the
// greater id, a set-once to the smaller, as the scan's join), not by the
// order of the ids or of their imports; one id answers as UserProperties.
func TestPersonPropertiesFold(t *testing.T) {
	ctx := context.Background()
	t0 := int64(1_600_000_000_000_000)
	w := func(id string, sec int64, once bool, name string, v event.Value) event.Event {
		e := event.Event{UserID: id, Time: t0 + sec*1e6, Props: []event.Prop{{Name: name, Value: v}}, Pos: event.Pos{File: "users", Line: 1}}
		if once {
			e.Name = SetOnceEvent
		}
		return e
	}
	writes := []event.Event{
		w("anon", 1, false, "plan", event.String("free")),
		w("acct", 5, false, "plan", event.String("pro")),
		w("phone", 3, false, "plan", event.String("trial")),
		w("anon", 2, true, "first", event.String("web")),
		w("phone", 1, true, "first", event.String("ios")),
		w("acct", 0, true, "first", event.String("never: set below")),
		w("acct", 9, false, "first", event.String("set")),
		w("anon", 4, false, "tie", event.String("a")),
		w("phone", 4, false, "tie", event.String("b")),
		w("anon", 7, true, "otie", event.Int(2)),
		w("phone", 7, true, "otie", event.Int(1)),
		w("other", 99, false, "plan", event.String("not this person")),
	}
	want := fmt.Sprint([]event.Prop{{Name: "first", Value: event.String("set")}, {Name: "otie", Value: event.Int(2)},
		{Name: "plan", Value: event.String("pro")}, {Name: "tie", Value: event.String("b")}})
	for seed := range 6 {
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		st := openTest(t, 1<<r.IntN(3))
		ws := slices.Clone(writes)
		r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		for len(ws) > 0 {
			n := 1 + r.IntN(len(ws))
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws[:n]}}, ImportOptions{Kind: KindUsers}); err != nil {
				t.Fatal(err)
			}
			ws = ws[n:]
		}
		a, _ := st.App("app")
		v := snapOf(t, a)
		ids := []string{"anon", "acct", "phone"}
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		got, err := v.PersonProperties(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != want {
			t.Fatalf("seed %d ids %v: %v, want %v", seed, ids, got, want)
		}
		one, err := v.PersonProperties(ctx, []string{"phone"})
		plain, err2 := v.UserProperties(ctx, "phone")
		if err != nil || err2 != nil || fmt.Sprint(one) != fmt.Sprint(plain) ||
			fmt.Sprint(plain) != fmt.Sprint([]event.Prop{{Name: "first", Value: event.String("ios")}, {Name: "otie", Value: event.Int(1)},
				{Name: "plan", Value: event.String("trial")}, {Name: "tie", Value: event.String("b")}}) {
			t.Fatalf("seed %d: one id %v, its user %v (%v %v)", seed, one, plain, err, err2)
		}
	}
}
