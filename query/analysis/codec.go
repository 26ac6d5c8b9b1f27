package analysis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/spurdb/spur/internal/bin"
	"hash/fnv"
	"math"
	"slices"
)

// Portable partial states. Every accumulator can write its mergeable
// state with AppendBinary and read it back with its Decode function, so
// that per-shard states can travel between processes and be merged there
// (docs/analytics.md §8). The layout of every kind is
//
//	version   1 byte (stateVersion; another version is refused)
//	kind      1 byte (stateKind)
//	spec      8 bytes little endian: the spec's fingerprint (SpecFingerprint)
//	body      the kind's state, made of the primitives below
//
// Integers are (zig-zag) varints, floats 8 bytes little endian, byte
// strings a uvarint length then the bytes, keys as encodeKey writes them.
// Decoders are strict: a length is bounded by the input left before
// anything is allocated, the memory a state's groups take once decoded
// by a multiple of its size (decoder.grow), counts by 2^53, and truncated, trailing, out-of-range or
// inconsistent input is an error, never a panic.

// stateVersion is the version of the encoding of every kind's state.
const stateVersion = 1

// stateKind names the kind of an encoded state.
type stateKind uint8

// Kinds of encoded states.
const (
	kindTrend stateKind = 1 + iota
	kindFunnel
	kindRetention
	kindStickiness
	kindLifecycle
	kindPaths
	kindAttribution
	kindUserList
	kindCohort
)

// KeyDict makes breakdown keys portable. A key of a string property holds
// a query-local dictionary id in Bits, which means nothing in another
// query; an encoder writes the key's string instead (KeyString) and a
// decoder maps the string into the receiving query's dictionary
// (StringKey). A nil KeyDict sends every key as its bits (numbers, bools,
// times, unset keys, and states that stay in one process).
type KeyDict interface {
	// KeyString returns the string k stands for and true when k is a
	// string value of the dictionary; false when k travels as its bits.
	KeyString(k Key) (string, bool)
	// StringKey returns the key of string s in the receiving query, or an
	// error when s cannot be mapped.
	StringKey(s string) (Key, error)
}

// ErrState is wrapped by every decode and merge error about a partial
// state that does not fit: another spec, version or kind, a damaged or
// foreign encoding.
var ErrState = errors.New("analysis: partial state")

// encoder appends the primitives of an encoding to b, string keys named
// by dict (nil: keys as their bits).
type encoder struct {
	b    []byte
	dict KeyDict
}

func (e *encoder) u8(v uint8)       { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) f64(v float64)    { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *encoder) u64(v uint64)     { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *encoder) bytes(p []byte) {
	e.uvarint(uint64(len(p)))
	e.b = append(e.b, p...)
}

// Key tags.
const (
	keyUnset  = 0 // unset, then its bits (the "(other)" key is unset with bits)
	keyBits   = 1 // set, then its bits
	keyString = 2 // set, then the string of e.dict
)

// key writes k: its tag, then its bits or its string.
func (e *encoder) key(k Key) {
	switch {
	case !k.Set:
		e.u8(keyUnset)
		e.uvarint(k.Bits)
	default:
		if e.dict != nil {
			if s, ok := e.dict.KeyString(k); ok {
				e.u8(keyString)
				e.bytes([]byte(s))
				return
			}
		}
		e.u8(keyBits)
		e.uvarint(k.Bits)
	}
}

// counts writes a list of non-negative counts (countsInto reads it).
func (e *encoder) counts(v []int64) {
	e.uvarint(uint64(len(v)))
	for _, x := range v {
		e.uvarint(uint64(x))
	}
}

func (e *encoder) int64s(v []int64) {
	e.uvarint(uint64(len(v)))
	for _, x := range v {
		e.varint(x)
	}
}

func (e *encoder) f64s(v []float64) {
	e.uvarint(uint64(len(v)))
	for _, x := range v {
		e.f64(x)
	}
}

// source writes where a key comes from (not its Dict).
func (e *encoder) source(s KeySource) {
	e.u8(uint8(s.From))
	e.varint(int64(s.Index))
}

// sameSource reports whether a and b read the same keys (their Dicts
// aside).
func sameSource(a, b KeySource) bool { return a.From == b.From && a.Index == b.Index }

// header writes the version, kind and spec fingerprint.
func (e *encoder) header(k stateKind, fp uint64) {
	e.u8(stateVersion)
	e.u8(uint8(k))
	e.u64(fp)
}

