package analysis

import (
	"fmt"
	"slices"
	"unsafe"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than t.
func (t *Trend) sameSpec(o *Trend) error {
	a, b := &t.spec, &o.spec
	var what string
	switch {
	case !slices.Equal(a.Bounds, b.Bounds) || a.From != b.From || a.To != b.To:
		what = "bucket bounds or range"
	case !slices.Equal(a.Series, b.Series):
		what = "series"
	case !sameSource(a.Breakdown, b.Breakdown):
		what = "breakdown"
	case !sameGroup(t.group, o.group):
		what = "group"
	default:
		return nil
	}
	return fmt.Errorf("%w: trend: merge of accumulators with different %s", ErrState, what)
}

// writeSpec writes the canonical form of the spec for its fingerprint.
func (s *TrendSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindTrend))
	e.int64s(s.Bounds)
	e.varint(s.From)
	e.varint(s.To)
	e.uvarint(uint64(len(s.Series)))
	for _, x := range s.Series {
		e.u8(uint8(x.Math))
		e.varint(int64(x.Bit))
		e.varint(int64(x.Col))
		e.bool(x.Float)
	}
	e.source(s.Breakdown)
	s.Group.write(e)
}

// SpecFingerprint returns the fingerprint of the trend's spec that its
// encoded states carry: a hash of the spec's canonical parameters
// (bounds, range, series, breakdown source, group with string keys named
// by the breakdown's Dict). Two queries with equal parameters have equal
// fingerprints, whatever their dictionaries' ids.
func (t *Trend) SpecFingerprint() uint64 {
	return fingerprint(t.spec.Breakdown.Dict, t.spec.writeSpec)
}

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender) and returns the extended slice: the
// header (version, kind, SpecFingerprint), then per breakdown key its key
// (a string when the breakdown's Dict names it), counters and cells. The
// current user's scratch is not written: call it between users. It
// normalises the exact sums in place (their values are kept) and never
// fails; the error is for the interface's shape.
func (t *Trend) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, t.spec.Breakdown.Dict, kindTrend, t.SpecFingerprint(), func(e *encoder) {
		e.uvarint(uint64(len(t.slots)))
		for i := range t.slots {
			sl := &t.slots[i]
			e.key(sl.key)
			e.counts(sl.counts)
			e.counts(sl.events)
			for c := range sl.tots {
				e.cell(&sl.tots[c])
			}
			for c := range sl.cells {
				e.cell(&sl.cells[c])
			}
		}
	})
}

// cell writes a trend cell: its count, then, if not empty, its extremes,
// sum and values.
func (e *encoder) cell(c *trendCell) {
	e.uvarint(uint64(c.n))
	if c.n == 0 {
		return
	}
	e.f64(c.min)
	e.f64(c.max)
	e.sum(&c.sum)
	e.f64s(c.vals)
}

// cell reads a trend cell into c (empty) and returns the bytes of memory
// it allocated. vals tells whether the cell keeps one value per item
// counted (a percentile's values, a count per user's counts): it must
// then hold n values, else none.
func (d *decoder) cell(c *trendCell, vals bool) int64 {
	c.n = d.count()
	if c.n == 0 || d.err != nil {
		return 0
	}
	c.min, c.max = d.f64(), d.f64()
	if d.err == nil && !(c.min <= c.max) {
		d.fail("cell min %g above its max %g", c.min, c.max)
		return 0
	}
	d.sum(&c.sum)
	c.vals = d.f64s(nil)
	if want := c.n; !vals && len(c.vals) != 0 || vals && int64(len(c.vals)) != want {
		d.fail("cell of %d with %d values", c.n, len(c.vals))
	}
	return c.sum.bytes() + int64(cap(c.vals))*8
}

// keepsVals reports whether the cells (tots: the range totals) of the
// series of mask bit bit keep one value per item counted.
func (t *Trend) keepsVals(bit int, tots bool) bool {
	if t.seriesMask&(1<<bit) == 0 {
		return false
	}
	switch m := t.spec.Series[t.bitSeries[bit]].Math; m {
	case MathCountPerUserAvg, MathCountPerUserMedian, MathCountPerUserMax:
		return true
	default:
		return !tots && m.Quantile()
	}
}

// DecodeTrend returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids. Errors (wrapping
// ErrState): an invalid spec, another version or kind, a state of another
// spec (fingerprint), truncated, trailing, out-of-range or inconsistent
// input (a duplicate key, a key no slot of the spec has, a negative count
// or one of 2^53 or more, a cell whose values do not match its count or
// whose min is above its max), or more slots than 64 times the input's
// size plus 1 MiB of memory can hold. b is not retained.
func DecodeTrend(spec TrendSpec, b []byte) (*Trend, error) {
	t, err := NewTrend(spec)
	return decodeState(t, err, b, spec.Breakdown.Dict, kindTrend, "trend", func(d *decoder) {
		// A slot takes at least a key, its counters and its events and tots.
		// and its counters, cells and table entry once decoded.
		cost := int64(unsafe.Sizeof(trendSlot{})) + int64(t.nb*t.nw)*8 + int64(t.nw)*(cellSize+16+int64(unsafe.Sizeof(userMark{}))) + slotEntryBytes
		if t.withCells {
			cost += int64(t.nb*t.nw) * cellSize
		}
		if t.withCPU {
			cost += int64(t.nw) * int64(unsafe.Sizeof(cpuMark{}))
		}
		n := d.grow(2+1+t.nb*t.nw+1+2*t.nw, cost, t.Bytes())
		t.slots = slices.Grow(t.slots, n)
		t.sc.marks = slices.Grow(t.sc.marks, n*t.nw)
		if t.withCPU {
			t.sc.cpu = slices.Grow(t.sc.cpu, n*t.nw)
		}
		seen := make([]bool, 0, len(t.slots)+n)
		for range n {
			k := d.key()
			// Without a breakdown the one slot is Key{}, group or not
			// (NewTrend).
			ok := k == Key{}
			if t.spec.Breakdown.From != KeyNone {
				ok = groupKey(t.spec.Breakdown, t.group, k)
			}
			if d.err == nil && !ok {
				d.fail("key %+v is no slot's", k)
			}
			if d.err != nil {
				return
			}
			s := int(t.slotFor(k))
			if !d.once(&seen, s, len(t.slots), k) {
				return
			}
			sl := &t.slots[s]
			d.countsInto(sl.counts)
			d.countsInto(sl.events)
			for c := range sl.tots {
				t.bytes += d.cell(&sl.tots[c], t.keepsVals(c, true))
			}
			for c := range sl.cells {
				t.bytes += d.cell(&sl.cells[c], t.keepsVals(c%t.nw, false))
			}
		}
	})
}
