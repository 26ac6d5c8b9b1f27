package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than s.
func (s *Stickiness) sameSpec(o *Stickiness) error {
	a, b := &s.spec, &o.spec
	if !slices.Equal(a.Bounds, b.Bounds) || a.From != b.From || a.To != b.To || !slices.Equal(a.Series, b.Series) ||
		a.MinEvents != b.MinEvents || !sameSource(a.Breakdown, b.Breakdown) ||
		!sameGroup(s.groups.group, o.groups.group) || (a.List == nil) != (b.List == nil) || a.List != nil && *a.List != *b.List {
		return fmt.Errorf("%w: stickiness: merge of accumulators with different specs", ErrState)
	}
	return nil
}

// writeSpec writes the canonical form of the spec for the fingerprint.
func (s *StickinessSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindStickiness))
	e.int64s(s.Bounds)
	e.varint(s.From)
	e.varint(s.To)
	e.uvarint(uint64(len(s.Series)))
	for _, b := range s.Series {
		e.varint(int64(b))
	}
	e.varint(int64(s.MinEvents))
	e.source(s.Breakdown)
	s.Group.write(e)
	e.bool(s.List != nil)
	if l := s.List; l != nil {
		e.varint(int64(l.Series))
		e.varint(int64(l.Intervals))
		e.bool(l.AtLeast)
		e.key(l.Key)
		e.varint(int64(l.Keep))
	}
}

// SpecFingerprint returns the fingerprint of the stickiness's spec
// (string keys named by Breakdown.Dict) that its encoded states carry.
func (s *Stickiness) SpecFingerprint() uint64 {
	return fingerprint(s.spec.Breakdown.Dict, s.spec.writeSpec)
}

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), the user list, then per group its key (a string when
// Breakdown.Dict names it) and counts. Call it between users; it never
// fails.
func (s *Stickiness) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, s.spec.Breakdown.Dict, kindStickiness, s.SpecFingerprint(), func(e *encoder) {
		e.list(&s.list)
		e.groups(&s.groups, func(g int) { e.counts(s.counts[g]) })
	})
}

// DecodeStickiness returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids. Errors (wrapping
// ErrState): an invalid spec, another version or kind, a state of another
// spec (fingerprint), truncated, trailing, out-of-range or inconsistent
// input (a duplicate key). b is not retained.
func DecodeStickiness(spec StickinessSpec, b []byte) (*Stickiness, error) {
	s, err := NewStickiness(spec)
	return decodeState(s, err, b, spec.Breakdown.Dict, kindStickiness, "stickiness", func(d *decoder) {
		d.list(&s.list)
		d.groups(&s.groups, s.spec.Breakdown, 2+1+s.ns*s.nb, s.ensure, func(g int) { d.countsInto(s.counts[g]) })
	})
}
