package storage

import (
	"math/bits"
	"slices"
)

// filterDeltasBlock is drain's row filter for dense blocks read with
// deltas and without property columns (cursor.vector), over the users
// u = 0..len(ends)-1 of a block at once, user u holding block rows
// [starts[u], starts[u+1]) of deltas and codes (see segment.Block.Deltas:
// each user's first delta is from base, in units of g). It writes the
// passing rows' times (µs) and masks back to back from out[0] and
// outm[0], the end of user u's rows in them to ends[u], and returns the
// total: the answer of filterDeltas (inRange: every row's time lies in
// [from, from+span)) or filterDeltasInRange per user, times wrapping
// alike. live8 is the bit set of codes with a non-zero mask (every code
// below 512). out needs capacity for 8 entries past its rows (the kernel
// stores whole registers). It needs AVX-512 (useAVX512): the kernel,
// filterBlockAVX512, filters all the rows eight at a time, leaving
// per-step counts in fs from which the ends follow, and the masks of
// the passing rows (and, inRange, their times) are filled in after.
func filterDeltasBlock(out []int64, outm []uint64, ends []int32, deltas []uint64, codes []uint32, starts []int32, masks []uint64, live8 *[8]uint64, base int64, g uint64, inRange bool, from int64, span uint64, fs *filterScratch) int {
	starts = starts[:len(ends)+1]
	s0, end := starts[0], starts[len(ends)]
	if end == s0 {
		clear(ends)
		return 0
	}
	n := int(end - s0)
	steps := (n + 7) / 8
	if cap(out) < n+8 || len(outm) < n || len(deltas) < int(end) || len(codes) < int(end) {
		panic("storage: filterDeltasBlock: short buffers")
	}
	// flags: a bit at each user's first row, one byte per step of 8 rows.
	flags := slices.Grow(fs.flags[:0], steps+1)[:steps+1]
	clear(flags)
	for _, s := range starts[1:len(ends)] {
		r := s - s0
		flags[r>>3] |= 1 << (r & 7)
	}
	kcodes := slices.Grow(fs.kcodes[:0], n+8)[:n+8]
	kstep := slices.Grow(fs.kstep[:0], steps+1)[:steps+1]
	kbits := slices.Grow(fs.kbits[:0], steps+1)[:steps+1]
	fs.flags, fs.kcodes, fs.kstep, fs.kbits = flags, kcodes, kstep, kbits
	a := filterArgs{
		deltas: &deltas[s0], codes: &codes[s0], n: n, flags: &flags[0], perm: &segPerm,
		live: live8, kcodes: &kcodes[0], out: &out[:1][0],
		kstep: &kstep[0], kbits: &kbits[0], base: base, g: g, from: from, span: span,
	}
	if inRange {
		a.all = 1
	}
	k := filterBlockAVX512(&a)
	outm = outm[:k]
	if inRange {
		// The kernel left the sums since each user's first row.
		out = out[:k]
		for i, c := range kcodes[:k] {
			out[i] = base + int64(uint64(out[i])*g)
			outm[i] = masks[c]
		}
	} else {
		for i, c := range kcodes[:k] {
			outm[i] = masks[c]
		}
	}
	for u := range ends {
		r := starts[u+1] - s0
		ends[u] = kstep[r>>3] + int32(bits.OnesCount8(kbits[r>>3]&(1<<(r&7)-1)))
	}
	return k
}

// filterArgs are filterBlockAVX512's arguments; filter_amd64.s reads
// them at fixed offsets (8 bytes each, in this order).
type filterArgs struct {
	deltas *uint64         // the rows' deltas
	codes  *uint32         // the rows' event codes
	n      int             // rows, ≥ 1
	flags  *uint8          // (n+7)/8 bytes: bit j of byte s, row 8s+j starts a user
	perm   *[256][8]uint64 // segPerm
	live   *[8]uint64      // bit set of live codes
	kcodes *uint32         // passing rows' codes, room for n+8
	out    *int64          // passing rows' times, room for n+8
	_      uintptr
	kstep  *int32 // (n+7)/8+1 entries: passing rows before step s, and the total
	kbits  *uint8 // (n+7)/8+1 bytes: bit j of byte s, row 8s+j passes
	base   int64  // time base (µs)
	g      uint64 // delta unit (µs)
	from   int64  // range start (µs), unless all
	span   uint64 // range width (µs), unless all
	all    uint64 // 1: every time passes the range; out gets the sums, not times
}

// filterScratch is filterDeltasBlock's reusable memory.
type filterScratch struct {
	flags, kbits []uint8
	kstep        []int32
	kcodes       []uint32
}

// segPerm[f][j], for a step of 8 rows whose user starts are the bits of
// f, is the last row s ≤ j that starts a user, or 15 when there is none:
// filterBlockAVX512 picks lane s of the step's negated sums before each
// row, or lane 7 of the previous step's sums since the user's first row.
var segPerm = func() (p [256][8]uint64) {
	for f := range p {
		last := uint64(15)
		for j := range 8 {
			if f>>j&1 == 1 {
				last = uint64(j)
			}
			p[f][j] = last
		}
	}
	return p
}()
