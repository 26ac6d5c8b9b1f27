package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spurdb/spur/storage/vfs"
)

// Defaults of Options.
const (
	DefaultSegmentSize   = 64 << 20 // bytes (docs/ingest.md §2: log files rotate at 64 MiB)
	DefaultMaxRecordSize = 64 << 20 // bytes
)

// writeBufferSize is the size of the buffer a commit's records are copied
// into before each write, in bytes. The log never hands the caller's
// slices to File.Write: it has no business keeping or changing them.
const writeBufferSize = 512 << 10

// maxGroupRecords bounds the records of one commit group (the group
// index is 32 bits) and of one batch.
const maxGroupRecords = 1 << 24

// lockName is the lock file that keeps a second Log off the directory.
const lockName = "LOCK"

// ErrClosed is returned by the methods of a closed Log.
var ErrClosed = errors.New("wal: log closed")

// ErrTooLarge is matched (errors.Is) by the error of an append whose
// record exceeds Options.MaxRecordSize; nothing of that append is written.
var ErrTooLarge = errors.New("record too large")

// ErrReleased is matched (errors.Is) by the error of a Replay asked for
// records that Release already deleted.
var ErrReleased = errors.New("records already released")

// Options configure a Log. The zero value gives the defaults.
type Options struct {
	// SegmentSize is the size, in bytes, at which the current file is
	// rotated: a commit that finds it this large or larger starts a new
	// file first. A file exceeds it by at most one commit group. Default
	// DefaultSegmentSize.
	SegmentSize int64
	// MaxRecordSize is the largest record Append accepts, in bytes
	// (payload); a larger one fails with ErrTooLarge. Default
	// DefaultMaxRecordSize, at most MaxRecordSizeLimit.
	MaxRecordSize int
	// FirstSeq is the seq of the first record of a log whose directory
	// holds no log file (after `spur recover` set a damaged log aside,
	// the store continues after its catalog's log position). Default 1.
	// Ignored when the directory holds log files.
	FirstSeq uint64
	// Apply, if not nil, is called once per successful commit group with
	// the seq of its first record and its records in seq order (recs[i]
	// has seq first+i; each is the slice the caller passed to Append, the
	// outer slice is reused after Apply returns). Guarantees:
	//   - the group is durable when Apply is called;
	//   - groups are applied one at a time, from one goroutine, in seq
	//     order, each exactly once; a failed commit is never applied;
	//   - no Append of the group returns before Apply has returned, and
	//     every Append that returns nil has had its group applied.
	// So a caller that makes records visible in Apply makes a group
	// visible at once, after it is durable and before it is acknowledged
	// (docs/ingest.md §2). Apply runs while the next group is written and
	// fsynced; it must not call the Log's methods (it would deadlock) and
	// cannot fail: the records are in the log, so an Apply that cannot
	// keep them must stop the process (Replay reapplies them).
	Apply func(first uint64, recs [][]byte)
}

// logFile is one file of the log.
type logFile struct {
	name   string
	first  uint64 // seq of the file's first record (from its name)
	size   int64  // bytes
	synced bool   // its directory entry is durable
	gap    bool   // a gap file: its seqs were lost (see Salvage)
}

// request is one Append or AppendBatch waiting for its commit.
type request struct {
	recs  [][]byte
	one   [1][]byte // recs of an Append
	first uint64    // seq of recs[0], set by the commit
	err   error     // the commit's failure
	taken bool      // a commit has it (under Log.mu)
	done  chan struct{}
}

// group is one commit: the requests it took, in seq order.
type group struct {
	reqs  []*request
	recs  [][]byte // the records, for Options.Apply
	first uint64
}

// Stats describe a Log for metrics.
type Stats struct {
	// Files and Bytes count the log's files and their size on disk.
	Files int
	Bytes int64
	// FirstSeq is the seq of the oldest record kept (or the first seq
	// of a gap file before it), LastSeq that of the newest durable one;
	// FirstSeq = LastSeq+1 when the log holds none.
	FirstSeq, LastSeq uint64
	// Commits, Records and Failures count commit groups made durable,
	// records in them and failed commits since Open; Syncs counts
	// fsyncs of files and of the directory since Open.
	Commits, Records, Failures, Syncs uint64
	// LastSync is how long the last commit's file fsync took.
	LastSync time.Duration
}

