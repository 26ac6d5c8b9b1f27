package analysis

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/spurdb/spur/trail"
)

// MaxTrendSeries is the largest number of series of one Trend (one mask
// bit each).
const MaxTrendSeries = 64

// Rolling windows of the active-users maths (docs/analytics.md §2 rolling periods).
const (
	WAUWindow int64 = 7 * 86400 * 1e6  // wau: 7 days in µs
	MAUWindow int64 = 30 * 86400 * 1e6 // mau: 30 days in µs
)

// TrendSeries describes one series of a trend.
type TrendSeries struct {
	Math TrendMath
	// Bit is the trail mask bit of the series' matcher (0..63). Each series
	// has its own bit, except that quantile series (TrendMath.Quantile) of
	// the same Col may share one when their matchers are the same: they
	// then share one list of values per cell.
	Bit int
	// Col is the Trail column of the numeric property of a property math
	// (sum … p99); Float says it holds float64 bits rather than int64.
	Col   int
	Float bool
}

// TrendSpec is a validated trend query for the kernel (docs/analytics.md §4).
type TrendSpec struct {
	// Bounds are the calendar bucket boundaries (UTC µs, strictly
	// increasing, from timebucket.Bounds(From, To, …)); bucket b is
	// [Bounds[b], Bounds[b+1]). They must cover [From, To).
	Bounds []int64
	// From, To: only events with From ≤ time < To count (UTC µs), also in
	// a first or last bucket that extends past the range (docs/analytics.md §2). The
	// rolling active-users maths (wau, mau) also look back before From:
	// bucket b counts the users with an event in [E−W, E) where E is
	// min(Bounds[b+1], To) and W the math's window; the scan must supply
	// events from From − W.
	From, To int64
	// Series, 1 to MaxTrendSeries of them.
	Series []TrendSeries
	// Breakdown is where an event's breakdown key comes from: the event's
	// column, the user's property, or none (every event has the zero Key).
	Breakdown KeySource
	// Group, if set, gives the key each breakdown key is aggregated
	// under, or drops the key's events (see KeyGroup). It lets a second
	// pass recompute a merged "(other)" group exactly (users stay
	// distinct).
	Group *KeyGroup
}

// TrendRow is one breakdown value of a series.
type TrendRow struct {
	Key Key
	// Buckets[b] is the value of bucket b (see TrendMath); maths over
	// property values are 0 for a bucket without values.
	Buckets []float64
	// Total is the value over the whole range: for count and sum the sum
	// of the buckets; for users, wau and mau the distinct users counted in
	// any bucket; for the other maths the math over all the range's
	// values or per-user counts (not an aggregate of buckets).
	Total float64
	// Events is the number of matching events counted under the key (for
	// wau and mau also the look-back ones; for users the number of users,
	// which is positive exactly when an event was counted); under a
	// breakdown, keys without any are left out.
	Events int64
}

// TrendSeriesResult is one series of a TrendResult: its rows by key
// (without a breakdown, exactly one row with the zero Key), ordered by
// Key (unset first, then Bits ascending).
type TrendSeriesResult struct {
	Rows []TrendRow
}

// TrendResult is the result of a Trend: Series[i] belongs to spec series i.
type TrendResult struct {
	Series []TrendSeriesResult
}

// trendCell is the state of one (slot, bucket, series), or of a slot's
// series over the range (tots). Per-series state is indexed by the
// series' mask bit (width nw = highest bit + 1), so that the hot loops
// index by the bit directly.
type trendCell struct {
	n        int64 // events, users, values or per-user counts
	min, max float64
	sum      ExactSum
	vals     []float64 // property values (percentiles) or per-user counts
}

// userMark is the current user's state in one (slot, series): scratch,
// not state (trendScratch).
type userMark struct {
	gen    uint32 // Add generation that last touched it
	bucket int32  // users, cpu: bucket of the current count; wau: last bucket counted
}

// cpuMark is the current user's counts in one (slot, series) of a
// count-per-user math.
type cpuMark struct {
	cnt int64 // the user's events in the mark's bucket
	tot int64 // the user's events in the range
}

