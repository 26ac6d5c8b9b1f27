package analysis

import (
	"fmt"
	"slices"
	"unsafe"
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
// initStats) and returns the bytes of memory it allocated. The stats must
// be those Add can make in view v: in the steps view, reached counts and,
// for each step k ≥ 2, one duration per user who reached k or further;
// in the trends view, per-bucket counts with no more converted than
// entered users; in the time-to-convert view, durations of converted
// users (durs[0]) only. Durations are in [0, window]: two steps of an
// attempt are at most the conversion window apart.
func (d *decoder) funnelStats(st *funnelStats, steps int, v FunnelView, window int64) int64 {
	for k := range steps + 1 {
		st.reached[k] = d.count()
		if v != ViewSteps && st.reached[k] != 0 {
			d.fail("%d users at step %d outside the steps view", st.reached[k], k)
			return 0
		}
	}
	var n, users int64 // users: who reached step k or further
	for k := range steps + 1 {
		users += st.reached[k]
	}
	for k := range steps + 1 {
		if k > 0 {
			users -= st.reached[k-1]
		}
		l := d.length(1)
		switch {
		case d.err != nil:
			return n
		case v == ViewSteps && k >= 2 && int64(l) != users:
			d.fail("%d durations to step %d of %d users", l, k, users)
			return n
		case (v != ViewSteps || k < 2) && l != 0 && !(v == ViewTimeToConvert && k == 0):
			d.fail("%d durations at step %d, which keeps none", l, k)
			return n
		}
		if l > 0 {
			st.durs[k] = make([]int64, l)
			for i := range st.durs[k] {
				x := d.varint()
				if x < 0 || x > window {
					d.fail("duration %dµs outside [0, %d]", x, window)
					return n
				}
				st.durs[k][i] = x
			}
			n += int64(l) * 8
		}
	}
	for b := range st.entered {
		st.entered[b], st.converted[b] = d.count(), d.count()
		if st.converted[b] > st.entered[b] {
			d.fail("bucket %d: %d converted of %d entered", b, st.converted[b], st.entered[b])
			return n
		}
	}
	d.list(&st.list)
	return n + st.list.Bytes()
}

// DecodeFunnel returns a new accumulator of spec and opt holding the
// state b encodes (AppendBinary), ready to Merge into another of the same
// spec and options. String keys are mapped into opt.Key.Dict's ids.
// Errors (wrapping ErrState): an invalid spec, another version or kind, a
// state of another spec (fingerprint), truncated, trailing, out-of-range
// or inconsistent input (a duplicate key, a key no group of the spec has,
// durations or counts Add cannot make, a count of 2^53 or more), or more
// groups than 64 times the input's size plus 1 MiB of memory can hold.
// b is not retained.
func DecodeFunnel(spec FunnelSpec, opt FunnelOptions, b []byte) (*Funnel, error) {
	f, err := NewFunnel(spec, opt)
	return decodeState(f, err, b, opt.Key.Dict, kindFunnel, "funnel", func(d *decoder) {
		steps, view := f.spec.Steps, f.opt.View
		if f.total != nil {
			f.bytes += d.funnelStats(f.total, steps, view, f.spec.Window)
		}
		// Keys are grouped only in the rows of an attribution.
		var group *keyGrouper
		if f.rows != nil {
			group = f.group
		}
		// A group takes at least a key, its counts, durations and list,
		// and its stats and table entry once decoded.
		nb := 0
		if view == ViewTrends {
			nb = len(f.opt.Bounds) - 1
		}
		n := d.grow(2+2*(steps+1)+2*nb+3, int64(unsafe.Sizeof(funnelStats{}))+int64(nb)*16+slotEntryBytes, f.Bytes())
		f.groups = slices.Grow(f.groups, n)
		for range n {
			k := d.key()
			if d.err == nil && !groupKey(f.opt.Key, group, k) {
				d.fail("key %+v is no group's", k)
			}
			if d.err != nil {
				return
			}
			if _, dup := f.table.get(k); dup {
				d.fail("key %+v twice", k)
				return
			}
			g := f.newGroup(k)
			f.bytes += d.funnelStats(&f.groups[g], steps, view, f.spec.Window)
		}
	})
}