// Log is an open write-ahead log. Its methods are safe for concurrent
// use (see the package doc).
type Log struct {
	fsys   vfs.FS
	dir    string
	opt    Options
	lock   io.Closer
	repair *Repair

	mu      sync.Mutex
	work    sync.Cond // queue grew or the log closed
	queue   []*request
	closed  bool
	rotate  bool      // Rotate: the next commit starts a new file
	files   []logFile // oldest first
	lastSeq uint64    // newest durable seq
	stats   Stats     // counters (Files, Bytes, seqs filled in by Stats)

	relMu      sync.Mutex // serialises Release and Replay
	groupLimit int        // records per commit group and batch at most: maxGroupRecords (tests lower it)

	// Owned by the committer goroutine.
	nextSeq uint64
	out     fileWriter // the file commits go to; out.f nil: start a new one

	applyc        chan *group // committed groups to apply; nil without Options.Apply
	committerDone chan struct{}
	applierDone   chan struct{}
	requests      sync.Pool
	groups        sync.Pool
}

// Open opens the log in directory dir of fsys, creating the directory if
// needed. It checks every file (see the package doc): a torn tail of the
// last file is cut (Log.Repair says what was cut); any other damage is a
// *CorruptionError naming the file and offset; a file of a newer format
// gives ErrUnsupportedVersion. It fsyncs the last file and the directory,
// so that what it found stays found. A directory another Log holds gives
// an error matching vfs.ErrLocked. The caller must Close the Log.
func Open(fsys vfs.FS, dir string, opt Options) (*Log, error) {
	if opt.SegmentSize == 0 {
		opt.SegmentSize = DefaultSegmentSize
	}
	if opt.MaxRecordSize == 0 {
		opt.MaxRecordSize = DefaultMaxRecordSize
	}
	if opt.FirstSeq == 0 {
		opt.FirstSeq = 1
	}
	switch {
	case opt.SegmentSize < 0:
		return nil, fmt.Errorf("wal: segment size %d bytes, want > 0", opt.SegmentSize)
	case opt.MaxRecordSize < 0 || opt.MaxRecordSize > MaxRecordSizeLimit:
		return nil, fmt.Errorf("wal: max record size %d bytes, want 1..%d", opt.MaxRecordSize, MaxRecordSizeLimit)
	}
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: create %s: %w", dir, err)
	}
	lock, err := fsys.Lock(filepath.Join(dir, lockName), false, fmt.Sprintf("a write-ahead log (pid %d)", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	l := &Log{fsys: fsys, dir: dir, opt: opt, lock: lock, groupLimit: maxGroupRecords}
	if err := l.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	l.nextSeq = l.lastSeq + 1
	l.work.L = &l.mu
	l.out.buf = make([]byte, 0, writeBufferSize)
	l.requests.New = func() any { return &request{done: make(chan struct{}, 1)} }
	l.groups.New = func() any { return new(group) }
	l.committerDone = make(chan struct{})
	if opt.Apply != nil {
		l.applyc = make(chan *group, 1)
		l.applierDone = make(chan struct{})
		go l.applyLoop()
	}
	go l.commitLoop()
	return l, nil
}

// load checks and repairs the files of the log and sets files and
// lastSeq.
func (l *Log) load() error {
	names, err := l.fsys.List(l.dir)
	if err != nil {
		return err
	}
	var firsts []uint64
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, ".tmp"); ok {
			if _, ok := parseName(base); ok { // an interrupted repair
				if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
					return err
				}
			}
			continue
		}
		if first, ok := parseName(name); ok {
			l.files = append(l.files, logFile{name: name, first: first, synced: true})
			firsts = append(firsts, first)
		}
	}
	l.lastSeq = l.opt.FirstSeq - 1
	if len(l.files) == 0 {
		return nil
	}
	var c checked
	for i := range l.files {
		next := uint64(0)
		if i+1 < len(firsts) {
			next = firsts[i+1]
		}
		if c, err = checkFile(l.fsys, l.dir, l.files[i].name, firsts[i], next); err != nil {
			return err
		}
		l.files[i].size, l.files[i].gap = c.size, c.gap
	}
	l.repair = c.repair
	l.lastSeq = firsts[len(firsts)-1] + c.count - 1
	if c.repair == nil {
		// The tail may be in the page cache only (a process killed
		// before its fsync): make it durable before anyone relies on it
		// and later files follow it.
		f, err := l.fsys.Open(filepath.Join(l.dir, c.name))
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("fsync %s: %w", c.name, err)
		}
	}
	return vfs.SyncDir(l.fsys, l.dir)
}

