package segment

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// The row filters: the hot loop of a scan, fused with the decoding of a
// block's time deltas (they read the deltas as ReadBlockDeltas,
// ReadBlockRows or ReadBlockPacked leave them, so a block's times are
// never written to memory). Each writes the passing rows' times (UTC µs)
// and masks, a row passing when masks[its event code] is not 0 (and,
// where said, its time lies in [from, from+span), span an unsigned width
// so that the full int64 range works).

// FilterDeltas is the row filter of a user's rows read with deltas (see
// Block.Deltas: the first from base, in units of g): it sums the deltas
// into times and writes every row's time and mask to out/outm, returning
// how many rows have a non-zero mask, compacted to the front. One
// multiply-add and one table lookup per event and no branch on the match
// (the write position advances by (m | -m) >> 63, 1 for any non-zero m),
// since which events match is unpredictable. len(out), len(outm) ≥
// len(deltas) = len(codes); every code indexes masks. It is kept out of
// line: inlined into its caller, register pressure spilled k and t to
// the stack and the loop ran at ~11 cycles per event instead of ~3.
//
//go:noinline
func FilterDeltas(out []int64, outm []uint64, deltas []uint64, codes []uint32, masks []uint64, base int64, g uint64) int {
	k := 0
	out, outm = out[:len(deltas)], outm[:len(deltas)]
	codes = codes[:len(deltas)]
	t := base
	for i, d := range deltas {
		t += int64(d * g)
		m := masks[codes[i]]
		out[k] = t
		outm[k] = m
		k += int((m | -m) >> 63)
	}
	return k
}

// FilterDeltasSparse is FilterDeltas for segments where few rows match,
// also requiring from ≤ t < from+span, over the users u =
// 0..len(ends)-1 of block b at once, user u holding rows [starts[u],
// starts[u+1]) of b's deltas and codes. It writes the passing rows'
// times, masks and block rows back to back from out[0], outm[0] and
// rows[0], the end of user u's rows in them to ends[u], and returns the
// total. It looks for matching codes first, branching on the match
// (which the predictor gets right for almost every row), and sums a
// user's deltas only up to each match (Block.SumDeltas, which reads
// deltas ReadBlockPacked left packed without unpacking the others): the
// deltas after a user's last match, and all of a user with none, are
// never read. One call per block: a call per user cost more than the
// rows of a typical user. out, outm and rows need an entry per passing
// row.
//
//go:noinline
func FilterDeltasSparse(out []int64, outm []uint64, rows []int32, ends []int32, b *Block, codes []uint32, starts []int32, masks []uint64, base int64, g uint64, from int64, span uint64) int {
	k, u := 0, 0
	starts = starts[:len(ends)+1]
	end := int(starts[len(ends)])
	codes = codes[:end]
	p, next := int(starts[0]), int(starts[1]) // user u's deltas[starts[u]:p] are in sum
	var sum uint64                            // wrapping, like the times
	for i := p; ; i++ {
		if i = nextMatch(codes, masks, i); i == end {
			break
		}
		m := masks[codes[i]]
		if i >= next { // the match is a later user's
			for i >= next {
				ends[u] = int32(k)
				u++
				next = int(starts[u+1])
			}
			p, sum = int(starts[u]), 0
		}
		sum += b.SumDeltas(p, i+1)
		p = i + 1
		// base + g·Σd ≡ base + Σ(g·d) (mod 2^64): the times FilterDeltas sums.
		if t := base + int64(sum*g); uint64(t)-uint64(from) < span {
			out[k] = t
			outm[k] = m
			rows[k] = int32(i)
			k++
		}
	}
	for ; u < len(ends); u++ {
		ends[u] = int32(k)
	}
	return k
}

