package storage

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/spurdb/spur/storage/segment"
)

// filterDeltasBlock is drain's row filter for dense blocks read with
// deltas and without property columns (cursor.vector), over the users
// u = 0..len(ends)-1 of a block at once, user u holding block rows
// [starts[u], starts[u+1]) of d and codes (see segment.Block.Deltas:
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
// the passing rows (and, inRange, their times) are filled in after. With
// d's 16-bit low parts (segment.Block.PackedDeltas at width 16) the
// kernel widens them and adds the exceptions itself, so the block's
// deltas are never unpacked to memory. With thin (not nil) the rows
// ScanSpec.Thin allows are dropped: of each run of consecutive rows of a
// user that pass with a code of thin.codes and lie in one slot, all but
// the first.
func filterDeltasBlock(out []int64, outm []uint64, ends []int32, d *blockDeltas, codes []uint32, starts []int32, masks []uint64, live8 *[8]uint64, base int64, g uint64, inRange bool, from int64, span uint64, thin *thinning, fs *filterScratch) int {
	starts = starts[:len(ends)+1]
	s0, end := starts[0], starts[len(ends)]
	if end == s0 {
		clear(ends)
		return 0
	}
	n := int(end - s0)
	steps := (n + 7) / 8
	if cap(out) < n+8 || len(outm) < n || len(codes) < int(end) || (d.lows == nil && len(d.deltas) < int(end)) || (d.lows != nil && len(d.lows) < 2*int(end)) {
		panic("storage: filterDeltasBlock: short buffers")
	}
	// flags: a bit at each user's first row but the first, read a byte
	// per step of 8 rows.
	words := (n + 63) / 64
	flags := slices.Grow(fs.flags[:0], words)[:words]
	setBits(flags, starts[1:len(ends)], s0)
	kcodes := slices.Grow(fs.kcodes[:0], n+8)[:n+8]
	kstep := slices.Grow(fs.kstep[:0], steps+1)[:steps+1]
	kbits := slices.Grow(fs.kbits[:0], steps+1)[:steps+1]
	fs.flags, fs.kcodes, fs.kstep, fs.kbits = flags, kcodes, kstep, kbits
	a := filterArgs{
		codes: &codes[s0], n: n, flags: (*uint8)(unsafe.Pointer(&flags[0])), perm: &segPerm,
		live: live8, kcodes: &kcodes[0], out: &out[:1][0],
		kstep: &kstep[0], kbits: &kbits[0], base: base, g: g, from: from, span: span,
	}
	if inRange {
		a.mode |= modeAll
	}
	if thin != nil {
		// Slots from the times, or, with every row in range and a slot
		// that is a multiple of g, from the sums: with time − origin =
		// g·(T + c) + r, 0 ≤ r < g, the slot ⌊(time − origin)/slot⌋ is
		// ⌊(T + c)/(slot/g)⌋.
		a.mode |= modeThin
		a.thin, a.add, a.slot = &thin.codes, -thin.origin, float64(thin.slot)
		if d, ok := sub64(base, thin.origin); ok && inRange && g <= math.MaxInt64 && thin.slot%int64(g) == 0 {
			a.mode |= modeThinT
			a.add, a.slot = floorDiv(d, int64(g)), float64(thin.slot/int64(g))
		}
		a.inv = 1 / a.slot
	}
	if d.lows == nil {
		a.deltas = unsafe.Pointer(&d.deltas[s0])
	} else {
		// The exceptions of rows [s0, end): a bit per row, and their
		// high parts in row order from a.highs.
		a.mode |= modeLows16
		a.deltas = unsafe.Pointer(&d.lows[2*s0])
		exc := slices.Grow(fs.exc[:0], words)[:words]
		var k0, k1 int
		if d.excBits != nil {
			rc := d.excRank
			if rc == nil {
				rc = &rankCache{}
			}
			k0, k1 = rankBits(d.excBits, int(s0), rc), copyBits(exc, d.excBits, int(s0), n)
		} else {
			k0, _ = slices.BinarySearch(d.excRows, uint64(s0))
			k1, _ = slices.BinarySearch(d.excRows[k0:], uint64(end))
			setBits(exc, d.excRows[k0:k0+k1], uint64(s0))
		}
		fs.exc = exc
		a.exc = (*uint8)(unsafe.Pointer(&exc[0]))
		a.highs = &fs.noHighs
		if k1 > 0 {
			a.highs = &d.excHighs[k0]
		}
	}
	k := filterBlockAVX512(&a)
	outm = outm[:k]
	if inRange && (thin == nil || a.mode&modeThinT != 0) {
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

// copyBits sets dst to the n bits of the bitmap src (little-endian u64
// words, as segment.PackedDeltas.ExcBits) from bit s on, clearing dst's
// bits past n, and returns how many are set. dst has ⌈n/64⌉ words; src
// must hold bit s+n-1.
func copyBits(dst []uint64, src []byte, s, n int) int {
	words := len(src) / 8
	sh := uint(s % 64)
	w := s / 64
	c := 0
	for j := range dst {
		v := binary.LittleEndian.Uint64(src[8*(w+j):]) >> sh
		if sh != 0 && w+j+1 < words {
			v |= binary.LittleEndian.Uint64(src[8*(w+j+1):]) << (64 - sh)
		}
		if rest := n - 64*j; rest < 64 {
			v &= 1<<rest - 1
		}
		dst[j] = v
		c += bits.OnesCount64(v)
	}
	return c
}

// rankCache resumes rankBits over one bitmap: rank bits are set before
// bit at.
type rankCache struct{ at, rank int }

// rankBits returns the number of bits set before bit s in the bitmap src
// (segment.PackedDeltas.ExcBits), counting on from rc when s ≥ rc.at (rc
// must then be of src; a zero rankCache is of every bitmap) and leaving
// rc at s.
func rankBits(src []byte, s int, rc *rankCache) int {
	if s < rc.at {
		*rc = rankCache{}
	}
	rc.rank += segment.BitsSet(src, rc.at, s)
	rc.at = s
	return rc.rank
}

// sub64 returns a − b and whether it did not overflow.
func sub64(a, b int64) (int64, bool) {
	d := a - b
	return d, (d < a) == (b > 0)
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// setBits clears bm and sets bit r-base for every r of rows, which
// ascend within [base, base+64·len(bm)). Each row's word is stored whole
// and never loaded, so a word's bits are complete at its last store: a
// byte-wise |= waited on the previous store (in the profile of
// BenchmarkFilterDeltas/dense/block-lows16: 5 ns per exception, against
// 1.4 ns).
func setBits[T int32 | uint64](bm []uint64, rows []T, base T) {
	clear(bm)
	var word uint64
	prev := ^uint64(0)
	for _, row := range rows {
		r := uint64(row - base)
		w := r >> 6
		diff := w ^ prev
		word = word&(((diff|-diff)>>63)-1) | 1<<(r&63)
		bm[w] = word
		prev = w
	}
}

// blockDeltas is where filterDeltasBlock reads a block's time deltas:
// deltas, one per row, or, when lows is set, the 16-bit low parts of
// segment.PackedDeltas (2 bytes per row, little-endian) and its
// exceptions: their rows (excRows), or their bitmap (excBits, when not
// nil), and their high parts.
type blockDeltas struct {
	deltas            []uint64
	lows              []byte
	excRows, excHighs []uint64
	excBits           []byte
	// excRank, if not nil, carries the bitmap's rank from one call to
	// the next over a block (zero at the block's first)
	excRank *rankCache
}

// filterArgs are filterBlockAVX512's arguments; filter_amd64.s reads
// them at fixed offsets (8 bytes each, in this order).
type filterArgs struct {
	deltas unsafe.Pointer  // the rows' deltas: []uint64, or 16-bit low parts (modeLows16)
	codes  *uint32         // the rows' event codes
	n      int             // rows, ≥ 1
	flags  *uint8          // (n+7)/8 bytes: bit j of byte s, row 8s+j starts a user
	perm   *[256][8]uint64 // segPerm
	live   *[8]uint64      // bit set of live codes
	kcodes *uint32         // passing rows' codes, room for n+8
	out    *int64          // passing rows' times, room for n+8
	exc    *uint8          // modeLows16: (n+7)/8 bytes, bit j of byte s: row 8s+j is an exception
	kstep  *int32          // (n+7)/8+1 entries: passing rows before step s, and the total
	kbits  *uint8          // (n+7)/8+1 bytes: bit j of byte s, row 8s+j passes
	base   int64           // time base (µs)
	g      uint64          // delta unit (µs)
	from   int64           // range start (µs), unless modeAll
	span   uint64          // range width (µs), unless modeAll
	mode   uint64          // modeAll | modeLows16 | modeThin
	highs  *uint64         // modeLows16: the exceptions' high parts, in row order
	thin   *[8]uint64      // modeThin: thinning.codes
	add    int64           // modeThin: a row's slot is ⌊(time + add)/slot⌋, or with modeThinT ⌊(T + add)/slot⌋
	slot   float64         // modeThin: the slot, in µs or (modeThinT) in units of g
	inv    float64         // modeThin: 1/slot
}

// filterArgs.mode bits.
const (
	// modeAll: every time passes the range; out gets the sums since each
	// user's first row, not times.
	modeAll = 1
	// modeLows16: deltas are 16-bit low parts plus exceptions.
	modeLows16 = 2
	// modeThin: rows are thinned (thinning); with modeAll out gets
	// times, unless modeThinT.
	modeThin = 4
	// modeThinT (with modeAll and modeThin): slots are found from the
	// sums T, without the times.
	modeThinT = 8
)

// thinning is filterDeltasBlock's share of ScanSpec.Thin for one
// segment: codes is the bit set of the event codes whose mask is
// Thin.Mask (every code below 512), and a row's slot is
// ⌊(time − origin)/slot⌋ (µs, slot > 0).
type thinning struct {
	codes        [8]uint64
	origin, slot int64
}

// filterScratch is filterDeltasBlock's reusable memory.
type filterScratch struct {
	kbits      []uint8
	flags, exc []uint64 // user start and exception bits, read bytewise (little-endian)
	noHighs    uint64   // a.highs when a piece has no exception
	kstep      []int32
	kcodes     []uint32
}

// bytes returns the memory fs holds, in bytes.
func (fs *filterScratch) bytes() int64 {
	return int64(cap(fs.kbits)) + int64(cap(fs.flags)+cap(fs.exc))*8 + int64(cap(fs.kstep)+cap(fs.kcodes))*4
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
