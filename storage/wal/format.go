package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/spurdb/spur/internal/bin"
)

// FormatVersion is the version of the file format this build writes and
// the newest it reads.
const FormatVersion = 1

// MaxRecordSizeLimit is the largest payload, in bytes, the format allows
// (and the largest Options.MaxRecordSize).
const MaxRecordSizeLimit = 1 << 30

const (
	magic            = "SPURWAL"
	gapMagic         = "SPURGAP" // a gap file's (see the package doc)
	fileHeaderSize   = 20
	gapFileSize      = 28
	recordHeaderSize = 24
	fileSuffix       = ".wal"
	nameDigits       = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruption is matched (errors.Is) by every *CorruptionError. It is the
// store's sentinel for damaged data (bin.ErrCorruption, the same value as
// storage.ErrCorruption and segment.ErrCorruption), so one check covers
// the log too.
var ErrCorruption = bin.ErrCorruption

// ErrUnsupportedVersion is matched (errors.Is) by the error for a log file
// whose header, with a valid checksum, names a format version newer than
// FormatVersion. It does not match ErrCorruption. It is the store's
// sentinel (bin.ErrNewerVersion: storage.ErrUnsupportedVersion,
// segment.ErrNewerVersion).
var ErrUnsupportedVersion = bin.ErrNewerVersion

// CorruptionError reports damage in a log file that is not a torn tail
// (bin.CorruptionError, the store's one corruption error, also
// segment.CorruptionError): Path names the file, Offset the byte where the
// damaged header or record starts, Msg what is wrong there. It matches
// ErrCorruption.
type CorruptionError = bin.CorruptionError

// fileName is the name of the file whose first record has seq first.
func fileName(first uint64) string {
	s := strconv.FormatUint(first, 10)
	return strings.Repeat("0", nameDigits-len(s)) + s + fileSuffix
}

// parseName returns the first seq a log file name carries, or false if
// name is not a log file's name.
func parseName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, fileSuffix)
	if !ok || len(digits) != nameDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	first, err := strconv.ParseUint(digits, 10, 64)
	return first, err == nil && first > 0
}

// appendFileHeader appends the header of a file whose first record has
// seq first.
func appendFileHeader(b []byte, first uint64) []byte {
	at := len(b)
	b = append(b, magic...)
	b = append(b, FormatVersion)
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[at:], castagnoli))
}

// headerDamage says why h (the first bytes of a file, up to
// fileHeaderSize) is not the valid header of a file named for seq first:
// "" if it is; torn reports damage a crash can cause (a short, zeroed or
// checksum-failing header). A valid header of a newer version is an
// ErrUnsupportedVersion error.
func headerDamage(h []byte, first uint64) (why string, torn bool, err error) {
	if len(h) < fileHeaderSize {
		return fmt.Sprintf("incomplete file header (%d of %d bytes)", len(h), fileHeaderSize), true, nil
	}
	d := bin.NewDecoder(h, 0) // the fields: magic, version, first seq, CRC
	mg, v, got := d.Raw(len(magic)), d.U8(), d.U64()
	sum := d.Pos()
	stored := d.U32()
	if string(mg) != magic {
		return fmt.Sprintf("not a write-ahead-log file header (magic %q, want %q)", mg, magic), true, nil
	}
	if computed := crc32.Checksum(h[:sum], castagnoli); stored != computed {
		return fmt.Sprintf("file header checksum mismatch: stored %08x, computed %08x", stored, computed), true, nil
	}
	if v != FormatVersion {
		if v > FormatVersion {
			return "", false, fmt.Errorf("format version %d: %w (this build reads up to version %d)", v, ErrUnsupportedVersion, FormatVersion)
		}
		return fmt.Sprintf("format version %d", v), false, nil
	}
	if got != first {
		return fmt.Sprintf("the header's first seq is %d, the file name's %d", got, first), false, nil
	}
	return "", false, nil
}