// nextMatch returns the first row r ≥ i with a non-zero masks[codes[r]],
// or len(codes). Out of line, so that the loop has registers to itself.
//
//go:noinline
func nextMatch(codes []uint32, masks []uint64, i int) int {
	// Four rows per test: one branch per four rows, and the four
	// lookups issue together (BenchmarkFilterDeltas/sparse, 2.5% of rows
	// live: 102 -> 83 µs; eight rows per test: 99 µs).
	for ; i+4 <= len(codes); i += 4 {
		c := codes[i : i+4 : i+4]
		if masks[c[0]]|masks[c[1]]|masks[c[2]]|masks[c[3]] != 0 {
			break
		}
	}
	for ; i < len(codes); i++ {
		if masks[codes[i]] != 0 {
			return i
		}
	}
	return len(codes)
}

// FilterDeltasInRange is FilterDeltas that also requires from ≤ t <
// from+span: the subtraction's borrow is 1 exactly when t-from < span.
// Out of line like FilterDeltas.
//
//go:noinline
func FilterDeltasInRange(out []int64, outm []uint64, deltas []uint64, codes []uint32, masks []uint64, base int64, g uint64, from int64, span uint64) int {
	k := 0
	out, outm = out[:len(deltas)], outm[:len(deltas)]
	codes = codes[:len(deltas)]
	t := base
	for i, d := range deltas {
		t += int64(d * g)
		m := masks[codes[i]]
		out[k] = t
		outm[k] = m
		_, in := bits.Sub64(uint64(t)-uint64(from), span, 0)
		k += int(((m | -m) >> 63) & in)
	}
	return k
}

