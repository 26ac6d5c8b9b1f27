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
		a.Breakdown.From != b.Breakdown.From || a.Breakdown.Index != b.Breakdown.Index ||
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
	e.u8(uint8(s.Breakdown.From))
	e.varint(int64(s.Breakdown.Index))
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
	e := encoder{b: dst, dict: r.spec.Breakdown.Dict}
	e.header(kindRetention, r.SpecFingerprint())
	e.uvarint(uint64(len(r.groups)))
	for i := range r.groups {
		g := &r.groups[i]
		e.key(g.key)
		for _, v := range g.sizes {
			e.uvarint(uint64(v))
		}
		for _, v := range g.retained {
			e.uvarint(uint64(v))
		}
		e.list(&g.list)
	}
	return e.b, nil
}

// DecodeRetention returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids. Errors (wrapping
// ErrState): an invalid spec, another version or kind, a state of another
// spec (fingerprint), truncated, trailing, out-of-range or inconsistent
// input (a duplicate key). b is not retained.
func DecodeRetention(spec RetentionSpec, b []byte) (*Retention, error) {
	r, err := NewRetention(spec)
	if err != nil {
		return nil, err
	}
	d := decoder{b: b, dict: spec.Breakdown.Dict, what: "retention"}
	d.header(kindRetention, r.SpecFingerprint())
	// A group takes at least a key, its counts and its list.
	n := d.length(2 + r.nc*(r.n+1) + 3)
	seen := make([]bool, 0, len(r.groups)+n)
	for range n {
		k := d.key()
		if d.err != nil {
			break
		}
		gi := int(r.group(k))
		if !d.once(&seen, gi, len(r.groups), k) {
			break
		}
		g := &r.groups[gi]
		for i := range g.sizes {
			g.sizes[i] = d.count()
		}
		for i := range g.retained {
			g.retained[i] = d.count()
		}
		d.list(&g.list)
		r.bytes += g.list.Bytes()
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}
