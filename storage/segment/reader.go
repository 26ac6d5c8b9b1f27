package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"

	"github.com/spurdb/spur/event"
)

// Version is the segment format version this package writes, and the
// newest it reads. Version 2 adds the times encoding 3 (PFOR with an
// exception bitmap), version 3 the users encoding 2 (hashes recomputed
// from the ids, not stored), version 4 the footer's identity and
// creation time, continued users across blocks, dictionaries in the
// writer's first-use order and event codes of up to 32 bits; older files
// are read as before.
const Version = 4

// File framing (see doc.go).
const (
	headerMagic  = "SPURSEG"             // bytes 1..7, after the version byte
	trailerMagic = "SPUR-END"            // the last 8 bytes
	headerSize   = 8                     // version byte + headerMagic
	trailerSize  = 8 + 8 + 4 + 4 + 1 + 8 // see doc.go
)

// Reader reads one segment file. NewReader (or Open) validates the
// framing and decodes the footer; ReadBlock reads blocks with pread into
// the caller's Block. A Reader is safe for concurrent ReadBlock calls
// with distinct Blocks; Close must not run concurrently with other calls.
type Reader struct {
	name    string
	ra      io.ReaderAt
	closer  io.Closer // the file Open opened; nil after NewReader
	size    int64
	meta    *Meta
	layouts []blockLayout
	footer  int64 // footer offset, to detect a changed file in Verify
}

// NewReader reads the segment of size bytes that ra holds (a file of the
// store's filesystem seam, or any io.ReaderAt): it checks its header,
// trailer and footer checksum and decodes the footer. name names the
// segment in errors (Path). It returns a *CorruptionError (errors.Is
// ErrCorruption) for any structural problem, an error matching
// ErrNewerVersion for a file of a newer format version, or the wrapped
// read error. The Reader reads ra until the caller stops using it; it
// does not close ra (Close does nothing to it).
func NewReader(ra io.ReaderAt, size int64, name string) (*Reader, error) {
	r := &Reader{name: name, ra: ra, size: size}
	var err error
	if r.meta, r.layouts, r.footer, err = r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// Open opens the segment file at path with NewReader (name path). It
// returns NewReader's errors, or the wrapped os error when the file
// cannot be opened. The Reader holds the file open until Close.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open segment: %w", err)
	}
	r, err := NewReader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// load reads and checks header, trailer and footer of r.ra (r.size bytes).
