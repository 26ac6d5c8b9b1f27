package analysis

import "slices"

// keyGroups numbers the breakdown groups of a kernel: a raw breakdown key
// (an event's column value or the user's property) becomes a dense group
// number, through an optional group function called once per distinct
// raw key (a second pass maps the values a breakdown limit drops to one
// "(other)" key, so that users stay distinct in it; spec §4). It is the
// key → group part shared by the stickiness, lifecycle and attribution
// kernels; the kernels keep their per-group state in slices indexed by
// the group number.
type keyGroups struct {
	group func(Key) (Key, bool) // nil: every raw key is its own group
	keys  []Key                 // group key by group number
	byKey slotTable             // group key → group number
	raw   slotTable             // raw key → group number, -1 dropped (with group only)
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
	if gk, keep := kg.group(k); keep {
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
