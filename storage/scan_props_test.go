package storage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// propEv is one event of the naive expectation: time, mask and column
// values.
type propEv struct {
	t    int64
	mask uint64
	cols [3]trail.Value
}

// TestScanColumnsRowMasksAndUserValues checks the Compile form of the
// scan against a naive model, over several imports (users spanning
// segments, a property missing from some segments), shards and worker
// counts: row masks computed per block by Rows (bit 0: event a; bit 1:
// event b with tag "x"), property columns as typed bits (float price with
// -0 as +0, string tag through a remap, int n), the users' current tier
// (latest write by time, ties to the later arrival), and with AllUsers the
// users without a passing row or with only user property writes.
func TestScanColumnsRowMasksAndUserValues(t *testing.T) {
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_600_000_000_000_000)
		var imports [][]event.Event
		for imp := range 3 {
			evs := randomEvents(r, 200, 15, t0)
			for i := range evs {
				var ps []event.Prop
				if r.IntN(3) > 0 {
					p := float64(r.IntN(9)-4) / 2
					if p == 0 && r.IntN(2) == 0 {
						p = math.Copysign(0, -1)
					}
					ps = append(ps, event.Prop{Name: "price", Value: event.Float(p)})
				}
				if r.IntN(3) > 0 {
					ps = append(ps, event.Prop{Name: "tag", Value: event.String([]string{"x", "y", "z"}[r.IntN(3)])})
				}
				if imp == 1 && r.IntN(2) == 0 { // n exists only in the second import's segments
					ps = append(ps, event.Prop{Name: "n", Value: event.Int(int64(r.IntN(100)))})
				}
				evs[i].Props = ps
			}
			imports = append(imports, evs)
			if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 1 + r.IntN(40)}); err != nil {
				t.Fatal(err)
			}
		}
		var writes []event.Event
		for i := range 30 {
			writes = append(writes, event.Event{UserID: fmt.Sprintf("u%d", r.IntN(18)), Time: t0 + int64(r.IntN(5))*1e6,
				Props: []event.Prop{{Name: "tier", Value: event.String([]string{"gold", "silver", "bronze"}[r.IntN(3)])}},
				Pos:   event.Pos{File: "users", Line: int64(i + 1)}})
		}
		for _, part := range [][]event.Event{writes[:12], writes[12:]} {
			if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: part}}, ImportOptions{Kind: KindUsers, BlockRows: 4}); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := st.App("app")
		snap := snapOf(t, a)
		tags := []string{"x", "y", "z"}
		tiers := []string{"bronze", "gold", "silver"}
		remap := func(dict, global []string) []uint32 {
			out := make([]uint32, len(dict))
			for i, s := range dict {
				j, _ := slices.BinarySearch(global, s)
				out[i] = uint32(j)
			}
			return out
		}
		findProp := func(meta *segment.Meta, name string) int {
			return slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == name })
		}
		compile := func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
			sp := &SegmentPlan{Masks: make([]uint64, len(meta.EventNames)), Cond: make([]uint64, len(meta.EventNames))}
			for c, n := range meta.EventNames {
				switch n {
				case "a":
					sp.Masks[c] = 1
				case "b":
					sp.Cond[c] = 2
				}
			}
			for _, name := range []string{"price", "tag", "n"} {
				src := ColumnSource{Prop: -1}
				if mi := findProp(meta, name); mi >= 0 {
					src.Prop = len(sp.Props)
					sp.Props = append(sp.Props, mi)
					switch name {
					case "price":
						src.Kind = ColFloat
					case "tag":
						src.Kind, src.Remap = ColString, remap(meta.Props[mi].Dict, tags)
					}
				}
				sp.Cols = append(sp.Cols, src)
			}
			tagCol, dict := sp.Cols[1].Prop, []string(nil)
			if mi := findProp(meta, "tag"); mi >= 0 {
				dict = meta.Props[mi].Dict
			}
			sp.Rows = func(b *segment.Block, rm []uint64) {
				for row, c := range b.Events[:b.Rows] {
					rm[row] = sp.Masks[c]
					if sp.Cond[c] != 0 && tagCol >= 0 {
						pd := &b.Props[tagCol]
						if pd.Present[row>>6]>>(row&63)&1 != 0 && dict[pd.Strs[row]] == "x" {
							rm[row] |= 2
						}
					}
				}
			}
			return sp, nil
		}
		compileUsers := func(ref SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
			up := &UserSegmentPlan{Cols: []ColumnSource{{Prop: -1, Kind: ColString}}}
			if mi := findProp(meta, "tier"); mi >= 0 {
				up.Props = []int{mi}
				up.Cols[0] = ColumnSource{Prop: 0, Kind: ColString, Remap: remap(meta.Props[mi].Dict, tiers)}
			}
			return up, nil
		}
		// The naive model.
		from, to := t0+5e6, t0+35e6
		want := map[string][]propEv{}
		for _, evs := range imports {
			for _, e := range evs {
				var m uint64
				var cols [3]trail.Value
				for _, p := range e.Props {
					switch p.Name {
					case "price":
						cols[0] = trail.Value{Set: true, Bits: math.Float64bits(p.Value.Float + 0)}
					case "tag":
						i, _ := slices.BinarySearch(tags, p.Value.Str)
						cols[1] = trail.Value{Set: true, Bits: uint64(i)}
						if e.Name == "b" && p.Value.Str == "x" {
							m |= 2
						}
					case "n":
						cols[2] = trail.Value{Set: true, Bits: uint64(p.Value.Int)}
					}
				}
				if e.Name == "a" {
					m |= 1
				}
				if m != 0 && e.Time >= from && e.Time < to {
					want[e.UserID] = append(want[e.UserID], propEv{e.Time, m, cols})
				}
			}
		}
		for u := range want {
			slices.SortStableFunc(want[u], func(a, b propEv) int { return cmp.Compare(a.t, b.t) })
		}
		tier := map[string]trail.Value{}
		best := map[string]int64{}
		allUsers := map[string]bool{}
		for _, w := range writes {
			allUsers[w.UserID] = true
			if bt, ok := best[w.UserID]; !ok || w.Time >= bt {
				i, _ := slices.BinarySearch(tiers, w.Props[0].Value.Str)
				best[w.UserID], tier[w.UserID] = w.Time, trail.Value{Set: true, Bits: uint64(i)}
			}
		}
		for _, evs := range imports {
			for _, e := range evs {
				allUsers[e.UserID] = true
			}
		}
		for _, all := range []bool{false, true} {
			workers := 1 + r.IntN(3)
			var mu sync.Mutex
			got := map[string][]propEv{}
			gotTier := map[string]trail.Value{}
			vs := make([]Visitor, workers)
			for i := range vs {
				vs[i] = visitFunc(func(u UserKey, tr *trail.Trail) {
					mu.Lock()
					defer mu.Unlock()
					id := string(u.ID)
					if _, dup := got[id]; dup || string(tr.ID) != id {
						t.Errorf("user %s visited twice or with trail id %q", id, tr.ID)
					}
					got[id] = []propEv{}
					for i, ts := range tr.Times {
						var cols [3]trail.Value
						for j := range cols {
							cols[j] = trail.Value{Set: tr.Cols[j].Set[i], Bits: tr.Cols[j].Bits[i]}
						}
						got[id] = append(got[id], propEv{ts, tr.Mask[i], cols})
					}
					gotTier[id] = tr.User[0]
				})
			}
			spec := ScanSpec{From: from, To: to, Compile: compile, Cols: 3, UserProps: 1, CompileUsers: compileUsers, AllUsers: all}
			if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
				t.Fatal(err)
			}
			for u, w := range want {
				if !slices.Equal(got[u], w) {
					t.Fatalf("seed %d all=%v user %s:\n got %v\nwant %v", seed, all, u, got[u], w)
				}
				if gotTier[u] != tier[u] {
					t.Fatalf("seed %d user %s: tier %+v want %+v", seed, u, gotTier[u], tier[u])
				}
			}
			if all {
				for u := range allUsers {
					if _, ok := got[u]; !ok {
						t.Fatalf("seed %d: AllUsers did not visit %s", seed, u)
					}
					if gotTier[u] != tier[u] {
						t.Fatalf("seed %d user %s: tier %+v want %+v", seed, u, gotTier[u], tier[u])
					}
				}
			} else {
				for u, evs := range got {
					if len(evs) == 0 || want[u] == nil {
						t.Fatalf("seed %d: user %s visited without passing rows", seed, u)
					}
				}
			}
		}
	}
}

