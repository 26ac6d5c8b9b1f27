package identity

import (
	"github.com/cespare/xxhash/v2"
)

// idIndex is the persistent map from distinct id to person key: a hash
// trie keyed by the id's xxhash64 (the value storage.UserHash gives, so a
// scan that decoded the hash looks up without hashing again), 64 children
// per inner node indexed by 6 bits of the hash, most significant first,
// and buckets of up to leafMax entries at the leaves. Like table, a write
// copies the nodes on the path that the current generation has not copied
// yet, so one Apply copies each touched path once and a published index is
// never modified. A lookup is a few pointer hops and a hash and id
// comparison; nothing allocates.
type idIndex struct {
	root *inode
}

// inode is an inner node (kids) or a leaf (ents); gen is the generation
// that created it, the only one allowed to modify it.
type inode struct {
	gen  uint64
	kids *[64]*inode
	ents []ient
}

// ient is one id of a leaf.
type ient struct {
	hash uint64
	id   string
	key  uint32
}

// leafMax is the number of entries at which a leaf splits (unless the
// hash's bits are used up: then it grows).
const leafMax = 8

// hashID returns the index's hash of id: xxhash64, as storage.UserHash.
func hashID(id []byte) uint64 { return xxhash.Sum64(id) }

// get returns the key of id, whose hash is h, and the index's copy of id.
func (x idIndex) get(h uint64, id []byte) (uint32, string, bool) {
	n := x.root
	for shift := 58; n != nil; shift -= 6 {
		if n.kids == nil {
			for i := range n.ents {
				e := &n.ents[i]
				if e.hash == h && e.id == string(id) {
					return e.key, e.id, true
				}
			}
			return 0, "", false
		}
		n = n.kids[h>>uint(max(shift, 0))&63]
	}
	return 0, "", false
}

// set points id (hash h; the caller's copy is kept) to key k in
// generation gen.
func (x *idIndex) set(gen uint64, h uint64, id string, k uint32) {
	if x.root == nil {
		x.root = &inode{gen: gen}
	}
	x.root = x.root.own(gen)
	n := x.root
	for shift := 58; ; shift -= 6 {
		if n.kids == nil {
			for i := range n.ents {
				if n.ents[i].hash == h && n.ents[i].id == id {
					n.ents[i].key = k
					return
				}
			}
			if len(n.ents) < leafMax || shift < 0 {
				n.ents = append(n.ents, ient{hash: h, id: id, key: k})
				return
			}
			// Split the leaf by the next 6 bits.
			kids := new([64]*inode)
			for _, e := range n.ents {
				c := &kids[e.hash>>uint(shift)&63]
				if *c == nil {
					*c = &inode{gen: gen}
				}
				(*c).ents = append((*c).ents, e)
			}
			n.kids, n.ents = kids, nil
		}
		i := h >> uint(max(shift, 0)) & 63
		c := n.kids[i]
		if c == nil {
			c = &inode{gen: gen}
		} else {
			c = c.own(gen)
		}
		n.kids[i] = c
		n = c
	}
}

// own returns n if generation gen created it, else a copy created by gen.
func (n *inode) own(gen uint64) *inode {
	if n.gen == gen {
		return n
	}
	c := &inode{gen: gen}
	if n.kids != nil {
		c.kids = new([64]*inode)
		*c.kids = *n.kids
	} else {
		c.ents = append(make([]ient, 0, len(n.ents)+1), n.ents...)
	}
	return c
}
