package segment

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/klauspost/compress/zstd"

	"github.com/cespare/xxhash/v2"

	"github.com/spurdb/spur/event"
)

// Column slots of a block: the users, times and events chunks come first,
// then one chunk per property in Meta.Props order.
const (
	colUsers  = 0
	colTimes  = 1
	colEvents = 2
	colProps  = 3 // first property chunk
)

// Chunk compression codecs.
const (
	compNone = 0 // stored bytes are the raw bytes
	compZstd = 1 // stored bytes are one zstd frame of the raw bytes
)

// Chunk encodings (the enc byte of a chunk record). See doc.go for the raw
// layout of each.
const (
	encUsers    = 1 // users: hash deltas, row counts, ids
	encUsersIDs = 2 // users: row counts and ids; hashes are xxhash64 of the ids (version 3)

	encTimesPFOR     = 1 // times: gcd-scaled deltas, patched bit-packing (exceptions by index gaps)
	encTimesUvarint  = 2 // times: gcd-scaled deltas as uvarints
	encTimesPFORBits = 3 // times: as encTimesPFOR, exceptions by a row bitmap

	encEvents = 1 // events: bit-packed codes
)

// Property chunk enc byte: presence kind in the low 2 bits, value encoding
// in the high 6 bits.
const (
	presNone   = 0 // no row has a value; raw chunk is empty
	presAll    = 1 // every row has a value; no bitmap stored
	presBitmap = 2 // bitmap of (rows+63)/64 little-endian uint64 words

	valNone    = 0 // no values (presNone)
	valFOR     = 1 // frame of reference: varint min, width byte, packed v-min
	valDelta   = 2 // zigzag uvarint of v[i]-v[i-1] (v[-1] = 0)
	valPlain   = 3 // float64 bits, 8 bytes LE each
	valDecimal = 4 // scale byte d, then FOR of v·10^d (exact decimals)
)

// maxDecimalScale is the largest d of the decimal float encoding; 10^d is
// exact in float64 for d ≤ 22.
const maxDecimalScale = 9

