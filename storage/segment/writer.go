package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// WriterOptions tunes Write.
type WriterOptions struct {
	// BlockRows is the target number of rows per block (0 means
	// DefaultBlockRows; at most MaxBlockRows). A block takes whole users
	// while it stays within BlockRows rows; a user with more rows gets a
	// block of its own.
	BlockRows int
	// MinZstdRatio is how many times smaller zstd must make a chunk (than
	// the chunk's smallest uncompressed encoding) for the chunk to be
	// stored compressed: 0 means DefaultMinZstdRatio; it must otherwise be
	// ≥ 1. Lower values give smaller files that decode slower (e.g. 1.07
	// compresses whenever that saves 1/16).
	MinZstdRatio float64
}

// DefaultMinZstdRatio is the default WriterOptions.MinZstdRatio: with it,
// bit-packed times and event codes stay uncompressed on typical data and
// decode at several hundred million rows per second, while
// low-cardinality and repetitive columns are still compressed.
const DefaultMinZstdRatio = 2

// Info describes a written segment: Bytes is the file size in bytes, Rows
// and Users the counts, MinTime and MaxTime the row time range in UTC
// microseconds (both 0 for an empty segment).
type Info struct {
	Bytes   int64
	Rows    int64
	Users   int64
	MinTime int64
	MaxTime int64
	// FirstHash and LastHash are the user-key hashes of the first and
	// last user (0 for an empty segment).
	FirstHash uint64
	LastHash  uint64
}

// minCompress is the smallest raw chunk worth trying to compress.
const minCompress = 64

// minKeysZstdRatio is how many times smaller zstd must make a users
// chunk's keys section (WriterOptions.MinZstdRatio if larger) for it to
// be stored compressed. Keys are decoded by every scan that joins user
// properties or lists users, for each user: at 2.1x (ids "u0000000") their
// decompression took 17 % of the CPU of a 100M-event funnel broken down
// by a user property, which ran x1.20 against the keys stored raw.
const minKeysZstdRatio = 4

// Write writes in as a new segment file at path: it creates the file
// (failing if it exists), writes header, blocks, footer and trailer,
// fsyncs and closes it. in must satisfy the Input contract; a violation is
// reported (naming the user, row or property) before the file is created.
// On any error after creation the partial file is removed. Write does not
// retain in.
func Write(path string, in *Input, opt WriterOptions) (Info, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return Info{}, fmt.Errorf("write segment: %w", err)
	}
	info, err := WriteTo(f, path, in, opt)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Info{}, errors.Join(fmt.Errorf("write segment %s: %w", path, err), os.Remove(path))
	}
	return info, nil
}

// WriteTo is Write into an open file (or any io.Writer) f, which the
// caller creates, syncs and closes; name names it in errors. in is
// validated (naming the user, row or property at fault) before the first
// byte is written.
func WriteTo(f io.Writer, name string, in *Input, opt WriterOptions) (Info, error) {
	if in == nil {
		return Info{}, fmt.Errorf("write segment %s: nil input", name)
	}
	blockRows := opt.BlockRows
	if blockRows == 0 {
		blockRows = DefaultBlockRows
	}
	if blockRows < 1 || blockRows > MaxBlockRows {
		return Info{}, fmt.Errorf("write segment %s: BlockRows %d outside [1, %d]", name, opt.BlockRows, MaxBlockRows)
	}
	minRatio := opt.MinZstdRatio
	if minRatio == 0 {
		minRatio = DefaultMinZstdRatio
	}
	if !(minRatio >= 1) {
		return Info{}, fmt.Errorf("write segment %s: MinZstdRatio %v is below 1", name, opt.MinZstdRatio)
	}
	p, err := validate(in)
	if err != nil {
		return Info{}, fmt.Errorf("write segment %s: invalid input: %w", name, err)
	}
	w := &writer{p: p, bw: bufio.NewWriterSize(f, 1<<20), off: headerSize, minRatio: minRatio}
	info, err := w.write(blockRows)
	if err != nil {
		return Info{}, fmt.Errorf("write segment %s: %w", name, err)
	}
	return info, nil
}

