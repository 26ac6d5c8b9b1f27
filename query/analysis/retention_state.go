package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than r.
func (r *Retention) sameSpec(o *Retention) error {
	a, b := &r.spec, &o.spec
	if !slices.Equal(a.Bounds, b.Bounds) || a.Periods != b.Periods || a.Type != b.Type || a.Windows != b.Windows ||
		a.Criterion != b.Criterion || a.Period != b.Period || a.From != b.From || a.To != b.To ||
		!sameSource(a.Breakdown, b.Breakdown) ||
		(a.List == nil) != (b.List == nil) || a.List != nil && *a.List != *b.List {
		return fmt.Errorf("%w: retention: merge of accumulators with different specs", ErrState)
	}
	return nil
}

// writeSpec writes the canonical form of the spec for the fingerprint.
func (s *RetentionSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindRetention))
	e.int64s(s.Bounds)
	e.varint(int64(s.Periods))
	e.u8(uint8(s.Type))
	e.u8(uint8(s.Windows))
	e.u8(uint8(s.Criterion))
	e.varint(s.Period)
	e.varint(s.From)
	e.varint(s.To)
	e.source(s.Breakdown)
	e.bool(s.List != nil)
	if l := s.List; l != nil {
		e.varint(int64(l.Cohort))
		e.varint(int64(l.Period))
		e.varint(int64(l.Keep))
	}
}

// SpecFingerprint returns the fingerprint of the retention's spec (string
// keys named by Breakdown.Dict) that its encoded states carry.
func (r *Retention) SpecFingerprint() uint64 {
	return fingerprint(r.spec.Breakdown.Dict, r.spec.writeSpec)
}

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), then per breakdown key its key (a string when
// Breakdown.Dict names it), cohort sizes, retained counts and user list.
// Call it between users; it never fails.
func (r *Retention) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, r.spec.Breakdown.Dict, kindRetention, r.SpecFingerprint(), func(e *encoder) {
		e.uvarint(uint64(len(r.groups)))
		for i := range r.groups {
			g := &r.groups[i]
			e.key(g.key)
			e.counts(g.sizes)
			e.counts(g.retained)
			e.list(&g.list)
		}
	})
}

// DecodeRetention returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids. Errors (wrapping
// ErrState): an invalid spec, another version or kind, a state of another
// spec (fingerprint), truncated, trailing, out-of-range or inconsistent
// input (a duplicate key). b is not retained.
func DecodeRetention(spec RetentionSpec, b []byte) (*Retention, error) {
	r, err := NewRetention(spec)
	return decodeState(r, err, b, spec.Breakdown.Dict, kindRetention, "retention", func(d *decoder) {
		// A group takes at least a key, its counts and its list.
		n := d.length(2 + 2 + r.nc*(r.n+1) + 3)
		seen := make([]bool, 0, len(r.groups)+n)
		for range n {
			k := d.key()
			if d.err == nil && !groupKey(r.spec.Breakdown, nil, k) {
				d.fail("key %+v without a breakdown", k)
			}
			if d.err != nil {
				return
			}
			gi := int(r.group(k))
			if !d.once(&seen, gi, len(r.groups), k) {
				return
			}
			g := &r.groups[gi]
			d.countsInto(g.sizes)
			d.countsInto(g.retained)
			d.list(&g.list)
			r.bytes += g.list.Bytes()
		}
	})
}
