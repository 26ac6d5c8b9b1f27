package analysis

import "slices"

// keyGroups numbers the breakdown groups of a kernel: a raw breakdown key
// (an event's column value or the user's property) becomes a dense group
// number, through an optional KeyGroup looked up once per distinct
// raw key (a second pass maps the values a breakdown limit drops to one
// "(other)" key, so that users stay distinct in it; docs/analytics.md §4). It is the
// key → group part shared by the stickiness, lifecycle and attribution
// kernels; the kernels keep their per-group state in slices indexed by
// the group number.
type keyGroups struct {
	group *keyGrouper // nil: every raw key is its own group
	keys  []Key       // group key by group number
	byKey slotTable   // group key → group number
	raw   slotTable   // raw key → group number, -1 dropped (with group only)
}

// of returns the group number of raw key k, or -1 when the group
// function drops it. A group number equal to the previous number of
// groups is a new group (the caller appends its state).
func (kg *keyGroups) of(k Key) int32 {
	if kg.group == nil {
		return kg.add(k)
	}
	if g, ok := kg.raw.get(k); ok {
		return g
	}
	g := int32(-1)
	if gk, keep := kg.group.group(k); keep {
		g = kg.add(gk)
	}
	kg.raw.put(k, g)
	return g
}

// add returns the group number of group key k, creating it.
func (kg *keyGroups) add(k Key) int32 {
	if g, ok := kg.byKey.get(k); ok {
		return g
	}
	g := int32(len(kg.keys))
	kg.keys = append(kg.keys, k)
	kg.byKey.put(k, g)
	return g
}

// n returns the number of groups.
func (kg *keyGroups) n() int { return len(kg.keys) }

// sorted returns the group numbers ordered by key (compareKeys), newly
// allocated.
func (kg *keyGroups) sorted() []int {
	idx := make([]int, len(kg.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareKeys(kg.keys[a], kg.keys[b]) })
	return idx
}

// bytes returns the memory of the tables.
func (kg *keyGroups) bytes() int64 {
	return int64(cap(kg.keys))*16 + kg.byKey.bytes() + kg.raw.bytes()
}

// KeyGroup maps the raw breakdown keys of a kernel to the keys it
// aggregates them under, as data (so that a spec can be compared,
// fingerprinted and sent): a key of Kept is its own group, or is dropped
// (its events ignored) when DropKept; every other key is aggregated
// under Other. A breakdown limit's "(other)" row is recomputed exactly
// by a pass with Kept the kept values, Other the "(other)" key and
// DropKept set (users stay distinct in it); the rows of a list are a
// pass without DropKept. Kept is read by the kernel's constructor only.
type KeyGroup struct {
	Kept     []Key
	Other    Key
	DropKept bool
}

// keyGrouper is a KeyGroup ready for lookups: its kept keys in a table.
type keyGrouper struct {
	other    Key
	dropKept bool
	kept     slotTable
}

// newKeyGrouper returns the grouper of g, or nil for a nil g.
func newKeyGrouper(g *KeyGroup) *keyGrouper {
	if g == nil {
		return nil
	}
	kg := &keyGrouper{other: g.Other, dropKept: g.DropKept}
	for _, k := range g.Kept {
		if _, ok := kg.kept.get(k); !ok {
			kg.kept.put(k, 0)
		}
	}
	return kg
}

// group returns the key raw key k is aggregated under, or false when k
// is dropped.
func (kg *keyGrouper) group(k Key) (Key, bool) {
	if _, ok := kg.kept.get(k); ok {
		return k, !kg.dropKept
	}
	return kg.other, true
}

// write writes the group's canonical form for a spec's fingerprint: the
// kept keys in the order of their encodings, so that the fingerprint
// does not depend on Kept's order or on the query's dictionary ids.
func (g *KeyGroup) write(e *encoder) {
	if g == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.key(g.Other)
	e.bool(g.DropKept)
	encs := make([]string, 0, len(g.Kept))
	for _, k := range g.Kept {
		ke := encoder{dict: e.dict}
		ke.key(k)
		encs = append(encs, string(ke.b))
	}
	slices.Sort(encs)
	encs = slices.Compact(encs)
	e.uvarint(uint64(len(encs)))
	for _, s := range encs {
		e.b = append(e.b, s...)
	}
}

// sameGroup reports whether two groupers (of a's and b's KeyGroup, nil
// for none) group every key alike.
func sameGroup(a, b *keyGrouper) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.other != b.other || a.dropKept != b.dropKept || a.kept.n != b.kept.n {
		return false
	}
	for i, s := range b.kept.slots {
		if s != 0 {
			if _, ok := a.kept.get(b.kept.keys[i]); !ok {
				return false
			}
		}
	}
	return true
}

// groups writes the number of groups of kg, then each group's key
// followed by what write writes of the group's state.
func (e *encoder) groups(kg *keyGroups, write func(g int)) {
	e.uvarint(uint64(len(kg.keys)))
	for g, k := range kg.keys {
		e.key(k)
		write(g)
	}
}

// groups reads what encoder.groups wrote: each group key is added to kg
// (a key read twice, or one that src and kg's group cannot make, is an
// error), ensure creates the group's state and read reads it. min is the
// least number of bytes a group takes.
func (d *decoder) groups(kg *keyGroups, src KeySource, min int, ensure func(g int32), read func(g int)) {
	n := d.length(min)
	seen := make([]bool, 0, kg.n()+n)
	for range n {
		k := d.key()
		if d.err == nil && !groupKey(src, kg.group, k) {
			d.fail("key %+v is no group's", k)
		}
		if d.err != nil {
			return
		}
		g := kg.add(k)
		ensure(g)
		if !d.once(&seen, int(g), kg.n(), k) {
			return
		}
		read(int(g))
	}
}

// groupKey reports whether k can be the key of a group of a kernel whose
// keys come from src through g (nil: none): without a breakdown or group
// only the zero Key, with a group its Other key or a kept key it does not
// drop.
func groupKey(src KeySource, g *keyGrouper, k Key) bool {
	if g != nil {
		if k == g.other {
			return true
		}
		_, kept := g.kept.get(k)
		return kept && !g.dropKept
	}
	return src.From != KeyNone || k == Key{}
}
