package analysis

import (
	"math"
	"math/bits"
	"slices"
)

// This file computes exact quantiles (docs/analytics.md §4, quantile_cont) by
// selection instead of a full sort: an introselect (Musser, "Introspective
// Sorting and Selection Algorithms", 1997) with Floyd–Rivest sampled
// pivots for long ranges (samplePivot) and, for the rest, the pieces of
// pattern-defeating quicksort (Peters, 2021; Go's sort package): ninther
// or median-of-3 pivots, pdqsort's partition of the elements equal to a
// range's known lower bound (so that duplicate-heavy lists take linear
// time) and insertion sort for short ranges. Partitions are branchless
// Lomuto (Alexandrescu, "Lomuto's Comeback", 2020): on random data a
// mispredicted branch per element costs more than the extra stores. A
// budget of bad partitions bounds the work: when it runs out the
// remaining range is sorted with slices.Sort (pdqsort, O(n log n) worst
// case), so adversarial inputs cannot make the selection quadratic.

// Quantile returns the exact q-quantile (0 ≤ q ≤ 1) of the sorted values
// x by linear interpolation between closest ranks (NumPy's default,
// DuckDB's quantile_cont; docs/analytics.md §4): h = (n-1)q,
// x[⌊h⌋] + (h-⌊h⌋)(x[⌊h⌋+1]-x[⌊h⌋]). It returns 0 for an empty x. x must
// be sorted ascending; it is not modified. The kernels use QuantileSelect,
// which needs no sort and gives the same result.
func Quantile(x []int64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, frac := quantilePos(len(x), q)
	v := float64(x[lo])
	if frac > 0 && lo+1 < len(x) {
		v = lerp(v, float64(x[lo+1]), frac)
	}
	return v
}

// QuantileFloat is Quantile for sorted float64 values (docs/analytics.md §4,
// quantile_cont; sorted as by slices.Sort, NaNs first). It returns 0 for
// an empty x. The kernels use QuantileSelectFloat.
func QuantileFloat(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, frac := quantilePos(len(x), q)
	v := x[lo]
	if frac > 0 && lo+1 < len(x) {
		v = lerp(v, x[lo+1], frac)
	}
	return v
}

// QuantileSelect returns the exact q-quantile (0 ≤ q ≤ 1) of x, equal bit
// for bit to Quantile of x sorted ascending (docs/analytics.md §4, DuckDB's
// quantile_cont): h = (n-1)q, x₍⌊h⌋₎ + (h-⌊h⌋)(x₍⌊h⌋+1₎ - x₍⌊h⌋₎) over
// the order statistics x₍i₎. It returns 0 for an empty x.
//
// It reorders x in place (x is left partitioned around rank ⌊h⌋, not
// sorted) and does not allocate; the expected time is O(n), the worst
// case O(n log n).
func QuantileSelect(x []int64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, frac := quantilePos(len(x), q)
	e := selectRank(x, lo)
	v := float64(x[lo])
	if frac > 0 && lo+1 < len(x) {
		v = lerp(v, float64(minOf(x[lo+1:e])), frac)
	}
	return v
}

// QuantileSelectFloat is QuantileSelect for float64 values: it returns,
// bit for bit, QuantileFloat of x after slices.Sort, which orders NaNs
// before every number (so a rank that falls on a NaN gives NaN) and treats
// -0 and +0 as equal (so, if x holds both, the sign of a zero result is
// unspecified, as it is after the unstable sort; Spur stores -0 as +0).
// ±Inf are ordinary values. It returns 0 for an empty x.
//
// It reorders x in place (NaNs first, the rest partitioned around rank
// ⌊h⌋, not sorted) and does not allocate; the expected time is O(n), the
// worst case O(n log n).
func QuantileSelectFloat(x []float64, q float64) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, frac := quantilePos(len(x), q)
	nan := 0
	for i, v := range x {
		if v != v {
			x[i], x[nan] = x[nan], v
			nan++
		}
	}
	if lo < nan {
		return x[lo] // NaN, also after interpolation
	}
	r := x[nan:]
	k := lo - nan
	e := selectRank(r, k)
	v := r[k]
	if frac > 0 && k+1 < len(r) {
		v = lerp(v, minOf(r[k+1:e]), frac)
	}
	return v
}

// quantilePos returns the rank ⌊h⌋ and the fraction h-⌊h⌋ of the
// q-quantile position h = (n-1)q of n > 0 values (docs/analytics.md §4).
func quantilePos(n int, q float64) (lo int, frac float64) {
	h := float64(n-1) * q
	lo = int(h)
	return lo, h - float64(lo)
}

// lerp interpolates linearly from a (at 0) to b (at 1): a + frac(b-a), the
// docs/analytics.md §4 formula, written once so that every quantile function rounds
// identically.
func lerp(a, b, frac float64) float64 {
	return a + frac*(b-a)
}

// ordered are the element types of the selection routines: the compiler
// instantiates each separately, so comparisons are single instructions.
type ordered interface{ int64 | float64 }

// selectSmall is the longest range that selectRank finishes with
// insertion sort.
const selectSmall = 16

// selectRank reorders x (with no NaN) so that x[k] is its k-th smallest
// element (0-based), x[:k] ≤ x[k] ≤ x[k+1:], and returns e ≤ len(x) such
// that, if k+1 < len(x), e ≥ k+2 and the minimum of x[k+1:e] is the
// minimum of x[k+1:], the (k+1)-th smallest element (e = k+2: it is
// x[k+1]); so the next order statistic costs no second selection and
// usually no scan. 0 ≤ k < len(x).
func selectRank[T ordered](x []T, k int) int {
	return introselect(x, k, bits.Len(uint(len(x))))
}