// decoder reads the primitives of an encoding with internal/bin's sticky
// Decoder (shortest-form varints, bounds checked). The first error
// sticks in err, wrapping ErrState (a foreign state is refused, not store
// corruption): later reads return zero values.
type decoder struct {
	bd   bin.Decoder
	err  error
	dict KeyDict
	what string // kind, for messages
	in   int    // length of the whole input, for grow
}

// newDecoder returns a decoder of b, a state of kind what.
func newDecoder(b []byte, dict KeyDict, what string) decoder {
	return decoder{bd: bin.NewDecoder(b, 0), dict: dict, what: what, in: len(b)}
}

// sync takes over bd's failure, if any, as the decoder's error.
func (d *decoder) sync() {
	if d.err == nil {
		if e := d.bd.Err(); e != nil {
			d.err = fmt.Errorf("%w: %s: %s at byte %d", ErrState, d.what, e.Msg, e.Offset)
		}
	}
}

// Decoding may allocate at most decodeGrowth bytes per byte of input,
// plus decodeSlack: a state whose elements (groups, slots) would take
// more memory than that once decoded is refused before they are
// allocated. An element's minimal encoding can be far smaller than the
// state it decodes into (a 2-step funnel group: 11 bytes for 1.2 KiB),
// so a length bounded by the input alone does not bound memory.
const (
	decodeGrowth = 64
	decodeSlack  = 1 << 20
)

// slotEntryBytes is the memory a key takes in a slotTable: 20 bytes an
// entry at a load of a quarter to a half.
const slotEntryBytes = 80

// grow reads the length of a list whose elements take at least min
// bytes of input and cost bytes of memory each once decoded, and refuses
// one whose elements would take more than the input allows
// (decodeGrowth, decodeSlack) besides the used bytes already held.
func (d *decoder) grow(min int, cost, used int64) int {
	n := d.length(min)
	if d.err != nil {
		return 0
	}
	if limit := int64(d.in)*decodeGrowth + decodeSlack; int64(n) > (limit-used)/cost {
		d.fail("%d elements of %d bytes each exceed the %d bytes a state of %d bytes may take", n, cost, limit, d.in)
		return 0
	}
	return n
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrState, d.what, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) u8() uint8 {
	v := d.bd.U8()
	d.sync()
	return v
}

func (d *decoder) u64() uint64 {
	v := d.bd.U64()
	d.sync()
	return v
}

func (d *decoder) uvarint() uint64 {
	v := d.bd.Uvarint()
	d.sync()
	return v
}

func (d *decoder) varint() int64 {
	v := d.bd.Varint()
	d.sync()
	return v
}

// maxCount bounds every decoded count (users, events, values): below
// 2^53 a count is exact as a float64, and adding up to 1024 counts that
// were each decoded cannot overflow an int64 in Merge.
const maxCount = 1<<53 - 1

// count reads a count in [0, maxCount].
func (d *decoder) count() int64 { return d.bounded(maxCount, "count") }

// maxTotal bounds a decoded total of durations in µs (146,000 years):
// merging two cannot overflow an int64.
const maxTotal = 1<<62 - 1

// bounded reads a uvarint in [0, max], what it is for messages.
func (d *decoder) bounded(max uint64, what string) int64 {
	v := d.uvarint()
	if v > max {
		d.fail("%s %d out of range", what, v)
		return 0
	}
	return int64(v)
}

// f64 reads a float64; NaN (which Spur never stores) is an error.
func (d *decoder) f64() float64 {
	v := math.Float64frombits(d.u64())
	if v != v {
		d.fail("NaN value")
		return 0
	}
	return v
}

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

// length reads the length of a list whose elements take at least min
// bytes each and refuses one longer than the input left can hold, so that
// no length field makes the decoder allocate more than its input.
func (d *decoder) length(min int) int {
	if d.err != nil {
		return 0
	}
	n := d.bd.Count("length", min, math.MaxInt)
	d.sync()
	return n
}

// exact reads a length that must be n.
func (d *decoder) exact(n int, of string) {
	if v := d.uvarint(); d.err == nil && v != uint64(n) {
		d.fail("%d %s, want %d", v, of, n)
	}
}

func (d *decoder) bytes() []byte {
	if d.err != nil {
		return nil
	}
	p := d.bd.Bytes("bytes")
	d.sync()
	return p[:len(p):len(p)]
}

// key reads a key, mapping a string into d.dict.
func (d *decoder) key() Key {
	switch d.u8() {
	case keyUnset:
		return Key{Bits: d.uvarint()}
	case keyBits:
		return Key{Bits: d.uvarint(), Set: true}
	case keyString:
		s := d.bytes()
		if d.err != nil {
			return Key{}
		}
		if d.dict == nil {
			d.fail("string key %q without a dictionary", s)
			return Key{}
		}
		k, err := d.dict.StringKey(string(s))
		if err != nil {
			d.fail("key %q: %v", s, err)
			return Key{}
		}
		return k
	}
	d.fail("bad key tag")
	return Key{}
}

