package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spurdb/spur/storage/vfs"
)

// SalvageOptions configure Salvage. The zero value keeps every intact
// record, in files of DefaultSegmentSize.
type SalvageOptions struct {
	// After is a seq: only records with larger seqs are written to the
	// new log. The store passes its catalog's log position (segments hold
	// the records up to it). Seqs up to After that are lost are reported
	// all the same. At most math.MaxUint64-1.
	After uint64
	// SegmentSize is the size, in bytes, at which a file of the new log
	// is rotated (as Options.SegmentSize). Default DefaultSegmentSize.
	SegmentSize int64
}

// SalvageReport says what Salvage kept and what it found lost.
type SalvageReport struct {
	// Dir is the damaged log's directory, Dst the new log's.
	Dir string `json:"dir"`
	Dst string `json:"dst"`
	// After is SalvageOptions.After.
	After uint64 `json:"after"`
	// Files and Bytes count the damaged log's files read and their size.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Records counts the intact records written to Dst (those with seqs
	// after After), FirstSeq and LastSeq are the first and last of their
	// seqs (0 when Records is 0).
	Records  uint64 `json:"records"`
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	// Skipped counts the intact records with seqs up to After, not
	// written.
	Skipped uint64 `json:"skipped"`
	// Gaps counts the gap files written to Dst: seq ranges after After
	// that the new log declares lost, so that it opens and replays.
	Gaps int `json:"gaps"`
	// Lost lists every byte range of the damaged log that yielded no
	// record, in log order, with the seqs lost there. Every seq between
	// the first file's (or After+1, if smaller) and LastSeq that is not
	// kept or skipped is in one of them.
	Lost []LostRange `json:"lost"`
}