func TestSavedCohortsFile(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(Config{Dir: dir, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: randomEvents(rand.New(rand.NewPCG(1, 1)), 10, 2, 1e15)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	if cs, err := a.Cohorts(); err != nil || len(cs) != 0 {
		t.Fatalf("no cohorts yet: %v %v", cs, err)
	}
	for _, n := range []string{"zeta", "alpha", "zeta"} {
		if err := a.SaveCohort(SavedCohort{Name: n, Definition: []byte(`{"performed":{"event":"` + n + `"}}`), SavedAt: "2024-01-01T00:00:00Z"}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	st, _ = Open(Config{Dir: dir})
	defer st.Close()
	a, _ = st.App("app")
	cs, err := a.Cohorts()
	if err != nil || len(cs) != 2 || cs[0].Name != "alpha" || cs[1].Name != "zeta" {
		t.Fatalf("after reopening: %+v %v", cs, err)
	}
	if c, err := a.Cohort("zeta"); err != nil || string(c.Definition) != `{"performed":{"event":"zeta"}}` {
		t.Fatalf("Cohort(zeta) = %+v %v", c, err)
	}
	if _, err := a.Cohort("beta"); err == nil {
		t.Fatal("unknown cohort found")
	}
	for _, bad := range []SavedCohort{{Name: "", Definition: []byte(`{}`)}, {Name: "UP", Definition: []byte(`{}`)}, {Name: "ok"}} {
		if err := a.SaveCohort(bad); err == nil {
			t.Errorf("SaveCohort(%+v) accepted", bad)
		}
	}
	if _, err := st.App("nope"); err == nil {
		t.Fatal("unknown app")
	}
}

// TestDrainJoinsUserValues: with one events segment per shard the scan
// drains it block by block and merge-joins the user values from several
// users segments; ties between their writes (same time) must go to the
// later import, and users without events must be skipped past. On half
// the seeds some writes are SetOnceEvent writes, which count only for a
// user no SetEvent write sets, the earliest winning (a tie to the earlier
// arrival), and must not carry over to the next user.
func TestDrainJoinsUserValues(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 12))
		st := openTest(t, 1<<r.IntN(3))
		t0 := int64(1_600_000_000_000_000)
		evs := randomEvents(r, 300, 25, t0)
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 1 + r.IntN(60)}); err != nil {
			t.Fatal(err)
		}
		tiers := []string{"bronze", "gold", "silver"}
		tier := map[string]uint64{}
		best := map[string]int64{}
		once := map[string]uint64{}
		onceAt := map[string]int64{}
		withOnce := seed%4 >= 2
		// One part on a third of the seeds: each shard then has one users
		// segment, which drain reads without times (cursor.noTimes), and
		// a user's several writes in it must resolve to the last.
		parts := 1 + seed%3
		for part := range parts {
			var writes []event.Event
			for i := range 60 / parts {
				w := event.Event{UserID: fmt.Sprintf("u%d", r.IntN(40)), Time: t0 + int64(r.IntN(3))*1e6,
					Props: []event.Prop{{Name: "tier", Value: event.String(tiers[r.IntN(3)])}},
					Pos:   event.Pos{File: "users", Line: int64(i + 1)}}
				i, _ := slices.BinarySearch(tiers, w.Props[0].Value.Str)
				if withOnce && r.IntN(2) == 0 {
					w.Name = SetOnceEvent
					if at, ok := onceAt[w.UserID]; !ok || w.Time < at {
						onceAt[w.UserID], once[w.UserID] = w.Time, uint64(i)
					}
				} else if bt, ok := best[w.UserID]; !ok || w.Time >= bt {
					best[w.UserID], tier[w.UserID] = w.Time, uint64(i)
				}
				writes = append(writes, w)
			}
			if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: writes}}, ImportOptions{Kind: KindUsers, BlockRows: 1 + r.IntN(8)}); err != nil {
				t.Fatalf("users import %d: %v", part, err)
			}
		}
		a, _ := st.App("app")
		// NoIDs on some seeds: a join still needs (and decodes) the keys.
		spec := ScanSpec{From: math.MinInt64, To: math.MaxInt64, UserProps: 1, NoIDs: seed%2 == 1,
			Masks: func(m *segment.Meta) []uint64 { return slices.Repeat([]uint64{1}, len(m.EventNames)) },
			CompileUsers: func(ref SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
				up := &UserSegmentPlan{Cols: []ColumnSource{{Prop: -1, Kind: ColString}}}
				if mi := slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == "tier" }); mi >= 0 {
					rm := make([]uint32, len(meta.Props[mi].Dict))
					for i, s := range meta.Props[mi].Dict {
						j, _ := slices.BinarySearch(tiers, s)
						rm[i] = uint32(j)
					}
					up.Props, up.Cols[0] = []int{mi}, ColumnSource{Prop: 0, Kind: ColString, Remap: rm}
				}
				return up, nil
			}}
		var mu sync.Mutex
		got := map[string]trail.Value{}
		vs := []Visitor{visitFunc(func(u UserKey, tr *trail.Trail) {
			mu.Lock()
			defer mu.Unlock()
			got[string(u.ID)] = tr.User[0]
		})}
		if _, err := snapOf(t, a).Scan(context.Background(), spec, vs); err != nil {
			t.Fatal(err)
		}
		users := map[string]bool{}
		for _, e := range evs {
			users[e.UserID] = true
		}
		if len(got) != len(users) {
			t.Fatalf("seed %d: visited %d users, want %d", seed, len(got), len(users))
		}
		for u := range users {
			want := trail.Value{}
			if v, ok := tier[u]; ok {
				want = trail.Value{Set: true, Bits: v}
			} else if v, ok := once[u]; ok {
				want = trail.Value{Set: true, Bits: v}
			}
			if got[u] != want {
				t.Fatalf("seed %d user %s: tier %+v, want %+v", seed, u, got[u], want)
			}
		}
	}
}