// trendSlot is the mergeable state of one breakdown key. The counters of
// count, users, wau and mau are a dense array (the hot path of most
// trends); cells exist only when the spec has a property or
// count-per-user math.
type trendSlot struct {
	key    Key
	counts []int64     // [b*nw + bit]: count, users, wau, mau
	cells  []trendCell // [b*nw + bit]: the other maths; nil when the spec has none
	tots   []trendCell // [bit]
	events []int64     // [bit] matching events counted (maths other than count and users)
}

// Trend accumulates trend series per calendar bucket and breakdown key.
// Create it with NewTrend; it is owned by one goroutine.
type Trend struct {
	spec       TrendSpec
	ns, nb, nw int // series, buckets, width of per-series state (highest bit + 1)
	seriesMask uint64
	countMask  uint64   // bits of count series
	usersMask  uint64   // bits of users series
	otherMask  uint64   // bits of the other maths (event dispatches them)
	bitSeries  [64]int8 // series index of a mask bit
	lookMask   uint64   // bits of wau/mau series
	look       int64    // largest look-back window
	ends       []int64  // ends[b] = min(Bounds[b+1], To)
	withCells  bool     // some series has a property or count-per-user math
	withCPU    bool     // some series has a count-per-user math

	group *keyGrouper // spec.Group, or nil

	// The mergeable state (what Merge combines and AppendBinary writes).
	slots []trendSlot
	keys  slotTable // slot key → slot
	bytes int64     // memory of slots and value lists

	raw  *slotTable // original key → slot (-1 dropped); &keys without Group
	rawT slotTable
	sc   trendScratch
}

// trendScratch is the per-user scratch of a Trend: the current user's
// marks per slot and series, which Merge and AppendBinary ignore.
type trendScratch struct {
	marks   []userMark // [slot*nw + bit]
	cpu     []cpuMark  // [slot*nw + bit]; nil when the spec has no count-per-user math
	gen     uint32
	touched []int32 // slot*nw+bit of count-per-user marks touched by the current user
	user    trendUser
}

// trendUser is the current user's state between the chunks of their
// trail (package trail) that the marks do not hold: a few words, whatever
// the trail's length.
type trendUser struct {
	b int // bucket of the last event counted in [From, To)
	// addCounts: users series that counted the user at all, and those
	// that counted them in bucket b
	seen, done uint64
}

// NewTrend validates spec and returns an empty accumulator. It copies
// spec.Bounds. Errors: empty range, fewer than two or non-increasing
// boundaries, boundaries not covering [From, To), no series or more than
// MaxTrendSeries, duplicate or out-of-range bits, unknown math.
func NewTrend(spec TrendSpec) (*Trend, error) {
	if err := checkBounds("trend", spec.Bounds, spec.From, spec.To); err != nil {
		return nil, err
	}
	ns := len(spec.Series)
	if ns == 0 || ns > MaxTrendSeries {
		return nil, fmt.Errorf("analysis: trend: %d series, want 1 to %d", ns, MaxTrendSeries)
	}
	spec.Bounds = slices.Clone(spec.Bounds)
	spec.Series = slices.Clone(spec.Series)
	t := &Trend{spec: spec, ns: ns, nb: len(spec.Bounds) - 1}
	for i, s := range spec.Series {
		if s.Math > MathMAU {
			return nil, fmt.Errorf("analysis: trend: series %d: unknown math %v", i, s.Math)
		}
		if s.Bit < 0 || s.Bit > 63 {
			return nil, fmt.Errorf("analysis: trend: series %d: bit %d out of range", i, s.Bit)
		}
		if t.seriesMask&(1<<s.Bit) != 0 {
			o := spec.Series[t.bitSeries[s.Bit]]
			if !s.Math.Quantile() || !o.Math.Quantile() || s.Col != o.Col || s.Float != o.Float {
				return nil, fmt.Errorf("analysis: trend: series %d: bit %d shared, but not by quantiles of one column", i, s.Bit)
			}
			continue // the first series on the bit set it up
		}
		t.seriesMask |= 1 << s.Bit
		t.bitSeries[s.Bit] = int8(i)
		t.nw = max(t.nw, s.Bit+1)
		switch s.Math {
		case MathCount:
			t.countMask |= 1 << s.Bit
		case MathUsers:
			t.usersMask |= 1 << s.Bit
		default:
			t.otherMask |= 1 << s.Bit
		}
		switch s.Math {
		case MathCountPerUserAvg, MathCountPerUserMedian, MathCountPerUserMax:
			t.withCPU, t.withCells = true, true
		default:
			t.withCells = t.withCells || s.Math.NeedsProperty()
		}
		if w := s.Math.Window(); w > 0 {
			t.lookMask |= 1 << s.Bit
			t.look = max(t.look, w)
		}
	}
	t.ends = make([]int64, t.nb)
	for b := range t.nb {
		t.ends[b] = min(spec.Bounds[b+1], spec.To)
	}
	t.raw = &t.keys
	if spec.Group != nil {
		t.raw = &t.rawT
		t.group = newKeyGrouper(spec.Group)
	}
	if spec.Breakdown.From == KeyNone {
		t.slotFor(Key{})
	}
	return t, nil
}

