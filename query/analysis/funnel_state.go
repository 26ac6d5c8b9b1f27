package analysis

import (
	"fmt"
	"slices"
)

// sameSpec returns an error wrapping ErrState when o was made from
// another spec or options than f.
func (f *Funnel) sameSpec(o *Funnel) error {
	a, b := &f.spec, &o.spec
	x, y := &f.opt, &o.opt
	var what string
	switch {
	case a.Steps != b.Steps || a.Window != b.Window || a.From != b.From || a.To != b.To || a.Order != b.Order ||
		a.Events != b.Events || !slices.Equal(a.Exclusions, b.Exclusions):
		what = "specs"
	case x.View != y.View || f.from != o.from || f.to != o.to || !slices.Equal(x.Bounds, y.Bounds) || x.Bins != y.Bins:
		what = "views"
	case !sameSource(x.Key, y.Key) || x.Attribution != y.Attribution || x.AttrStep != y.AttrStep:
		what = "breakdowns"
	case !sameGroup(f.group, o.group):
		what = "groups"
	case (x.List == nil) != (y.List == nil) || x.List != nil && *x.List != *y.List:
		what = "lists"
	default:
		return nil
	}
	return fmt.Errorf("%w: funnel: merge of accumulators with different %s", ErrState, what)
}

// writeSpec writes the canonical form of the spec and options (not
// Observe) for the fingerprint.
func (f *Funnel) writeSpec(e *encoder) {
	s, o := &f.spec, &f.opt
	e.u8(uint8(kindFunnel))
	e.varint(int64(s.Steps))
	e.varint(s.Window)
	e.varint(s.From)
	e.varint(s.To)
	e.u8(uint8(s.Order))
	e.uvarint(s.Events)
	e.uvarint(uint64(len(s.Exclusions)))
	for _, x := range s.Exclusions {
		e.varint(int64(x.Bit))
		e.varint(int64(x.From))
		e.varint(int64(x.To))
	}
	e.u8(uint8(o.View))
	e.varint(int64(f.from))
	e.varint(int64(f.to))
	e.int64s(o.Bounds)
	e.varint(int64(o.Bins))
	e.source(o.Key)
	e.u8(uint8(o.Attribution))
	e.varint(int64(o.AttrStep))
	o.Group.write(e)
	e.bool(o.List != nil)
	if l := o.List; l != nil {
		for _, v := range []int64{int64(l.Step), int64(l.Bucket), int64(l.Bin), int64(l.Bins), l.BinLo, l.BinWidth, int64(l.Keep)} {
			e.varint(v)
		}
		e.bool(l.Dropped)
		e.bool(l.Converted)
	}
}

// SpecFingerprint returns the fingerprint of the funnel's spec and
// options (all but Observe; string keys named by Key.Dict) that its
// encoded states carry.
func (f *Funnel) SpecFingerprint() uint64 { return fingerprint(f.opt.Key.Dict, f.writeSpec) }

// AppendBinary appends the accumulator's mergeable state to dst (the
// shape of encoding.BinaryAppender): the header (version, kind,
// SpecFingerprint), the all-users stats of per-row attributions, then
// per breakdown key its key (a string when Key.Dict names it), users per
// furthest step, durations, per-bucket counts and user list. Call it
// between users; it never fails.
func (f *Funnel) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, f.opt.Key.Dict, kindFunnel, f.SpecFingerprint(), func(e *encoder) {
		if f.total != nil {
			e.funnelStats(f.total, f.spec.Steps)
		}
		e.uvarint(uint64(len(f.groups)))
		for i := range f.groups {
			e.key(f.groups[i].key)
			e.funnelStats(&f.groups[i], f.spec.Steps)
		}
	})
}

func (e *encoder) funnelStats(st *funnelStats, steps int) {
	for k := range steps + 1 {
		e.uvarint(uint64(st.reached[k]))
	}
	for k := range steps + 1 {
		e.int64s(st.durs[k])
	}
	for b := range st.entered {
		e.uvarint(uint64(st.entered[b]))
		e.uvarint(uint64(st.converted[b]))
	}
	e.list(&st.list)
}

// funnelStats reads the stats of one group into st (initialised by
// initStats) and returns the bytes of memory it allocated.
func (d *decoder) funnelStats(st *funnelStats, steps int) int64 {
	for k := range steps + 1 {
		st.reached[k] = d.count()
	}
	var n int64
	for k := range steps + 1 {
		if l := d.length(1); l > 0 {
			st.durs[k] = make([]int64, l)
			for i := range st.durs[k] {
				st.durs[k][i] = d.varint()
			}
			n += int64(l) * 8
		}
	}
	for b := range st.entered {
		st.entered[b], st.converted[b] = d.count(), d.count()
	}
	d.list(&st.list)
	return n + st.list.Bytes()
}

// DecodeFunnel returns a new accumulator of spec and opt holding the
// state b encodes (AppendBinary), ready to Merge into another of the same
// spec and options. String keys are mapped into opt.Key.Dict's ids.
// Errors (wrapping ErrState): an invalid spec, another version or kind, a
// state of another spec (fingerprint), truncated, trailing, out-of-range
// or inconsistent input (a duplicate key). b is not retained.
func DecodeFunnel(spec FunnelSpec, opt FunnelOptions, b []byte) (*Funnel, error) {
	f, err := NewFunnel(spec, opt)
	return decodeState(f, err, b, opt.Key.Dict, kindFunnel, "funnel", func(d *decoder) {
		steps := f.spec.Steps
		if f.total != nil {
			f.bytes += d.funnelStats(f.total, steps)
		}
		// A group takes at least a key, its counts, durations and list.
		nb := 0
		if f.opt.View == ViewTrends {
			nb = len(f.opt.Bounds) - 1
		}
		for range d.length(2 + 2*(steps+1) + 2*nb + 3) {
			k := d.key()
			if d.err != nil {
				return
			}
			if _, dup := f.table.get(k); dup {
				d.fail("key %+v twice", k)
				return
			}
			g := f.newGroup(k)
			f.bytes += d.funnelStats(&f.groups[g], steps)
		}
	})
}