// writer is the state of one Write.
type writer struct {
	p        *prepared
	bw       *bufio.Writer
	off      int64 // file offset of the next byte
	enc      encoder
	minRatio float64 // see WriterOptions.MinZstdRatio
	meta     Meta
	layouts  []blockLayout
}

// write writes the whole file through w.bw and flushes it.
func (w *writer) write(blockRows int) (Info, error) {
	in := w.p.in
	var hdr [headerSize]byte
	hdr[0] = Version
	copy(hdr[1:], headerMagic)
	w.bw.Write(hdr[:]) // bufio errors are sticky: checked at Flush

	m := &w.meta
	m.Version = Version
	m.Rows, m.Users = int64(len(in.Times)), int64(len(in.Users))
	m.EventNames = w.p.events.names
	m.EventRows = make([]int64, len(m.EventNames))
	m.Props = make([]PropMeta, len(in.Props))
	for j := range in.Props {
		m.Props[j] = PropMeta{Name: in.Props[j].Name, Type: in.Props[j].Type, Dict: w.p.props[j].names}
	}
	for u := 0; u < len(in.Users); {
		first, rows := u, 0
		for u < len(in.Users) && u-first < MaxBlockUsers && (u == first || rows+in.Users[u].Rows <= blockRows) {
			rows += in.Users[u].Rows
			u++
		}
		w.writeBlock(first, u)
	}
	if len(m.Blocks) > 0 {
		m.MinTime, m.MaxTime = minBlockTime(m.Blocks), maxBlockTime(m.Blocks)
	}

	footer := appendFooter(nil, m, w.layouts)
	footerOff := w.off
	w.bw.Write(footer)
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint64(tr[0:], uint64(footerOff))
	binary.LittleEndian.PutUint64(tr[8:], uint64(len(footer)))
	binary.LittleEndian.PutUint32(tr[16:], crc(footer))
	binary.LittleEndian.PutUint32(tr[20:], crc(tr[:20]))
	tr[24] = Version
	copy(tr[25:], trailerMagic)
	w.bw.Write(tr[:])
	if err := w.bw.Flush(); err != nil {
		return Info{}, err
	}
	return Info{
		Bytes:     footerOff + int64(len(footer)) + trailerSize,
		Rows:      m.Rows,
		Users:     m.Users,
		MinTime:   m.MinTime,
		MaxTime:   m.MaxTime,
		FirstHash: firstHash(m.Blocks),
		LastHash:  lastHash(m.Blocks),
	}, nil
}