// slotFor returns the slot of slot key k, creating it.
func (t *Trend) slotFor(k Key) int32 {
	if s, ok := t.keys.get(k); ok {
		return s
	}
	s := int32(len(t.slots))
	sl := trendSlot{
		key:    k,
		counts: make([]int64, t.nb*t.nw),
		tots:   make([]trendCell, t.nw),
		events: make([]int64, t.nw),
	}
	t.sc.marks = append(t.sc.marks, make([]userMark, t.nw)...)
	t.bytes += int64(t.nb*t.nw)*8 + int64(t.nw)*(cellSize+16)
	if t.withCells {
		sl.cells = make([]trendCell, t.nb*t.nw)
		t.bytes += int64(t.nb*t.nw) * cellSize
	}
	if t.withCPU {
		t.sc.cpu = append(t.sc.cpu, make([]cpuMark, t.nw)...)
		t.bytes += int64(t.nw) * 16
	}
	t.slots = append(t.slots, sl)
	t.keys.put(k, s)
	return s
}

// slotOf returns the slot of original key k, or -1 when Group drops it.
func (t *Trend) slotOf(k Key) int32 {
	if s, ok := t.raw.get(k); ok {
		return s
	}
	if t.group == nil {
		return t.slotFor(k)
	}
	s := int32(-1)
	if g, keep := t.group.group(k); keep {
		s = t.slotFor(g)
	}
	t.raw.put(k, s)
	return s
}

