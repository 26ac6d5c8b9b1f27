package wal

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/spurdb/spur/storage/vfs"
)

// windowSize is how much of a file a window reads at once, in bytes.
const windowSize = 1 << 20

// window reads a file through a buffer of at least windowSize bytes (more
// for a larger record), so that sequential and nearby reads cost one
// ReadAt per window. Memory: the largest record read plus windowSize.
type window struct {
	f     io.ReaderAt
	path  string
	size  int64 // file size when opened
	start int64 // file offset of buf[0]
	buf   []byte
}

// at returns the n bytes of the file at off (off+n <= size). The slice is
// valid until the next call.
func (w *window) at(off int64, n int) ([]byte, error) {
	if off >= w.start && off+int64(n) <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start : off-w.start+int64(n)], nil
	}
	m := int(min(int64(max(n, windowSize)), w.size-off))
	if m < n {
		return nil, fmt.Errorf("read %s: %d bytes at offset %d past its end (%d bytes)", w.path, n, off, w.size)
	}
	if cap(w.buf) < m {
		w.buf = make([]byte, m)
	}
	w.buf = w.buf[:m]
	w.start = off
	if got, err := w.f.ReadAt(w.buf, off); got < m {
		w.buf = w.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s at offset %d: %w", w.path, off, err)
	}
	return w.buf[:n], nil
}

// openWindow opens the file path for reading; the caller closes the
// returned file.
func openWindow(fsys vfs.FS, path string) (*window, vfs.File, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &window{f: f, path: path, size: st.Size()}, f, nil
}

// header returns the file's first bytes, up to gapFileSize: a file
// header and more, or a gap file.
func (w *window) header() ([]byte, error) {
	return w.at(0, int(min(w.size, gapFileSize)))
}

// scanResult is what reading a file's records found.
type scanResult struct {
	count uint64 // records up to the end of the last complete batch
	end   int64  // the offset just after them
	bad   int64  // offset of the first record that could not be read; -1 if none
	seq   uint64 // the seq expected at bad
	why   string // what is wrong at bad
	torn  bool   // the failure is one a crash can leave (short, zeroed, checksum-failing)
}

// scanRecords reads the records of the file in w, whose first record has
// seq first, from offset fileHeaderSize on, until the end of the file,
// limit records or the first record that cannot be read. fn, if not nil,
// gets every intact record in order (rec is valid during the call only),
// also those of a batch that turns out to be incomplete. The error is an
// I/O error or fn's; damage is reported in the result.
func scanRecords(w *window, first, limit uint64, fn func(seq uint64, rec []byte) error) (scanResult, error) {
	res := scanResult{end: fileHeaderSize, bad: -1}
	off, seq := int64(fileHeaderSize), first
	inBatch, started := false, false
	var prev recordHeader
	fail := func(why string, torn bool) {
		res.bad, res.seq, res.why, res.torn = off, seq, why, torn
	}
	for {
		if seq-first == limit {
			if inBatch {
				fail(fmt.Sprintf("the batch of seq %d goes on past seq %d, where the next file starts", seq-1, seq-1), false)
			}
			return res, nil
		}
		left := w.size - off
		if left == 0 {
			if inBatch {
				fail(fmt.Sprintf("the file ends inside a batch (%d more records expected)", prev.rest), true)
			}
			return res, nil
		}
		h, b, why, err := readRecord(w, off)
		if err != nil {
			return res, err
		}
		if why != "" {
			fail(why, true)
			return res, nil
		}
		switch {
		case h.seq != seq:
			fail(fmt.Sprintf("intact record with seq %d, want %d", h.seq, seq), false)
		case h.index == 0 && inBatch:
			fail(fmt.Sprintf("a commit group starts at seq %d inside a batch", seq), false)
		case h.index != 0 && (!started || h.index != prev.index+1):
			fail(fmt.Sprintf("group index %d at seq %d does not follow %d", h.index, seq, prev.index), false)
		case inBatch && h.rest != prev.rest-1:
			fail(fmt.Sprintf("batch count %d at seq %d does not follow %d", h.rest, seq, prev.rest), false)
		}
		if res.bad >= 0 {
			return res, nil
		}
		if fn != nil {
			if err := fn(seq, b[recordHeaderSize:]); err != nil {
				return res, err
			}
		}
		off += recordHeaderSize + int64(h.n)
		seq++
		started, prev, inBatch = true, h, h.rest > 0
		if !inBatch {
			res.count, res.end = seq-first, off
		}
	}
}

