package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

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
	encUsers = 1 // users chunk (the only encoding)

	encTimesPFOR    = 1 // times: gcd-scaled deltas, patched bit-packing
	encTimesUvarint = 2 // times: gcd-scaled deltas as uvarints

	encEventsU8  = 1 // events: one byte per code
	encEventsU16 = 2 // events: two bytes (LE) per code
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
	case colTimes:
		s = "gcd-delta-uvarint"
		if enc == encTimesPFOR {
			s = "gcd-delta-pfor"
		}
	case colEvents:
		s = "u16"
		if enc == encEventsU8 {
			s = "u8"
		}
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
		return enc == encUsers
	case colTimes:
		return enc == encTimesPFOR || enc == encTimesUvarint
	case colEvents:
		return enc == encEventsU8 || enc == encEventsU16
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
	case colTimes:
		return 2*binary.MaxVarintLen64 + 1 + rows*binary.MaxVarintLen64
	case colEvents:
		return 2 * rows
	}
	return 8*((rows+63)/64) + binary.MaxVarintLen64 + 2 + rows*binary.MaxVarintLen64
}

// ---- encoders (writer side) ----

// encoder holds the writer's reusable scratch buffers.
type encoder struct {
	u64  []uint64
	f64  []float64
	bm   []uint64
	raw  []byte
	comp []byte
}

// encodeUsers appends the users chunk of users (rows of each user) to dst.
func encodeUsers(dst []byte, users []User, scratch []uint64) []byte {
	deltas := scratch[:0]
	var maxd uint64
	for i := 1; i < len(users); i++ {
		d := users[i].Hash - users[i-1].Hash
		deltas = append(deltas, d)
		maxd = max(maxd, d)
	}
	w := bitWidth(maxd)
	dst = append(dst, byte(w))
	dst = binary.LittleEndian.AppendUint64(dst, users[0].Hash)
	dst = appendPacked(dst, deltas, w)
	for i := range users {
		dst = binary.AppendUvarint(dst, uint64(users[i].Rows))
	}
	for i := range users {
		dst = binary.AppendUvarint(dst, uint64(len(users[i].ID)))
	}
	for i := range users {
		dst = append(dst, users[i].ID...)
	}
	return dst
}

// encodeTimes appends the times chunk of times (rows of one block, user u
// spanning times[starts[u]:starts[u+1]]) to dst and returns its encoding.
// vals is scratch of at least len(times).
func encodeTimes(dst []byte, times []int64, starts []int, vals []uint64) ([]byte, uint8) {
	vals = vals[:len(times)]
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
	var maxv uint64
	varLen := 0
	for r := range vals {
		vals[r] /= g
		maxv = max(maxv, vals[r])
		varLen += uvarintLen(vals[r])
	}
	dst = binary.AppendUvarint(dst, g)
	dst = binary.AppendVarint(dst, base)
	if w, size := pforWidth(vals); size <= varLen {
		return appendPFOR(dst, vals, w), encTimesPFOR
	}
	for _, v := range vals {
		dst = binary.AppendUvarint(dst, v)
	}
	return dst, encTimesUvarint
}

// pforWidth returns the bit width w that minimises the (estimated) size
// of vals in the patched frame-of-reference layout, and that size.
func pforWidth(vals []uint64) (w uint, size int) {
	var hist [65]int // hist[k]: values of bit width k
	for _, v := range vals {
		hist[bitWidth(v)]++
	}
	size = math.MaxInt
	for cw := uint(0); cw <= 64; cw++ {
		exc, excBytes := 0, 0
		for k := cw + 1; k <= 64; k++ {
			exc += hist[k]
			excBytes += hist[k] * int((k-cw+6)/7)
		}
		// Each exception also stores its index gap, about n/exc.
		est := 1 + packedLen(len(vals), cw) + uvarintLen(uint64(exc)) + excBytes + exc*uvarintLen(uint64(len(vals)/(exc+1)))
		if est < size {
			w, size = cw, est
		}
	}
	return w, size
}