// Add accumulates one chunk of a user's trail (package trail: a user's
// chunks come one after the other, the first with Offset 0, all but the
// last with More). Between chunks the accumulator keeps the user's marks
// per breakdown key and series and a few words (trendUser), and the
// count-per-user maths' counts are recorded after the last chunk. The
// trail is borrowed only for the call. Cost: O(log n) to find the first
// event, then O(events × matching series) plus the buckets crossed; no
// allocation except the amortised growth of value lists and of the
// breakdown slots.
func (t *Trend) Add(tr *trail.Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	if !t.spec.Breakdown.check(tr) {
		panic("analysis: Trend.Add: trail lacks the breakdown column")
	}
	start := t.spec.From - t.look
	i := 0
	if len(times) > 0 && times[0] < start {
		i = sort.Search(len(times), func(j int) bool { return times[j] >= start })
	}
	if tr.Offset == 0 { // a new user
		t.sc.gen++
		if t.sc.gen == 0 { // wrapped: reset every mark
			clear(t.sc.marks)
			t.sc.gen = 1
		}
		t.sc.user = trendUser{}
	}
	userSlot := int32(0)
	switch {
	case t.spec.Breakdown.From == KeyUser:
		userSlot = t.slotOf(t.spec.Breakdown.user(tr))
	case t.spec.Breakdown.From == KeyNone && t.spec.Group != nil:
		userSlot = t.slotOf(Key{})
	}
	if userSlot >= 0 && t.spec.Breakdown.From != KeyEvent && t.otherMask|t.lookMask == 0 {
		t.addCounts(times[i:], masks[i:], &t.slots[userSlot], tr.More)
		return
	}
	from, to, bounds, nw, gen := t.spec.From, t.spec.To, t.spec.Bounds, t.nw, t.sc.gen
	perEvent := t.spec.Breakdown.From == KeyEvent
	slot := userSlot
	if !perEvent && slot < 0 {
		return // Group dropped the user's key
	}
	var sl *trendSlot
	if !perEvent {
		sl = &t.slots[slot]
	}
	// Locals: the stores into cells below would otherwise make the
	// compiler reload these from t on every event.
	seriesMask, lookMask, countMask, usersMask, otherMask := t.seriesMask, t.lookMask, t.countMask, t.usersMask, t.otherMask
	b := t.sc.user.b
	next := bounds[b+1]
	for ; i < len(times); i++ {
		ts := times[i]
		if ts >= to {
			break
		}
		m := masks[i] & seriesMask
		if ts < from {
			m &= lookMask
		}
		if m == 0 {
			continue
		}
		if ts >= from {
			for ts >= next {
				b++
				next = bounds[b+1]
			}
		}
		if perEvent {
			if slot = t.slotOf(t.spec.Breakdown.event(tr, i)); slot < 0 {
				continue
			}
			sl = &t.slots[slot]
		}
		if ts >= from {
			counts := sl.counts[b*nw : b*nw+nw]
			for cm := m & countMask; cm != 0; cm &= cm - 1 {
				counts[bits.TrailingZeros64(cm)]++
			}
			for um := m & usersMask; um != 0; um &= um - 1 {
				bit := bits.TrailingZeros64(um)
				mk := &t.sc.marks[int(slot)*nw+bit]
				if mk.gen != gen {
					mk.gen, mk.bucket = gen, -1
					sl.tots[bit].n++
				}
				if mk.bucket != int32(b) {
					mk.bucket = int32(b)
					counts[bit]++
				}
			}
		}
		for om := m & otherMask; om != 0; om &= om - 1 {
			t.event(sl, slot, bits.TrailingZeros64(om), tr, i, b)
		}
	}
	if tr.More {
		t.sc.user.b = b
		return
	}
	for _, ix := range t.sc.touched {
		sl := &t.slots[ix/int32(t.nw)]
		bit := int(ix % int32(t.nw))
		t.flushCount(sl, int(ix), bit)
		tot := &sl.tots[bit]
		tot.n++
		t.appendVal(tot, float64(t.sc.cpu[ix].tot))
	}
	t.sc.touched = t.sc.touched[:0]
}

// addCounts is Add's loop for the most common shape — only count and
// users series, one slot for the whole trail — kept as tight as the scan
// itself (one masked table update per matching event). more says that
// the user's trail continues in another chunk: the loop's state is kept
// in t.user and the range totals wait for the last chunk.
func (t *Trend) addCounts(times []int64, masks []uint64, sl *trendSlot, more bool) {
	to, bounds, nw := t.spec.To, t.spec.Bounds, t.nw
	seriesMask, countMask, usersMask := t.seriesMask, t.countMask, t.usersMask
	counts := sl.counts
	masks = masks[:len(times)]
	// seen: users series the trail counts at all; done: users series that
	// already counted the user in bucket b.
	seen, done, b := t.sc.user.seen, t.sc.user.done, t.sc.user.b
	next := bounds[b+1]
	row := counts[b*nw : b*nw+nw]
	for i := 0; i < len(times); i++ {
		ts := times[i]
		if ts >= to {
			break
		}
		if ts >= next {
			for ts >= next {
				b++
				next = bounds[b+1]
			}
			row, done = counts[b*nw:b*nw+nw], 0
		}
		m := masks[i] & seriesMask
		if m == 0 {
			continue
		}
		for cm := m & countMask; cm != 0; cm &= cm - 1 {
			row[bits.TrailingZeros64(cm)]++
		}
		if um := m & usersMask &^ done; um != 0 {
			seen, done = seen|um, done|um
			for ; um != 0; um &= um - 1 {
				row[bits.TrailingZeros64(um)]++
			}
			if done == usersMask && countMask == 0 {
				// Nothing more to count in bucket b: skip its other
				// events (a distinct-users trend reads one event per
				// user and bucket, not every event).
				i = skipBelow(times, i, next) - 1
			}
		}
	}
	if more {
		t.sc.user = trendUser{b: b, seen: seen, done: done}
		return
	}
	for ; seen != 0; seen &= seen - 1 {
		sl.tots[bits.TrailingZeros64(seen)].n++
	}
}