// readRecord reads the record at offset off of the file in w. It returns
// its header and its bytes (header and payload; valid until the window's
// next read), or in why what makes it unreadable — an incomplete header,
// a length past the end of the file, a checksum mismatch: damage a crash
// can leave — and then no bytes. The error is an I/O error.
func readRecord(w *window, off int64) (h recordHeader, b []byte, why string, err error) {
	left := w.size - off
	if left < recordHeaderSize {
		return h, nil, fmt.Sprintf("incomplete record header (%d of %d bytes)", left, recordHeaderSize), nil
	}
	if b, err = w.at(off, recordHeaderSize); err != nil {
		return h, nil, "", err
	}
	h = parseRecordHeader(b)
	if int64(h.n) > left-recordHeaderSize || h.n > MaxRecordSizeLimit {
		return h, nil, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", h.n, left-recordHeaderSize), nil
	}
	if b, err = w.at(off, recordHeaderSize+int(h.n)); err != nil {
		return h, nil, "", err
	}
	if got := recordCRC(b, b[recordHeaderSize:]); got != h.crc {
		return h, nil, fmt.Sprintf("record checksum mismatch: stored %08x, computed %08x", h.crc, got), nil
	}
	return h, b, "", nil
}

// nextIntact looks in the file in w, at every offset from from on, for
// the first intact record whose seq is after seq after, the seq of the
// damaged record at from, and that the bytes since from could have
// reached (at least recordHeaderSize bytes a record, so at most
// after+(off-from)/recordHeaderSize); with group, only a record of a
// commit group that starts after seq after. Only a candidate that passes
// these tests has its checksum computed: random bytes almost never pass,
// which keeps the search linear in the bytes searched.
//
// With group it is Open's test for a torn tail: an intact record of a
// later group proves that the damage before it was fsynced (groups are
// written only after the previous one's fsync). Without, it is Salvage's
// resynchronisation after damage.
func nextIntact(w *window, from int64, after uint64, group bool) (off int64, h recordHeader, found bool, err error) {
	from = max(from, 0)
	for off = from; w.size-off >= recordHeaderSize; off++ {
		b, err := w.at(off, recordHeaderSize)
		if err != nil {
			return 0, h, false, err
		}
		h = parseRecordHeader(b)
		start := h.seq // the seq that must be after after
		if group {
			start = h.seq - uint64(h.index)
		}
		if uint64(h.index) > h.seq || start <= after ||
			h.seq-after > uint64(off-from)/recordHeaderSize || int64(h.n) > w.size-off-recordHeaderSize {
			continue
		}
		_, _, why, err := readRecord(w, off)
		if err != nil {
			return 0, h, false, err
		}
		if why == "" {
			return off, h, true, nil
		}
	}
	return 0, recordHeader{}, false, nil
}

// Repair describes the torn tail Open cut from the last file.
type Repair struct {
	// File is the repaired file's path.
	File string
	// Offset is where the cut starts (the file's new size, in bytes); 0
	// with a damaged header, which was rewritten.
	Offset int64
	// Dropped is the number of bytes cut.
	Dropped int64
	// Reason says what was damaged at the cut.
	Reason string
}

// checked is a log file as Open found it.
type checked struct {
	logFile
	count  uint64  // intact records (those of a torn tail not counted)
	repair *Repair // the last file's torn tail, cut; nil if none
}