// appendGapFile appends the bytes of a gap file declaring the seqs
// [first, end) lost.
func appendGapFile(b []byte, first, end uint64) []byte {
	at := len(b)
	b = append(b, gapMagic...)
	b = append(b, FormatVersion)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint64(b, end)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[at:], castagnoli))
}

// isGapFile reports whether b, a file's first bytes, starts as a gap file.
func isGapFile(b []byte) bool {
	return len(b) >= len(gapMagic) && string(b[:len(gapMagic)]) == gapMagic
}

// gapDamage says why b, the first bytes (up to gapFileSize) of a file of
// size bytes named for seq first, is not a valid gap file for the seqs
// [first, next), where next is the next file's first seq (0: it is the
// last file, which a gap file never is): "" if it is. A valid gap file of
// a newer version is an ErrUnsupportedVersion error.
func gapDamage(b []byte, size int64, first, next uint64) (string, error) {
	if size != gapFileSize || len(b) != gapFileSize {
		return fmt.Sprintf("a gap file of %d bytes, want %d", size, gapFileSize), nil
	}
	d := bin.NewDecoder(b, 0) // the fields: magic, version, first seq, end seq, CRC
	d.Raw(len(gapMagic))
	v, from, end := d.U8(), d.U64(), d.U64()
	sum := d.Pos()
	if stored, computed := d.U32(), crc32.Checksum(b[:sum], castagnoli); stored != computed {
		return fmt.Sprintf("gap file checksum mismatch: stored %08x, computed %08x", stored, computed), nil
	}
	if v != FormatVersion {
		if v > FormatVersion {
			return "", fmt.Errorf("gap file format version %d: %w (this build reads up to version %d)", v, ErrUnsupportedVersion, FormatVersion)
		}
		return fmt.Sprintf("gap file format version %d", v), nil
	}
	switch {
	case from != first:
		return fmt.Sprintf("the gap file's first seq is %d, the file name's %d", from, first), nil
	case end <= first:
		return fmt.Sprintf("a gap file for seqs %d up to %d", first, end), nil
	case next == 0:
		return fmt.Sprintf("a gap file (seqs %d..%d lost) is the log's last file: the file for seqs from %d is missing", first, end-1, end), nil
	case end != next:
		return fmt.Sprintf("a gap file for seqs %d..%d, but the next file starts at seq %d", first, end-1, next), nil
	}
	return "", nil
}

// recordHeader is a record's fixed fields.
type recordHeader struct {
	n     uint32 // payload length in bytes
	crc   uint32 // stored checksum
	seq   uint64
	index uint32 // index in the commit group
	rest  uint32 // records after this one in its batch
}

// parseRecordHeader decodes the first recordHeaderSize bytes of b.
func parseRecordHeader(b []byte) recordHeader {
	_ = b[recordHeaderSize-1]
	return recordHeader{
		n:     binary.LittleEndian.Uint32(b[0:4]),
		crc:   binary.LittleEndian.Uint32(b[4:8]),
		seq:   binary.LittleEndian.Uint64(b[8:16]),
		index: binary.LittleEndian.Uint32(b[16:20]),
		rest:  binary.LittleEndian.Uint32(b[20:24]),
	}
}

// recordCRC is the checksum of a record with header bytes hdr (its first
// recordHeaderSize bytes; the CRC field itself is skipped) and payload.
func recordCRC(hdr, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[0:4])
	c = crc32.Update(c, castagnoli, hdr[8:recordHeaderSize])
	return crc32.Update(c, castagnoli, payload)
}

// putRecordHeader fills hdr (recordHeaderSize bytes) for payload with the
// given seq, group index and batch rest, checksum included.
func putRecordHeader(hdr *[recordHeaderSize]byte, payload []byte, seq uint64, index, rest uint32) {
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(hdr[8:16], seq)
	binary.LittleEndian.PutUint32(hdr[16:20], index)
	binary.LittleEndian.PutUint32(hdr[20:24], rest)
	binary.LittleEndian.PutUint32(hdr[4:8], recordCRC(hdr[:], payload))
}