// Repair returns what Open cut from the last file as a torn tail, and
// false if it cut nothing.
func (l *Log) Repair() (Repair, bool) {
	if l.repair == nil {
		return Repair{}, false
	}
	return *l.repair, true
}

// Append writes rec as one record and returns its seq once it is durable
// and, with Options.Apply, applied (see Options.Apply for the order).
// Concurrent appends share commits (group commit). rec is read until
// Append returns (and by Apply); the Log keeps no reference to it after.
//
// Errors: ErrTooLarge for a record over Options.MaxRecordSize; ErrClosed
// after Close; ctx's error if ctx ends before a commit took the record
// (it is then never written); otherwise the commit's write or fsync error
// (errors.Is(err, syscall.ENOSPC) when the disk is full). A record whose
// Append returned an error was not acknowledged: it is not applied, and
// after a crash it may or may not be in the log (see the package doc).
// Once a commit took the record, Append waits for that commit's outcome
// (one write and fsync) even if ctx ends.
func (l *Log) Append(ctx context.Context, rec []byte) (uint64, error) {
	r := l.requests.Get().(*request)
	r.one[0] = rec
	r.recs = r.one[:]
	return l.submit(ctx, r)
}

// AppendBatch writes recs as consecutive records of one commit and
// returns the seq of recs[0] (recs[i] has seq+i) once all are durable and
// applied. The batch is atomic: after a crash it is in the log entirely
// or not at all. Errors and the use of recs are as for Append; an empty
// batch is an error.
func (l *Log) AppendBatch(ctx context.Context, recs [][]byte) (uint64, error) {
	if len(recs) == 0 || len(recs) > l.groupLimit {
		return 0, fmt.Errorf("wal: a batch of %d records, want 1..%d", len(recs), l.groupLimit)
	}
	r := l.requests.Get().(*request)
	r.recs = recs
	return l.submit(ctx, r)
}

// submit queues r for the commit loop and waits for its outcome.
func (l *Log) submit(ctx context.Context, r *request) (uint64, error) {
	first, err := l.wait(ctx, r)
	r.one[0], r.recs, r.err, r.taken = nil, nil, nil, false
	l.requests.Put(r)
	return first, err
}

// wait checks r's records, queues r and waits for its commit (see Append).
func (l *Log) wait(ctx context.Context, r *request) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for _, rec := range r.recs {
		if len(rec) > l.opt.MaxRecordSize {
			return 0, fmt.Errorf("wal: a record of %d bytes: %w (limit %d bytes)", len(rec), ErrTooLarge, l.opt.MaxRecordSize)
		}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	l.queue = append(l.queue, r)
	l.work.Signal()
	l.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		l.mu.Lock()
		if !r.taken {
			if i := slices.Index(l.queue, r); i >= 0 {
				l.queue = slices.Delete(l.queue, i, i+1)
			}
			l.mu.Unlock()
			return 0, ctx.Err()
		}
		l.mu.Unlock()
		<-r.done
	}
	return r.first, r.err
}

