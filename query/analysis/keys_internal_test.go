package analysis

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestSkipBelow compares skipBelow with a linear search on random sorted
// times, every start and a range of bounds.
func TestSkipBelow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for n := range 70 {
		times := make([]int64, n)
		for k := range times {
			times[k] = r.Int64N(40)
		}
		slices.Sort(times)
		for i := -1; i < n; i++ {
			for bound := int64(-1); bound <= 41; bound++ {
				want := i + 1
				for want < n && times[want] < bound {
					want++
				}
				if got := skipBelow(times, i, bound); got != want {
					t.Fatalf("times %v, i %d, bound %d: got %d, want %d", times, i, bound, got, want)
				}
			}
		}
	}
}

// TestBucketIndex compares bucketIndex.of with a binary search over the
// boundaries: irregular bucket lengths (23/25-hour days, months), spans
// that overflow maxBucketSlots (slots longer than buckets), and times
// before, between, on and after the boundaries.
func TestBucketIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		nb := 1 + r.IntN(200)
		step := int64(1) << (1 + r.IntN(40))
		if trial%10 == 0 {
			nb = maxBucketSlots + r.IntN(1000) // forces longer slots
			step = 7
		}
		bounds := make([]int64, nb+1)
		bounds[0] = r.Int64N(1<<50) - 1<<49
		for b := 1; b <= nb; b++ {
			bounds[b] = bounds[b-1] + 1 + r.Int64N(step)
		}
		x := newBucketIndex(bounds)
		want := func(ts int64) int {
			return sort.Search(nb, func(b int) bool { return bounds[b+1] > ts })
		}
		probe := func(ts int64) {
			if got, w := x.of(ts), want(ts); got != w {
				t.Fatalf("trial %d: %d buckets, time %d: got bucket %d, want %d", trial, nb, ts, got, w)
			}
		}
		for range 2000 {
			b := r.IntN(nb + 1)
			probe(bounds[b])
			probe(bounds[b] - 1)
			probe(bounds[b] + r.Int64N(step+1))
		}
		probe(bounds[0] - 1<<40)
		probe(bounds[nb] + 1<<40)
	}
}
