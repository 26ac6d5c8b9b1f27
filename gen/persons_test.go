package gen

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// personConfigs are data sets with persons, for the tests below.
var personConfigs = []Config{
	{Events: 200_000, Seed: 1, Persons: 0.1},
	{Events: 50_000, Seed: 7, Days: 30, Persons: 0.5},
	{Events: 30_000, Seed: -3, Users: 9000, Persons: 1},
	{Events: 20_000, Seed: 42, Users: 20_000, Persons: 0.3}, // installs only
	{Events: 5_000, Seed: 5, Users: 3, Persons: 1},          // a few very heavy users
	{Events: 20_000, Days: 1, Persons: 0.2},                 // crowded day
}

// collect returns every event of cfg (props copied).
func collect(t *testing.T, cfg Config) ([]event.Event, *Generator) {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	var ev event.Event
	for g.Next(&ev) {
		e := ev
		e.Props = slices.Clone(ev.Props)
		out = append(out, e)
	}
	return out, g
}

// anonOf returns an $identify event's anonymous id, "" for other events.
func anonOf(ev *event.Event) string {
	if ev.Name != IdentifyEvent {
		return ""
	}
	for _, p := range ev.Props {
		if p.Name == PropAnonDistinctID {
			return p.Value.Str
		}
	}
	return ""
}

// sameEvent reports whether a and b are equal with a's user id mapped by m.
func sameEvent(a, b *event.Event, m map[string]string) bool {
	id := a.UserID
	if t, ok := m[id]; ok {
		id = t
	}
	return id == b.UserID && a.Time == b.Time && a.Name == b.Name && slices.Equal(a.Props, b.Props)
}

func TestPersonsConfigErrors(t *testing.T) {
	for _, rate := range []float64{-0.1, 1.01, math.NaN(), math.Inf(1)} {
		_, err := New(Config{Events: 10, Persons: rate})
		if err == nil || !strings.Contains(err.Error(), "persons rate") {
			t.Errorf("Persons %v: %v, want a persons rate error", rate, err)
		}
	}
}

// TestPersonsZero: Persons 0 is the stream of before persons whatever
// ResolvePersons says.
func TestPersonsZero(t *testing.T) {
	cfg := goldenConfigs[1]
	cfg.ResolvePersons = true
	want := cfg
	want.ResolvePersons = false
	if a, b := nextHash(t, cfg, goldenEvents), nextHash(t, want, goldenEvents); a != b {
		t.Fatalf("ResolvePersons without Persons changed the stream")
	}
}

