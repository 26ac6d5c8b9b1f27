package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec than p.
func (p *Paths) sameSpec(o *Paths) error {
	a, b := &p.spec, &o.spec
	if a.From != b.From || a.To != b.To || a.Include != b.Include || a.Start != b.Start || a.End != b.End ||
		a.NameBits != b.NameBits || a.BitItem != b.BitItem || a.NameCol != b.NameCol || a.PropCol != b.PropCol ||
		!slices.Equal(a.PropItem, b.PropItem) || !slices.Equal(a.Exclude, b.Exclude) || a.Ellipsis != b.Ellipsis ||
		a.SessionGap != b.SessionGap || a.Steps != b.Steps || (a.List == nil) != (b.List == nil) || a.List != nil && *a.List != *b.List {
		return fmt.Errorf("%w: paths: merge of accumulators with different specs", ErrState)
	}
	return nil
}

// item writes an item id, as its name when e.dict names it.
func (e *encoder) item(i uint32) { e.key(Key{Bits: uint64(i), Set: true}) }

// item reads an item id (a name mapped into d.dict).
func (d *decoder) item() uint32 {
	k := d.key()
	if d.err == nil && (!k.Set || k.Bits >= MaxPathItems) {
		d.fail("item %+v out of range", k)
	}
	return uint32(k.Bits)
}

// writeSpec writes the canonical form of the spec for the fingerprint:
// the items as their names when Items names them, the excluded items as
// a sorted list; PropItem, which maps a node's dictionary ids to items,
// is left out (it follows from the item names of the property's values).
func (s *PathsSpec) writeSpec(e *encoder) {
	e.u8(uint8(kindPaths))
	e.varint(s.From)
	e.varint(s.To)
	for _, m := range []uint64{s.Include, s.Start, s.End, s.NameBits} {
		e.uvarint(m)
	}
	for b := range 64 {
		if s.NameBits&(1<<b) != 0 {
			e.item(s.BitItem[b])
		}
	}
	e.varint(int64(s.NameCol))
	e.varint(int64(s.PropCol))
	var ex []string
	for i, x := range s.Exclude {
		if x {
			ie := encoder{dict: e.dict}
			ie.item(uint32(i))
			ex = append(ex, string(ie.b))
		}
	}
	slices.Sort(ex)
	e.uvarint(uint64(len(ex)))
	for _, x := range ex {
		e.b = append(e.b, x...)
	}
	e.item(s.Ellipsis)
	e.varint(s.SessionGap)
	e.varint(int64(s.Steps))
	e.bool(s.List != nil)
	if l := s.List; l != nil {
		e.varint(int64(l.Pos))
		e.item(l.Source)
		e.item(l.Target)
		e.varint(int64(l.Keep))
	}
}

// SpecFingerprint returns the fingerprint of the paths' spec (items named
// by Items) that its encoded states carry.
func (p *Paths) SpecFingerprint() uint64 { return fingerprint(p.spec.Items, p.spec.writeSpec) }

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), the user list, then per edge its position, source
// and target items (names when Items names them), sessions, users and
// µs. Call it between users; it never fails.
func (p *Paths) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, p.spec.Items, kindPaths, p.SpecFingerprint(), func(e *encoder) {
		e.list(&p.list)
		e.uvarint(uint64(len(p.edges)))
		for _, x := range p.edges {
			e.uvarint(x.key >> 58)
			e.item(uint32(x.key >> 29 & (MaxPathItems - 1)))
			e.item(uint32(x.key & (MaxPathItems - 1)))
			e.uvarint(uint64(x.sessions))
			e.uvarint(uint64(x.users))
			e.uvarint(uint64(x.micros))
		}
	})
}

// DecodePaths returns a new accumulator of spec holding the state b
// encodes (AppendBinary), ready to Merge into another of the same spec.
// Item names are mapped into spec.Items' ids. Errors (wrapping ErrState):
// an invalid spec, another version or kind, a state of another spec
// (fingerprint), truncated, trailing, out-of-range or inconsistent input
// (a duplicate edge, more users than sessions). b is not retained.
func DecodePaths(spec PathsSpec, b []byte) (*Paths, error) {
	p, err := NewPaths(spec)
	return decodeState(p, err, b, spec.Items, kindPaths, "paths", func(d *decoder) {
		d.list(&p.list)
		for range d.length(7) {
			pos := d.uvarint()
			src, dst := d.item(), d.item()
			if d.err == nil && (pos < 1 || pos >= uint64(p.spec.Steps)) {
				d.fail("edge position %d out of range", pos)
			}
			if d.err != nil {
				return
			}
			key := pos<<58 | uint64(src)<<29 | uint64(dst)
			if _, dup := p.table.get(Key{Bits: key, Set: true}); dup {
				d.fail("edge %d %d→%d twice", pos, src, dst)
				return
			}
			x := &p.edges[p.edgeAt(key)]
			x.sessions, x.users, x.micros = d.count(), d.count(), d.bounded(maxTotal, "µs")
			if x.users > x.sessions {
				d.fail("edge of %d sessions by %d users", x.sessions, x.users)
			}
		}
	})
}
