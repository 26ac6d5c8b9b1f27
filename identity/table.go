package identity

// table is a persistent array from person key to *Person: a trie of four
// levels of 256 slots indexed by the key's bytes, most significant first.
// A write copies the nodes on the key's path that the current generation
// has not copied yet, so one Apply copies each touched path once and a
// published table is never modified.
type table struct {
	root *tnode
}

// tnode is an inner node (kids used, levels 0–2) or a leaf (persons used,
// level 3); gen is the generation that created it, the only one allowed
// to modify it.
type tnode struct {
	gen     uint64
	kids    *[256]*tnode
	persons *[256]*Person
}

// get returns the person of key k, or nil. No allocation.
func (t table) get(k uint32) *Person {
	n := t.root
	for shift := 24; shift > 0; shift -= 8 {
		if n == nil {
			return nil
		}
		n = n.kids[k>>shift&255]
	}
	if n == nil {
		return nil
	}
	return n.persons[k&255]
}

// set stores p (nil clears) at key k, copying the nodes on k's path that
// generation gen did not create.
func (t *table) set(gen uint64, k uint32, p *Person) {
	t.root = own(t.root, gen, false)
	n := t.root
	for shift := 24; shift > 0; shift -= 8 {
		i := k >> shift & 255
		n.kids[i] = own(n.kids[i], gen, shift == 8)
		n = n.kids[i]
	}
	n.persons[k&255] = p
}

// own returns n if generation gen created it, else a copy of n (a new
// empty node when n is nil) created by gen.
func own(n *tnode, gen uint64, leaf bool) *tnode {
	if n != nil && n.gen == gen {
		return n
	}
	c := &tnode{gen: gen}
	if leaf {
		c.persons = new([256]*Person)
		if n != nil {
			*c.persons = *n.persons
		}
	} else {
		c.kids = new([256]*tnode)
		if n != nil {
			*c.kids = *n.kids
		}
	}
	return c
}

// each calls fn with every non-nil person in key order until fn returns
// false; it reports whether it went through all.
func (t table) each(fn func(*Person) bool) bool {
	return eachNode(t.root, 3, fn)
}

func eachNode(n *tnode, level int, fn func(*Person) bool) bool {
	if n == nil {
		return true
	}
	if level == 0 {
		for _, p := range n.persons {
			if p != nil && !fn(p) {
				return false
			}
		}
		return true
	}
	for _, c := range n.kids {
		if !eachNode(c, level-1, fn) {
			return false
		}
	}
	return true
}
