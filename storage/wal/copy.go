package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"

	"github.com/spurdb/spur/storage/vfs"
)

// CopyOptions configures Copy.
type CopyOptions struct {
	// After and UpTo bound the seqs of the records copied: (After, UpTo].
	// UpTo 0 means to the end of the log (a log no one appends to).
	After, UpTo uint64
	// SegmentSize is the new log's file size; 0 means
	// DefaultSegmentSize.
	SegmentSize int64
}

// errCopied stops a file's scan once UpTo is copied.
var errCopied = errors.New("copied")

// Copy writes into directory dst (new or empty, outside dir) a log that
// holds exactly the records of the log in directory dir whose seqs are
// in (opt.After, opt.UpTo], each in a commit group and batch of its own
// as Salvage writes them, fsynced with dst; Open(dst) with FirstSeq
// After+1 accepts it and Replay(After) delivers them. It returns the
// number of records copied (none: dst is not created).
//
// Unlike Salvage it takes no lock: the log may be open and appended to
// meanwhile (a backup of a running server). It reads only records up to
// UpTo, which the caller knows were acknowledged (so complete and
// durable), and opens every file it needs before reading any, so that a
// Release meanwhile (an unlinked file stays readable while open) cannot
// take them away.
//
// Errors: one matching fs.ErrNotExist when records after After are no
// longer in the log (released by a flush that published them: the
// caller retries with the newer position); ErrCorruption when a record
// in the range is missing or damaged; ErrUnsupportedVersion; I/O errors
// (dst's files are then removed, and dst if Copy created it); ctx's.
func Copy(ctx context.Context, fsys vfs.FS, dir, dst string, opt CopyOptions) (n uint64, err error) {
	if opt.SegmentSize == 0 {
		opt.SegmentSize = DefaultSegmentSize
	}
	upTo := opt.UpTo
	if upTo == 0 {
		upTo = math.MaxUint64
	}
	if upTo <= opt.After {
		return 0, nil
	}
	if rel, err := filepath.Rel(dir, dst); err == nil && (rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))) {
		return 0, fmt.Errorf("wal: copy %s into %s: the new log must be outside the old one", dir, dst)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return 0, fmt.Errorf("wal: copy: %w", err)
	}
	var files []logFile
	for _, name := range names {
		if first, ok := parseName(name); ok {
			files = append(files, logFile{name: name, first: first})
		}
	}
	// The files that may hold seqs in the range: from the last one
	// starting at or before After+1, to the last one starting at or
	// before UpTo.
	lo, hi := 0, len(files)
	for i, f := range files {
		if f.first <= opt.After+1 {
			lo = i
		}
		if f.first > upTo {
			hi = i
			break
		}
	}
	if len(files) == 0 || files[lo].first > opt.After+1 {
		return 0, fmt.Errorf("wal: copy %s: the records after seq %d are no longer in the log: %w", dir, opt.After, fs.ErrNotExist)
	}
	files = files[lo:hi]
	windows := make([]*window, len(files))
	var open []vfs.File
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for i, f := range files {
		w, file, err := openWindow(fsys, filepath.Join(dir, f.name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("wal: copy %s: %s was released: %w", dir, f.name, err)
			}
			return 0, fmt.Errorf("wal: copy: %w", err)
		}
		windows[i] = w
		open = append(open, file)
	}

	created, err := newDir(fsys, dst)
	if err != nil {
		return 0, fmt.Errorf("wal: copy into %s: %w", dst, err)
	}
	out := salvageOut{fsys: fsys, dir: dst, segSize: opt.SegmentSize, next: opt.After + 1}
	out.w.buf = make([]byte, 0, writeBufferSize)
	want := opt.After + 1 // the next seq to copy
	err = func() error {
		for i, w := range windows {
			next := uint64(0)
			if i+1 < len(files) {
				next = files[i+1].first
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			h, err := w.header()
			if err != nil {
				return err
			}
			if isGapFile(h) {
				if want < next || next == 0 {
					return &CorruptionError{Path: w.path, Msg: fmt.Sprintf("a gap file: the records from seq %d on were lost", want)}
				}
				continue
			}
			if why, _, err := headerDamage(h, files[i].first); err != nil {
				return fmt.Errorf("%s: %w", w.path, err)
			} else if why != "" {
				return &CorruptionError{Path: w.path, Msg: why}
			}
			limit := uint64(math.MaxUint64)
			if next != 0 {
				limit = next - files[i].first
			}
			_, err = scanRecords(w, files[i].first, limit, func(seq uint64, rec []byte) error {
				if seq < want {
					return nil
				}
				if seq > want {
					return &CorruptionError{Path: w.path, Msg: fmt.Sprintf("the records of seqs %d to %d are missing", want, seq-1)}
				}
				if err := out.record(seq, rec); err != nil {
					return err
				}
				n++
				want = seq + 1
				if seq == upTo {
					return errCopied
				}
				return nil
			})
			if errors.Is(err, errCopied) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		if opt.UpTo != 0 && want <= opt.UpTo {
			return &CorruptionError{Path: dir, Msg: fmt.Sprintf("the log ends before seq %d (at %d)", opt.UpTo, want-1)}
		}
		return nil
	}()
	if err == nil && n > 0 {
		err = out.finish()
	}
	if err != nil || n == 0 {
		out.abort(created)
		if err != nil {
			return 0, fmt.Errorf("wal: copy %s: %w", dir, err)
		}
	}
	return n, nil
}