// checkFile checks dir/name, whose name says its first seq is first.
// next is the next file's first seq, or 0 for the last file. A non-last
// file must hold exactly the seqs [first, next), or be a gap file
// declaring them lost; the last one any number from first on, and its
// torn tail is cut (see the package doc).
func checkFile(fsys vfs.FS, dir, name string, first, next uint64) (checked, error) {
	path := filepath.Join(dir, name)
	last := next == 0
	w, f, err := openWindow(fsys, path)
	if err != nil {
		return checked{}, err
	}
	defer f.Close()
	c := checked{logFile: logFile{name: name, first: first, size: w.size}}
	h, err := w.header()
	if err != nil {
		return c, err
	}
	if isGapFile(h) {
		c.gap = true
		why, err := gapDamage(h, w.size, first, next)
		if err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
		if why != "" {
			return c, &CorruptionError{Path: path, Offset: 0, Msg: why}
		}
		return c, nil
	}
	why, torn, err := headerDamage(h, first)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if why != "" {
		if !last || !torn {
			return c, &CorruptionError{Path: path, Offset: 0, Msg: why}
		}
		return c, cutTail(fsys, w, &c, scanResult{bad: 0, seq: first, why: why, torn: true, end: 0})
	}
	limit := uint64(math.MaxUint64)
	if !last {
		if next <= first {
			return c, &CorruptionError{Path: path, Msg: fmt.Sprintf("file for seqs from %d followed by one from %d", first, next)}
		}
		limit = next - first
	}
	res, err := scanRecords(w, first, limit, nil)
	if err != nil {
		return c, err
	}
	c.count = res.count
	switch {
	case res.bad >= 0 && (!last || !res.torn):
		return c, &CorruptionError{Path: path, Offset: res.bad, Msg: res.why}
	case !last && res.count < limit:
		return c, &CorruptionError{Path: path, Offset: res.end, Msg: fmt.Sprintf(
			"the file ends after seq %d, but the next file (%s) starts at seq %d: records are missing", first+res.count-1, fileName(next), next)}
	case res.bad >= 0:
		return c, cutTail(fsys, w, &c, res)
	}
	return c, nil
}

// cutTail checks that the damage res found in the last file is a torn
// tail (no later commit group follows it) and cuts the file after the
// last complete batch (res.end; 0: rewrite the header).
func cutTail(fsys vfs.FS, w *window, c *checked, res scanResult) error {
	if off, h, found, err := nextIntact(w, res.bad, res.seq, true); err != nil {
		return err
	} else if found {
		return &CorruptionError{Path: w.path, Offset: res.bad, Msg: fmt.Sprintf(
			"%s, but an intact record of a later commit group (seq %d at offset %d) follows: damage inside the log, not a torn tail", res.why, h.seq, off)}
	}
	dir, name := filepath.Split(w.path)
	tmp := w.path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if res.end == 0 {
		_, err = f.Write(appendFileHeader(nil, c.first))
	} else {
		err = copyPrefix(f, w, res.end)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, w.path)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("repair the torn tail of %s: %w", w.path, err)
	}
	if err := vfs.SyncDir(fsys, filepath.Clean(dir)); err != nil {
		return fmt.Errorf("repair the torn tail of %s: %w", name, err)
	}
	newSize := max(res.end, fileHeaderSize)
	c.repair = &Repair{File: w.path, Offset: res.end, Dropped: w.size - res.end, Reason: res.why}
	c.size = newSize
	return nil
}

// copyPrefix writes the first n bytes of the file in w to f.
func copyPrefix(f vfs.File, w *window, n int64) error {
	buf := make([]byte, min(n, windowSize))
	for off := int64(0); off < n; {
		m := int(min(int64(len(buf)), n-off))
		if got, err := w.f.ReadAt(buf[:m], off); got < m {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read %s at offset %d: %w", w.path, off, err)
		}
		if _, err := f.Write(buf[:m]); err != nil {
			return err
		}
		off += int64(m)
	}
	return nil
}
