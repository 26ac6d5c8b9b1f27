package storage

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// TestMergeLongTrails: users whose trails span several segments, each
// holding the user in continued blocks, with many ties across the
// segments and duplicates (docs/ingest.md §3) at those ties, are scanned
// (mergeLong) in small chunks, with and without a prepass, exactly as the
// naive whole trails: every event once, in (time, arrival) order, with
// its columns and the user's values.
func TestMergeLongTrails(t *testing.T) {
	ctx := context.Background()
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 33))
		st := openTest(t, 1+r.IntN(2))
		t0 := int64(1_700_000_000_000_000)
		var m trailModel
		var ids idPool
		users := 1 + r.IntN(4)
		slots := 10 + r.IntN(300)
		for range 3 + r.IntN(4) {
			evs := spreadEvents(r, 100+r.IntN(400), users, t0, slots, &ids)
			m.addEvents(evs)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 2 + r.IntN(16)}); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		ws := compactWrites(r, 10+r.IntN(30), users+2, t0)
		m.writes = append(m.writes, ws...)
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: ws}}, ImportOptions{Kind: KindUsers, BlockRows: 1 + r.IntN(4)}); err != nil {
			t.Fatalf("seed %d: users import: %v", seed, err)
		}
		a, err := st.App("app")
		if err != nil {
			t.Fatal(err)
		}
		snap := snapOf(t, a)
		want := m.trails()
		for _, chunk := range []int{3 + r.IntN(48), 1 + r.IntN(3), 0} {
			for _, prepass := range []bool{false, true} {
				got, err := scanTrailsChunked(snap, chunk, prepass)
				if err != nil {
					t.Fatalf("seed %d chunk %d prepass %v: %v", seed, chunk, prepass, err)
				}
				sameTrails(t, fmt.Sprintf("seed %d chunk %d prepass %v", seed, chunk, prepass), got, want)
			}
		}
	}
}

// TestMergeLongFilteredDuplicates: long trails merged across segments
// with a row filter (a property test per row: n ≥ 0), columns and a time
// range are those of the naive model, duplicates (docs/ingest.md §3) dropped.
// The copies of an event here have equal properties: where a later copy
// passes a filter its first copy fails, the scan keeps it unless another
// part has a passing event at that time (see dedupTies).
func TestMergeLongFilteredDuplicates(t *testing.T) {
	ctx := context.Background()
	for seed := range 16 {
		r := rand.New(rand.NewPCG(uint64(seed), 34))
		st := openTest(t, 1)
		t0 := int64(1_700_000_000_000_000)
		var m trailModel
		var ids idPool
		first := map[string][]event.Prop{}
		slots := 10 + r.IntN(200)
		for range 3 + r.IntN(4) {
			evs := spreadEvents(r, 100+r.IntN(300), 1+r.IntN(3), t0, slots, &ids)
			for i := range evs {
				if e := &evs[i]; e.InsertID != "" {
					key := fmt.Sprint(e.UserID, e.Name, e.Time, e.InsertID)
					if ps, ok := first[key]; ok {
						e.Props = ps
					} else {
						first[key] = e.Props
					}
				}
			}
			m.addEvents(evs)
			if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 2 + r.IntN(16)}); err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		from, to := int64(math.MinInt64), int64(math.MaxInt64)
		if seed%2 == 1 {
			from, to = t0+int64(r.IntN(slots/3))*1e6, t0+int64(slots/2+r.IntN(slots/2))*1e6
		}
		nOf := func(e event.Event) (int64, bool) {
			for _, p := range e.Props {
				if p.Name == "n" {
					return p.Value.Int, true
				}
			}
			return 0, false
		}
		want := map[string]string{}
		var kept []event.Event
		for _, e := range m.events {
			if n, ok := nOf(e); ok && n >= 0 && e.Time >= from && e.Time < to {
				kept = append(kept, e)
			}
		}
		slices.SortStableFunc(kept, func(a, b event.Event) int { return cmp.Compare(a.Time, b.Time) })
		for _, e := range kept {
			n, _ := nOf(e)
			want[e.UserID] += fmt.Sprintf("%d %s %d\n", e.Time, e.Name, n)
		}
		compile := func(_ SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
			sp := &SegmentPlan{Masks: make([]uint64, len(meta.EventNames)), Cond: make([]uint64, len(meta.EventNames)),
				Cols: []ColumnSource{{Prop: -1}}}
			for c, name := range meta.EventNames {
				sp.Cond[c] = 1 << slices.Index(names, name)
			}
			mi := slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == "n" })
			if mi >= 0 {
				sp.Props, sp.Cols[0].Prop = []int{mi}, 0
			}
			sp.Rows = func(b *segment.Block, rm []uint64) {
				for row, c := range b.Events[:b.Rows] {
					rm[row] = 0
					if mi >= 0 {
						if pd := &b.Props[0]; pd.Present[row>>6]>>(row&63)&1 != 0 && pd.Ints[pd.Index(row)] >= 0 {
							rm[row] = sp.Cond[c]
						}
					}
				}
			}
			return sp, nil
		}
		snap := snapOf(t, a(t, st))
		for _, chunk := range []int{1 + r.IntN(10), 0} {
			prepass := r.IntN(2) == 0
			var mu sync.Mutex
			var errs []string
			got := map[string]string{}
			vs := newChunkVisitors(2, prepass, &mu, &errs, func(u UserKey, tr *trail.Trail) {
				var b strings.Builder
				for i, ts := range tr.Times {
					fmt.Fprintf(&b, "%d %s %d\n", ts, names[bitIndex(tr.Mask[i])], int64(tr.Cols[0].Bits[i]))
				}
				mu.Lock()
				defer mu.Unlock()
				got[string(u.ID)] = b.String()
			})
			spec := ScanSpec{From: from, To: to, Compile: compile, Cols: 1, ChunkEvents: chunk}
			if _, err := snap.Scan(ctx, spec, vs); err != nil {
				t.Fatalf("seed %d: scan: %v", seed, err)
			}
			if len(errs) > 0 {
				t.Fatalf("seed %d: chunks: %v", seed, errs)
			}
			sameTrails(t, fmt.Sprintf("seed %d chunk %d prepass %v", seed, chunk, prepass), got, want)
		}
	}
}

