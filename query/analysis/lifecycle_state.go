package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than c.
func (c *Lifecycle) sameSpec(o *Lifecycle) error {
	a, b := &c.spec, &o.spec
	if !slices.Equal(a.Bounds, b.Bounds) || a.From != b.From || a.To != b.To || a.Active != b.Active || a.Seen != b.Seen ||
		!sameSource(a.Breakdown, b.Breakdown) ||
		!sameGroup(c.groups.group, o.groups.group) || (a.List == nil) != (b.List == nil) || a.List != nil && *a.List != *b.List {
		return fmt.Errorf("%w: lifecycle: merge of accumulators with different specs", ErrState)
	}
	return nil
}

// writeSpec writes the canonical form of the spec for the fingerprint.
func (s *LifecycleSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindLifecycle))
	e.int64s(s.Bounds)
	e.varint(s.From)
	e.varint(s.To)
	e.varint(int64(s.Active))
	e.varint(int64(s.Seen))
	e.source(s.Breakdown)
	s.Group.write(e)
	e.bool(s.List != nil)
	if l := s.List; l != nil {
		e.varint(int64(l.Bucket))
		e.u8(uint8(l.Status))
		e.key(l.Key)
		e.varint(int64(l.Keep))
	}
}

// SpecFingerprint returns the fingerprint of the lifecycle's spec
// (string keys named by Breakdown.Dict) that its encoded states carry.
func (c *Lifecycle) SpecFingerprint() uint64 {
	return fingerprint(c.spec.Breakdown.Dict, c.spec.writeSpec)
}

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), the user list, then per group its key (a string when
// Breakdown.Dict names it) and its counts per bucket and status. Call it
// between users; it never fails.
func (c *Lifecycle) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, c.spec.Breakdown.Dict, kindLifecycle, c.SpecFingerprint(), func(e *encoder) {
		e.list(&c.list)
		e.groups(&c.groups, func(g int) {
			for _, st := range c.counts[g] {
				for _, v := range st {
					e.uvarint(uint64(v))
				}
			}
		})
	})
}

// DecodeLifecycle returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids. Errors (wrapping
// ErrState): an invalid spec, another version or kind, a state of another
// spec (fingerprint), truncated, trailing, out-of-range or inconsistent
// input (a duplicate key). b is not retained.
func DecodeLifecycle(spec LifecycleSpec, b []byte) (*Lifecycle, error) {
	c, err := NewLifecycle(spec)
	return decodeState(c, err, b, spec.Breakdown.Dict, kindLifecycle, "lifecycle", func(d *decoder) {
		d.list(&c.list)
		d.groups(&c.groups, c.spec.Breakdown, 2+4*c.nb, c.ensure, func(g int) {
			for b := range c.counts[g] {
				for s := range c.counts[g][b] {
					c.counts[g][b][s] = d.count()
				}
			}
		})
	})
}