// LostRange is a byte range of a damaged log's file that yielded no
// record: [Start, End) of File, in bytes (Start == End: records missing
// where nothing is damaged, as at the end of a file cut at a record's
// start or followed by a missing file).
type LostRange struct {
	File  string `json:"file"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	// FirstSeq..LastSeq are the seqs of the records lost there; FirstSeq
	// is 0 when the range lost none (a damaged file header before intact
	// records, a second copy of a record).
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	// ToEnd says the damage runs to the end of the log, so the number of
	// records lost is unknown: seqs from FirstSeq on (LastSeq is 0). It
	// may be a torn tail: records never acknowledged.
	ToEnd bool `json:"to_end,omitempty"`
	// Reason says what was found there.
	Reason string `json:"reason"`
}

// String describes r on one line, for an operator.
func (r LostRange) String() string {
	seqs := "no record lost"
	switch {
	case r.ToEnd:
		seqs = fmt.Sprintf("seqs from %d on lost (how many is unknown)", r.FirstSeq)
	case r.FirstSeq == r.LastSeq && r.FirstSeq > 0:
		seqs = fmt.Sprintf("seq %d lost", r.FirstSeq)
	case r.FirstSeq > 0:
		seqs = fmt.Sprintf("seqs %d..%d lost (%d records)", r.FirstSeq, r.LastSeq, r.LastSeq-r.FirstSeq+1)
	}
	return fmt.Sprintf("%s bytes %d..%d: %s: %s", r.File, r.Start, r.End, seqs, r.Reason)
}

// Salvage copies every intact record with a seq after opt.After from the
// log in directory dir of fsys, damaged or not, into a new log in
// directory dst, keeping their seqs, and reports every byte range of dir
// that yielded no record with the seqs lost there (docs/ingest.md §2: `spur
// recover --app` keeps every intact record of a damaged log and reports
// the lost byte ranges).
//
// Reading: the files are read in seq order, each record's checksum
// checked. After a damaged record (or header) Salvage resynchronises on
// the next intact record whose seq the bytes since the damage could have
// reached (nextIntact, the search Open uses to tell a tear from damage),
// and it goes on with the next file after each. As Open does, it ignores
// the records of a file past the next file's first seq (a failed commit
// the next file supersedes); it reports records missing between files
// (a file cut at a record's start, or removed), a second copy of a seq,
// a damaged file header, and the gap files of an earlier salvage. Batch
// counts and group indexes are not needed to read: every intact record
// is kept, also when other records of its batch are lost (a batch is
// atomic across a crash, not across damage; the store writes one record
// per request).
//
// Writing: dst must not exist or be an empty directory, and must not be
// inside dir; Salvage creates it (fsyncing its parent) and writes the
// records with the Log's file writer, each record its own commit group
// and batch (the most damage a later Open can still tell from a tear),
// in files named by their first seq, rotated at opt.SegmentSize and at
// each hole in the seqs. The seqs of a hole (lost records after After)
// are declared by a gap file (see the package doc), so that Open accepts
// the new log and Replay yields exactly the kept records, in seq order.
// A hole at the end needs none: the next append takes the seq after the
// last record kept. Every file is fsynced, then dst. Nothing is kept
// (dst empty) when no intact record follows After: the store then opens
// the log with Options.FirstSeq After+1.
//
// Salvage never changes dir, except that it takes dir's LOCK file, as
// Open does (creating it in a directory no Log ever opened), so that no
// Log writes dir while it reads: it fails with an error matching
// vfs.ErrLocked while one is open. It checks ctx before each record.
// Memory: a read window of 1 MiB and the largest record, a write buffer
// of 512 KiB, and the report.
//
// Errors: ctx's; a *LockedError; an I/O error reading dir or writing
// dst (dst's files are then removed, and dst if Salvage created it); a
// file of a newer format (ErrUnsupportedVersion: not this build's to
// interpret); a dst that is not empty or is inside dir. Damage is never
// an error: it is in the report. A caller that recovers an app's log
// salvages into a new directory, then renames the damaged one aside and
// the new one into its place (see docs/decisions.md).
func Salvage(ctx context.Context, fsys vfs.FS, dir, dst string, opt SalvageOptions) (*SalvageReport, error) {
	if opt.SegmentSize == 0 {
		opt.SegmentSize = DefaultSegmentSize
	}
	switch {
	case opt.SegmentSize < 0:
		return nil, fmt.Errorf("wal: salvage: segment size %d bytes, want > 0", opt.SegmentSize)
	case opt.After == math.MaxUint64:
		return nil, fmt.Errorf("wal: salvage: after seq %d, want < %d", opt.After, uint64(math.MaxUint64))
	}
	if rel, err := filepath.Rel(dir, dst); err == nil && (rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))) {
		return nil, fmt.Errorf("wal: salvage %s into %s: the new log must be outside the damaged one", dir, dst)
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockName), false, fmt.Sprintf("a write-ahead-log salvage (pid %d)", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("wal: salvage: %w", err)
	}
	defer lock.Close()
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: salvage: %w", err)
	}
	var files []logFile
	for _, name := range names {
		if first, ok := parseName(name); ok {
			files = append(files, logFile{name: name, first: first})
		}
	}
	created, err := newDir(fsys, dst)
	if err != nil {
		return nil, fmt.Errorf("wal: salvage into %s: %w", dst, err)
	}
	s := &salvager{
		fsys: fsys,
		rep:  &SalvageReport{Dir: dir, Dst: dst, After: opt.After, Lost: []LostRange{}},
		out:  salvageOut{fsys: fsys, dir: dst, segSize: opt.SegmentSize, next: opt.After + 1},
	}
	s.out.w.buf = make([]byte, 0, writeBufferSize)
	for i, f := range files {
		next := uint64(0)
		if i+1 < len(files) {
			next = files[i+1].first
		}
		if err = s.file(ctx, filepath.Join(dir, f.name), f.first, next); err != nil {
			break
		}
	}
	if err == nil {
		err = s.out.finish()
	}
	if err != nil {
		s.out.abort(created)
		return nil, fmt.Errorf("wal: salvage %s: %w", dir, err)
	}
	s.rep.Gaps = s.out.gaps
	return s.rep, nil
}