// countsInto reads a list of len(dst) counts into dst.
func (d *decoder) countsInto(dst []int64) {
	d.exact(len(dst), "counts")
	for i := range dst {
		dst[i] = d.count()
	}
}

// f64s reads a list of floats, appended to dst.
func (d *decoder) f64s(dst []float64) []float64 {
	n := d.length(8)
	if d.err != nil || n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	for range n {
		dst = append(dst, d.f64())
	}
	return dst
}

// header reads and checks the version, kind and spec fingerprint.
func (d *decoder) header(k stateKind, fp uint64) {
	if v := d.u8(); d.err == nil && v != stateVersion {
		d.fail("version %d, want %d", v, stateVersion)
		return
	}
	if v := d.u8(); d.err == nil && v != uint8(k) {
		d.fail("kind %d, want %d", v, k)
		return
	}
	if v := d.u64(); d.err == nil && v != fp {
		d.fail("spec fingerprint %#x, want %#x (a state of another query)", v, fp)
	}
}

// end reports the sticky error, or an error when input is left over.
func (d *decoder) end() error {
	if d.err == nil && d.bd.Left() > 0 {
		d.fail("%d trailing bytes", d.bd.Left())
	}
	return d.err
}

// fingerprint hashes the canonical encoding of a spec that write makes
// (FNV-1a, 64 bits), with string keys as their strings when dict names
// them.
func fingerprint(dict KeyDict, write func(e *encoder)) uint64 {
	e := encoder{dict: dict}
	write(&e)
	h := fnv.New64a()
	h.Write(e.b)
	return h.Sum64()
}

// sum writes s after normalising it in place (its value is kept).
func (e *encoder) sum(s *ExactSum) {
	s.normalize()
	e.bool(s.posInf)
	e.bool(s.negInf)
	e.varint(int64(s.base))
	e.uvarint(uint64(len(s.d)))
	for _, v := range s.d {
		e.varint(v)
	}
}

// exactMaxDigits bounds the digit window of an ExactSum: magnitudes up to
// 2^(1074+1024+64) need 68 digits, a few more leave room for carries.
const exactMaxDigits = 80

// sum reads a normalised ExactSum into s (which must be empty).
func (d *decoder) sum(s *ExactSum) {
	s.posInf, s.negInf = d.bool(), d.bool()
	base := d.varint()
	n := d.length(1)
	if d.err != nil {
		return
	}
	if n == 0 {
		if base != 0 {
			d.fail("empty sum with base %d", base)
		}
		return
	}
	if base < 0 || base+int64(n) > exactMaxDigits {
		d.fail("sum digits [%d, %d) out of range", base, base+int64(n))
		return
	}
	s.base = int32(base)
	s.d = make([]int64, n)
	for i := range s.d {
		v := d.varint()
		if i < n-1 && (v < 0 || v >= 1<<32) || i == n-1 && (v > 1<<40 || v < -1<<40) {
			d.fail("sum digit %d not normalised", i)
			return
		}
		s.d[i] = v
	}
}

// once records that state slot i (of n slots so far) has been read and
// fails, returning false, when key k's slot was read before.
func (d *decoder) once(seen *[]bool, i, n int, k Key) bool {
	*seen = append(*seen, make([]bool, n-len(*seen))...)
	if (*seen)[i] {
		d.fail("key %+v twice", k)
		return false
	}
	(*seen)[i] = true
	return true
}

// appendState appends to dst the header of a state of kind k whose spec
// has fingerprint fp, then what body writes, with keys named by dict.
func appendState(dst []byte, dict KeyDict, k stateKind, fp uint64, body func(e *encoder)) ([]byte, error) {
	e := encoder{b: dst, dict: dict}
	e.header(k, fp)
	body(&e)
	return e.b, nil
}

// decodeState reads b, a state of kind k, into acc, a new accumulator
// made from the receiving spec (err: its constructor's error): the
// header, then what body reads, with keys mapped into dict. It returns
// acc, or the first error.
func decodeState[A interface{ SpecFingerprint() uint64 }](acc A, err error, b []byte, dict KeyDict, k stateKind, what string, body func(d *decoder)) (A, error) {
	var zero A
	if err != nil {
		return zero, err
	}
	d := newDecoder(b, dict, what)
	d.header(k, acc.SpecFingerprint())
	body(&d)
	if err := d.end(); err != nil {
		return zero, err
	}
	return acc, nil
}