// commitLoop takes everything queued as one commit group, writes and
// fsyncs it, and starts the next commit as soon as that returns. On
// Close it commits what is queued, then ends.
func (l *Log) commitLoop() {
	defer close(l.committerDone)
	if l.applyc != nil {
		defer close(l.applyc)
	}
	for {
		g := l.groups.Get().(*group)
		l.mu.Lock()
		for len(l.queue) == 0 && !l.closed {
			l.work.Wait()
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		n, i := 0, 0
		for ; i < len(l.queue); i++ {
			if n += len(l.queue[i].recs); n > l.groupLimit && i > 0 {
				break
			}
			l.queue[i].taken = true
		}
		if i == len(l.queue) {
			g.reqs, l.queue = l.queue, g.reqs[:0]
		} else { // the rest waits for the next commit
			g.reqs = append(g.reqs[:0], l.queue[:i]...)
			l.queue = slices.Delete(l.queue, 0, i)
		}
		l.mu.Unlock()
		l.commit(g)
	}
}

// commit assigns g its seqs, writes and fsyncs it, and hands it on to be
// applied and acknowledged, or fails it.
func (l *Log) commit(g *group) {
	g.first = l.nextSeq
	seq, n := g.first, 0
	for _, r := range g.reqs {
		r.first = seq
		seq += uint64(len(r.recs))
		n += len(r.recs)
	}
	sync, err := l.write(g)
	if err != nil {
		l.fail(g, seq-1, err)
		return
	}
	l.nextSeq = seq
	l.mu.Lock()
	l.lastSeq = seq - 1
	l.files[len(l.files)-1].size = l.out.size
	l.stats.Commits++
	l.stats.Records += uint64(n)
	l.stats.LastSync = sync
	l.mu.Unlock()
	if l.applyc != nil {
		l.applyc <- g
		return
	}
	l.finish(g, nil)
}

// write writes g's records to the current file (starting a new one if
// there is none or it is full) and fsyncs it, and the directory if the
// file is new. It returns the file fsync's duration.
func (l *Log) write(g *group) (time.Duration, error) {
	l.mu.Lock()
	rotate := l.rotate
	l.rotate = false
	l.mu.Unlock()
	if l.out.f == nil || l.out.size >= l.opt.SegmentSize || rotate {
		if err := l.startFile(g.first); err != nil {
			return 0, err
		}
	}
	seq, index := g.first, uint32(0)
	for _, r := range g.reqs {
		for j, rec := range r.recs {
			if err := l.out.putRecord(rec, seq, index, uint32(len(r.recs)-1-j)); err != nil {
				return 0, err
			}
			seq++
			index++
		}
	}
	return l.sync()
}

// startFile closes the current file (fsynced by its last commit) and
// creates the file for seqs from first, with its header in the write
// buffer. A file of the same name (the last file when it holds no record,
// or one whose commit failed) is replaced.
func (l *Log) startFile(first uint64) error {
	l.out.close() // its data is fsynced; nothing is lost if close fails
	name := fileName(first)
	if err := l.out.create(l.fsys, filepath.Join(l.dir, name)); err != nil {
		return err
	}
	l.out.buf = appendFileHeader(l.out.buf, first)
	l.mu.Lock()
	if n := len(l.files); n > 0 && l.files[n-1].name == name {
		l.files = l.files[:n-1]
	}
	l.files = append(l.files, logFile{name: name, first: first})
	l.mu.Unlock()
	return nil
}

// fileWriter writes one log file through a buffer: the file commits go
// to, or one Salvage writes. It never hands a caller's slice to
// File.Write (the buffer is a copy). Its buffer has cap writeBufferSize.
type fileWriter struct {
	f    vfs.File // nil: no file
	size int64    // bytes written to f (the buffer not counted)
	buf  []byte   // bytes not written yet
	hdr  [recordHeaderSize]byte
}

// create creates (or truncates) the file path of fsys and makes it the
// file written, with an empty buffer. The caller closed the previous one.
func (w *fileWriter) create(fsys vfs.FS, path string) error {
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	w.f, w.size, w.buf = f, 0, w.buf[:0]
	return nil
}

// putRecord buffers the record rec with the given seq, group index and
// batch rest.
func (w *fileWriter) putRecord(rec []byte, seq uint64, index, rest uint32) error {
	putRecordHeader(&w.hdr, rec, seq, index, rest)
	if err := w.put(w.hdr[:]); err != nil {
		return err
	}
	return w.put(rec)
}

// put copies b into the buffer, writing it out whenever it fills.
func (w *fileWriter) put(b []byte) error {
	for len(b) > 0 {
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		n := copy(w.buf[len(w.buf):cap(w.buf)], b)
		w.buf = w.buf[:len(w.buf)+n]
		b = b[n:]
	}
	return nil
}

// flush writes the buffer to the file.
func (w *fileWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	w.size += int64(n)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	w.buf = w.buf[:0]
	return err
}

// close closes the file, if any, dropping what the buffer holds, and
// returns Close's error.
func (w *fileWriter) close() error {
	w.buf = w.buf[:0]
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// sync flushes the write buffer and fsyncs the current file, and the
// directory if the file's entry is not durable yet.
func (l *Log) sync() (time.Duration, error) {
	if err := l.out.flush(); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := l.out.f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync: %w", err)
	}
	took := time.Since(start)
	l.mu.Lock()
	l.stats.Syncs++
	synced := l.files[len(l.files)-1].synced
	l.mu.Unlock()
	if !synced {
		if err := vfs.SyncDir(l.fsys, l.dir); err != nil {
			return 0, err
		}
		l.mu.Lock()
		l.stats.Syncs++
		l.files[len(l.files)-1].synced = true
		l.mu.Unlock()
	}
	return took, nil
}

// fail abandons the current file (it is never written again), fences off
// what of g reached it — a new file for seqs from g.first, fsynced with
// its directory entry; if that fails, the next commit starts the new
// file — and then reports err to g's appends.
func (l *Log) fail(g *group, last uint64, err error) {
	path := filepath.Join(l.dir, fileName(g.first)) // the file a failed Create was for
	l.mu.Lock()
	l.stats.Failures++
	if l.out.f != nil { // the last file is the current one
		f := &l.files[len(l.files)-1]
		f.size = l.out.size
		path = filepath.Join(l.dir, f.name)
	}
	l.mu.Unlock()
	l.out.close() // abandoned: its error adds nothing
	first := g.first
	// The new file is made before the appends hear of the failure: when
	// Append returns the error, the log is already where the next commit
	// writes (TestFsyncFailure looked right after the error and found the
	// new file missing now and then).
	defer l.finish(g, fmt.Errorf("wal: commit of seqs %d..%d to %s: %w", first, last, path, err))
	if ferr := l.startFile(first); ferr == nil {
		if _, ferr = l.sync(); ferr == nil {
			l.mu.Lock()
			l.files[len(l.files)-1].size = l.out.size
			l.mu.Unlock()
			return
		}
	}
	l.out.close()
}

// applyLoop applies committed groups in order and acknowledges them.
func (l *Log) applyLoop() {
	defer close(l.applierDone)
	for g := range l.applyc {
		for _, r := range g.reqs {
			g.recs = append(g.recs, r.recs...)
		}
		l.opt.Apply(g.first, g.recs)
		clear(g.recs)
		g.recs = g.recs[:0]
		l.finish(g, nil)
	}
}

// finish tells g's appends the outcome and recycles g.
func (l *Log) finish(g *group, err error) {
	for i, r := range g.reqs {
		r.err = err
		g.reqs[i] = nil
		r.done <- struct{}{} // r belongs to its Append from here on
	}
	g.reqs = g.reqs[:0]
	l.groups.Put(g)
}

// Replay calls fn for every record with seq > after, in seq order (rec is
// valid during the call only), up to the newest durable record when
// Replay starts. The seqs are consecutive but across a gap file (records
// a salvage found lost), whose seqs fn never sees. The store calls it after Open and before the first
// append, with its catalog's log position, to rebuild what segments do
// not hold yet. It re-reads the files: damage found now (the disk
// changed since Open) is a *CorruptionError, and fn may have seen the
// records before it. Asking for records Release deleted (after+1 below
// the first seq kept) is an ErrReleased error. fn's error stops Replay
// and is returned as is.
func (l *Log) Replay(after uint64, fn func(seq uint64, rec []byte) error) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	files, last := slices.Clone(l.files), l.lastSeq
	first := last + 1
	if len(files) > 0 {
		first = files[0].first
	}
	l.mu.Unlock()
	if after < first-1 {
		return fmt.Errorf("wal: replay after seq %d: %w: the log %s starts at seq %d", after, ErrReleased, l.dir, first)
	}
	for i, f := range files {
		end := last + 1 // the seq after the file's last record
		if i+1 < len(files) {
			end = files[i+1].first
		}
		if end <= f.first || end-1 <= after {
			continue
		}
		if err := l.replayFile(f, end, after, fn); err != nil {
			return err
		}
	}
	return nil
}