// writeBlock writes the block of users [u0, u1).
func (w *writer) writeBlock(u0, u1 int) {
	in, p := w.p.in, w.p
	lo, hi := p.starts[u0], p.starts[u1]
	rows := hi - lo
	users := in.Users[u0:u1]
	bm := BlockMeta{
		Rows: rows, Users: u1 - u0,
		FirstHash: users[0].Hash, LastHash: users[len(users)-1].Hash,
		MinTime: in.Times[lo], MaxTime: in.Times[lo],
		Events: make([]uint64, (len(p.events.names)+63)/64),
	}
	starts := make([]int, len(users)+1)
	for i := range users {
		starts[i+1] = p.starts[u0+i+1] - lo
		bm.MinTime = min(bm.MinTime, in.Times[p.starts[u0+i]])
		bm.MaxTime = max(bm.MaxTime, in.Times[p.starts[u0+i+1]-1])
	}
	for _, c := range in.Events[lo:hi] {
		code := p.events.code[c]
		bm.Events[code>>6] |= 1 << (code & 63)
		w.meta.EventRows[code]++
	}
	w.meta.Blocks = append(w.meta.Blocks, bm)

	e := &w.enc
	l := blockLayout{chunks: make([]chunkMeta, colProps+len(in.Props))}
	e.u64 = grow(e.u64, len(users))
	var uenc uint8
	e.raw, uenc = e.encodeUsers(e.raw[:0], users, max(w.minRatio, minKeysZstdRatio))
	if uenc == encUsersIDs {
		// Compressed inside (the keys only): stored as it is.
		l.chunks[colUsers] = w.store(uenc, e.raw)
	} else {
		l.chunks[colUsers] = w.emit(uenc, e.raw, 0, nil)
	}
	var enc uint8
	e.raw, e.raw2, enc = e.encodeTimes(e.raw[:0], e.raw2[:0], in.Times[lo:hi], starts)
	if len(e.raw2) > len(e.raw)-len(e.raw)/8 {
		// PFOR decodes several times faster than uvarints (the scan
		// profile at 100M events: 8 % of the rows in uvarint blocks took
		// as long as the 92 % in PFOR blocks), so the uvarint candidate
		// competes only when it is at least 1/8 smaller.
		e.raw2 = e.raw2[:0]
	}
	l.chunks[colTimes] = w.emit(enc, e.raw, encTimesUvarint, e.raw2)
	e.raw, e.raw2 = e.encodeEvents(e.raw[:0], e.raw2[:0], in.Events[lo:hi], p.events.code)
	l.chunks[colEvents] = w.emit(encEvents, e.raw, encEvents, e.raw2)
	for j := range in.Props {
		var enc uint8
		e.raw, enc = e.encodeProp(e.raw[:0], &in.Props[j], &p.props[j], lo, hi)
		l.chunks[colProps+j] = w.emit(enc, e.raw, 0, nil)
	}
	w.layouts = append(w.layouts, l)
}

// emit chooses how to store a chunk given one or two candidate encodings
// (raw2 empty when there is one), writes the stored bytes and returns the
// chunk record. The smallest candidate is stored as is unless zstd makes
// some candidate at least w.minRatio times smaller than that: zstd
// decoding costs more CPU than the bit-unpacking of the encodings, so it
// must earn its keep.
func (w *writer) emit(enc uint8, raw []byte, enc2 uint8, raw2 []byte) chunkMeta {
	if len(raw2) > 0 && len(raw2) < len(raw) {
		enc, raw, enc2, raw2 = enc2, raw2, enc, raw
	}
	c := chunkMeta{off: w.off, raw: len(raw), enc: enc, comp: compNone}
	stored := raw
	limit := float64(len(raw)) / w.minRatio
	if len(raw) >= minCompress {
		w.enc.comp = zstdEncoder().EncodeAll(raw, w.enc.comp[:0])
		if float64(len(w.enc.comp)) <= limit {
			stored, c.comp, limit = w.enc.comp, compZstd, float64(len(w.enc.comp))-1
		}
	}
	if len(raw2) >= minCompress {
		w.enc.comp2 = zstdEncoder().EncodeAll(raw2, w.enc.comp2[:0])
		if float64(len(w.enc.comp2)) <= limit {
			stored, c.comp, c.enc, c.raw = w.enc.comp2, compZstd, enc2, len(raw2)
		}
	}
	return w.put(c, stored)
}

// store writes a chunk of encoding enc uncompressed.
func (w *writer) store(enc uint8, raw []byte) chunkMeta {
	return w.put(chunkMeta{off: w.off, raw: len(raw), enc: enc, comp: compNone}, raw)
}

// put writes a chunk's stored bytes and completes its record c.
func (w *writer) put(c chunkMeta, stored []byte) chunkMeta {
	c.stored, c.crc = len(stored), crc(stored)
	w.bw.Write(stored)
	w.off += int64(len(stored))
	return c
}

func firstHash(blocks []BlockMeta) uint64 {
	if len(blocks) == 0 {
		return 0
	}
	return blocks[0].FirstHash
}

func lastHash(blocks []BlockMeta) uint64 {
	if len(blocks) == 0 {
		return 0
	}
	return blocks[len(blocks)-1].LastHash
}