// TestScanNoIDs scans segments of many small blocks (so drain reads most
// of them itself) with and without NoIDs: without it every visited user
// carries its id, and its trail is that user's events; with it the users
// of the blocks drain reads have zero keys, and the trails are the same.
func TestScanNoIDs(t *testing.T) {
	for seed := range 10 {
		r := rand.New(rand.NewPCG(uint64(seed), 31))
		st := openTest(t, 1<<r.IntN(2))
		t0 := int64(1_600_000_000_000_000)
		evs := randomEvents(r, 400, 30, t0)
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 1 + r.IntN(40)}); err != nil {
			t.Fatal(err)
		}
		want := map[string][]int64{}
		byTime := slices.Clone(evs)
		slices.SortStableFunc(byTime, func(x, y event.Event) int { return cmp.Compare(x.Time, y.Time) })
		for _, e := range byTime {
			want[e.UserID] = append(want[e.UserID], e.Time)
		}
		a, _ := st.App("app")
		var trails [2][]string
		zero := 0
		for i, noIDs := range []bool{false, true} {
			spec := ScanSpec{From: math.MinInt64, To: math.MaxInt64, NoIDs: noIDs,
				Masks: func(m *segment.Meta) []uint64 { return slices.Repeat([]uint64{1}, len(m.EventNames)) }}
			var mu sync.Mutex
			vs := []Visitor{visitFunc(func(u UserKey, tr *trail.Trail) {
				mu.Lock()
				defer mu.Unlock()
				if noIDs && u.ID == nil {
					zero++
				} else if !slices.Equal(want[string(u.ID)], tr.Times) || string(tr.ID) != string(u.ID) {
					t.Errorf("seed %d: user %q: trail %v, want %v", seed, u.ID, tr.Times, want[string(u.ID)])
				}
				trails[i] = append(trails[i], fmt.Sprint(tr.Times))
			})}
			if _, err := snapOf(t, a).Scan(context.Background(), spec, vs); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(trails[0])
		slices.Sort(trails[1])
		// A shard's first block is read before drain takes its cursor, so
		// its users keep their keys; the later blocks' do not.
		if zero == 0 || zero == len(want) {
			t.Fatalf("seed %d: %d of %d users visited without a key", seed, zero, len(want))
		}
		if len(trails[0]) != len(want) || !slices.Equal(trails[0], trails[1]) {
			t.Fatalf("seed %d: %d and %d trails for %d users", seed, len(trails[0]), len(trails[1]), len(want))
		}
	}
}
