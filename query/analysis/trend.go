package analysis

import (
	"fmt"
	"math/bits"
	"sort"
)

// MaxTrendSeries is the largest number of series of one Trend (one mask
// bit each).
const MaxTrendSeries = 64

// TrendSeries describes one series of a trend. Series i is matched by
// trail mask bit i.
type TrendSeries struct {
	Math TrendMath
}

// TrendSpec is a validated trend query for the kernel (spec §4).
type TrendSpec struct {
	// Bounds are the calendar bucket boundaries (UTC µs, strictly
	// increasing, from timebucket.Bounds(From, To, …)); bucket b is
	// [Bounds[b], Bounds[b+1]). They must cover [From, To).
	Bounds []int64
	// From, To: only events with From ≤ time < To count (UTC µs), also in
	// a first or last bucket that extends past the range (spec §2).
	From, To int64
	// Series, 1 to MaxTrendSeries of them.
	Series []TrendSeries
}

// TrendSeriesResult is one series of a TrendResult.
type TrendSeriesResult struct {
	// Buckets[b] is the value of bucket b: matching events (count) or
	// distinct users with a matching event in the bucket (users).
	Buckets []int64
	// Total over [From, To): for count the number of matching events, for
	// users the number of distinct users over the whole range (not a sum
	// of buckets).
	Total int64
}

// TrendResult is the result of a Trend: Series[i] belongs to spec series i.
type TrendResult struct {
	Series []TrendSeriesResult
}

// Trend accumulates trend series per calendar bucket. Create it with
// NewTrend; it is owned by one goroutine.
type Trend struct {
	bounds     []int64
	from, to   int64
	ns, nb     int
	seriesMask uint64
	countMask  uint64
	usersMask  uint64
	counts     []int64 // counts[b*ns+s]
	userTotals []int64 // per series: distinct users over the range (users math only)
	last       []int32 // per series, per Add: last bucket the user was counted in
}

// NewTrend validates spec and returns an empty accumulator. It copies
// spec.Bounds. Errors: empty range, fewer than two or non-increasing
// boundaries, boundaries not covering [From, To), no series or more than
// MaxTrendSeries, unknown math.
func NewTrend(spec TrendSpec) (*Trend, error) {
	if err := checkBounds("trend", spec.Bounds, spec.From, spec.To); err != nil {
		return nil, err
	}
	ns := len(spec.Series)
	if ns == 0 || ns > MaxTrendSeries {
		return nil, fmt.Errorf("analysis: trend: %d series, want 1 to %d", ns, MaxTrendSeries)
	}
	t := &Trend{
		bounds: append([]int64(nil), spec.Bounds...),
		from:   spec.From, to: spec.To,
		ns: ns, nb: len(spec.Bounds) - 1,
		userTotals: make([]int64, ns),
		last:       make([]int32, ns),
	}
	for i, s := range spec.Series {
		switch s.Math {
		case MathCount:
			t.countMask |= 1 << i
		case MathUsers:
			t.usersMask |= 1 << i
		default:
			return nil, fmt.Errorf("analysis: trend: series %d: unknown math %v", i, s.Math)
		}
	}
	t.seriesMask = t.countMask | t.usersMask
	t.counts = make([]int64, t.nb*ns)
	return t, nil
}

// Add accumulates one user's whole trail. The trail is borrowed only for
// the call. Cost: O(log n) to find From, then O(events + buckets) with a
// bucket cursor; no allocation.
func (t *Trend) Add(tr Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	i := 0
	if len(times) > 0 && times[0] < t.from {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= t.from })
	}
	for um := t.usersMask; um != 0; um &= um - 1 {
		t.last[bits.TrailingZeros64(um)] = -1
	}
	var seen uint64
	ns, to, bounds, counts := t.ns, t.to, t.bounds, t.counts
	b := 0
	next := bounds[1]
	for ; i < len(times); i++ {
		ts := times[i]
		if ts >= to {
			break
		}
		for ts >= next {
			b++
			next = bounds[b+1]
		}
		m := masks[i] & t.seriesMask
		if m == 0 {
			continue
		}
		row := counts[b*ns : b*ns+ns]
		for cm := m & t.countMask; cm != 0; cm &= cm - 1 {
			row[bits.TrailingZeros64(cm)]++
		}
		if um := m & t.usersMask; um != 0 {
			seen |= um
			for ; um != 0; um &= um - 1 {
				s := bits.TrailingZeros64(um)
				if t.last[s] != int32(b) {
					t.last[s] = int32(b)
					row[s]++
				}
			}
		}
	}
	for ; seen != 0; seen &= seen - 1 {
		t.userTotals[bits.TrailingZeros64(seen)]++
	}
}

// Merge adds the counts of o, an accumulator created from an equal spec,
// into t. o is not modified. It panics if the shapes differ (a programmer
// error).
func (t *Trend) Merge(o *Trend) {
	if o.ns != t.ns || o.nb != t.nb || o.countMask != t.countMask {
		panic("analysis: Trend.Merge of accumulators with different specs")
	}
	for i, v := range o.counts {
		t.counts[i] += v
	}
	for i, v := range o.userTotals {
		t.userTotals[i] += v
	}
}

// Result returns the tables accumulated so far, in newly allocated slices
// owned by the caller. t stays usable.
func (t *Trend) Result() TrendResult {
	res := TrendResult{Series: make([]TrendSeriesResult, t.ns)}
	for s := range t.ns {
		buckets := make([]int64, t.nb)
		var sum int64
		for b := range t.nb {
			buckets[b] = t.counts[b*t.ns+s]
			sum += buckets[b]
		}
		total := sum
		if t.usersMask&(1<<s) != 0 {
			total = t.userTotals[s]
		}
		res.Series[s] = TrendSeriesResult{Buckets: buckets, Total: total}
	}
	return res
}