// appendPFOR appends vals in the patched frame-of-reference layout of
// width w (after PFOR, Zukowski et al., "Super-Scalar RAM-CPU Cache
// Compression", ICDE 2006): the width byte, the low w bits of every value
// bit-packed, the exception count, then per exception (a value of more
// than w bits) its index gap (index - previous index - 1, the first from
// -1) and its high bits v>>w, as uvarints.
func appendPFOR(dst []byte, vals []uint64, w uint) []byte {
	dst = append(dst, byte(w))
	mask := uint64(1)<<w - 1
	exc := 0
	for _, v := range vals {
		if v&^mask != 0 {
			exc++
		}
	}
	dst = appendPacked(dst, vals, w)
	dst = binary.AppendUvarint(dst, uint64(exc))
	prev := -1
	for i, v := range vals {
		if v&^mask != 0 {
			dst = binary.AppendUvarint(dst, uint64(i-prev-1))
			dst = binary.AppendUvarint(dst, v>>w)
			prev = i
		}
	}
	return dst
}

// encodeEvents appends the events chunk of codes (already re-mapped to the
// written dictionary of nNames names) to dst and returns its encoding.
func encodeEvents(dst []byte, codes []uint32, remap []uint32, nNames int) ([]byte, uint8) {
	if nNames <= 256 {
		for _, c := range codes {
			dst = append(dst, byte(remap[c]))
		}
		return dst, encEventsU8
	}
	for _, c := range codes {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(remap[c]))
	}
	return dst, encEventsU16
}