// event accumulates event i for the series of mask bit bit in slot sl
// (number slot) when its math is neither count nor users: in bucket b,
// or, for wau and mau, also an event before From (look-back; b is then
// meaningless).
func (t *Trend) event(sl *trendSlot, slot int32, bit int, tr *trail.Trail, i, b int) {
	s := &t.spec.Series[t.bitSeries[bit]]
	ix := int(slot)*t.nw + bit
	mk := &t.sc.marks[ix]
	sl.events[bit]++
	switch s.Math {
	case MathCountPerUserAvg, MathCountPerUserMedian, MathCountPerUserMax:
		cm := &t.sc.cpu[ix]
		if mk.gen != t.sc.gen {
			*mk = userMark{gen: t.sc.gen, bucket: -1}
			*cm = cpuMark{}
			t.sc.touched = append(t.sc.touched, int32(ix))
		}
		if mk.bucket != int32(b) {
			t.flushCount(sl, ix, bit)
			mk.bucket = int32(b)
		}
		cm.cnt++
		cm.tot++
	case MathWAU, MathMAU:
		t.active(sl, bit, mk, tr.Times[i], s.Math.Window())
	default: // property maths
		c := &tr.Cols[s.Col]
		if !c.Set[i] {
			return
		}
		cell := &sl.cells[b*t.nw+bit]
		cell.n++
		switch s.Math {
		case MathSum, MathAvg:
			before := cap(cell.sum.d)
			if s.Float {
				cell.sum.AddFloat(math.Float64frombits(c.Bits[i]))
			} else {
				cell.sum.AddInt(int64(c.Bits[i]))
			}
			t.bytes += int64(cap(cell.sum.d)-before) * 8
		case MathMin, MathMax:
			v := colFloat(c.Bits[i], s.Float)
			if cell.n == 1 {
				cell.min, cell.max = v, v
			} else {
				cell.min, cell.max = min(cell.min, v), max(cell.max, v)
			}
		default:
			t.appendVal(cell, colFloat(c.Bits[i], s.Float))
		}
	}
}

// colFloat converts column bits to float64 (-0 as +0).
func colFloat(b uint64, isFloat bool) float64 {
	if isFloat {
		return math.Float64frombits(b) + 0
	}
	return float64(int64(b))
}

func (t *Trend) appendVal(c *trendCell, v float64) {
	before := cap(c.vals)
	c.vals = append(c.vals, v)
	t.bytes += int64(cap(c.vals)-before) * 8
}

// flushCount records the user's count in their current bucket (cpu
// maths): the mark ix (slot*nw + bit) of slot sl.
func (t *Trend) flushCount(sl *trendSlot, ix, bit int) {
	mk, cm := &t.sc.marks[ix], &t.sc.cpu[ix]
	if mk.bucket < 0 || cm.cnt == 0 {
		return
	}
	cell := &sl.cells[int(mk.bucket)*t.nw+bit]
	cell.n++
	t.appendVal(cell, float64(cm.cnt))
	cm.cnt = 0
}

// active counts the user in the buckets whose window [E−w, E) holds ts:
// those with E in (ts, ts+w]. Events come in time order, so the buckets
// already counted for this user are a prefix up to mk.bucket.
func (t *Trend) active(sl *trendSlot, bit int, mk *userMark, ts, w int64) {
	ends := t.ends
	lo := searchGreater(ends, ts)   // first bucket with E > ts
	hi := searchGreater(ends, ts+w) // first bucket with E > ts+w
	if mk.gen != t.sc.gen {
		mk.gen, mk.bucket = t.sc.gen, -1
	}
	lo = max(lo, int(mk.bucket)+1)
	if lo >= hi {
		return
	}
	if mk.bucket < 0 {
		sl.tots[bit].n++
	}
	for b := lo; b < hi; b++ {
		sl.counts[b*t.nw+bit]++
	}
	mk.bucket = int32(hi - 1)
}

// searchGreater returns the first index i with a[i] > v (len(a) if none).
func searchGreater(a []int64, v int64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if a[h] > v {
			hi = h
		} else {
			lo = h + 1
		}
	}
	return lo
}