// introselect is selectRank with a budget of bad partitions (those after
// which more than 7/8 of the range is left to search); when it runs out
// the remaining range is sorted.
//
// Invariants: k ∈ [lo, hi); x[:lo] ≤ x[lo:hi] ≤ x[hi:]; x[lo-1] (if lo >
// 0) is a lower bound of x[lo:hi] known to the loop; x[hi] (if hi <
// len(x)) is the minimum of x[hi:], a pivot placed there.
func introselect[T ordered](x []T, k, budget int) int {
	lo, hi := 0, len(x)
	for hi-lo > selectSmall {
		if budget == 0 {
			slices.Sort(x[lo:hi])
			return min(k+2, len(x))
		}
		s := x[lo:hi]
		var m int
		if len(s) >= sampleMin {
			m = samplePivot(s, k-lo, budget)
		} else {
			m = choosePivot(s)
		}
		if lo > 0 && !(x[lo-1] < s[m]) {
			// The pivot equals the lower bound x[lo-1]: gather its
			// copies first; nothing in s is smaller.
			mid := lo + partitionEqual(s, m)
			if k < mid {
				if k+1 < mid {
					return k + 2
				}
				return min(hi+1, len(x))
			}
			lo = mid
			continue
		}
		p := lo + partition(s, m)
		switch {
		case k < p:
			hi = p
		case k > p:
			lo = p + 1
		default:
			return min(hi+1, len(x))
		}
		if hi-lo > len(s)-len(s)/8 {
			budget--
		}
	}
	insertionSort(x[lo:hi])
	return min(k+2, len(x))
}

// sampleMin is the shortest range that takes its pivot from a sample
// (samplePivot); shorter ones use choosePivot.
const sampleMin = 1 << 12

// samplePivot picks a pivot for selecting rank k of x (len(x) ≥
// sampleMin) the way of Floyd and Rivest ("Algorithm 489: SELECT", CACM
// 18(3), 1975; constants of the original): it gathers an evenly spaced
// sample of about n^(2/3)/2 elements into a window around k, selects
// recursively within it the element whose rank estimates k, shifted by
// about one standard deviation towards the middle so that after the
// partition k lies, with high probability, in the short side, and returns
// its index, k. Over 1e6 random values a median then partitions about
// 1.6n elements in all instead of ~2.4n with ninther pivots, a p99 about
// 1.07n instead of ~2.2n. The sample is strided rather than the
// original's contiguous window, so that sorted, reversed or organ-pipe
// inputs still get a representative pivot.
func samplePivot[T ordered](x []T, k, budget int) int {
	n := len(x)
	fn, fi := float64(n), float64(k+1)
	z := math.Log(fn)
	size := 0.5 * math.Exp(2*z/3)
	sd := 0.5 * math.Sqrt(z*size*(fn-size)/fn)
	if fi < fn/2 {
		sd = -sd
	}
	l := min(k, max(0, int(float64(k)-fi*size/fn+sd)))
	r := max(k+1, min(n, int(float64(k)+(fn-fi)*size/fn+sd)+1))
	stride := n / (r - l)
	for i := l; i < r; i++ {
		j := (i - l) * stride
		x[i], x[j] = x[j], x[i]
	}
	introselect(x[l:r], k-l, budget)
	return k
}

// choosePivot returns the index of a pivot for s (len(s) > selectSmall):
// Tukey's ninther for long ranges, else the median of three.
func choosePivot[T ordered](s []T) int {
	n := len(s)
	a, b, c := n/4, n/2, n/4*3
	if n >= 64 {
		a = median3(s, a-1, a, a+1)
		b = median3(s, b-1, b, b+1)
		c = median3(s, c-1, c, c+1)
	}
	return median3(s, a, b, c)
}

// median3 returns the index, among a, b and c, of the median of s[a],
// s[b] and s[c].
func median3[T ordered](s []T, a, b, c int) int {
	if s[b] < s[a] {
		a, b = b, a
	}
	// s[a] ≤ s[b]
	if s[c] < s[b] {
		if s[c] < s[a] {
			return a
		}
		return c
	}
	return b
}

// partition reorders s around the pivot s[m] and returns its final index
// p: s[:p] < s[p] ≤ s[p+1:]. The loop is branchless: every element is
// swapped to the boundary and the boundary advances by the comparison.
func partition[T ordered](s []T, m int) int {
	s[0], s[m] = s[m], s[0]
	pv := s[0]
	j := 1
	for i := 1; i < len(s); i++ {
		v := s[i]
		s[i] = s[j]
		s[j] = v
		var d int // 0 or 1 without a branch (SETcc)
		if v < pv {
			d = 1
		}
		j += d
	}
	j--
	s[0], s[j] = s[j], s[0]
	return j
}

// partitionEqual reorders s, none of whose elements is smaller than the
// pivot s[m], so that its copies of the pivot come first; it returns
// their count c: s[:c] = pivot < s[c:].
func partitionEqual[T ordered](s []T, m int) int {
	pv := s[m]
	j := 0
	for i := range s {
		v := s[i]
		s[i] = s[j]
		s[j] = v
		var d int
		if !(pv < v) {
			d = 1
		}
		j += d
	}
	return j
}

// insertionSort sorts the short s ascending.
func insertionSort[T ordered](s []T) {
	for i := 1; i < len(s); i++ {
		v := s[i]
		j := i
		for ; j > 0 && v < s[j-1]; j-- {
			s[j] = s[j-1]
		}
		s[j] = v
	}
}

// minOf returns the smallest element of the non-empty s (no NaN).
func minOf[T ordered](s []T) T {
	m := s[0]
	for _, v := range s[1:] {
		if v < m {
			m = v
		}
	}
	return m
}