func (r *Reader) load() (*Meta, []blockLayout, int64, error) {
	if r.size < headerSize+trailerSize {
		return nil, nil, 0, r.corrupt(corruptf(0, "file is %d bytes, smaller than header and trailer (%d)", r.size, headerSize+trailerSize))
	}
	var hdr [headerSize]byte
	var tr [trailerSize]byte
	trOff := r.size - trailerSize
	if err := r.readAt(hdr[:], 0); err != nil {
		return nil, nil, 0, err
	}
	if err := r.readAt(tr[:], trOff); err != nil {
		return nil, nil, 0, err
	}
	switch hv, tv := hdr[0], tr[24]; {
	case string(hdr[1:]) != headerMagic:
		return nil, nil, 0, r.corrupt(corruptf(1, "bad header magic %q", hdr[1:]))
	case string(tr[25:]) != trailerMagic:
		return nil, nil, 0, r.corrupt(corruptf(trOff+25, "bad trailer magic %q", tr[25:]))
	case hv != tv:
		return nil, nil, 0, r.corrupt(corruptf(0, "header version %d disagrees with trailer version %d", hv, tv))
	case hv > Version:
		return nil, nil, 0, fmt.Errorf("open segment %s: format version %d: %w (this build reads up to version %d)", r.name, hv, ErrNewerVersion, Version)
	case hv == 0:
		return nil, nil, 0, r.corrupt(corruptf(0, "invalid format version 0"))
	}
	if got, want := crc(tr[:20]), binary.LittleEndian.Uint32(tr[20:]); got != want {
		return nil, nil, 0, r.corrupt(corruptf(trOff, "trailer checksum mismatch (stored %#08x, computed %#08x)", want, got))
	}
	footOff := binary.LittleEndian.Uint64(tr[0:])
	footLen := binary.LittleEndian.Uint64(tr[8:])
	if footOff < headerSize || footOff > uint64(trOff) || footLen != uint64(trOff)-footOff {
		return nil, nil, 0, r.corrupt(corruptf(trOff, "footer offset %d and length %d do not end at the trailer (%d)", footOff, footLen, trOff))
	}
	footer := make([]byte, footLen) // ≤ file size
	if err := r.readAt(footer, int64(footOff)); err != nil {
		return nil, nil, 0, err
	}
	if got, want := crc(footer), binary.LittleEndian.Uint32(tr[16:]); got != want {
		return nil, nil, 0, r.corrupt(corruptf(int64(footOff), "footer checksum mismatch (stored %#08x, computed %#08x)", want, got))
	}
	m, layouts, cerr := decodeFooter(footer, int64(footOff), hdr[0])
	if cerr != nil {
		return nil, nil, 0, r.corrupt(cerr)
	}
	for i, l := range layouts {
		if c := l.chunks[colTimes]; m.Version < 2 && c.enc == encTimesPFORBits {
			return nil, nil, 0, r.corrupt(corruptf(c.off, "block %d: times encoding %d in a version %d file", i, c.enc, m.Version))
		}
		if c := l.chunks[colUsers]; c.enc == encUsersIDs && (m.Version < 3 || c.comp != compNone) {
			// Its keys section is compressed inside, never the chunk.
			return nil, nil, 0, r.corrupt(corruptf(c.off, "block %d: users encoding %d in a version %d file or compressed (%d)", i, c.enc, m.Version, c.comp))
		}
	}
	return m, layouts, int64(footOff), nil
}

// readAt fills b from file offset off; a short read (the file shrank) is
// corruption.
func (r *Reader) readAt(b []byte, off int64) error {
	n, err := r.ra.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return r.corrupt(corruptf(off+int64(n), "file ends early (%d of %d bytes readable)", n, len(b)))
	}
	return fmt.Errorf("read segment %s at offset %d: %w", r.name, off, err)
}

// corrupt names r's file in e.
func (r *Reader) corrupt(e *CorruptionError) error {
	e.Path = r.name
	return e
}

// Close closes the file Open opened (a Reader of NewReader has none).
// The Reader must not be used afterwards.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Path returns the name given to NewReader (the path given to Open).
func (r *Reader) Path() string { return r.name }

// Size returns the file size in bytes.
func (r *Reader) Size() int64 { return r.size }

// Meta returns the decoded footer. It is owned by the Reader and shared by
// all callers: read-only.
func (r *Reader) Meta() *Meta { return r.meta }

// PropData is one decoded property column of a block.
//
// Present is a bitmap of (Rows+63)/64 words (bit r%64 of word r/64 set =
// row r has a value; bits beyond Rows are 0). Exactly one value slice is
// non-empty, by the property's type: Ints (TypeInt, TypeBool as 0/1,
// TypeTime in UTC microseconds), Floats, or Strs (codes into
// PropMeta.Dict). The value of present row r is at index Index(r) of it.
// After ReadBlock the slice has Rows entries and Index(r) = r; the values
// of absent rows are unspecified (not zeroed), so test Present before
// reading one. After ReadBlockPacked a column with absent rows may be
// compact instead: one entry per present row, in row order, and Ranks
// (one entry per Present word: the present rows before it) non-empty.
type PropData struct {
	Present []uint64
	Ints    []int64
	Floats  []float64
	Strs    []uint32
	Ranks   []int32
}

// Index returns the index in pd's value slice of present row r.
func (pd *PropData) Index(r int) int {
	if len(pd.Ranks) == 0 {
		return r
	}
	w := r >> 6
	return int(pd.Ranks[w]) + bits.OnesCount64(pd.Present[w]&(1<<(uint(r)&63)-1))
}

