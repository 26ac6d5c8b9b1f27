package analysis

import (
	"math/rand/v2"
	"slices"
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