// encodeProp appends the chunk of rows [lo, hi) of col to dst and returns
// its encoding. dm is the compacted dictionary of a string column.
func (e *encoder) encodeProp(dst []byte, col *PropColumn, dm *dictMap, lo, hi int) ([]byte, uint8) {
	rows := hi - lo
	words := (rows + 63) / 64
	e.bm = grow(e.bm, words)
	clear(e.bm)
	ints := e.u64[:0]
	floats := e.f64[:0]
	for r := lo; r < hi; r++ {
		if !present(col.Present, r) {
			continue
		}
		e.bm[(r-lo)>>6] |= 1 << (uint(r-lo) & 63)
		switch col.Type {
		case event.TypeFloat:
			floats = append(floats, col.Floats[r])
		case event.TypeString:
			ints = append(ints, uint64(dm.code[col.Strs[r]]))
		default:
			ints = append(ints, uint64(col.Ints[r]))
		}
	}
	e.u64, e.f64 = ints, floats
	m := len(ints) + len(floats)
	var pres uint8
	switch m {
	case 0:
		return dst, presNone
	case rows:
		pres = presAll
	default:
		pres = presBitmap
		for _, w := range e.bm {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
	}
	var val uint8
	switch col.Type {
	case event.TypeFloat:
		dst, val = e.encodeFloats(dst, floats)
	case event.TypeString:
		dst, val = appendFOR(dst, ints), valFOR
	default:
		dst, val = appendInts(dst, ints)
	}
	return dst, pres | val<<2
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

// decodeUsers decodes a users chunk of a block with rows rows and users
// users (first and last hash as declared by the footer) into b.
func decodeUsers(raw []byte, rows, users int, firstHash, lastHash uint64, b *Block) error {
	if len(raw) < 9 {
		return errShort
	}
	w := uint(raw[0])
	if w > 64 {
		return fmt.Errorf("hash delta width %d > 64", w)
	}
	p := 9
	plen := packedLen(users-1, w)
	if len(raw)-p < plen {
		return errShort
	}
	b.u64 = grow(b.u64, users)
	deltas := b.u64[:users-1]
	unpack(deltas, raw[p:p+plen], w)
	p += plen
	hashes := grow(b.UserHashes, users)
	h := binary.LittleEndian.Uint64(raw[1:9])
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

	vals := b.u64[:users]
	k := decodeUvarints(vals, raw[p:])
	if k < 0 {
		return errors.New("bad user row counts")
	}
	p += k
	starts := grow(b.UserStarts, users+1)
	starts[0] = 0
	total := 0
	for i, v := range vals {
		if v == 0 || v > uint64(rows-total) {
			return fmt.Errorf("user %d row count %d does not fit the block's %d rows", i, v, rows)
		}
		total += int(v)
		starts[i+1] = int32(total)
	}
	if total != rows {
		return fmt.Errorf("users hold %d rows, block has %d", total, rows)
	}
	b.UserStarts = starts

	k = decodeUvarints(vals, raw[p:])
	if k < 0 {
		return errors.New("bad user id lengths")
	}
	p += k
	offs := grow(b.UserIDOffsets, users+1)
	offs[0] = 0
	idBytes := 0
	for i, v := range vals {
		if v > event.MaxUserIDBytes {
			return fmt.Errorf("user %d id length %d > %d", i, v, event.MaxUserIDBytes)
		}
		idBytes += int(v)
		offs[i+1] = uint32(idBytes)
	}
	if idBytes != len(raw)-p {
		return fmt.Errorf("user ids take %d bytes, chunk has %d left", idBytes, len(raw)-p)
	}
	b.UserIDOffsets = offs
	b.UserIDBytes = append(b.UserIDBytes[:0], raw[p:]...)
	return nil
}

// decodeTimes decodes a times chunk into b.Times using b.UserStarts.
func decodeTimes(enc uint8, raw []byte, b *Block) error {
	g, n1 := binary.Uvarint(raw)
	if n1 <= 0 || g == 0 {
		return errors.New("bad time divisor")
	}
	base, n2 := binary.Varint(raw[n1:])
	if n2 <= 0 {
		return errors.New("bad time base")
	}
	p := n1 + n2
	rows := b.Rows
	b.u64 = grow(b.u64, rows)
	vals := b.u64[:rows]
	switch enc {
	case encTimesPFOR:
		k, err := decodePFOR(vals, raw[p:])
		if err != nil {
			return err
		}
		p += k
	case encTimesUvarint:
		k := decodeUvarints(vals, raw[p:])
		if k < 0 {
			return errors.New("bad time deltas")
		}
		p += k
	}
	if p != len(raw) {
		return fmt.Errorf("%d trailing bytes", len(raw)-p)
	}
	times := grow(b.Times, rows)
	starts := b.UserStarts
	for u := 0; u+1 < len(starts); u++ {
		vs := vals[starts[u]:starts[u+1]]
		ts := times[starts[u]:starts[u+1]]
		ts = ts[:len(vs)]
		t := base + int64(vs[0]*g)
		ts[0] = t
		for r := 1; r < len(vs); r++ {
			t += int64(vs[r] * g)
			ts[r] = t
		}
	}
	b.Times = times
	return nil
}

// decodePFOR decodes len(vals) values in the appendPFOR layout from src
// and returns the number of bytes read.
func decodePFOR(vals []uint64, src []byte) (int, error) {
	if len(src) == 0 || src[0] > 64 {
		return 0, errors.New("bad PFOR width")
	}
	w := uint(src[0])
	p := 1
	plen := packedLen(len(vals), w)
	if len(src)-p < plen {
		return 0, errShort
	}
	unpack(vals, src[p:p+plen], w)
	p += plen
	exc, n := binary.Uvarint(src[p:])
	if n <= 0 || exc > uint64(len(vals)) {
		return 0, errors.New("bad PFOR exception count")
	}
	p += n
	i := -1
	for range exc {
		gap, n1 := binary.Uvarint(src[p:])
		if n1 <= 0 {
			return 0, errors.New("bad PFOR exception index")
		}
		high, n2 := binary.Uvarint(src[p+n1:])
		if n2 <= 0 || gap >= uint64(len(vals)-i-1) || w == 64 || high>>(64-w) != 0 {
			return 0, errors.New("bad PFOR exception")
		}
		p += n1 + n2
		i += int(gap) + 1
		vals[i] |= high << w
	}
	return p, nil
}

// decodeEvents decodes an events chunk of codes into b.Events, checking
// every code against the nNames names of the segment.
func decodeEvents(enc uint8, raw []byte, nNames int, b *Block) error {
	rows := b.Rows
	ev := grow(b.Events, rows)
	b.Events = ev
	switch enc {
	case encEventsU8:
		if len(raw) != rows {
			return fmt.Errorf("%d bytes for %d one-byte codes", len(raw), rows)
		}
		raw = raw[:len(ev)]
		if nNames >= 256 {
			for i, c := range raw {
				ev[i] = uint16(c)
			}
			return nil
		}
		for i, c := range raw {
			if int(c) >= nNames {
				return fmt.Errorf("row %d event code %d ≥ %d names", i, c, nNames)
			}
			ev[i] = uint16(c)
		}
	case encEventsU16:
		if len(raw) != 2*rows {
			return fmt.Errorf("%d bytes for %d two-byte codes", len(raw), rows)
		}
		for i := range ev {
			c := binary.LittleEndian.Uint16(raw[2*i:])
			if int(c) >= nNames {
				return fmt.Errorf("row %d event code %d ≥ %d names", i, c, nNames)
			}
			ev[i] = c
		}
	}
	return nil
}

// decodeProp decodes a property chunk of a block of rows rows into pd: the
// presence bitmap and the value slice of typ, one entry per row (0 for
// absent rows). dictLen bounds string codes. scratch is reusable memory.
func decodeProp(enc uint8, raw []byte, typ event.Type, dictLen, rows int, pd *PropData, scratch *[]uint64) error {
	words := (rows + 63) / 64
	pm := grow(pd.Present, words)
	pd.Present = pm
	pd.Ints, pd.Floats, pd.Strs = pd.Ints[:0], pd.Floats[:0], pd.Strs[:0]
	switch typ {
	case event.TypeFloat:
		pd.Floats = grow(pd.Floats, rows)
		clear(pd.Floats)
	case event.TypeString:
		pd.Strs = grow(pd.Strs, rows)
		clear(pd.Strs)
	default:
		pd.Ints = grow(pd.Ints, rows)
		clear(pd.Ints)
	}
	var m, p int
	switch enc & 3 {
	case presNone:
		clear(pm)
		if len(raw) != 0 {
			return fmt.Errorf("%d bytes in an all-absent column", len(raw))
		}
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
	raw = raw[p:]
	val := enc >> 2
	if val == valPlain {
		if len(raw) != 8*m {
			return fmt.Errorf("%d bytes for %d floats", len(raw), m)
		}
		out := pd.Floats
		forPresent(pm, m == rows, m, func(j, r int) {
			out[r] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*j:]))
		})
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
		for i, v := range vals {
			vals[i] = v + uint64(lo)
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
		out, div := pd.Floats, pow10[scale]
		forPresent(pm, m == rows, m, func(j, r int) { out[r] = float64(int64(vals[j])) / div })
	case event.TypeString:
		for _, v := range vals {
			if v >= uint64(dictLen) {
				return fmt.Errorf("string code %d ≥ dictionary size %d", v, dictLen)
			}
		}
		out := pd.Strs
		forPresent(pm, m == rows, m, func(j, r int) { out[r] = uint32(vals[j]) })
	default:
		out := pd.Ints
		forPresent(pm, m == rows, m, func(j, r int) { out[r] = int64(vals[j]) })
	}
	return nil
}

// forPresent calls f(j, r) for the j-th present row r of bitmap pm, in row
// order; all says every one of the m rows is present.
func forPresent(pm []uint64, all bool, m int, f func(j, r int)) {
	if all {
		for r := range m {
			f(r, r)
		}
		return
	}
	j := 0
	for wi, w := range pm {
		for w != 0 {
			f(j, wi*64+bits.TrailingZeros64(w))
			j++
			w &= w - 1
		}
	}
}
