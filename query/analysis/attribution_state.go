package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than a.
func (a *Attribution) sameSpec(o *Attribution) error {
	x, y := &a.spec, &o.spec
	if x.From != y.From || x.To != y.To || x.Conversion != y.Conversion || !slices.Equal(x.Touchpoints, y.Touchpoints) ||
		x.Channel != y.Channel || x.Model != y.Model || x.HalfLife != y.HalfLife || x.First != y.First || x.Value != y.Value ||
		x.Subsequent != y.Subsequent || x.SubsequentWindow != y.SubsequentWindow || x.SubsequentValue != y.SubsequentValue ||
		!slices.Equal(x.Bounds, y.Bounds) || !sameSource(x.Breakdown, y.Breakdown) ||
		!sameGroup(a.groups.group, o.groups.group) || (x.List == nil) != (y.List == nil) || x.List != nil && *x.List != *y.List {
		return fmt.Errorf("%w: attribution: merge of accumulators with different specs", ErrState)
	}
	return nil
}

// channel writes a channel key, named by dict.
func (e *encoder) channel(dict KeyDict, k Key) {
	d := e.dict
	e.dict = dict
	e.key(k)
	e.dict = d
}

// channel reads a channel key, mapped into dict.
func (d *decoder) channel(dict KeyDict) Key {
	bd := d.dict
	d.dict = dict
	k := d.key()
	d.dict = bd
	return k
}

// writeSpec writes the canonical form of the spec for the fingerprint.
func (s *AttributionSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindAttribution))
	e.varint(s.From)
	e.varint(s.To)
	e.varint(int64(s.Conversion))
	e.uvarint(uint64(len(s.Touchpoints)))
	for _, tp := range s.Touchpoints {
		e.varint(int64(tp.Bit))
		e.varint(tp.Lookback)
	}
	e.varint(int64(s.Channel))
	e.u8(uint8(s.Model))
	e.varint(s.HalfLife)
	e.bool(s.First)
	for _, vc := range []ValueCol{s.Value, s.SubsequentValue} {
		e.varint(int64(vc.Col))
		e.bool(vc.Float)
	}
	e.varint(int64(s.Subsequent))
	e.varint(s.SubsequentWindow)
	e.int64s(s.Bounds)
	e.source(s.Breakdown)
	s.Group.write(e)
	e.bool(s.List != nil)
	if l := s.List; l != nil {
		e.channel(s.ChannelDict, l.Channel)
		e.key(l.Key)
		e.varint(int64(l.Keep))
	}
}

// SpecFingerprint returns the fingerprint of the attribution's spec
// (string keys named by Breakdown.Dict, channels by ChannelDict) that its
// encoded states carry.
func (a *Attribution) SpecFingerprint() uint64 {
	return fingerprint(a.spec.Breakdown.Dict, a.spec.writeSpec)
}

// attrCell writes a cell: its four exact sums and users.
func (e *encoder) attrCell(c *attrCell) {
	for _, s := range [4]*ExactSum{&c.conv, &c.value, &c.subEv, &c.subVal} {
		e.sum(s)
	}
	e.uvarint(uint64(c.users))
}

// attrCell reads a cell into c (empty) and returns the bytes of memory it
// allocated.
func (d *decoder) attrCell(c *attrCell) int64 {
	var n int64
	for _, s := range [4]*ExactSum{&c.conv, &c.value, &c.subEv, &c.subVal} {
		d.sum(s)
		n += s.bytes()
	}
	c.users = d.count()
	return n
}

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), the plain totals, the user list, then per group its
// key (a string when Breakdown.Dict names it) and per channel row its
// channel (named by ChannelDict) and cells. It normalises the exact sums
// in place (their values are kept). Call it between users; it never
// fails.
func (a *Attribution) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, a.spec.Breakdown.Dict, kindAttribution, a.SpecFingerprint(), func(e *encoder) {
		e.uvarint(uint64(a.conv))
		e.uvarint(uint64(a.users))
		e.uvarint(uint64(a.subEv))
		e.sum(&a.value)
		e.sum(&a.subVal)
		e.list(&a.list)
		e.groups(&a.groups, func(g int) {
			gr := &a.gs[g]
			e.uvarint(uint64(len(gr.rows)))
			for ri := range gr.rows {
				r := &gr.rows[ri]
				e.channel(a.spec.ChannelDict, r.channel)
				e.attrCell(&r.total)
				for b := range r.buckets {
					e.attrCell(&r.buckets[b])
				}
			}
		})
	})
}

// DecodeAttribution returns a new accumulator of spec holding the state
// b encodes (AppendBinary), ready to Merge into another of the same spec.
// String keys are mapped into spec.Breakdown.Dict's ids, channels into
// spec.ChannelDict's. Errors (wrapping ErrState): an invalid spec,
// another version or kind, a state of another spec (fingerprint),
// truncated, trailing, out-of-range or inconsistent input (a duplicate
// key or channel). b is not retained.
func DecodeAttribution(spec AttributionSpec, b []byte) (*Attribution, error) {
	a, err := NewAttribution(spec)
	return decodeState(a, err, b, spec.Breakdown.Dict, kindAttribution, "attribution", func(d *decoder) {
		a.conv, a.users, a.subEv = d.count(), d.count(), d.count()
		d.sum(&a.value)
		d.sum(&a.subVal)
		d.list(&a.list)
		// A cell takes at least 4 empty sums (4 bytes each) and users.
		cell := 4*4 + 1
		d.groups(&a.groups, a.spec.Breakdown, 2+1, a.ensure, func(g int) {
			for range d.length(2 + cell*(a.nb+1)) {
				ch := d.channel(spec.ChannelDict)
				if d.err != nil {
					return
				}
				if _, dup := a.gs[g].channels.get(ch); dup {
					d.fail("channel %+v twice", ch)
					return
				}
				r := &a.gs[g].rows[a.row(int32(g), ch)]
				a.bytes += d.attrCell(&r.total)
				for b := range r.buckets {
					a.bytes += d.attrCell(&r.buckets[b])
				}
			}
		})
	})
}
