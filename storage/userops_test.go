package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/internal/testutil"
)

// opWrite is one user property write of the model: its user, time,
// operation and properties, in arrival order.
type opWrite struct {
	user  string
	time  int64
	op    UserOp
	props []event.Prop
}

// randomOpRequest returns n events, each with one user property write of
// a random operation on the compact test's user properties (tier string,
// score int, vip bool, ltv float); adds go to score and ltv. The first
// request (first) sets every property of every user, so that the app's
// schema knows them all (an unset of a property no user has is skipped,
// see UserWrite).
func randomOpRequest(r *rand.Rand, n, users int, t0 int64, first bool) ([]event.Event, []UserWrite, []opWrite) {
	var evs []event.Event
	var uws []UserWrite
	var model []opWrite
	all := func() []event.Prop {
		return []event.Prop{{Name: "tier", Value: event.String([]string{"gold", "silver"}[r.IntN(2)])},
			{Name: "score", Value: event.Int(int64(r.IntN(50)))}, {Name: "vip", Value: event.Bool(r.IntN(2) == 0)},
			{Name: "ltv", Value: event.Float(float64(r.IntN(40)) / 4)}}
	}
	for i := range n {
		u := fmt.Sprintf("u%d", r.IntN(users))
		if first {
			u = fmt.Sprintf("u%d", i%users)
		}
		ev := event.Event{UserID: u, Name: names[r.IntN(len(names))], Time: t0 + int64(r.IntN(4))*1_000_000,
			InsertID: fmt.Sprintf("%x", r.Uint64())}
		w := UserWrite{Index: len(evs), Op: UserOp(r.IntN(5))}
		switch {
		case first:
			w.Op, w.Props = UserSet, all()
		case w.Op == UserSet || w.Op == UserSetOnce:
			ps := all()
			r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			w.Props = ps[:1+r.IntN(len(ps))]
		case w.Op == UserUnset:
			for _, name := range []string{"tier", "score", "vip", "ltv"} {
				if r.IntN(2) == 0 {
					w.Props = append(w.Props, event.Prop{Name: name, Value: event.Int(1)}) // values are ignored
				}
			}
		case w.Op == UserAdd:
			if r.IntN(3) > 0 {
				w.Props = append(w.Props, event.Prop{Name: "score", Value: event.Int(int64(r.IntN(7) - 3))})
			}
			if r.IntN(2) == 0 {
				w.Props = append(w.Props, event.Prop{Name: "ltv", Value: event.Float(float64(r.IntN(9)-4) / 2)})
			}
		case w.Op == UserDelete:
			if r.IntN(4) > 0 { // mostly rarer than the others
				w.Op, w.Props = UserAdd, []event.Prop{{Name: "score", Value: event.Int(1)}}
			}
		}
		evs = append(evs, ev)
		uws = append(uws, w)
		model = append(model, opWrite{user: u, time: ev.Time, op: w.Op, props: slices.Clone(w.Props)})
	}
	return evs, uws, model
}

// foldState returns each user's properties after its writes, applied in
// (time, arrival) order by the rules of docs/identity.md §3: the naive
// reference's (testutil.CurrentUsers).
func foldState(ws []opWrite) map[string]map[string]event.Value {
	us := make([]testutil.UserWrite, len(ws))
	for i, w := range ws {
		props := map[string]event.Value{}
		for _, p := range w.props {
			props[p.Name] = p.Value
			if props[p.Name].Type == event.TypeNone {
				props[p.Name] = event.Bool(true) // an unset's mark
			}
		}
		op := userOpEvents[w.op]
		if op == SetEvent {
			op = ""
		}
		us[i] = testutil.UserWrite{User: w.user, Time: w.time, Props: props, Op: op}
	}
	return testutil.CurrentUsers(us)
}