// Block is a decoded block. ReadBlock fills it; all slices are owned by the
// Block and reused by the next ReadBlock into it, so they are borrowed:
// valid until then, and callers that keep data copy it.
//
// Rows is the number of rows. User i (of len(UserStarts)-1) has rows
// [UserStarts[i], UserStarts[i+1]), hash UserHashes[i] and id UserID(i);
// UserHashes has one entry per user and UserIDOffsets one more, except
// after ReadBlockRows (and reads with KeysNone), which leaves both (and
// UserIDBytes) empty, and after reads with KeysIDs, which may leave
// UserHashes empty (see KeysIDs). Events (codes into Meta.EventNames) has
// Rows entries; so has Times (UTC microseconds) after ReadBlock, while the
// other reads leave it empty (see Deltas). Props[j] is the property
// Meta.Props[props[j]] of the ReadBlock call.
// BytesRead is the number of stored (on-disk) bytes the call read.
type Block struct {
	Rows          int
	UserHashes    []uint64
	UserIDBytes   []byte
	UserIDOffsets []uint32
	UserStarts    []int32
	Times         []int64
	Events        []uint32
	// Deltas, TimeBase and TimeGCD replace Times after ReadBlockDeltas:
	// row r's time (UTC microseconds) is TimeBase + TimeGCD·Deltas[r] when
	// r is its user's first row, else the previous row's time +
	// TimeGCD·Deltas[r] (wrapping int64 arithmetic). Deltas has Rows
	// entries; after ReadBlock it is empty, and after ReadBlockPacked it
	// may be empty too, the deltas then being read by SumDeltas.
	Deltas    []uint64
	TimeBase  int64
	TimeGCD   uint64
	Props     []PropData
	BytesRead int64

	buf  []byte   // stored bytes of the users, times and events chunks
	pbuf []byte   // stored bytes of a property chunk
	raw  []byte   // decompressed chunk bytes
	traw []byte   // decompressed times chunk bytes
	u64  []uint64 // unpacking scratch
	exc  []uint64 // PFOR exceptions scratch
	// packed: after ReadBlockPacked left the deltas bit-packed, pf reads
	// them from buf or traw, unpacking into sums.
	packed bool
	pf     pforReader
	sums   []uint64
}

// Bytes returns the memory b's buffers hold, in bytes (capacities, for a
// query's memory budget): the exported slices, the property columns and
// the read and decode scratch.
func (b *Block) Bytes() int64 {
	n := int64(cap(b.UserHashes)+cap(b.Times)+cap(b.Deltas)+cap(b.u64)+cap(b.exc)+cap(b.sums))*8 +
		int64(cap(b.UserIDOffsets)+cap(b.UserStarts)+cap(b.Events))*4 +
		int64(cap(b.UserIDBytes)+cap(b.buf)+cap(b.pbuf)+cap(b.raw)+cap(b.traw))
	for _, p := range b.Props[:cap(b.Props)] {
		n += int64(cap(p.Present)+cap(p.Ints)+cap(p.Floats))*8 + int64(cap(p.Strs)+cap(p.Ranks))*4
	}
	return n
}

// UserID returns user i's id bytes, borrowed from b.
func (b *Block) UserID(i int) []byte { return b.UserIDBytes[b.UserIDOffsets[i]:b.UserIDOffsets[i+1]] }

// ReadBlock decodes block i (0 ≤ i < len(Meta().Blocks)) into dst: the
// users, times and events, and the property columns whose indexes into
// Meta().Props are listed in props (dst.Props[j] holds props[j]). It reads
// the needed chunks with pread, checks each chunk's CRC-32C and every
// length and code while decoding, and returns a *CorruptionError at the
// chunk's offset on a mismatch. Out-of-range i or props are reported as
// plain errors. In steady state (dst reused for blocks of similar size) it
// does not allocate.
func (r *Reader) ReadBlock(i int, props []int, dst *Block) error {
	return r.readBlock(i, props, dst, timesSummed, KeysAll)
}

// ReadBlockDeltas is ReadBlock that leaves dst.Times empty and sets
// dst.Deltas, dst.TimeBase and dst.TimeGCD instead (see Block), for a
// caller that sums the deltas itself while it reads the rows: the trail
// scan fuses that sum with its row filter and so never writes the
// block's times to memory. Errors are those of ReadBlock.
func (r *Reader) ReadBlockDeltas(i int, props []int, dst *Block) error {
	return r.readBlock(i, props, dst, timesDeltas, KeysAll)
}

