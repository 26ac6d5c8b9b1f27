package identity

import (
	"math/bits"
	"sync/atomic"
)

func bitsLen(x uint64) int { return bits.Len64(x) }

// joinFilter is a blocked Bloom filter (two bits of one word per id) of
// the hashes of the ids
// in persons of two or more ids: what a scan asks of every trail, so that
// an id in no joined person — nearly every one — costs one memory read
// instead of an index walk. Bits are only ever set (a person never
// splits), with atomic writes, so snapshots share one filter: an older
// snapshot may see bits of ids joined after it, which only makes
// MayBeJoined answer true where Lookup then says no. When the ids outgrow
// it (more than one per 8 bits), Apply builds a filter twice the size for
// the snapshots that follow.
type joinFilter struct {
	words []atomic.Uint64
	mask  uint64 // bits − 1 (bits a power of two)
	shift uint   // 64 − log2(len(words)): a hash's word is its top bits
	n     int    // ids added (under Graph.mu)
}

// newJoinFilter returns a filter of at least 8 bits per id for ids ids
// (at least 2^16 bits).
func newJoinFilter(ids int) *joinFilter {
	bits := uint64(1 << 16)
	for bits < uint64(ids)*16 {
		bits <<= 1
	}
	return &joinFilter{words: make([]atomic.Uint64, bits/64), mask: bits - 1, shift: uint(64 - bitsLen(bits/64-1))}
}

// add sets the bits of hash h (under Graph.mu).
func (f *joinFilter) add(h uint64) {
	w, bits := f.bits(h)
	f.words[w].Or(bits)
	f.n++
}

// bits returns the word of hash h and its two bits in it: one word per
// hash (a blocked Bloom filter: one cache line read per question). The
// word is the hash's top bits, so that a scan, which meets a shard's
// users in hash order, reads the filter front to back.
func (f *joinFilter) bits(h uint64) (int, uint64) {
	return int(h >> f.shift), 1<<(h&63) | 1<<(h>>6&63)
}

// full reports whether the filter holds more than one id per 8 bits.
func (f *joinFilter) full() bool { return uint64(f.n)*8 > f.mask+1 }

// may reports whether h may be the hash of an id added.
func (f *joinFilter) may(h uint64) bool {
	w, bits := f.bits(h)
	return f.words[w].Load()&bits == bits
}