// replayFile calls fn for the records of f with seqs in (after, end); a
// gap file is checked again and has none.
func (l *Log) replayFile(f logFile, end, after uint64, fn func(seq uint64, rec []byte) error) error {
	path := filepath.Join(l.dir, f.name)
	w, file, err := openWindow(l.fsys, path)
	if err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	defer file.Close()
	h, err := w.header()
	if err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	if f.gap {
		if why, err := gapDamage(h, w.size, f.first, end); err != nil {
			return fmt.Errorf("wal: replay %s: %w", path, err)
		} else if why != "" {
			return &CorruptionError{Path: path, Msg: why}
		}
		return nil
	}
	if why, _, err := headerDamage(h, f.first); err != nil {
		return fmt.Errorf("wal: replay %s: %w", path, err)
	} else if why != "" {
		return &CorruptionError{Path: path, Msg: why}
	}
	res, err := scanRecords(w, f.first, end-f.first, func(seq uint64, rec []byte) error {
		if seq <= after {
			return nil
		}
		return fn(seq, rec)
	})
	switch {
	case err != nil:
		return err
	case res.bad >= 0:
		return &CorruptionError{Path: path, Offset: res.bad, Msg: res.why}
	case res.count < end-f.first:
		return &CorruptionError{Path: path, Offset: res.end, Msg: fmt.Sprintf("the file ends after seq %d, want records up to %d", f.first+res.count-1, end-1)}
	}
	return nil
}