// a returns st's app "app".
func a(t *testing.T, st *Store) *App {
	t.Helper()
	app, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// TestMergeLongMemoryBounded: the buffers a scan reports to
// ScanSpec.Grow for one user's 1M events in eight segments that overlap
// in time (merged by mergeLong) do not grow with the trail: the peak is
// that of an eighth of the trail, far below the trail's own 16 MB of
// times and masks; every event is visited, in chunks of at most
// ChunkEvents, also through a prepass.
func TestMergeLongMemoryBounded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million events")
	}
	peak := func(n int, prepass bool) int64 {
		st, err := Open(Config{Dir: t.TempDir(), Shards: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		importWhale(t, st, n, 8, 4096)
		a, _ := st.App("w")
		var mu sync.Mutex
		var held, most int64
		spec := ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(names), Grow: func(n int64) error {
			mu.Lock()
			defer mu.Unlock()
			held += n
			most = max(most, held)
			return nil
		}}
		var errs []string
		var events int
		vs := newChunkVisitors(1, prepass, &mu, &errs, func(_ UserKey, tr *trail.Trail) { events += len(tr.Times) })
		if _, err := snapOf(t, a).Scan(context.Background(), spec, vs); err != nil {
			t.Fatal(err)
		}
		if len(errs) > 0 || events != n || held != 0 {
			t.Fatalf("%d events: %d visited, %d bytes held at the end, chunk errors %v", n, events, held, errs)
		}
		return most
	}
	small := peak(1<<17, false)
	for _, prepass := range []bool{false, true} {
		large := peak(1<<20, prepass)
		t.Logf("peak of the scan's buffers: %d bytes for 128 Ki events, %d for 1 Mi (prepass %v)", small, large, prepass)
		if large > small*5/4 || large > 8<<20 {
			t.Fatalf("peak of the scan's buffers: %d bytes for 128 Ki events, %d for 1 Mi (prepass %v)", small, large, prepass)
		}
	}
}