// foldModel is foldState rendered as scanTrails renders a trail's user
// values.
func foldModel(ws []opWrite) map[string]string {
	state := foldState(ws)
	out := map[string]string{}
	for u, p := range state {
		var b []byte
		b = append(b, "user:"...)
		for _, c := range compactUserCols {
			b = append(b, ' ')
			v, ok := p[c.name]
			switch {
			case !ok:
				b = append(b, '-')
			case c.typ == event.TypeString:
				b = strconv.AppendQuote(b, v.Str)
			case c.typ == event.TypeFloat:
				f := v.Float
				if f == 0 {
					f = 0
				}
				b = strconv.AppendFloat(b, f, 'g', -1, 64)
			default:
				b = strconv.AppendInt(b, v.Int, 10)
			}
		}
		out[u] = string(b)
	}
	return out
}

// userLines keeps the user-values line of each trail of appTrails.
func userLines(trails map[string]string) map[string]string {
	out := map[string]string{}
	for u, s := range trails {
		out[u] = s[strings.LastIndex(s, "user:"):]
	}
	return out
}

// TestIngestUserOpsFold: user property writes of every operation (set,
// set-once, unset, add, delete), ingested live with ties and back-filled
// times, give the properties of the fold in (time, arrival) order
// (docs/identity.md §3) — live, flushed, merged in memory, compacted,
// replayed after a power loss and reopened after Close.
func TestIngestUserOpsFold(t *testing.T) {
	ctx := context.Background()
	for seed := range 6 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 28))
			fs := crashfs.New()
			st := openLiveOn(t, fs, 2, quietLive)
			var model []opWrite
			t0 := int64(1_600_000_000_000_000)
			for b := range 14 {
				evs, uws, m := randomOpRequest(r, 1+r.IntN(40), 12, t0+int64(b%3)*2_000_000, b == 0)
				rep, err := st.Ingest(ctx, "app", evs, uws)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Accepted != len(evs) || len(rep.Rejected)+len(rep.Dropped) > 0 {
					t.Fatalf("request %d: accepted %d of %d, rejected %v, dropped %v", b, rep.Accepted, len(evs), rep.Rejected, rep.Dropped)
				}
				model = append(model, m...)
				want := foldModel(model)
				if got := userLines(appTrails(t, st)); !mapsEqualDiff(t, fmt.Sprintf("after request %d", b), got, want) {
					return
				}
				checkUserProperties(t, st, fmt.Sprintf("after request %d", b), foldState(model))
				liveStep(t, st, r, r.IntN(4))
			}
			want := foldModel(model)
			crashed := openLiveOn(t, fs.Crash(0, nil), 2, quietLive)
			mapsEqualDiff(t, "after a power loss", userLines(appTrails(t, crashed)), want)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			again := openOn(t, fs.Crash(0, nil), 2)
			mapsEqualDiff(t, "after Close", userLines(appTrails(t, again)), want)
			if _, err := again.Compact(ctx, "app", CompactOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			mapsEqualDiff(t, "compacted after Close", userLines(appTrails(t, again)), want)
		})
	}
}

// mapsEqualDiff reports (with t.Errorf) the users whose lines differ.
func mapsEqualDiff(t *testing.T, when string, got, want map[string]string) bool {
	t.Helper()
	ok := true
	for u, w := range want {
		if got[u] != w {
			t.Errorf("%s: user %s: %s, want %s", when, u, got[u], w)
			ok = false
		}
	}
	for u, g := range got {
		if _, in := want[u]; !in {
			t.Errorf("%s: user %s: %s, not in the model", when, u, g)
			ok = false
		}
	}
	return ok
}

// checkUserProperties compares UserProperties of every user of want with
// want (the page's answer: the same fold, by name).
func checkUserProperties(t *testing.T, st *Store, when string, want map[string]map[string]event.Value) {
	t.Helper()
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	v := snapOf(t, a)
	for u, props := range want {
		got, err := v.UserProperties(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		var w []event.Prop
		for n, x := range props {
			if x.Type == event.TypeFloat && x.Float == 0 {
				x.Float = 0
			}
			w = append(w, event.Prop{Name: n, Value: x})
		}
		slices.SortFunc(w, func(x, y event.Prop) int { return strings.Compare(x.Name, y.Name) })
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: UserProperties(%s) = %v, want %v", when, u, got, w)
		}
	}
}