// Release deletes the oldest files all of whose records have seqs <=
// upTo (the store calls it after publishing segments that hold them),
// oldest first, fsyncing the directory after each, so that a crash never
// leaves a hole between files. It never deletes the last file (it carries
// the next seq), nor one whose successor's directory entry is not durable
// yet. It returns the first error of a removal or directory fsync; what
// was removed stays removed (after a failed directory fsync a crash may
// bring the file back, which is harmless: Replay skips its records).
func (l *Log) Release(upTo uint64) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		if len(l.files) < 2 || l.files[1].first-1 > upTo || !l.files[1].synced {
			l.mu.Unlock()
			return nil
		}
		name := l.files[0].name
		l.mu.Unlock()
		if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil {
			return fmt.Errorf("wal: release: %w", err)
		}
		l.mu.Lock()
		l.files = slices.Delete(l.files, 0, 1)
		l.mu.Unlock()
		if err := vfs.SyncDir(l.fsys, l.dir); err != nil {
			return fmt.Errorf("wal: release: %w", err)
		}
		l.mu.Lock()
		l.stats.Syncs++
		l.mu.Unlock()
	}
}

// Rotate makes the next commit start a new file, so that Release can
// delete every record before it (an erasure: docs/storage.md §7 wants
// the erased bytes gone from the log).
func (l *Log) Rotate() {
	l.mu.Lock()
	l.rotate = true
	l.mu.Unlock()
}

// Stats returns the log's current figures.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Files = len(l.files)
	for _, f := range l.files {
		s.Bytes += f.size
	}
	s.LastSeq = l.lastSeq
	s.FirstSeq = l.lastSeq + 1
	if len(l.files) > 0 {
		s.FirstSeq = l.files[0].first
	}
	return s
}

// Close commits the appends already queued, waits for them to be
// applied, closes the current file and releases the directory. Appends
// after Close fail with ErrClosed; a second Close returns ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.work.Broadcast()
	l.mu.Unlock()
	<-l.committerDone
	if l.applierDone != nil {
		<-l.applierDone
	}
	err := l.out.close()
	if lerr := l.lock.Close(); err == nil {
		err = lerr
	}
	return err
}
