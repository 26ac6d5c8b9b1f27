// Package bin holds what the store's file formats share for reading
// bytes back: the corruption error every layer reports (segment files,
// catalogs, settings, documents, write-ahead logs) and Decoder, a reader
// of little-endian integers, varints and length-prefixed bytes whose
// first failure sticks, for headers, footers, catalogs and log records
// (not for per-value kernels, which check their bounds once per chunk).
//
// storage/segment, storage/wal and storage export ErrCorruption,
// ErrNewerVersion (ErrUnsupportedVersion) and CorruptionError as aliases
// of this package's, so errors.Is(err, segment.ErrCorruption) and
// errors.Is(err, storage.ErrCorruption) match the same errors.
package bin

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCorruption is matched (errors.Is) by every error that reports a
// checksum mismatch or a structurally invalid file of the store. Such
// errors are a *CorruptionError naming the file and the byte offset.
var ErrCorruption = errors.New("corruption")

// ErrNewerVersion is matched (errors.Is) by the error for a well-formed
// file whose format version is newer than this build reads. It does not
// match ErrCorruption: the file is presumably fine, the program is too
// old.
var ErrNewerVersion = errors.New("format version is newer than this build reads")

// CorruptionError reports where a file of the store is corrupt: Path
// names it, Offset is the byte offset of the damaged structure (a
// segment's header, chunk, footer field or trailer; a catalog field; a
// log record), Msg says what is wrong there. It matches ErrCorruption.
type CorruptionError struct {
	Path   string
	Offset int64
	Msg    string
}

// Error formats the error as "corruption in PATH at offset N: MSG".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corruption in %s at offset %d: %s", e.Path, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// Decoder reads fields from a byte slice with a sticky error: the first
// read that fails (past the end, a bad varint, a count or length out of
// range) or the first Fail records a *CorruptionError at the offset where
// it happened, and from then on every read returns a zero value, so that
// a caller checks Err once after a run of fields instead of after each.
// Varints must be in their shortest form (a longer one is corruption), so
// that every value accepted has one encoding.
//
// A Decoder borrows its bytes: the slices Bytes and Raw return alias
// them. It is not safe for concurrent use.
type Decoder struct {
	// Path is the file named by the errors (CorruptionError.Path); ""
	// lets the caller fill it in later.
	Path string
	// Prefix starts every error message ("footer: ").
	Prefix string

	buf  []byte
	pos  int
	base int64 // file offset of buf[0]
	err  *CorruptionError
}

// NewDecoder returns a Decoder over b, whose first byte is at file offset
// base (error offsets are file offsets).
func NewDecoder(b []byte, base int64) Decoder { return Decoder{buf: b, base: base} }

// Err returns the first failure, or nil.
func (d *Decoder) Err() *CorruptionError { return d.err }

// Pos returns the position of the next read in the decoder's bytes.
func (d *Decoder) Pos() int { return d.pos }

// SetPos moves the next read to position p of the decoder's bytes
// (0 ≤ p ≤ len); it does not clear a failure.
func (d *Decoder) SetPos(p int) { d.pos = p }

// Left returns the number of bytes not yet read.
func (d *Decoder) Left() int { return len(d.buf) - d.pos }

// Buf returns all of the decoder's bytes (borrowed).
func (d *Decoder) Buf() []byte { return d.buf }

// Fail records a failure at the current position, unless one is already
// recorded: Msg is Prefix and the formatted message.
func (d *Decoder) Fail(format string, args ...any) { d.FailAt(d.pos, format, args...) }

// FailAt records a failure at position p of the decoder's bytes (the
// start of the field at fault), unless one is already recorded.
func (d *Decoder) FailAt(p int, format string, args ...any) {
	if d.err == nil {
		d.err = &CorruptionError{Path: d.Path, Offset: d.base + int64(p), Msg: d.Prefix + fmt.Sprintf(format, args...)}
	}
}

// take returns the next n bytes (0 ≤ n ≤ 8), or n zero bytes after a
// failure.
func (d *Decoder) take(n int) []byte {
	if d.err != nil || d.Left() < n {
		d.Fail("ends early")
		return zeros[:n]
	}
	d.pos += n
	return d.buf[d.pos-n : d.pos]
}

// zeros are what take returns after a failure.
var zeros [8]byte

// U8 reads a byte.
func (d *Decoder) U8() uint8 { return d.take(1)[0] }

// U16 reads a little-endian uint16.
func (d *Decoder) U16() uint16 { return binary.LittleEndian.Uint16(d.take(2)) }

// U32 reads a little-endian uint32.
func (d *Decoder) U32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }

// U64 reads a little-endian uint64.
func (d *Decoder) U64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }

// Raw reads the next n bytes (borrowed); nil after a failure.
func (d *Decoder) Raw(n int) []byte {
	if d.err != nil || n < 0 || d.Left() < n {
		d.Fail("ends early")
		return nil
	}
	d.pos += n
	return d.buf[d.pos-n : d.pos]
}

// Uvarint reads a uvarint in its shortest form: a longer one (a last byte
// of 0) is corruption too.
func (d *Decoder) Uvarint() uint64 { return d.uvarint("uvarint") }

// Varint reads a varint (a zigzag-encoded uvarint, as binary.Varint) in
// its shortest form.
func (d *Decoder) Varint() int64 {
	u := d.uvarint("varint")
	return int64(u>>1) ^ -int64(u&1)
}

// uvarint reads a uvarint in its shortest form, failing with "bad " and
// kind.
func (d *Decoder) uvarint(kind string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.pos:])
	if n <= 0 || n > 1 && d.buf[d.pos+n-1] == 0 {
		d.Fail("bad %s", kind)
		return 0
	}
	d.pos += n
	return v
}

// Count reads a uvarint count of what, failing if it exceeds limit or if
// the bytes left cannot hold that many elements of at least elemBytes
// bytes each (elemBytes ≥ 1), so that no count read from corrupt bytes
// can make the caller allocate much more than their size. It returns 0
// on failure.
func (d *Decoder) Count(what string, elemBytes, limit int) int {
	v := d.Uvarint()
	if d.err == nil && (v > uint64(limit) || v > uint64(d.Left()/elemBytes)) {
		d.Fail("%s %d exceeds the limit %d or the %d bytes left", what, v, limit, d.Left())
	}
	if d.err != nil {
		return 0
	}
	return int(v)
}

// Bytes reads a uvarint length and that many bytes of what (borrowed).
func (d *Decoder) Bytes(what string) []byte {
	n := d.Uvarint()
	if d.err == nil && n > uint64(d.Left()) {
		d.Fail("%s length %d exceeds the %d bytes left", what, n, d.Left())
	}
	if d.err != nil {
		return nil
	}
	d.pos += int(n)
	return d.buf[d.pos-int(n) : d.pos]
}

// String reads a length-prefixed string of what (a copy).
func (d *Decoder) String(what string) string {
	b := d.Bytes(what)
	if d.err != nil {
		return ""
	}
	return string(b)
}