// newDir creates directory dir of fsys (fsyncing its parent), or checks
// that it exists and is empty; created says whether it made it.
func newDir(fsys vfs.FS, dir string) (created bool, err error) {
	names, err := fsys.List(dir)
	switch {
	case err == nil && len(names) > 0:
		return false, fmt.Errorf("the directory is not empty (%d entries)", len(names))
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	return true, vfs.MkdirAllSync(fsys, dir, 0o755)
}

// salvager is one Salvage's state.
type salvager struct {
	fsys vfs.FS
	rep  *SalvageReport
	want uint64 // the next seq not yet kept, skipped or reported lost; 0 before the first file
	out  salvageOut
	buf  []byte // the read window's buffer, reused from file to file
}

// lose reports the byte range [start, end) of file path as lost, with
// the seqs [from, to): none if from == to, from on to an unknown end if
// to == 0.
func (s *salvager) lose(path string, start, end int64, from, to uint64, why string) {
	r := LostRange{File: path, Start: start, End: end, Reason: why}
	switch {
	case to == 0:
		r.FirstSeq, r.ToEnd = from, true
	case from < to:
		r.FirstSeq, r.LastSeq = from, to-1
	}
	s.rep.Lost = append(s.rep.Lost, r)
}

// file salvages the log file path, whose name says its first seq is
// first; next is the next file's first seq (0: it is the last file).
func (s *salvager) file(ctx context.Context, path string, first, next uint64) error {
	w, f, err := openWindow(s.fsys, path)
	if err != nil {
		return err
	}
	defer f.Close()
	w.buf = s.buf[:0]
	defer func() { s.buf = w.buf }()
	s.rep.Files++
	s.rep.Bytes += w.size
	if s.want == 0 {
		if after := s.rep.After; after+1 < first {
			s.lose(path, 0, 0, after+1, first, fmt.Sprintf("the log's first file starts at seq %d: the records before it are not in the log", first))
		}
	}
	s.want = first // the previous file accounted for every seq before first
	h, err := w.header()
	if err != nil {
		return err
	}
	if isGapFile(h) {
		// A damaged one is read as a log file whose header is damaged:
		// its magic may be the damage.
		why, err := gapDamage(h, w.size, first, next)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if why == "" {
			s.lose(path, 0, w.size, first, next, "a gap file: an earlier salvage found these records lost")
			return nil
		}
	}
	why, _, err := headerDamage(h, first)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	off := min(w.size, fileHeaderSize)
	if why != "" {
		s.lose(path, 0, off, first, first, "damaged file header: "+why)
	}
	var prev recordHeader // the last intact record read in the file
	for off < w.size {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, b, why, err := readRecord(w, off)
		if err != nil {
			return err
		}
		if why != "" {
			if prev.rest > 0 {
				why += fmt.Sprintf(" (the batch of seq %d had %d records to go; its intact records are kept)", prev.seq, prev.rest)
			}
			roff, rh, found, err := nextIntact(w, off, s.want, false)
			switch {
			case err != nil:
				return err
			case !found:
				if next == 0 {
					why += ": to the end of the last file (a torn tail, never acknowledged, or damage)"
				}
				s.lose(path, off, w.size, s.want, next, why)
				return nil
			case next != 0 && rh.seq >= next: // the rest is superseded
				s.lose(path, off, roff, s.want, next, why)
				return nil
			}
			s.lose(path, off, roff, s.want, rh.seq, why)
			s.want, off, prev = rh.seq, roff, recordHeader{}
			continue
		}
		size := int64(len(b))
		switch {
		case next != 0 && h.seq >= next:
			// A failed commit's records, superseded by the next file
			// (Open ignores them too).
			s.fileEnd(path, off, next, prev)
			return nil
		case h.seq < s.want:
			s.lose(path, off, off+size, s.want, s.want, fmt.Sprintf(
				"an intact record of seq %d where seq %d was due: a second copy", h.seq, s.want))
			off += size
			continue
		case h.seq > s.want:
			s.lose(path, off, off, s.want, h.seq, fmt.Sprintf(
				"an intact record of seq %d follows seq %d: records are missing", h.seq, s.want-1))
			s.want = h.seq
		}
		if err := s.keep(h.seq, b[recordHeaderSize:]); err != nil {
			return err
		}
		s.want++
		off += size
		prev = h
	}
	s.fileEnd(path, off, next, prev)
	return nil
}

// fileEnd reports the records missing at off, the end of the records of
// file path (after prev, its last intact one): up to next, the next
// file's first seq, or, in the last file, the rest of a batch it cuts.
func (s *salvager) fileEnd(path string, off int64, next uint64, prev recordHeader) {
	batch := ""
	if prev.rest > 0 {
		batch = fmt.Sprintf(" inside a batch (the batch of seq %d had %d records to go; its intact records are kept)", prev.seq, prev.rest)
	}
	switch {
	case next != 0 && s.want < next:
		s.lose(path, off, off, s.want, next, fmt.Sprintf(
			"the file's records end%s after seq %d, but the next file starts at seq %d: records are missing (a file cut or removed)", batch, s.want-1, next))
	case next == 0 && batch != "":
		s.lose(path, off, off, s.want, 0, "the last file ends"+batch+": a torn tail, never acknowledged")
	}
}

// keep writes the intact record rec of seq seq to the new log if seq is
// after After, and counts it.
func (s *salvager) keep(seq uint64, rec []byte) error {
	if seq <= s.rep.After {
		s.rep.Skipped++
		return nil
	}
	if err := s.out.record(seq, rec); err != nil {
		return err
	}
	if s.rep.Records == 0 {
		s.rep.FirstSeq = seq
	}
	s.rep.Records++
	s.rep.LastSeq = seq
	return nil
}

// salvageOut writes Salvage's new log.
type salvageOut struct {
	fsys    vfs.FS
	dir     string
	segSize int64
	w       fileWriter
	next    uint64   // the seq that continues the current file: After+1 before the first record
	written []string // paths of the files created
	gaps    int      // gap files written
}

// record appends rec as the record of seq seq (> every earlier one), in
// a commit group and batch of its own. It starts a new file when there is
// none, when the current one reached the segment size, and after a hole
// in the seqs, which a gap file declares first.
func (o *salvageOut) record(seq uint64, rec []byte) error {
	if o.w.f == nil || seq != o.next || o.w.size+int64(len(o.w.buf)) >= o.segSize {
		if err := o.closeFile(); err != nil {
			return err
		}
		if seq != o.next {
			if err := o.create(o.next, appendGapFile(nil, o.next, seq)); err != nil {
				return err
			}
			if err := o.closeFile(); err != nil {
				return err
			}
			o.gaps++
		}
		if err := o.create(seq, appendFileHeader(nil, seq)); err != nil {
			return err
		}
	}
	if err := o.w.putRecord(rec, seq, 0, 0); err != nil {
		return err
	}
	o.next = seq + 1
	return nil
}

// create creates the file named for seq first, starting with head.
func (o *salvageOut) create(first uint64, head []byte) error {
	path := filepath.Join(o.dir, fileName(first))
	if err := o.w.create(o.fsys, path); err != nil {
		return err
	}
	o.written = append(o.written, path)
	return o.w.put(head)
}

// closeFile writes out, fsyncs and closes the current file, if any.
func (o *salvageOut) closeFile() error {
	if o.w.f == nil {
		return nil
	}
	err := o.w.flush()
	if err == nil {
		err = o.w.f.Sync()
	}
	if cerr := o.w.close(); err == nil {
		err = cerr
	}
	return err
}

// finish closes the last file and fsyncs the directory.
func (o *salvageOut) finish() error {
	if err := o.closeFile(); err != nil {
		return err
	}
	return vfs.SyncDir(o.fsys, o.dir)
}

// abort removes what a failed Salvage wrote: its files, and the
// directory if it created it. Errors are dropped: the caller reports the
// failure that led here, and a leftover directory is refused as a
// destination until removed.
func (o *salvageOut) abort(created bool) {
	o.w.close()
	for _, path := range o.written {
		o.fsys.Remove(path)
	}
	if created {
		o.fsys.Remove(o.dir)
	}
}