// Merge adds the state of o, an accumulator created from an equal spec
// (or decoded with DecodeTrend), into t. o is not modified (value-wise).
// A spec that differs (bounds, range, series, breakdown, group) is an
// error wrapping ErrState, and t is left unchanged.
func (t *Trend) Merge(o *Trend) error {
	if err := t.sameSpec(o); err != nil {
		return err
	}
	for oi := range o.slots {
		os := &o.slots[oi]
		sl := &t.slots[t.slotFor(os.key)]
		for i, v := range os.counts {
			sl.counts[i] += v
		}
		for i := range os.cells {
			t.mergeCell(&sl.cells[i], &os.cells[i])
		}
		for i := range os.tots {
			t.mergeCell(&sl.tots[i], &os.tots[i])
			sl.events[i] += os.events[i]
		}
	}
	return nil
}

func (t *Trend) mergeCell(c, o *trendCell) {
	before := cap(c.vals)
	mergeCellCopy(c, o)
	t.bytes += int64(cap(c.vals)-before) * 8
}

// Bytes returns the memory the accumulator holds (cells, value lists,
// breakdown tables), for the query's memory budget.
func (t *Trend) Bytes() int64 {
	return t.bytes + t.keys.bytes() + t.rawT.bytes() + int64(cap(t.sc.touched))*4
}

// cellSize is the size of a trendCell in bytes.
const cellSize = 8 + 8 + 8 + 40 + 24

// Result returns the tables accumulated so far, in newly allocated slices
// owned by the caller; t stays usable. group, if not nil, maps each slot
// key of a series to the row it is reported under: rows with the same
// group key are merged first. Merging is exact for count, sum, avg, min,
// max and the percentiles; for users, wau, mau and the count-per-user
// maths it is not (users would be counted once per key), so callers must
// not merge keys of those series (use TrendSpec.Group in a second pass).
func (t *Trend) Result(group func(series int, k Key) Key) TrendResult {
	res := TrendResult{Series: make([]TrendSeriesResult, t.ns)}
	var scratch []float64
	// The range total of a one-slot row is computed over the merged
	// values of its buckets; a later series that shares the mask bit
	// (quantiles of one property) finds the same values in scratch.
	var lastSl *trendSlot
	lastBit := -1
	for si := range t.ns {
		s := t.spec.Series[si]
		bit := s.Bit
		var rows []*trendRowAcc
		byKey := map[Key]*trendRowAcc{}
		for i := range t.slots {
			sl := &t.slots[i]
			events := sl.events[bit]
			switch s.Math {
			case MathCount:
				for b := range t.nb {
					events += sl.counts[b*t.nw+bit]
				}
			case MathUsers:
				events = sl.tots[bit].n // a user counted means an event counted
			}
			if events == 0 && t.spec.Breakdown.From != KeyNone {
				continue
			}
			k := sl.key
			if group != nil {
				k = group(si, k)
			}
			a := byKey[k]
			if a == nil {
				a = &trendRowAcc{key: k, counts: make([]int64, t.nb), sl: sl}
				byKey[k] = a
				rows = append(rows, a)
			} else if a.sl != nil {
				a.copyCells(t, a.sl, bit)
				a.sl = nil
			}
			if a.sl == nil {
				a.copyCells(t, sl, bit)
			}
			for b := range t.nb {
				a.counts[b] += sl.counts[b*t.nw+bit]
			}
			a.events += events
		}
		slices.SortFunc(rows, func(a, b *trendRowAcc) int { return compareKeys(a.key, b.key) })
		out := make([]TrendRow, len(rows))
		for r, a := range rows {
			row := TrendRow{Key: a.key, Buckets: make([]float64, t.nb), Events: a.events}
			// all merges the buckets for the range total; its value list
			// is one scratch buffer for every row and series, sized once.
			all := trendCell{vals: scratch[:0]}
			keepVals := s.Math.Quantile() // other maths total from stats or a.total
			reuse := keepVals && a.sl != nil && a.sl == lastSl && bit == lastBit
			if keepVals && !reuse {
				n := 0
				for b := range t.nb {
					n += len(a.cell(t, b, bit).vals)
				}
				all.vals = slices.Grow(all.vals, n)
			}
			var sum int64
			for b := range t.nb {
				switch s.Math {
				case MathCount, MathUsers, MathWAU, MathMAU:
					row.Buckets[b] = float64(a.counts[b])
					sum += a.counts[b]
				default:
					c := a.cell(t, b, bit)
					row.Buckets[b] = s.Math.value(c)
					if keepVals && !reuse {
						mergeCellCopy(&all, c)
					} else {
						mergeCellStats(&all, c)
					}
				}
			}
			if reuse {
				all.vals = scratch // the same values, in another order
			}
			switch s.Math {
			case MathCount:
				row.Total = float64(sum)
			case MathUsers, MathWAU, MathMAU, MathCountPerUserAvg, MathCountPerUserMedian, MathCountPerUserMax:
				row.Total = s.Math.value(a.total(bit))
			default:
				row.Total = s.Math.value(&all)
			}
			if keepVals {
				scratch, lastSl, lastBit = all.vals, a.sl, bit
			}
			out[r] = row
		}
		res.Series[si] = TrendSeriesResult{Rows: out}
	}
	return res
}