// FilterDeltasBlock is the row filter of a dense block read with deltas
// and no property columns, over the users u = 0..len(ends)-1 of a block
// at once, user u holding block rows [starts[u], starts[u+1]) of d and
// codes (each user's first delta is from base, in units of g; see
// Block.Deltas). It writes the passing rows' times (µs) and masks back to
// back from out[0] and outm[0], the end of user u's rows in them to
// ends[u], and returns the total: the answer of FilterDeltas (inRange:
// every row's time lies in [from, from+span)) or FilterDeltasInRange per
// user, times wrapping alike. live8 is the bit set of codes with a
// non-zero mask, and every code of the rows must be below 512. out needs
// capacity for 8 entries past its rows (the kernel stores whole
// registers). It needs AVX-512 (HasAVX512; it panics otherwise): the
// kernel, filterBlockAVX512, filters all the rows eight at a time,
// leaving per-step counts in fs from which the ends follow, and the masks
// of the passing rows (and, inRange, their times) are filled in after.
// With 16-bit low parts left packed (see BlockDeltas.Reset) the kernel
// widens them and adds the exceptions itself, so the block's deltas are
// never unpacked to memory. With thin (not nil) rows are dropped: of each
// run of consecutive rows of a user that pass with a code of thin.Codes
// and lie in one slot, all but the first. It panics on buffers shorter
// than that. It does not allocate once fs has grown.
func FilterDeltasBlock(out []int64, outm []uint64, ends []int32, d *BlockDeltas, codes []uint32, starts []int32, masks []uint64, live8 *[8]uint64, base int64, g uint64, inRange bool, from int64, span uint64, thin *Thinning, fs *FilterScratch) int {
	if !useAVX512 {
		panic("segment: FilterDeltasBlock without AVX-512")
	}
	starts = starts[:len(ends)+1]
	s0, end := starts[0], starts[len(ends)]
	if end == s0 {
		clear(ends)
		return 0
	}
	n := int(end - s0)
	steps := (n + 7) / 8
	if cap(out) < n+8 || len(outm) < n || len(codes) < int(end) || (d.lows == nil && len(d.deltas) < int(end)) || (d.lows != nil && len(d.lows) < 2*int(end)) {
		panic("segment: FilterDeltasBlock: short buffers")
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
		a.thin, a.add, a.slot = &thin.Codes, -thin.Origin, float64(thin.Slot)
		if d, ok := sub64(base, thin.Origin); ok && inRange && g <= math.MaxInt64 && thin.Slot%int64(g) == 0 {
			a.mode |= modeThinT
			a.add, a.slot = floorDiv(d, int64(g)), float64(thin.Slot/int64(g))
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
				rc = &RankCache{}
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
// words, the PFOR exception bitmap) from bit s on, clearing dst's
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

// RankCache carries, from one FilterDeltasBlock call over a block to the
// next, how many PFOR exceptions lie before a row, so that the calls over
// a block's users in order count each exception once. The zero value
// fits every block: reset it at each new block.
type RankCache struct{ at, rank int }

// rankBits returns the number of bits set before bit s in the bitmap src
// (the PFOR exception bitmap), counting on from rc when s ≥ rc.at (rc
// must then be of src; a zero RankCache is of every bitmap) and leaving
// rc at s.
func rankBits(src []byte, s int, rc *RankCache) int {
	if s < rc.at {
		*rc = RankCache{}
	}
	rc.rank += bitsSet(src, rc.at, s)
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

// BlockDeltas is where FilterDeltasBlock reads a block's time deltas:
// one per row, or, for a PFOR times chunk of width 16 left packed, the
// 16-bit low parts and the exceptions (their rows or their bitmap, and
// their high parts). Reset sets it from a Block.
type BlockDeltas struct {
	deltas            []uint64
	lows              []byte
	excRows, excHighs []uint64
	excBits           []byte
	// excRank, if not nil, carries the bitmap's rank from one call to
	// the next over a block (zero at the block's first)
	excRank *RankCache
}

// Reset points d at the time deltas of b as ReadBlockDeltas,
// ReadBlockRows or ReadBlockPacked left them: Block.Deltas, or the packed
// layout of a PFOR chunk of width 16 (which the kernel widens itself);
// packed deltas of another width are unpacked into Block.Deltas first
// (Block.UnpackDeltas). rank carries the exception rank over the calls
// of one block (see RankCache). d borrows b's memory until b's next read.
func (d *BlockDeltas) Reset(b *Block, rank *RankCache) {
	*d = BlockDeltas{deltas: b.Deltas}
	if !b.packed {
		return
	}
	if pf := &b.pf; pf.w == 16 {
		*d = BlockDeltas{lows: pf.packed[:len(pf.packed):len(pf.packed)], excRows: pf.idx, excBits: pf.bits, excHighs: pf.highs[:len(pf.highs):len(pf.highs)], excRank: rank}
		return
	}
	b.UnpackDeltas()
	d.deltas = b.Deltas
}

// filterArgs are filterBlockAVX512's arguments; filter_amd64.s reads
// them at fixed offsets (8 bytes each, in this order), which
// TestFilterArgsLayout checks against the struct.
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
	thin   *[8]uint64      // modeThin: Thinning.Codes
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
	// modeThin: rows are thinned (Thinning); with modeAll out gets
	// times, unless modeThinT.
	modeThin = 4
	// modeThinT (with modeAll and modeThin): slots are found from the
	// sums T, without the times.
	modeThinT = 8
)

// Thinning is FilterDeltasBlock's share of a scan's thinning of one
// segment: Codes is the bit set of the event codes whose rows may be
// thinned (every code below 512), and a row's slot is
// ⌊(time − Origin)/Slot⌋ (µs, Slot > 0). Only rows less than 2^51 µs
// from Origin are thinned, or, in blocks wholly in range whose time unit
// (Block.TimeGCD) divides Slot, 2^51 of those units.
type Thinning struct {
	Codes        [8]uint64
	Origin, Slot int64
}

// FilterScratch is FilterDeltasBlock's reusable memory.
type FilterScratch struct {
	kbits      []uint8
	flags, exc []uint64 // user start and exception bits, read bytewise (little-endian)
	noHighs    uint64   // a.highs when a piece has no exception
	kstep      []int32
	kcodes     []uint32
}

// Bytes returns the memory fs holds, in bytes.
func (fs *FilterScratch) Bytes() int64 {
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

// HasAVX512 reports whether FilterDeltasBlock runs on this machine: amd64
// with AVX-512 F, VL, DQ and BW, POPCNT and BMI2, built without -tags
// purego. Without it callers filter per user (FilterDeltas).
func HasAVX512() bool { return useAVX512 }