// ReadBlockRows is ReadBlockDeltas without the user keys: it leaves
// dst.UserHashes and the user ids empty (UserID must not be called) and
// sets only dst.UserStarts, for a caller that visits the users by
// position and needs neither their order nor their ids (skipping them was
// 3-5% of a 100M-event funnel). Errors are those of ReadBlock.
func (r *Reader) ReadBlockRows(i int, props []int, dst *Block) error {
	return r.readBlock(i, props, dst, timesDeltas, KeysNone)
}

// ReadBlockPacked is ReadBlockDeltas (keys KeysAll), ReadBlockRows
// (KeysNone) or in between (KeysIDs) for a caller that needs the times
// and values of few rows:
// when the block's deltas are bit-packed (PFOR) it leaves them so and
// dst.Deltas empty, and dst.SumDeltas unpacks only the rows it is asked
// for; a property column with absent rows is left compact (see PropData).
// A scan for a rare event then decodes the deltas of the users that have
// one, up to their last match, instead of every row's. Errors are those
// of ReadBlock.
func (r *Reader) ReadBlockPacked(i int, props []int, keys Keys, dst *Block) error {
	return r.readBlock(i, props, dst, timesPacked, keys)
}

// ReadBlockNoTimes is ReadBlock without the times: it leaves dst.Times
// and dst.Deltas empty and neither checks nor decodes the times chunk, for
// a caller that reads only the order of each user's rows, which is their
// time order (the last of a user's property writes in one segment is its
// latest), with the user keys keys. Errors are those of ReadBlock.
func (r *Reader) ReadBlockNoTimes(i int, props []int, keys Keys, dst *Block) error {
	return r.readBlock(i, props, dst, timesNone, keys)
}

// Keys says which user keys a block read decodes.
type Keys uint8

const (
	// KeysNone decodes the row counts (Block.UserStarts) only: the
	// hashes and ids stay empty and UserID must not be called.
	KeysNone Keys = iota
	// KeysIDs decodes the ids, and Block.UserHashes only where the file
	// stores them (users encoding 1: format versions 1 and 2, or inputs
	// hashed otherwise); else UserHashes stays empty and user i's hash
	// is UserHash(UserID(i)). It is for a caller that matches users by
	// id and needs a hash only now and then: a merge join stepping
	// through two sides that mostly hold the same users.
	KeysIDs
	// KeysAll decodes the ids and UserHashes.
	KeysAll
)

// How readBlock decodes the times chunk.
const (
	timesSummed = iota // into Block.Times
	timesDeltas        // into Block.Deltas
	timesPacked        // into Block.pf when PFOR, else Block.Deltas
	timesNone          // not at all
)