// trendRowAcc gathers the slots that Result reports under one row of a
// series. A row of one slot reads that slot's cells in place (value may
// reorder their value lists, which leaves the accumulator's state as it
// was); a row that merges several slots copies their cells.
type trendRowAcc struct {
	key    Key
	counts []int64
	sl     *trendSlot  // the row's only slot, or nil
	cells  []trendCell // merged copies, once a second slot joins
	tot    trendCell
	events int64
}

// copyCells merges slot sl's cells and total of bit into a's copies.
func (a *trendRowAcc) copyCells(t *Trend, sl *trendSlot, bit int) {
	if a.cells == nil {
		a.cells = make([]trendCell, t.nb)
	}
	if sl.cells != nil {
		for b := range t.nb {
			mergeCellCopy(&a.cells[b], &sl.cells[b*t.nw+bit])
		}
	}
	mergeCellCopy(&a.tot, &sl.tots[bit])
}

// cell returns the row's cell of bucket b (a series with cells).
func (a *trendRowAcc) cell(t *Trend, b, bit int) *trendCell {
	if a.sl != nil {
		return &a.sl.cells[b*t.nw+bit]
	}
	return &a.cells[b]
}

// total returns the row's range total cell.
func (a *trendRowAcc) total(bit int) *trendCell {
	if a.sl != nil {
		return &a.sl.tots[bit]
	}
	return &a.tot
}

// mergeCellCopy merges o into c without sharing o's value list.
func mergeCellCopy(c, o *trendCell) {
	if mergeCellStats(c, o) {
		c.vals = append(c.vals, o.vals...)
	}
}

// mergeCellStats merges o's count, extremes and sum into c, not its
// values, and reports whether o had any.
func mergeCellStats(c, o *trendCell) bool {
	if o.n == 0 {
		return false
	}
	if c.n == 0 {
		c.min, c.max = o.min, o.max
	} else {
		c.min, c.max = min(c.min, o.min), max(c.max, o.max)
	}
	c.n += o.n
	c.sum.Merge(&o.sum)
	return true
}

// compareKeys orders keys: unset first, then by Bits.
func compareKeys(a, b Key) int {
	if a.Set != b.Set {
		if !a.Set {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.Bits, b.Bits)
}

// value computes the math over one cell. It reorders c.vals in place
// (QuantileSelectFloat).
func (m TrendMath) value(c *trendCell) float64 {
	switch m {
	case MathUsers, MathWAU, MathMAU: // range totals (tots)
		return float64(c.n)
	case MathSum:
		return c.sum.Float64()
	case MathAvg:
		return c.sum.Mean(c.n)
	case MathMin:
		if c.n == 0 {
			return 0
		}
		return c.min
	case MathMax:
		if c.n == 0 {
			return 0
		}
		return c.max
	case MathCountPerUserAvg:
		if c.n == 0 {
			return 0
		}
		var sum float64 // integers below 2^53: exact in any order
		for _, v := range c.vals {
			sum += v
		}
		return sum / float64(len(c.vals))
	case MathCountPerUserMax:
		if len(c.vals) == 0 {
			return 0
		}
		return slices.Max(c.vals)
	}
	return QuantileSelectFloat(c.vals, m.Level())
}