// TestPersons checks the persons' trails against the stream without
// persons: with the $identify events taken out and every anonymous id
// mapped to the user id of its $identify, the stream is the one of
// Persons = 0, event for event; each anonymous id is named by exactly one
// $identify, from a user id; device 1's events come before its identify,
// device 2's after; a naive union of the identifies makes about Persons of
// the users multi-id persons; Rows counts the events.
func TestPersons(t *testing.T) {
	for _, cfg := range personConfigs {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			evs, g := collect(t, cfg)
			if int64(len(evs)) != (Source{G: g}).Rows() {
				t.Fatalf("%d events, Rows() = %d", len(evs), (Source{G: g}).Rows())
			}
			plainCfg := cfg
			plainCfg.Persons = 0
			plain, _ := collect(t, plainCfg)

			// The identifies: anonymous id → user id, and where.
			owner := map[string]string{}
			at := map[string]int{} // anonymous id → index of its identify
			idents := map[string][]string{}
			for i := range evs {
				a := anonOf(&evs[i])
				if a == "" {
					continue
				}
				if !strings.HasPrefix(a, anonPrefix) || len(a) != anonLen || !strings.HasPrefix(evs[i].UserID, "u") {
					t.Fatalf("event %d: identify(%q, %q): want a user id and an anonymous id", i, evs[i].UserID, a)
				}
				if _, dup := owner[a]; dup {
					t.Fatalf("anonymous id %s identified twice", a)
				}
				owner[a], at[a] = evs[i].UserID, i
				idents[evs[i].UserID] = append(idents[evs[i].UserID], a)
			}
			if int64(len(owner)) != g.identifies {
				t.Fatalf("%d identifies, counted %d", len(owner), g.identifies)
			}

			// Without the identifies and with ids resolved: the plain stream.
			k := 0
			for i := range evs {
				if evs[i].Name == IdentifyEvent {
					continue
				}
				if k >= len(plain) || !sameEvent(&evs[i], &plain[k], owner) {
					t.Fatalf("event %d %+v, want %+v", i, evs[i], plain[min(k, len(plain)-1)])
				}
				k++
			}
			if k != len(plain) {
				t.Fatalf("%d events besides identifies, want %d", k, len(plain))
			}

			// Device 1's events before its identify (in stream and time),
			// device 2's after; every anonymous event's id is identified.
			for i := range evs {
				id := evs[i].UserID
				if !strings.HasPrefix(id, anonPrefix) {
					continue
				}
				j, ok := at[id]
				if !ok {
					t.Fatalf("event %d: anonymous id %s never identified", i, id)
				}
				first := idents[owner[id]][0] == id
				if first && (i > j || evs[i].Time > evs[j].Time) || !first && (i < j || evs[i].Time < evs[j].Time) {
					t.Fatalf("event %d of %s (device 1: %v) at %d, its identify is event %d at %d", i, id, first, evs[i].Time, j, evs[j].Time)
				}
			}

			// A person's events are contiguous and in time order.
			seen := map[string]bool{}
			person := func(id string) string {
				if t, ok := owner[id]; ok {
					return t
				}
				return id
			}
			for i := range evs {
				p := person(evs[i].UserID)
				if i > 0 && person(evs[i-1].UserID) == p {
					if evs[i].Time < evs[i-1].Time {
						t.Fatalf("event %d of %s before its predecessor", i, p)
					}
					continue
				}
				if seen[p] {
					t.Fatalf("event %d: person %s's events are not contiguous", i, p)
				}
				seen[p] = true
			}

			// Naive union over the identifies: persons with several ids.
			parent := map[string]string{}
			var find func(string) string
			find = func(x string) string {
				if p, ok := parent[x]; ok && p != x {
					r := find(p)
					parent[x] = r
					return r
				}
				return x
			}
			ids := map[string]bool{}
			for i := range evs {
				ids[evs[i].UserID] = true
				if a := anonOf(&evs[i]); a != "" {
					ids[a] = true
					if ra, rt := find(a), find(evs[i].UserID); ra != rt {
						parent[ra] = rt
					}
				}
			}
			size := map[string]int{}
			for id := range ids {
				size[find(id)]++
			}
			sessions := map[string]map[int64]bool{} // person → its session ids
			for i := range evs {
				p := find(evs[i].UserID)
				if sessions[p] == nil {
					sessions[p] = map[int64]bool{}
				}
				sessions[p][evs[i].Props[3].Value.Int] = true
			}
			multi, spare, two := 0, 0, 0
			for p, n := range size {
				if n > 1 {
					multi++
					if len(sessions[p]) > 1 {
						spare++
					}
				}
				if n > 2 {
					two++
				}
			}
			users := g.Users()
			if int64(len(size)) != users {
				t.Fatalf("%d persons, want the %d users", len(size), users)
			}
			share := float64(multi) / float64(users)
			tol := 3*math.Sqrt(cfg.Persons*(1-cfg.Persons)/float64(users)) + 1e-9
			if math.Abs(share-cfg.Persons) > tol {
				t.Fatalf("%d of %d users (%.4f) are multi-id persons, want %.2f ± %.4f", multi, users, share, cfg.Persons, tol)
			}
			t.Logf("%d users, %d distinct ids, %d multi-id persons (%.4f), %d of the %d with two sessions or more have a second device",
				users, len(ids), multi, share, two, spare)
			if tol := 3 * math.Sqrt(0.25/float64(spare)); spare > 100 && math.Abs(float64(two)/float64(spare)-secondDevice) > tol {
				t.Fatalf("%d of %d persons with two sessions or more have a second device, want %.1f ± %.3f", two, spare, secondDevice, tol)
			}
		})
	}
}

// TestPersonsResolved: ResolvePersons gives the same events, each under
// its person's user id.
func TestPersonsResolved(t *testing.T) {
	for _, cfg := range personConfigs[:3] {
		evs, _ := collect(t, cfg)
		owner := map[string]string{}
		for i := range evs {
			if a := anonOf(&evs[i]); a != "" {
				owner[a] = evs[i].UserID
			}
		}
		cfg.ResolvePersons = true
		res, _ := collect(t, cfg)
		if len(res) != len(evs) {
			t.Fatalf("%+v: %d events resolved, %d not", cfg, len(res), len(evs))
		}
		for i := range evs {
			if !sameEvent(&evs[i], &res[i], owner) || strings.HasPrefix(res[i].UserID, anonPrefix) {
				t.Fatalf("%+v: event %d %+v resolved to %+v", cfg, i, evs[i], res[i])
			}
		}
	}
}

// TestPersonsParquet: the file of a data set with persons has the
// $anon_distinct_id column, and its rows are Next's events.
func TestPersonsParquet(t *testing.T) {
	cfg := personConfigs[1]
	var buf bytes.Buffer
	if err := WriteParquet(&buf, cfg, nil); err != nil {
		t.Fatal(err)
	}
	rows, f := readAll[PersonEventRow](t, buf.Bytes())
	if _, ok := f.Schema().Lookup(PropAnonDistinctID); !ok {
		t.Fatal("no $anon_distinct_id column")
	}
	evs, _ := collect(t, cfg)
	if len(rows) != len(evs) {
		t.Fatalf("%d rows, want %d", len(rows), len(evs))
	}
	identifies := 0
	for i, r := range rows {
		ev := &evs[i]
		a := anonOf(ev)
		if r.UserID != ev.UserID || r.Timestamp != ev.Time || r.Event != ev.Name || r.SessionID != ev.Props[3].Value.Int ||
			(r.AnonDistinctID == nil) != (a == "") || a != "" && *r.AnonDistinctID != a {
			t.Fatalf("row %d %+v (anon %v), want %+v", i, r.EventRow, r.AnonDistinctID, ev)
		}
		if a != "" {
			identifies++
		}
	}
	if identifies == 0 {
		t.Fatal("no $identify rows")
	}
}
