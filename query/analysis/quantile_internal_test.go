package analysis

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestIntroselect checks the contract of introselect (see selectRank) for
// ranks spread over the list (all of them below 300 elements), on random,
// duplicate-heavy, sorted, reversed and constant inputs, short and longer
// than sampleMin, with the full budget of bad partitions and with budgets
// of 0 and 1 (which force the slices.Sort fallback at once or after the
// first bad partition).
func TestIntroselect(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	fills := map[string]func(i, n int) int64{
		"random":   func(i, n int) int64 { return r.Int64N(1 << 40) },
		"dups":     func(i, n int) int64 { return r.Int64N(5) },
		"sorted":   func(i, n int) int64 { return int64(i) },
		"reversed": func(i, n int) int64 { return int64(n - i) },
		"equal":    func(i, n int) int64 { return 3 },
	}
	for name, fill := range fills {
		for _, n := range []int{1, 2, 17, 18, 63, 64, 65, 200, 3000, 9000} {
			src := make([]int64, n)
			for i := range src {
				src[i] = fill(i, n)
			}
			sorted := slices.Clone(src)
			slices.Sort(sorted)
			for _, budget := range []int{0, 1, bits.Len(uint(n))} {
				for k := 0; k < n; k += 1 + n/300 {
					x := slices.Clone(src)
					e := introselect(x, k, budget)
					if x[k] != sorted[k] {
						t.Fatalf("%s n=%d budget=%d: x[%d] = %d, want %d", name, n, budget, k, x[k], sorted[k])
					}
					if slices.Max(x[:k+1]) != x[k] || slices.Min(x[k:]) != x[k] {
						t.Fatalf("%s n=%d budget=%d k=%d: not partitioned around x[k]", name, n, budget, k)
					}
					if e > n || k+1 < n && e < k+2 {
						t.Fatalf("%s n=%d budget=%d k=%d: e = %d out of [k+2, n]", name, n, budget, k, e)
					}
					if k+1 < n && minOf(x[k+1:e]) != sorted[k+1] {
						t.Fatalf("%s n=%d budget=%d k=%d: min(x[k+1:%d]) = %d, want %d", name, n, budget, k, e, minOf(x[k+1:e]), sorted[k+1])
					}
				}
			}
		}
	}
}