func (r *Reader) readBlock(i int, props []int, dst *Block, times int, keys Keys) error {
	if i < 0 || i >= len(r.meta.Blocks) {
		return fmt.Errorf("segment %s: block %d out of range [0, %d)", r.name, i, len(r.meta.Blocks))
	}
	for _, p := range props {
		if p < 0 || p >= len(r.meta.Props) {
			return fmt.Errorf("segment %s: property %d out of range [0, %d)", r.name, p, len(r.meta.Props))
		}
	}
	bm, l := &r.meta.Blocks[i], &r.layouts[i]
	dst.Rows = bm.Rows
	dst.BytesRead = 0

	// The users, times and events chunks are adjacent: one read.
	first, last := &l.chunks[colUsers], &l.chunks[colEvents]
	span := int(last.off + int64(last.stored) - first.off)
	dst.buf = growPadded(dst.buf, span)
	if err := r.readAt(dst.buf, first.off); err != nil {
		return err
	}
	dst.BytesRead += int64(span)
	dst.packed = false
	for col := colUsers; col <= colEvents; col++ {
		c := &l.chunks[col]
		if col == colTimes && times == timesNone {
			dst.Times, dst.Deltas = dst.Times[:0], dst.Deltas[:0]
			continue
		}
		start := int(c.off - first.off)
		rawBuf := &dst.raw
		if col == colTimes {
			// Packed deltas are read from here after the events chunk is
			// decompressed into dst.raw.
			rawBuf = &dst.traw
		}
		raw, err := r.chunkRaw(c, dst.buf[start:start+c.stored], rawBuf)
		if err == nil {
			switch col {
			case colUsers:
				err = decodeUsers(c.enc, raw, bm.Rows, bm.Users, bm.FirstHash, bm.LastHash, dst, keys)
			case colTimes:
				switch {
				case times == timesSummed:
					err = decodeTimes(c.enc, raw, dst)
				case times == timesPacked && c.enc != encTimesUvarint:
					err = decodePackedDeltas(c.enc, raw, dst)
				default:
					err = decodeDeltas(c.enc, raw, dst)
				}
			case colEvents:
				err = decodeEvents(raw, len(r.meta.EventNames), dst)
			}
		}
		if err != nil {
			return r.chunkErr(i, col, c, err)
		}
	}

	dst.Props = grow(dst.Props, len(props))
	for j, p := range props {
		c := &l.chunks[colProps+p]
		dst.pbuf = growPadded(dst.pbuf, c.stored)
		if err := r.readAt(dst.pbuf, c.off); err != nil {
			return err
		}
		dst.BytesRead += int64(c.stored)
		pm := &r.meta.Props[p]
		raw, err := r.chunkRaw(c, dst.pbuf, &dst.raw)
		if err == nil {
			err = decodeProp(c.enc, raw, pm.Type, len(pm.Dict), bm.Rows, &dst.Props[j], &dst.u64, times == timesPacked)
		}
		if err != nil {
			return r.chunkErr(i, colProps+p, c, err)
		}
	}
	return nil
}

// chunkRaw checks the CRC of a chunk's stored bytes and returns its raw
// bytes: stored itself, or decompressed into *buf.
func (r *Reader) chunkRaw(c *chunkMeta, stored []byte, buf *[]byte) ([]byte, error) {
	if got := crc(stored); got != c.crc {
		return nil, fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", c.crc, got)
	}
	if c.comp == compNone {
		return stored, nil
	}
	return decompress(stored, c.raw, buf)
}

// growPadded returns b resliced to n bytes with at least unpackPadding
// bytes of spare capacity, so that unpack can use its vectorised kernels on
// any sub-slice; it reallocates only when b is too small.
func growPadded(b []byte, n int) []byte {
	if cap(b) < n+unpackPadding {
		return make([]byte, n, n+n/8+unpackPadding)
	}
	return b[:n]
}

// chunkErr reports a chunk that fails its checksum or does not decode.
func (r *Reader) chunkErr(block, col int, c *chunkMeta, err error) error {
	return r.corrupt(corruptf(c.off, "block %d column %q: %v", block, r.meta.Columns[col].Name, err))
}

