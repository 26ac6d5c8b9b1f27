package identity

// table is a persistent array from person key to *Person: a trie of 64
// slots per node indexed by 6 bits of the key, most significant first,
// as high as the largest key needs (height h holds keys < 64^h: 4 levels
// for 16M keys). A write copies the nodes on the key's path that the
// current generation has not copied yet, so one Apply copies each touched
// path once (about 550 bytes a level) and a published table is never
// modified.
type table struct {
	root   *tnode
	height uint // levels; 0 when empty
}

// tnode is an inner node (kids used) or a leaf (persons used); gen is the
// generation that created it, the only one allowed to modify it.
type tnode struct {
	gen     uint64
	kids    *[64]*tnode
	persons *[64]*Person
}

// get returns the person of key k, or nil. No allocation.
func (t table) get(k uint32) *Person {
	if t.height == 0 || t.height < 6 && k>>(6*t.height) != 0 {
		return nil
	}
	n := t.root
	for shift := 6 * (t.height - 1); shift > 0; shift -= 6 {
		n = n.kids[k>>shift&63]
		if n == nil {
			return nil
		}
	}
	return n.persons[k&63]
}

// set stores p (nil clears) at key k, copying the nodes on k's path that
// generation gen did not create.
func (t *table) set(gen uint64, k uint32, p *Person) {
	for t.height == 0 || t.height < 6 && k>>(6*t.height) != 0 {
		up := &tnode{gen: gen}
		if t.height == 0 {
			up.persons = new([64]*Person)
		} else {
			up.kids = new([64]*tnode)
			up.kids[0] = t.root
		}
		t.root = up
		t.height++
	}
	t.root = own(t.root, gen, t.height == 1)
	n := t.root
	for shift := 6 * (t.height - 1); shift > 0; shift -= 6 {
		i := k >> shift & 63
		n.kids[i] = own(n.kids[i], gen, shift == 6)
		n = n.kids[i]
	}
	n.persons[k&63] = p
}

// own returns n if generation gen created it, else a copy of n (a new
// empty node when n is nil) created by gen.
func own(n *tnode, gen uint64, leaf bool) *tnode {
	if n != nil && n.gen == gen {
		return n
	}
	c := &tnode{gen: gen}
	if leaf {
		c.persons = new([64]*Person)
		if n != nil {
			*c.persons = *n.persons
		}
	} else {
		c.kids = new([64]*tnode)
		if n != nil {
			*c.kids = *n.kids
		}
	}
	return c
}

// each calls fn with every non-nil person in key order until fn returns
// false; it reports whether it went through all.
func (t table) each(fn func(*Person) bool) bool {
	return eachNode(t.root, t.height, fn)
}

func eachNode(n *tnode, height uint, fn func(*Person) bool) bool {
	if n == nil {
		return true
	}
	if height == 1 {
		for _, p := range n.persons {
			if p != nil && !fn(p) {
				return false
			}
		}
		return true
	}
	for _, c := range n.kids {
		if !eachNode(c, height-1, fn) {
			return false
		}
	}
	return true
}
