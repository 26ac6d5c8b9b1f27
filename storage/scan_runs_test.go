package storage

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// TestRunsPartition checks the chains the scan builds from a shard's
// segments: every segment exactly once, segments without a hash range
// alone, within a chain strictly ascending disjoint ranges, and no more
// chains than the largest number of known ranges sharing one hash (the
// optimum of interval partitioning).
func TestRunsPartition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var sc chainScratch
	for iter := range 500 {
		n := rng.IntN(12)
		refs := make([]SegmentRef, n)
		for i := range refs {
			refs[i].SeqMax = int64(i)
			if rng.IntN(4) > 0 {
				a, b := rng.Uint64N(40), rng.Uint64N(40)
				refs[i].FirstHash, refs[i].LastHash = min(a, b)+1, max(a, b)+1
			}
		}
		seen := make(map[int64]int)
		unknown := 0
		chains := chainSegments(refs, &sc)
		for _, ch := range chains {
			for j, r := range ch {
				seen[r.SeqMax]++
				if r.FirstHash == 0 && r.LastHash == 0 {
					unknown++
					if len(ch) != 1 {
						t.Fatalf("iter %d: segment without a range shares a chain: %+v", iter, ch)
					}
				}
				if j > 0 && ch[j-1].LastHash >= r.FirstHash {
					t.Fatalf("iter %d: chain ranges overlap or descend: %+v", iter, ch)
				}
			}
		}
		for i := range refs {
			if seen[int64(i)] != 1 {
				t.Fatalf("iter %d: segment %d appears %d times", iter, i, seen[int64(i)])
			}
		}
		depth := 0
		for h := uint64(1); h <= 41; h++ {
			d := 0
			for _, r := range refs {
				if r.FirstHash != 0 && r.FirstHash <= h && h <= r.LastHash {
					d++
				}
			}
			depth = max(depth, d)
		}
		if len(chains)-unknown != depth || countRuns(refs) != len(chains) {
			t.Fatalf("iter %d: %d chains for known ranges of depth %d", iter, len(chains)-unknown, depth)
		}
	}
}

// TestScanFilterStrategies: every row-filter variant — branch-free or
// branching (sparse), fused with the time deltas (sparse also with
// property columns) or over decoded times with property columns, block
// inside or across the range — returns the naive answer: each passing
// row's time and, with columns, its property value. A rare event (1 row
// in 50) makes the segments sparse for a query on it; a middling one (3
// in 10) takes the vector filter (cursor.vector), over blocks of up to
// 12,000 rows on even seeds, so drain filters them in pieces of users
// (denseRows); a common one keeps the per-user branch-free filter. On
// seeds 4-7 the time deltas pack at 16 bits with exceptions, which the
// vector filter reads packed.
func TestScanFilterStrategies(t *testing.T) {
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 77))
		st := openTest(t, 1+r.IntN(2))
		t0 := int64(1_600_000_000_000_000)
		evs := make([]event.Event, 12000)
		var clock [60]int64
		span := int64(0) // seconds from t0 holding every event
		for i := range evs {
			name := "common"
			switch x := r.IntN(50); {
			case x == 0:
				name = "rare"
			case x < 16:
				name = "mid"
			}
			u := r.IntN(60)
			sec := int64(r.IntN(1000))
			if seed >= 4 {
				// Each user's gaps mostly 40,000-59,999 s, every 7th
				// 2^20 s: the time deltas pack at 16 bits with
				// exceptions (the vector filter's packed path).
				gap := 40_000 + int64(r.IntN(20_000))
				if clock[u]%7 == 3 {
					gap = 1 << 20
				}
				clock[u] += gap
				sec = clock[u]
			}
			evs[i] = event.Event{UserID: fmt.Sprintf("u%d", u), Time: t0 + sec*1_000_000, Name: name,
				Pos: event.Pos{File: "mem", Line: int64(i + 1)}}
			span = max(span, sec+1)
			// n on most rows: blocks store a presence bitmap, which
			// sparse segments read compact (segment.PropData.Ranks).
			if i%7 != 3 {
				evs[i].Props = []event.Prop{{Name: "n", Value: event.Int(int64(i))}}
			}
		}
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 1 + r.IntN([]int{12000, 300}[seed%2])}); err != nil {
			t.Fatal(err)
		}
		a, _ := st.App("app")
		snap := snapOf(t, a)
		for _, target := range []string{"rare", "mid", "common"} {
			for _, cols := range []bool{false, true} {
				from := t0 + r.Int64N(span/2)*1_000_000
				to := from + r.Int64N(span*6/10)*1_000_000
				masksOf := func(meta *segment.Meta) []uint64 {
					out := make([]uint64, len(meta.EventNames))
					for c, n := range meta.EventNames {
						if n == target {
							out[c] = 1
						}
					}
					return out
				}
				spec := ScanSpec{From: from, To: to, Masks: masksOf}
				if cols {
					spec = ScanSpec{From: from, To: to, Cols: 1, Compile: func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
						mi := slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == "n" })
						return &SegmentPlan{Masks: masksOf(meta), Props: []int{mi}, Cols: []ColumnSource{{Prop: 0, Kind: ColInt}}}, nil
					}}
				}
				var mu sync.Mutex
				got := map[string][]int64{}
				vs := []Visitor{visitFunc(func(u UserKey, tr *trail.Trail) {
					mu.Lock()
					defer mu.Unlock()
					for i, ts := range tr.Times {
						got[string(u.ID)] = append(got[string(u.ID)], ts)
						if cols {
							// the row's n (which event it is), or -1
							n := int64(-1)
							if tr.Cols[0].Set[i] {
								n = int64(tr.Cols[0].Bits[i])
							}
							got[string(u.ID)] = append(got[string(u.ID)], n)
						}
					}
				})}
				if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
					t.Fatal(err)
				}
				want := map[string][]int64{}
				byUser := slices.Clone(evs)
				slices.SortStableFunc(byUser, func(x, y event.Event) int { return cmp.Compare(x.Time, y.Time) })
				for _, e := range byUser {
					if e.Name == target && e.Time >= from && e.Time < to {
						want[e.UserID] = append(want[e.UserID], e.Time)
						if cols {
							n := int64(-1)
							if len(e.Props) > 0 {
								n = e.Props[0].Value.Int
							}
							want[e.UserID] = append(want[e.UserID], n)
						}
					}
				}
				if len(got) != len(want) {
					t.Fatalf("seed %d %s cols=%v: %d users, want %d", seed, target, cols, len(got), len(want))
				}
				for u, w := range want {
					if !slices.Equal(got[u], w) {
						t.Fatalf("seed %d %s cols=%v user %s:\n got %v\nwant %v", seed, target, cols, u, got[u], w)
					}
				}
			}
		}
	}
}