// Verify checks the whole file: it re-reads and re-checks header, trailer
// and footer checksum (also catching a file changed since Open: with
// NewReader, when ra has a Stat method, as *os.File has, a changed size
// too), reads every chunk of every block checking its CRC-32C and
// decoding it, and checks the decoded data against the footer: users
// strictly ascending by (hash, id) but for a continued user (the same id
// as the previous block's last user, its rows in time order across the
// blocks), exact block time ranges and event bitsets, per-event row
// counts, string codes used, bools 0 or 1. With the chunks tiling the
// bytes between header and footer, every byte of the file is covered. It
// returns the first problem as a *CorruptionError, or an I/O error.
func (r *Reader) Verify() error {
	if st, ok := r.ra.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			return fmt.Errorf("verify segment %s: %w", r.name, err)
		}
		if fi.Size() != r.size {
			return r.corrupt(corruptf(r.size, "file size changed from %d to %d bytes since Open", r.size, fi.Size()))
		}
	}
	_, _, footer, err := r.load()
	if err != nil {
		return err
	}
	if footer != r.footer {
		return r.corrupt(corruptf(r.size-trailerSize, "footer moved from offset %d to %d since Open", r.footer, footer))
	}
	m := r.meta
	all := make([]int, len(m.Props))
	for j := range all {
		all[j] = j
	}
	var v verifier
	v.eventRows = make([]int64, len(m.EventNames))
	v.dictUsed = make([][]bool, len(m.Props))
	for j, p := range m.Props {
		v.dictUsed[j] = make([]bool, len(p.Dict))
	}
	var b Block
	for i := range m.Blocks {
		if err := r.ReadBlock(i, all, &b); err != nil {
			return err
		}
		if msg := v.block(m, &m.Blocks[i], &b); msg != "" {
			return r.corrupt(corruptf(r.layouts[i].chunks[colUsers].off, "block %d: %s", i, msg))
		}
	}
	for c, n := range v.eventRows {
		if n != m.EventRows[c] {
			return r.corrupt(corruptf(r.footer, "footer: event %q has %d rows, blocks hold %d", m.EventNames[c], m.EventRows[c], n))
		}
	}
	for j, used := range v.dictUsed {
		for k, u := range used {
			if !u {
				return r.corrupt(corruptf(r.footer, "footer: property %q dictionary entry %q is unused", m.Props[j].Name, m.Props[j].Dict[k]))
			}
		}
	}
	return nil
}

// verifier accumulates Verify's cross-block checks.
type verifier struct {
	eventRows []int64
	dictUsed  [][]bool
	lastHash  uint64
	lastID    []byte
	lastTime  int64 // the last user's last row time
	haveLast  bool
}

// block checks a decoded block against its footer record and the previous
// blocks; it returns a description of the first problem or "".
func (v *verifier) block(m *Meta, bm *BlockMeta, b *Block) string {
	for u := range b.UserHashes {
		h, id := b.UserHashes[u], b.UserID(u)
		ts := b.Times[b.UserStarts[u]:b.UserStarts[u+1]]
		switch {
		case u == 0 && bm.Continued:
			if !v.haveLast || h != v.lastHash || !bytes.Equal(id, v.lastID) || ts[0] < v.lastTime {
				return fmt.Sprintf("continued user (%#x %q) from time %d µs does not continue the previous block's last user (%#x %q) at %d µs", h, id, ts[0], v.lastHash, v.lastID, v.lastTime)
			}
		case v.haveLast && (h < v.lastHash || h == v.lastHash && bytes.Compare(id, v.lastID) <= 0):
			return fmt.Sprintf("user %d (%#x %q) not after (%#x %q)", u, h, id, v.lastHash, v.lastID)
		}
		v.lastHash, v.lastID, v.lastTime, v.haveLast = h, append(v.lastID[:0], id...), ts[len(ts)-1], true
	}
	lo, hi := b.Times[0], b.Times[0]
	for u := range b.UserHashes {
		ts := b.Times[b.UserStarts[u]:b.UserStarts[u+1]]
		for r := range ts {
			if r > 0 && ts[r] < ts[r-1] {
				return fmt.Sprintf("user %d times decrease", u)
			}
		}
		lo, hi = min(lo, ts[0]), max(hi, ts[len(ts)-1])
	}
	if lo != bm.MinTime || hi != bm.MaxTime {
		return fmt.Sprintf("times span %d..%d, footer says %d..%d", lo, hi, bm.MinTime, bm.MaxTime)
	}
	seen := make([]uint64, len(bm.Events))
	for _, c := range b.Events {
		seen[c>>6] |= 1 << (c & 63)
		v.eventRows[c]++
	}
	for k := range seen {
		if seen[k] != bm.Events[k] {
			return "event bitset disagrees with the events"
		}
	}
	for j, p := range m.Props {
		pd := &b.Props[j]
		for r := range b.Rows {
			if !present(pd.Present, r) {
				continue
			}
			switch p.Type {
			case event.TypeString:
				v.dictUsed[j][pd.Strs[r]] = true
			case event.TypeBool:
				if pd.Ints[r]&^1 != 0 {
					return fmt.Sprintf("property %q row %d: bool value %d", p.Name, r, pd.Ints[r])
				}
			}
		}
	}
	return ""
}