var pow10 = [maxDecimalScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// valNames names the property value encodings for describeChunk.
var valNames = [...]string{valNone: "none", valFOR: "for-bitpack", valDelta: "delta-zigzag-uvarint", valPlain: "plain", valDecimal: "decimal-for-bitpack"}

// describeChunk returns a human-readable description of a chunk encoding
// for ColumnStats.Encoding, e.g. "bitmap,decimal-for+zstd".
func describeChunk(col int, enc, comp uint8) string {
	var s string
	switch col {
	case colUsers:
		s = "hash-delta-bitpack,uvarint-rows,ids"
		if enc == encUsersIDs {
			s = "uvarint-rows,ids"
		}
	case colTimes:
		s = "gcd-delta-uvarint"
		switch enc {
		case encTimesPFOR:
			s = "gcd-delta-pfor"
		case encTimesPFORBits:
			s = "gcd-delta-pfor-bitmap"
		}
	case colEvents:
		s = "bitpack"
	default:
		s = [...]string{"absent", "all", "bitmap", "?"}[enc&3]
		if v := enc >> 2; v != valNone && int(v) < len(valNames) {
			s += "," + valNames[v]
		}
	}
	if comp == compZstd {
		s += "+zstd"
	}
	return s
}

// validEnc reports whether enc is a valid encoding for a chunk of column
// slot col (a property of type typ when col ≥ colProps).
func validEnc(col int, typ event.Type, enc uint8) bool {
	switch col {
	case colUsers:
		return enc == encUsers || enc == encUsersIDs
	case colTimes:
		return enc == encTimesPFOR || enc == encTimesUvarint || enc == encTimesPFORBits
	case colEvents:
		return enc == encEvents
	}
	pres, val := enc&3, enc>>2
	if pres == presNone || val == valNone {
		return pres == presNone && val == valNone
	}
	if pres > presBitmap {
		return false
	}
	switch typ {
	case event.TypeInt, event.TypeBool, event.TypeTime:
		return val == valFOR || val == valDelta
	case event.TypeFloat:
		return val == valPlain || val == valDecimal
	case event.TypeString:
		return val == valFOR
	}
	return false
}

// maxRawLen bounds the raw (decompressed) length of a chunk of column slot
// col in a block of rows rows and users users; a footer declaring more is
// corrupt. The bounds are loose upper limits of what the encoders produce.
func maxRawLen(col, rows, users int) int {
	switch col {
	case colUsers:
		return 9 + users*(8+2*binary.MaxVarintLen64+event.MaxUserIDBytes)
	case colTimes: // PFOR: low parts, plus up to rows exceptions of 2×64 bits
		return 2*binary.MaxVarintLen64 + 4 + binary.MaxVarintLen64 + 3*8*rows
	case colEvents:
		return 1 + 4*rows
	}
	return 8*((rows+63)/64) + binary.MaxVarintLen64 + 2 + rows*binary.MaxVarintLen64
}

// ---- encoders (writer side) ----

// encoder holds the writer's reusable scratch buffers.
type encoder struct {
	u64   []uint64
	exc   []uint64
	exc2  []uint64
	f64   []float64
	bm    []uint64
	raw   []byte // candidate encodings of a chunk
	raw2  []byte
	comp  []byte // zstd output
	comp2 []byte
	zstd  *zstd.Encoder // nil: zstdEncoder; fastZstdEncoder with WriterOptions.FastZstd

	// pforBitmapRatio is how many times the bytes of the index gaps
	// appendPFOR spends on an exception bitmap instead: 0 means
	// defaultPFORBitmapRatio, a negative value never (WriterOptions'
	// field of the same name, which tests set).
	pforBitmapRatio float64
}

// zstdEncoder returns the zstd encoder of e's chunks.
func (e *encoder) zstdEncoder() *zstd.Encoder {
	if e.zstd == nil {
		return zstdEncoder()
	}
	return e.zstd
}

// encodeUsers appends the users chunk of the block b (its users' hashes,
// ids and row counts) to dst and returns it with its encoding:
// encUsersIDs when every user's hash is xxhash64 of its id (UserHash), so
// that readers recompute the hashes (stored, they took 46-50 bits a user
// as deltas, about 0.5 bytes/event at 100M), else encUsers with the
// hashes stored (inputs that simulate hash collisions). encUsersIDs's
// keys section (id lengths and ids) is zstd-compressed when that makes it
// minRatio times smaller; the chunk itself must then be stored
// uncompressed, so that the row counts read without decompressing
// anything. The hash deltas use e.u64 as scratch, the keys e.raw2 and
// e.comp2.
func (e *encoder) encodeUsers(dst []byte, b *blockBuf, minRatio float64) ([]byte, uint8) {
	users := len(b.hashes)
	enc := uint8(encUsersIDs)
	for i, h := range b.hashes {
		if h != xxhash.Sum64(b.id(i)) {
			enc = encUsers
			break
		}
	}
	if enc == encUsers {
		deltas := grow(e.u64, users)[:0]
		var maxd uint64
		for i := 1; i < users; i++ {
			d := b.hashes[i] - b.hashes[i-1]
			deltas = append(deltas, d)
			maxd = max(maxd, d)
		}
		e.u64 = deltas
		w := bitWidth(maxd)
		dst = binary.LittleEndian.AppendUint64(dst, b.hashes[0])
		dst = append(dst, byte(w))
		dst = appendPacked(dst, deltas, w)
	}
	for i := range users {
		dst = binary.AppendUvarint(dst, uint64(b.starts[i+1]-b.starts[i]))
	}
	keys := e.raw2[:0]
	for i := range users {
		keys = binary.AppendUvarint(keys, uint64(b.idOff[i+1]-b.idOff[i]))
	}
	keys = append(keys, b.ids[:b.idOff[users]]...)
	e.raw2 = keys
	if enc == encUsers {
		return append(dst, keys...), enc
	}
	comp := byte(compNone)
	if len(keys) >= minCompress {
		e.comp2 = e.zstdEncoder().EncodeAll(keys, e.comp2[:0])
		if float64(len(e.comp2)) <= float64(len(keys))/minRatio {
			comp = compZstd
		}
	}
	dst = append(dst, comp)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	if comp == compZstd {
		return append(dst, e.comp2...), enc
	}
	return append(dst, keys...), enc
}

// UserHash returns the 64-bit key hash of a user id: xxhash64 (seed 0) of
// its bytes, the hash users are sorted and sharded by. Segments of format
// version 3 do not store it; readers recompute it from the ids.
func UserHash(id []byte) uint64 { return xxhash.Sum64(id) }

// encodeTimes encodes the times chunk of times (rows of one block, user u
// spanning times[starts[u]:starts[u+1]]) in both time encodings: into
// pfor (encTimesPFOR or encTimesPFORBits, returned as enc; see
// appendPFOR) and into uv (encTimesUvarint).
//
// Values: the first time of each user as the offset from the block's
// minimum (base), every other time as the delta from the previous row
// (non-negative: times do not decrease within a user), all divided by
// their greatest common divisor g (10^6 for second-resolution data).
func (e *encoder) encodeTimes(pfor, uv []byte, times []int64, starts []int) (_, _ []byte, enc uint8) {
	vals := grow(e.u64, len(times))
	e.u64 = vals
	base := times[0]
	for u := 0; u+1 < len(starts); u++ {
		base = min(base, times[starts[u]])
	}
	var g uint64
	for u := 0; u+1 < len(starts); u++ {
		lo, hi := starts[u], starts[u+1]
		vals[lo] = uint64(times[lo] - base) // the true difference: base ≤ times[lo]
		g = gcd(vals[lo], g)
		for r := lo + 1; r < hi; r++ {
			vals[r] = uint64(times[r] - times[r-1])
			g = gcd(vals[r], g)
		}
	}
	if g == 0 {
		g = 1
	}
	for r := range vals {
		vals[r] /= g
	}
	pfor = binary.AppendUvarint(pfor, g)
	pfor = binary.AppendVarint(pfor, base)
	uv = append(uv, pfor...)
	pfor, enc = e.appendPFOR(pfor, vals)
	for _, v := range vals {
		uv = binary.AppendUvarint(uv, v)
	}
	return pfor, uv, enc
}

// pforWidth returns the bit width that minimises the estimated size of
// vals in the appendPFOR layout.
func pforWidth(vals []uint64) uint {
	var hist [65]int // hist[k]: values of bit width k
	maxK := uint(0)
	for _, v := range vals {
		k := bitWidth(v)
		hist[k]++
		maxK = max(maxK, k)
	}
	best, bestSize := maxK, packedLen(len(vals), maxK)
	exc := 0
	for w := maxK; w > 0; {
		exc += hist[w]
		w--
		// Exceptions: high bits at width maxK-w, index gaps at about the
		// width of the average gap.
		gapW := bitWidth(uint64(2 * len(vals) / exc))
		size := packedLen(len(vals), w) + uvarintLen(uint64(exc)) + 2 + packedLen(exc, maxK-w) + packedLen(exc, gapW)
		if size < bestSize {
			best, bestSize = w, size
		}
	}
	return best
}

// appendPFOR appends vals in a patched frame-of-reference layout (after
// PFOR, Zukowski et al., "Super-Scalar RAM-CPU Cache Compression", ICDE
// 2006): a width byte w, the low w bits of every value bit-packed, the
// uvarint count of exceptions (values of more than w bits), and if there
// are any: where they are, then a width byte and their bit-packed high
// bits v>>w. Where they are is, in encTimesPFOR, a width byte and the
// bit-packed index gaps (index - previous index - 1, the first from -1),
// and in encTimesPFORBits a bitmap of ⌈n/64⌉ little-endian u64 words (bit
// i%64 of word i/64: value i is an exception), which a reader tests,
// ranks and copies without decoding. It returns the layout's encoding:
// the bitmap when it takes at most e.pforBitmapRatio times the gaps' bytes
// (the time deltas of generated app data, with 21 % exceptions: a
// bitmap of 1 bit per row against gaps of about 4 bits per exception).
func (e *encoder) appendPFOR(dst []byte, vals []uint64) ([]byte, uint8) {
	w := pforWidth(vals)
	dst = append(dst, byte(w))
	dst = appendPacked(dst, vals, w)
	gaps, highs := e.exc[:0], e.exc2[:0]
	var maxGap, maxHigh uint64
	prev := -1
	for i, v := range vals {
		if h := v >> w; w < 64 && h != 0 {
			gaps = append(gaps, uint64(i-prev-1))
			highs = append(highs, h)
			maxGap, maxHigh = max(maxGap, uint64(i-prev-1)), max(maxHigh, h)
			prev = i
		}
	}
	e.exc, e.exc2 = gaps, highs
	dst = binary.AppendUvarint(dst, uint64(len(gaps)))
	if len(gaps) == 0 {
		return dst, encTimesPFOR
	}
	gw, hw := bitWidth(maxGap), bitWidth(maxHigh)
	enc := uint8(encTimesPFOR)
	words := (len(vals) + 63) / 64
	if float64(8*words) <= cmp.Or(e.pforBitmapRatio, defaultPFORBitmapRatio)*float64(1+packedLen(len(gaps), gw)) {
		enc = encTimesPFORBits
		i := -1
		for w := range words {
			var word uint64
			for len(gaps) > 0 && i+int(gaps[0])+1 < 64*(w+1) {
				i += int(gaps[0]) + 1
				word |= 1 << (i % 64)
				gaps = gaps[1:]
			}
			dst = binary.LittleEndian.AppendUint64(dst, word)
		}
	} else {
		dst = append(dst, byte(gw))
		dst = appendPacked(dst, gaps, gw)
	}
	dst = append(dst, byte(hw))
	dst = appendPacked(dst, highs, hw)
	return dst, enc
}

// defaultPFORBitmapRatio is how many times the bytes of the index gaps
// appendPFOR spends on an exception bitmap instead, unless the writer's
// options say otherwise (tests set -1 and +Inf to write each layout).
const defaultPFORBitmapRatio = 1.5

// encodeEvents encodes the events chunk of codes (the writer's codes) as
// bit-packed codes (encEvents): into tight at the smallest width that
// holds the block's codes, and, when that width is not 8, 16 or 32, into
// aligned at the next of those, which zstd compresses better (aligned is
// then returned empty).
func (e *encoder) encodeEvents(tight, aligned []byte, codes []uint32) ([]byte, []byte) {
	vals := grow(e.u64, len(codes))
	e.u64 = vals
	var maxc uint32
	for i, c := range codes {
		vals[i] = uint64(c)
		maxc = max(maxc, c)
	}
	w := bitWidth(uint64(maxc))
	tight = append(tight, byte(w))
	tight = appendPacked(tight, vals, w)
	if w != 8 && w != 16 && w != 32 {
		aw := uint(8)
		switch {
		case w > 16:
			aw = 32
		case w > 8:
			aw = 16
		}
		aligned = append(aligned, byte(aw))
		aligned = appendPacked(aligned, vals, aw)
	}
	return tight, aligned
}

// encodeProp appends the chunk of the first rows rows of the property
// buffer pb (of type typ) to dst and returns its encoding.
func (e *encoder) encodeProp(dst []byte, pb *propBuf, typ event.Type, rows int) ([]byte, uint8) {
	// The block's presence bits (the buffer may hold later rows).
	words := (rows + 63) / 64
	pm := append(e.bm[:0], pb.present[:words]...)
	if rows%64 != 0 {
		pm[words-1] &= 1<<(rows%64) - 1
	}
	e.bm = pm
	m := popcount(pm)
	var pres uint8
	switch m {
	case 0:
		return dst, presNone
	case rows:
		pres = presAll
	default:
		pres = presBitmap
		for _, w := range pm {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
	}
	var val uint8
	if typ == event.TypeFloat {
		floats := grow(e.f64, m)
		e.f64 = floats
		gather(floats, pb.floats, pm, m == rows)
		dst, val = e.encodeFloats(dst, floats)
		return dst, pres | val<<2
	}
	ints := grow(e.u64, m)
	e.u64 = ints
	if typ == event.TypeString {
		gather(ints, pb.strs, pm, m == rows)
		dst, val = appendFOR(dst, ints), valFOR
	} else {
		gather(ints, pb.ints, pm, m == rows)
		dst, val = appendInts(dst, ints)
	}
	return dst, pres | val<<2
}

// gather sets dst[j] to the value of src at the row of the j-th set bit
// of pm (converted to D); all says every bit is set (then dst and src
// align).
func gather[D uint64 | float64, S int64 | uint32 | float64](dst []D, src []S, pm []uint64, all bool) {
	if all {
		src = src[:len(dst)]
		for r, v := range src {
			dst[r] = D(v)
		}
		return
	}
	j := 0
	for wi, w := range pm {
		for ; w != 0; w &= w - 1 {
			dst[j] = D(src[wi*64+bits.TrailingZeros64(w)])
			j++
		}
	}
}

// forSize returns the frame-of-reference parameters of vals (int64 bit
// patterns): the minimum, the bit width of max-min, and the encoded size.
func forSize(vals []uint64) (lo int64, w uint, size int) {
	lo, hi := int64(vals[0]), int64(vals[0])
	for _, v := range vals {
		lo, hi = min(lo, int64(v)), max(hi, int64(v))
	}
	w = bitWidth(uint64(hi - lo)) // the true span, < 2^64
	var tmp [binary.MaxVarintLen64]byte
	return lo, w, binary.PutVarint(tmp[:], lo) + 1 + packedLen(len(vals), w)
}

// appendFOR appends vals (int64 bit patterns, non-empty) in the valFOR
// layout. It rewrites vals to the offsets from the minimum.
func appendFOR(dst []byte, vals []uint64) []byte {
	lo, w, _ := forSize(vals)
	dst = binary.AppendVarint(dst, lo)
	dst = append(dst, byte(w))
	for i, v := range vals {
		vals[i] = v - uint64(lo)
	}
	return appendPacked(dst, vals, w)
}

// appendInts appends vals (int64 bit patterns, non-empty) in the smaller of
// the valFOR and valDelta layouts and returns the one chosen.
func appendInts(dst []byte, vals []uint64) ([]byte, uint8) {
	_, _, forLen := forSize(vals)
	deltaLen, prev := 0, int64(0)
	for _, v := range vals {
		deltaLen += uvarintLen(zigzag(int64(v) - prev))
		prev = int64(v)
	}
	if forLen <= deltaLen {
		return appendFOR(dst, vals), valFOR
	}
	prev = 0
	for _, v := range vals {
		dst = binary.AppendUvarint(dst, zigzag(int64(v)-prev))
		prev = int64(v)
	}
	return dst, valDelta
}

// decimalScale returns the smallest d ≤ maxDecimalScale such that every
// value of vals equals float64(k)/10^d bit for bit for an integer k with
// |k| ≤ 2^53 (so decoding with that exact expression restores it), or -1.
// NaN, ±Inf and -0 never qualify.
func decimalScale(vals []float64) int {
scales:
	for d, p := range pow10 {
		for _, v := range vals {
			k := math.Round(v * p)
			if !(math.Abs(k) <= 1<<53) || math.Float64bits(float64(int64(k))/p) != math.Float64bits(v) {
				continue scales
			}
		}
		return d
	}
	return -1
}

// encodeFloats appends vals (non-empty) as valDecimal when every value is
// an exact short decimal and that is smaller, else as valPlain.
func (e *encoder) encodeFloats(dst []byte, vals []float64) ([]byte, uint8) {
	if d := decimalScale(vals); d >= 0 {
		ks := grow(e.u64, len(vals))
		for i, v := range vals {
			ks[i] = uint64(int64(math.Round(v * pow10[d])))
		}
		e.u64 = ks
		if _, _, size := forSize(ks); 1+size < 8*len(vals) {
			dst = append(dst, byte(d))
			return appendFOR(dst, ks), valDecimal
		}
	}
	for _, v := range vals {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	return dst, valPlain
}

// ---- decoders (reader side) ----
//
// Each decoder checks every length and value it reads against the block's
// declared shape and returns an error (never panics) on a mismatch; the
// caller wraps it into a *CorruptionError at the chunk's file offset.

var errShort = errors.New("chunk ends early")

// grow returns s resliced to n elements, reallocating only when its
// capacity is too small. The contents are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// decodeUsers decodes a users chunk of encoding enc of a block with rows
// rows and users users (first and last hash as declared by the footer)
// into b, with the keys keys (see Keys). Encoding encUsersIDs's hashes
// are recomputed from the ids (UserHash; with KeysAll only) and checked
// to ascend by (hash, id) from firstHash to lastHash; encUsers's are
// checked to ascend. A compressed keys section is decompressed into
// b.raw.
func decodeUsers(enc uint8, raw []byte, rows, users int, firstHash, lastHash uint64, b *Block, keys Keys) error {
	b.u64 = grow(b.u64, users)
	var p int
	switch {
	case enc != encUsers:
	case keys == KeysNone:
		if len(raw) < 9 || raw[8] > 64 {
			return errors.New("bad bit width")
		}
		if p = 9 + packedLen(users-1, uint(raw[8])); p > len(raw) {
			return errShort
		}
	default:
		if len(raw) < 8 {
			return errShort
		}
		h := binary.LittleEndian.Uint64(raw)
		deltas := b.u64[:users-1]
		var err error
		if _, p, err = unpackWidth(deltas, raw, 8); err != nil {
			return err
		}
		hashes := grow(b.UserHashes, users)
		hashes[0] = h
		for i, d := range deltas {
			if h+d < h {
				return fmt.Errorf("user %d hash overflows", i+1)
			}
			h += d
			hashes[i+1] = h
		}
		if hashes[0] != firstHash || h != lastHash {
			return fmt.Errorf("user hashes %#x..%#x disagree with the footer's %#x..%#x", hashes[0], h, firstHash, lastHash)
		}
		b.UserHashes = hashes
	}

	vals := b.u64[:users]
	k := decodeUvarints(vals, raw[p:])
	if k < 0 {
		return errors.New("bad user row counts")
	}
	p += k
	starts := grow(b.UserStarts, users+1)
	starts[0] = 0
	// Checked after the loop, without a branch per user: every count in
	// [1, rows] (so the sum cannot wrap) and their sum rows.
	var total, lo, hi uint64 = 0, math.MaxUint64, 0
	for i, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
		total += v
		starts[i+1] = int32(total)
	}
	if lo == 0 || hi > uint64(rows) {
		i := slices.IndexFunc(vals, func(v uint64) bool { return v == 0 || v > uint64(rows) })
		return fmt.Errorf("user %d row count %d does not fit the block's %d rows", i, vals[i], rows)
	}
	if total != uint64(rows) {
		return fmt.Errorf("users hold %d rows, block has %d", total, rows)
	}
	b.UserStarts = starts
	if keys == KeysNone {
		b.UserHashes, b.UserIDOffsets, b.UserIDBytes = b.UserHashes[:0], b.UserIDOffsets[:0], b.UserIDBytes[:0]
		return nil
	}

	kb := raw[p:]
	if enc == encUsersIDs {
		if len(kb) < 1 || kb[0] > compZstd {
			return errors.New("bad keys compression")
		}
		n, k := binary.Uvarint(kb[1:])
		if k <= 0 || n > uint64(users)*(binary.MaxVarintLen64+event.MaxUserIDBytes) {
			return errors.New("bad keys length")
		}
		if kb = kb[1+k:]; raw[p] == compNone {
			if uint64(len(kb)) != n {
				return fmt.Errorf("keys take %d bytes, chunk has %d left", n, len(kb))
			}
		} else {
			var err error
			if kb, err = decompress(kb, int(n), &b.raw); err != nil {
				return fmt.Errorf("keys: %w", err)
			}
		}
	}
	k = decodeUvarints(vals, kb)
	if k < 0 {
		return errors.New("bad user id lengths")
	}
	p = k
	offs := grow(b.UserIDOffsets, users+1)
	offs[0] = 0
	var idBytes, longest uint64
	for i, v := range vals {
		longest = max(longest, v)
		idBytes += v
		offs[i+1] = uint32(idBytes)
	}
	if longest > event.MaxUserIDBytes {
		i := slices.IndexFunc(vals, func(v uint64) bool { return v > event.MaxUserIDBytes })
		return fmt.Errorf("user %d id length %d > %d", i, vals[i], event.MaxUserIDBytes)
	}
	if idBytes != uint64(len(kb)-p) {
		return fmt.Errorf("user ids take %d bytes, chunk has %d left", idBytes, len(kb)-p)
	}
	b.UserIDOffsets = offs
	b.UserIDBytes = append(b.UserIDBytes[:0], kb[p:]...)
	if enc == encUsers {
		return nil
	}
	if keys == KeysIDs {
		b.UserHashes = b.UserHashes[:0]
		return nil
	}
	hashes := grow(b.UserHashes, users)
	ids := b.UserIDBytes
	for i := range hashes {
		hashes[i] = UserHash(ids[offs[i]:offs[i+1]])
		if i > 0 && (hashes[i] < hashes[i-1] || hashes[i] == hashes[i-1] && string(ids[offs[i]:offs[i+1]]) <= string(ids[offs[i-1]:offs[i]])) {
			return fmt.Errorf("user %d (%#x) is not after user %d (%#x) by (hash, id)", i, hashes[i], i-1, hashes[i-1])
		}
	}
	if hashes[0] != firstHash || hashes[users-1] != lastHash {
		return fmt.Errorf("user hashes %#x..%#x disagree with the footer's %#x..%#x", hashes[0], hashes[users-1], firstHash, lastHash)
	}
	b.UserHashes = hashes
	return nil
}

// timeChunk is how many time deltas decodeTimes decodes at a time, so
// that its scratch stays in L1 cache (a multiple of 8: byte-aligned in the
// bit-packed stream).
const timeChunk = 1024

// decodeTimes decodes a times chunk into b.Times using b.UserStarts. It
// streams the deltas through a small scratch buffer in timeChunk pieces
// instead of materialising them for the whole block.
func decodeTimes(enc uint8, raw []byte, b *Block) error {
	return decodeTimeChunk(enc, raw, b, false)
}

// decodeDeltas decodes a times chunk into b.Deltas, b.TimeBase and
// b.TimeGCD (see Block) without summing them into times.
func decodeDeltas(enc uint8, raw []byte, b *Block) error {
	return decodeTimeChunk(enc, raw, b, true)
}

// decodePackedDeltas parses a PFOR times chunk into b.pf, b.TimeBase and
// b.TimeGCD, leaving the deltas packed for SumDeltas.
func decodePackedDeltas(enc uint8, raw []byte, b *Block) error {
	base, g, raw, err := timeHeader(raw)
	if err != nil {
		return err
	}
	if err := b.pf.initAll(raw, b.Rows, enc, &b.exc); err != nil {
		return err
	}
	b.TimeBase, b.TimeGCD = base, g
	b.Times, b.Deltas = b.Times[:0], b.Deltas[:0]
	b.packed = true
	return nil
}

// timeHeader parses a times chunk's divisor and base and returns the
// rest.
func timeHeader(raw []byte) (base int64, g uint64, rest []byte, err error) {
	g, n1 := binary.Uvarint(raw)
	if n1 <= 0 || g == 0 {
		return 0, 0, nil, errors.New("bad time divisor")
	}
	base, n2 := binary.Varint(raw[n1:])
	if n2 <= 0 {
		return 0, 0, nil, errors.New("bad time base")
	}
	return base, g, raw[n1+n2:], nil
}

// SumDeltas returns the wrapping sum of the time deltas of rows [s, e)
// (0 ≤ s ≤ e ≤ Rows) after ReadBlockDeltas, ReadBlockRows or
// ReadBlockPacked, in units of TimeGCD: the time of row e-1 is that of row
// s-1 (TimeBase when s is the user's first row) plus TimeGCD times the
// sum, wrapping. Reading packed deltas, it unpacks rows [s&^7, e) in
// pieces through a scratch buffer owned by b and adds the exceptions of
// [s, e); calls in increasing s are cheapest (the exception cursor moves
// forward). It does not allocate in steady state.
func (b *Block) SumDeltas(s, e int) uint64 {
	if !b.packed {
		return sumUint64(b.Deltas[s:e])
	}
	pf := &b.pf
	if len(b.sums) == 0 {
		b.sums = make([]uint64, timeChunk)
	}
	var sum uint64
	for a := s &^ 7; a < e; a += len(b.sums) {
		vs := b.sums[:min(e-a, len(b.sums))]
		off := a / 8 * int(pf.w)
		unpack(vs, pf.packed[off:off+packedLen(len(vs), pf.w)], pf.w)
		sum += sumUint64(vs[max(s-a, 0):])
	}
	if pf.bits != nil {
		// The exceptions in [s, e) are those ranked from rank(s) on.
		if s < pf.nextRow {
			pf.next, pf.nextRow = 0, 0
		}
		k := pf.next + bitsSet(pf.bits, pf.nextRow, s)
		c := bitsSet(pf.bits, s, e)
		for _, h := range pf.highs[k : k+c] {
			sum += h << pf.w
		}
		pf.next, pf.nextRow = k+c, e
		return sum
	}
	idx, us, ue := pf.idx, uint64(s), uint64(e)
	k := pf.next
	if k > 0 && idx[k-1] >= us { // a call before the last one's rows
		k, _ = slices.BinarySearch(idx, us)
	}
	for k < len(idx) && idx[k] < us {
		k++
	}
	for ; k < len(idx) && idx[k] < ue; k++ {
		sum += pf.highs[k] << pf.w
	}
	pf.next = k
	return sum
}

// UnpackDeltas decodes the deltas that ReadBlockPacked left packed into
// Deltas; after it the block reads as after
// ReadBlockDeltas. It does nothing when they are in Deltas already. It
// does not allocate in steady state.
func (b *Block) UnpackDeltas() {
	if !b.packed {
		return
	}
	b.Deltas = grow(b.Deltas, b.Rows)
	b.pf.next, b.pf.nextRow = 0, 0
	b.pf.read(b.Deltas, 0)
	b.packed = false
}

// sumUint64 returns the wrapping sum of d, with four independent
// accumulators so that the additions do not wait for each other.
func sumUint64(d []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	i := 0
	for ; i+4 <= len(d); i += 4 {
		v := d[i : i+4 : i+4]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
	}
	for ; i < len(d); i++ {
		s0 += d[i]
	}
	return s0 + s1 + s2 + s3
}

func decodeTimeChunk(enc uint8, raw []byte, b *Block, deltas bool) error {
	base, g, raw, err := timeHeader(raw)
	if err != nil {
		return err
	}
	rows := b.Rows
	var pf pforReader
	pfor := enc != encTimesUvarint
	if pfor {
		if err := pf.initAll(raw, rows, enc, &b.exc); err != nil {
			return err
		}
	}
	if deltas {
		b.TimeBase, b.TimeGCD = base, g
		b.Times = b.Times[:0]
		b.Deltas = grow(b.Deltas, rows)
		if pfor {
			pf.read(b.Deltas, 0)
		} else if k := decodeUvarints(b.Deltas, raw); k != len(raw) {
			if k < 0 {
				return errors.New("bad time deltas")
			}
			return fmt.Errorf("%d trailing bytes", len(raw)-k)
		}
		return nil
	}
	b.Deltas = b.Deltas[:0]
	b.u64 = grow(b.u64, timeChunk)
	times := grow(b.Times, rows)
	b.Times = times
	starts := b.UserStarts
	u, t := 0, base
	for c0 := 0; c0 < rows; c0 += timeChunk {
		vs := b.u64[:min(timeChunk, rows-c0)]
		if pfor {
			pf.read(vs, c0)
		} else {
			k := decodeUvarints(vs, raw)
			if k < 0 {
				return errors.New("bad time deltas")
			}
			raw = raw[k:]
		}
		// Running sums, restarting from base at each user's first row.
		for r := c0; r < c0+len(vs); {
			end := min(int(starts[u+1]), c0+len(vs))
			t = prefixSum(times[r:end], vs[r-c0:end-c0], t, g)
			if r = end; r == int(starts[u+1]) {
				u, t = u+1, base
			}
		}
	}
	if enc == encTimesUvarint && len(raw) != 0 {
		return fmt.Errorf("%d trailing bytes", len(raw))
	}
	return nil
}

// prefixSum sets ts[i] = t + g·(vs[0] + … + vs[i]) with wrapping int64
// arithmetic (which restores the exact times the writer subtracted) and
// returns the last sum (t if vs is empty). len(ts) ≥ len(vs).
func prefixSum(ts []int64, vs []uint64, t int64, g uint64) int64 {
	ts = ts[:len(vs)]
	i := 0
	for ; i+4 <= len(vs); i += 4 {
		// Partial sums within the group first, so that only one addition
		// per four rows depends on the previous group.
		v, o := vs[i:i+4:i+4], ts[i:i+4:i+4]
		a0 := int64(v[0] * g)
		a1 := a0 + int64(v[1]*g)
		a2 := a1 + int64(v[2]*g)
		a3 := a2 + int64(v[3]*g)
		o[0], o[1], o[2], o[3] = t+a0, t+a1, t+a2, t+a3
		t += a3
	}
	for ; i < len(vs); i++ {
		t += int64(vs[i] * g)
		ts[i] = t
	}
	return t
}

// pforReader decodes values in the appendPFOR layout piecewise.
type pforReader struct {
	w       uint
	n       int
	packed  []byte   // the n bit-packed low parts
	idx     []uint64 // encTimesPFOR: exception indexes, ascending
	bits    []byte   // encTimesPFORBits: the exception bitmap, ⌈n/64⌉ words
	highs   []uint64 // exception high parts
	next    int      // first exception not yet applied (read), or, with bits, SumDeltas' rank of row nextRow
	nextRow int
}

// init parses the appendPFOR layout (encoding enc) of n values at the
// start of src, unpacking the exceptions into scratch, and returns its
// length.
func (pf *pforReader) init(src []byte, n int, enc uint8, scratch *[]uint64) (int, error) {
	if len(src) == 0 || src[0] > 64 {
		return 0, errors.New("bad PFOR width")
	}
	pf.w, pf.n = uint(src[0]), n
	p := 1 + packedLen(n, pf.w)
	if len(src) < p {
		return 0, errShort
	}
	pf.packed = src[1:p]
	exc, k := binary.Uvarint(src[p:])
	if k <= 0 || exc > uint64(n) {
		return 0, errors.New("bad PFOR exception count")
	}
	p += k
	pf.idx, pf.bits, pf.highs, pf.next, pf.nextRow = nil, nil, nil, 0, 0
	if exc == 0 {
		return p, nil
	}
	if pf.w == 64 {
		return 0, errors.New("PFOR exceptions at width 64")
	}
	if enc == encTimesPFORBits {
		nb := 8 * ((n + 63) / 64)
		if len(src)-p < nb {
			return 0, errShort
		}
		pf.bits = src[p : p+nb : p+nb]
		p += nb
		if c := bitsSet(pf.bits, 0, n); uint64(c) != exc {
			return 0, fmt.Errorf("PFOR exception bitmap has %d rows, want %d", c, exc)
		}
		if n%64 != 0 && binary.LittleEndian.Uint64(pf.bits[nb-8:])>>(n%64) != 0 {
			return 0, errors.New("PFOR exception bitmap past the last row")
		}
		*scratch = grow(*scratch, int(exc))
		pf.highs = (*scratch)[:exc]
	} else {
		*scratch = grow(*scratch, 2*int(exc))
		pf.idx, pf.highs = (*scratch)[:exc], (*scratch)[exc:2*exc]
		var err error
		if _, p, err = unpackWidth(pf.idx, src, p); err != nil {
			return 0, err
		}
	}
	hw, p, err := unpackWidth(pf.highs, src, p)
	if err != nil {
		return 0, err
	}
	if hw > 64-pf.w {
		return 0, errors.New("PFOR exception overflows 64 bits")
	}
	i := -1
	for k, gap := range pf.idx {
		if gap >= uint64(n-i-1) {
			return 0, errors.New("PFOR exception index out of range")
		}
		i += int(gap) + 1
		pf.idx[k] = uint64(i)
	}
	return p, nil
}

// initAll is init for a src that holds exactly the PFOR layout.
func (pf *pforReader) initAll(src []byte, n int, enc uint8, scratch *[]uint64) error {
	k, err := pf.init(src, n, enc, scratch)
	if err == nil && k != len(src) {
		err = fmt.Errorf("%d trailing bytes", len(src)-k)
	}
	return err
}

// read decodes values [c0, c0+len(vs)) into vs; c0 is a multiple of 8 and
// calls come in increasing c0 order, from 0 after init or a reset of next.
func (pf *pforReader) read(vs []uint64, c0 int) {
	off := c0 / 8 * int(pf.w)
	unpack(vs, pf.packed[off:off+packedLen(len(vs), pf.w)], pf.w)
	k, end := pf.next, uint64(c0+len(vs))
	if pf.bits != nil {
		for w := c0 / 64; w < (int(end)+63)/64; w++ {
			word := binary.LittleEndian.Uint64(pf.bits[8*w:])
			if lo := 64 * w; lo < c0 {
				word &= ^uint64(0) << (c0 - lo)
			}
			if hi := 64 * (w + 1); hi > int(end) {
				word &= 1<<(int(end)-64*w) - 1
			}
			for ; word != 0; word &= word - 1 {
				vs[64*w+bits.TrailingZeros64(word)-c0] |= pf.highs[k] << pf.w
				k++
			}
		}
		pf.next = k
		return
	}
	idx, highs := pf.idx, pf.highs[:len(pf.idx)]
	for ; k < len(idx) && idx[k] < end; k++ {
		vs[idx[k]-uint64(c0)] |= highs[k] << pf.w
	}
	pf.next = k
}

// bitsSet returns the number of bits set in rows [a, b) of the bitmap bm
// in the layout of the PFOR exception bitmap (little-endian u64 words,
// bit r%64 of word r/64 for row r; 0 ≤ a ≤ b ≤ 8·len(bm), len(bm) a
// multiple of 8): with a = 0, the rank of row b among the exceptions.
func bitsSet(bm []byte, a, b int) int {
	if a >= b {
		return 0
	}
	wa, wb := a/64, (b-1)/64
	first := binary.LittleEndian.Uint64(bm[8*wa:]) &^ (1<<(a%64) - 1)
	if wa == wb {
		return bits.OnesCount64(first & (^uint64(0) >> (63 - (b-1)%64)))
	}
	c := bits.OnesCount64(first)
	for w := wa + 1; w < wb; w++ {
		c += bits.OnesCount64(binary.LittleEndian.Uint64(bm[8*w:]))
	}
	return c + bits.OnesCount64(binary.LittleEndian.Uint64(bm[8*wb:])&(^uint64(0)>>(63-(b-1)%64)))
}

// unpackWidth reads a width byte at src[p] and len(vals) values packed at
// that width after it; it returns the width and the offset after them.
func unpackWidth(vals []uint64, src []byte, p int) (uint, int, error) {
	if p >= len(src) || src[p] > 64 {
		return 0, 0, errors.New("bad bit width")
	}
	w := uint(src[p])
	p++
	plen := packedLen(len(vals), w)
	if len(src)-p < plen {
		return 0, 0, errShort
	}
	unpack(vals, src[p:p+plen], w)
	return w, p + plen, nil
}

// decodeEvents decodes an events chunk into b.Events, checking every code
// against the nNames names of the segment (≤ MaxEventNames).
func decodeEvents(raw []byte, nNames int, b *Block) error {
	rows := b.Rows
	ev := grow(b.Events, rows)
	b.Events = ev
	if len(raw) == 0 || raw[0] > 32 {
		return errors.New("bad event code width")
	}
	w := uint(raw[0])
	raw = raw[1:]
	if len(raw) != packedLen(rows, w) {
		return fmt.Errorf("%d bytes for %d codes of %d bits", len(raw), rows, w)
	}
	// Codes unpack with parquet-go/bitpack's vectorised kernels straight
	// into the 32-bit Events (a uint16 Events needed a narrowing pass that
	// cost 0.8 ns per row at 1B events); the check that every code is
	// below the names is then codesAbove, skipped when w bits cannot
	// exceed them.
	limit := uint32(nNames) // > 0: a block has rows, so the segment names
	var over bool
	switch {
	case w == 0:
		clear(ev)
	case w == 16:
		var o uint32
		for i := range ev {
			c := uint32(binary.LittleEndian.Uint16(raw[2*i:]))
			ev[i] = c
			o |= limit - 1 - c
		}
		over = o>>31 != 0 // c < 2^16 and limit ≤ 2^31: no false positive
	default:
		unpack(ev, raw, w)
		over = uint64(1)<<w > uint64(limit) && codesAbove(ev, limit-1)
	}
	if over || limit == 0 {
		for i, c := range ev {
			if c >= limit {
				return fmt.Errorf("row %d event code %d ≥ %d names", i, c, nNames)
			}
		}
	}
	return nil
}

// codesOver reports, in the top bit of its result, whether some code
// exceeds l (< 2^31). It reads the codes in pairs as uint64 words and
// subtracts each pair from l|l<<32: a lane's top bit is set when its code
// (below 2^31) exceeds l, and the borrow from the low lane only ever sets
// the high lane's top bit when the low lane's is already set, so the test
// stays exact; each word is ORed in too, for the codes of 2^31 and more
// (32-bit codes). Four accumulators keep the OR chains off the critical
// path (one accumulator over single codes ran at 2 cycles per code at 1B
// events).
func codesOver(codes []uint32, l uint32) uint32 {
	var o0, o1, o2, o3 uint64
	l2 := uint64(l) | uint64(l)<<32
	if n := len(codes) / 2; n > 0 {
		w := unsafe.Slice((*uint64)(unsafe.Pointer(&codes[0])), n)
		i := 0
		for ; i+4 <= len(w); i += 4 {
			x := w[i : i+4 : i+4]
			o0 |= (l2 - x[0]) | x[0]
			o1 |= (l2 - x[1]) | x[1]
			o2 |= (l2 - x[2]) | x[2]
			o3 |= (l2 - x[3]) | x[3]
		}
		for _, x := range w[i:] {
			o0 |= (l2 - x) | x
		}
	}
	o := o0 | o1 | o2 | o3
	if len(codes)%2 == 1 {
		c := codes[len(codes)-1]
		o |= uint64((l - c) | c)
	}
	return uint32(o) | uint32(o>>32)
}

// decodeProp decodes a property chunk of a block of rows rows into pd: the
// presence bitmap and the value slice of typ, one entry per row
// (unspecified for absent rows), or with compact and a presence bitmap
// one entry per present row and pd.Ranks (see PropData). dictLen bounds
// string codes. scratch is reusable memory.
func decodeProp(enc uint8, raw []byte, typ event.Type, dictLen, rows int, pd *PropData, scratch *[]uint64, compact bool) error {
	words := (rows + 63) / 64
	pm := grow(pd.Present, words)
	pd.Present = pm
	pd.Ints, pd.Floats, pd.Strs, pd.Ranks = pd.Ints[:0], pd.Floats[:0], pd.Strs[:0], pd.Ranks[:0]
	// Absent rows keep whatever the slice held: every reader tests
	// Present first, and clearing a 64 Ki-row block's values for a
	// sparse property (prices on 0.6% of rows) was 7% of a quantile
	// trend's CPU time.
	var m, p int
	switch enc & 3 {
	case presNone:
		clear(pm)
		if len(raw) != 0 {
			return fmt.Errorf("%d bytes in an all-absent column", len(raw))
		}
		pd.size(typ, rows)
		return nil
	case presAll:
		for i := range pm {
			pm[i] = ^uint64(0)
		}
		if rows%64 != 0 {
			pm[words-1] = 1<<(uint(rows)%64) - 1
		}
		m = rows
	case presBitmap:
		if len(raw) < 8*words {
			return errShort
		}
		for i := range pm {
			pm[i] = binary.LittleEndian.Uint64(raw[8*i:])
		}
		if rows%64 != 0 && pm[words-1]>>(uint(rows)%64) != 0 {
			return errors.New("presence bits set beyond the last row")
		}
		m, p = popcount(pm), 8*words
	}
	if m == 0 {
		return errors.New("presence bitmap without values")
	}
	n := rows // value slice entries
	if compact && m < rows {
		// Values stay in present-row order: no scatter over the block's
		// rows (scatterFloats was 5% of a quantile trend over prices on
		// 0.6% of rows, most likely cache misses on the scattered writes).
		n = m
		rk := grow(pd.Ranks, words)
		c := 0
		for i, w := range pm {
			rk[i] = int32(c)
			c += bits.OnesCount64(w)
		}
		pd.Ranks = rk
	}
	pd.size(typ, n)
	raw = raw[p:]
	val := enc >> 2
	if val == valPlain {
		if len(raw) != 8*m {
			return fmt.Errorf("%d bytes for %d floats", len(raw), m)
		}
		*scratch = grow(*scratch, m)
		vals := (*scratch)[:m]
		for j := range vals {
			vals[j] = binary.LittleEndian.Uint64(raw[8*j:])
		}
		scatterFloats(pd.Floats, vals, pm, m == n)
		return nil
	}
	*scratch = grow(*scratch, m)
	vals := (*scratch)[:m]
	scale := 0
	switch val {
	case valDecimal:
		if len(raw) == 0 || raw[0] > maxDecimalScale {
			return errors.New("bad decimal scale")
		}
		scale = int(raw[0])
		raw = raw[1:]
		fallthrough
	case valFOR:
		lo, n := binary.Varint(raw)
		if n <= 0 || n >= len(raw) || raw[n] > 64 {
			return errors.New("bad frame of reference")
		}
		w := uint(raw[n])
		raw = raw[n+1:]
		if len(raw) != packedLen(m, w) {
			return fmt.Errorf("%d bytes for %d values of %d bits", len(raw), m, w)
		}
		unpack(vals, raw, w)
		if lo != 0 {
			for i, v := range vals {
				vals[i] = v + uint64(lo)
			}
		}
		// Every value is at most lo + 2^w - 1: when that is a valid
		// string code, the per-value check below is not needed.
		if w < 32 && lo >= 0 && lo < int64(dictLen) && uint64(lo)+1<<w <= uint64(dictLen) {
			dictLen = math.MaxInt
		}
	case valDelta:
		k := decodeUvarints(vals, raw)
		if k != len(raw) {
			return errors.New("bad zigzag deltas")
		}
		prev := int64(0)
		for i, v := range vals {
			prev += unzigzag(v)
			vals[i] = uint64(prev)
		}
	}
	switch typ {
	case event.TypeFloat:
		div := pow10[scale]
		for j, k := range vals {
			vals[j] = math.Float64bits(float64(int64(k)) / div)
		}
		scatterFloats(pd.Floats, vals, pm, m == n)
	case event.TypeString:
		if dictLen < math.MaxInt {
			for _, v := range vals {
				if v >= uint64(dictLen) {
					return fmt.Errorf("string code %d ≥ dictionary size %d", v, dictLen)
				}
			}
		}
		scatter(pd.Strs, vals, pm, m == n)
	default:
		scatter(pd.Ints, vals, pm, m == n)
	}
	return nil
}

// size sizes pd's value slice of typ to n entries (contents unspecified).
func (pd *PropData) size(typ event.Type, n int) {
	switch typ {
	case event.TypeFloat:
		pd.Floats = grow(pd.Floats, n)
	case event.TypeString:
		pd.Strs = grow(pd.Strs, n)
	default:
		pd.Ints = grow(pd.Ints, n)
	}
}

// scatter stores vals[j] (converted to T) at the row of the j-th set bit
// of pm; all says every bit is set (then out and vals align).
func scatter[T int64 | uint32](out []T, vals []uint64, pm []uint64, all bool) {
	if all {
		vals = vals[:len(out)]
		for r, v := range vals {
			out[r] = T(v)
		}
		return
	}
	j := 0
	for wi, w := range pm {
		for ; w != 0; w &= w - 1 {
			out[wi*64+bits.TrailingZeros64(w)] = T(vals[j])
			j++
		}
	}
}

// scatterFloats is scatter for float64 bit patterns.
func scatterFloats(out []float64, vals []uint64, pm []uint64, all bool) {
	if all {
		vals = vals[:len(out)]
		for r, v := range vals {
			out[r] = math.Float64frombits(v)
		}
		return
	}
	j := 0
	for wi, w := range pm {
		for ; w != 0; w &= w - 1 {
			out[wi*64+bits.TrailingZeros64(w)] = math.Float64frombits(vals[j])
			j++
		}
	}
}
