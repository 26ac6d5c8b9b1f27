package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOneCorruptionSentinel: the log's corruption error and sentinels are
// the segment files' (internal/bin's), so a caller checking
// segment.ErrCorruption or ErrNewerVersion also catches the log's.
func TestOneCorruptionSentinel(t *testing.T) {
	var err error = fmt.Errorf("replay: %w", &CorruptionError{Path: "x.wal", Offset: 20, Msg: "bad"})
	var ce *segment.CorruptionError
	if !errors.Is(err, segment.ErrCorruption) || !errors.As(err, &ce) || ce.Offset != 20 {
		t.Fatalf("a wal.CorruptionError is not a segment one: %v", err)
	}
	if ErrUnsupportedVersion != segment.ErrNewerVersion || errors.Is(ErrUnsupportedVersion, ErrCorruption) {
		t.Fatal("ErrUnsupportedVersion is not segment.ErrNewerVersion, or matches ErrCorruption")
	}
}

// dir is the log directory every test uses.
const dir = "wal"

// rec is a replayed record.
type rec struct {
	seq  uint64
	data string
}

// openLog opens the log in dir of fsys and closes it when the test ends
// (unless the test closed it).
func openLog(t testing.TB, fsys vfs.FS, opt Options) *Log {
	t.Helper()
	l, err := Open(fsys, dir, opt)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// replayAll returns every record with seq > after.
func replayAll(t testing.TB, l *Log, after uint64) []rec {
	t.Helper()
	var out []rec
	if err := l.Replay(after, func(seq uint64, b []byte) error {
		out = append(out, rec{seq, string(b)})
		return nil
	}); err != nil {
		t.Fatalf("replay after %d: %v", after, err)
	}
	return out
}

// payload is a unique, checkable record: its writer g, its number i and
// filler up to size bytes.
func payload(g, i, size int) []byte {
	b := fmt.Appendf(nil, "g%d-i%d|", g, i)
	for len(b) < size {
		b = append(b, byte('a'+(g+i+len(b))%26))
	}
	return b
}

// appendAll appends recs one by one and returns them as replay would.
func appendAll(t testing.TB, l *Log, recs ...[]byte) []rec {
	t.Helper()
	var out []rec
	for _, r := range recs {
		seq, err := l.Append(context.Background(), r)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		out = append(out, rec{seq, string(r)})
	}
	return out
}

// appendBatch appends recs as one batch and returns them as replay
// would.
func appendBatch(t testing.TB, l *Log, recs ...[]byte) []rec {
	t.Helper()
	seq, err := l.AppendBatch(context.Background(), recs)
	if err != nil {
		t.Fatalf("append a batch: %v", err)
	}
	out := make([]rec, len(recs))
	for i, r := range recs {
		out[i] = rec{seq + uint64(i), string(r)}
	}
	return out
}

// logNames lists the log files in dir.
func logNames(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, fileSuffix) })
}

func TestRoundTrip(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{})
	r := rand.New(rand.NewPCG(1, 2))
	var want []rec
	for i := range 200 {
		size := r.IntN(3000)
		if i%50 == 0 {
			size = 0 // empty records are records too
		}
		want = append(want, appendAll(t, l, payload(0, i, size)[:size])...)
	}
	for i, w := range want {
		if w.seq != uint64(i+1) {
			t.Fatalf("record %d got seq %d, want %d", i, w.seq, i+1)
		}
	}
	if got := replayAll(t, l, 0); !slices.Equal(got, want) {
		t.Fatalf("replay before close differs: %d records, want %d", len(got), len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, Options{})
	if _, ok := l.Repair(); ok {
		t.Fatal("a cleanly closed log was repaired")
	}
	if got := replayAll(t, l, 0); !slices.Equal(got, want) {
		t.Fatalf("replay after reopen differs: %d records, want %d", len(got), len(want))
	}
	if got := replayAll(t, l, 150); !slices.Equal(got, want[150:]) {
		t.Fatalf("replay after 150: %d records, want %d", len(got), len(want)-150)
	}
	if got := replayAll(t, l, 200); len(got) != 0 {
		t.Fatalf("replay after the last seq: %d records", len(got))
	}
	st := l.Stats()
	if st.FirstSeq != 1 || st.LastSeq != 200 || st.Files != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The reopened log continues the sequence, in a new file.
	more := appendAll(t, l, []byte("after reopen"))
	if more[0].seq != 201 {
		t.Fatalf("first seq after reopen %d, want 201", more[0].seq)
	}
	if names := logNames(t, fsys); !slices.Equal(names, []string{fileName(1), fileName(201)}) {
		t.Fatalf("files %v", names)
	}
	st = l.Stats()
	size := int64(0)
	for _, n := range logNames(t, fsys) {
		fi, err := fsys.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if st.Bytes != size || st.Files != 2 || st.LastSeq != 201 || st.Commits != 1 || st.Records != 1 || st.LastSync <= 0 {
		t.Fatalf("stats %+v, files hold %d bytes", st, size)
	}
}

func TestAppendBatchAndApplyOrder(t *testing.T) {
	fsys := crashfs.New()
	var mu sync.Mutex
	var applied []rec
	l := openLog(t, fsys, Options{Apply: func(first uint64, recs [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		if n := len(applied); n > 0 && applied[n-1].seq+1 != first {
			t.Errorf("group from seq %d applied after seq %d", first, applied[n-1].seq)
		}
		for i, r := range recs {
			applied = append(applied, rec{first + uint64(i), string(r)})
		}
	}})
	ctx := context.Background()
	var wg sync.WaitGroup
	const writers, batches = 8, 30
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := range batches {
				recs := [][]byte{payload(g, 3*i, 10), payload(g, 3*i+1, 100), payload(g, 3*i+2, 1000)}
				seq, err := l.AppendBatch(ctx, recs[:1+i%3])
				if err != nil {
					errs <- err
					return
				}
				// Applied before acknowledged, as a whole.
				mu.Lock()
				for j := range 1 + i%3 {
					s := seq + uint64(j)
					if s > uint64(len(applied)) || applied[s-1] != (rec{s, string(recs[j])}) {
						t.Errorf("seq %d acknowledged but not applied", s)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := replayAll(t, l, 0); !slices.Equal(got, applied) {
		t.Fatalf("replay (%d records) differs from what was applied (%d)", len(got), len(applied))
	}
	if _, err := l.AppendBatch(ctx, nil); err == nil {
		t.Fatal("empty batch accepted")
	}
}

// TestApplySeesDurableGroups checks, inside Apply, that a power loss at
// that instant would keep the whole group.
func TestApplySeesDurableGroups(t *testing.T) {
	fsys := crashfs.New()
	var checked int
	l := openLog(t, fsys, Options{SegmentSize: 2000, Apply: func(first uint64, recs [][]byte) {
		crashed := fsys.Crash(0, nil)
		l2, err := Open(crashed, dir, Options{})
		if err != nil {
			t.Errorf("open the crashed log: %v", err)
			return
		}
		defer l2.Close()
		var got []rec
		if err := l2.Replay(first-1, func(seq uint64, b []byte) error {
			got = append(got, rec{seq, string(b)})
			return nil
		}); err != nil {
			t.Errorf("replay the crashed log: %v", err)
			return
		}
		if len(got) < len(recs) {
			t.Errorf("group from seq %d (%d records) applied, but a crash keeps %d of them", first, len(recs), len(got))
			return
		}
		for i, r := range recs {
			if got[i] != (rec{first + uint64(i), string(r)}) {
				t.Errorf("seq %d applied but not durable", first+uint64(i))
			}
		}
		checked++
	}})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 15 {
				if _, err := l.Append(context.Background(), payload(g, i, 300)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("Apply never called")
	}
}

func TestConcurrentAppends(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{SegmentSize: 64 << 10})
	const writers, each = 16, 150
	got := make([][]rec, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range each {
				b := payload(g, i, 20+r.IntN(500))
				seq, err := l.Append(context.Background(), b)
				if err != nil {
					t.Error(err)
					return
				}
				if n := len(got[g]); n > 0 && got[g][n-1].seq >= seq {
					t.Errorf("writer %d: seq %d after %d", g, seq, got[g][n-1].seq)
				}
				got[g] = append(got[g], rec{seq, string(b)})
			}
		})
	}
	wg.Wait()
	want := slices.Concat(got...)
	slices.SortFunc(want, func(a, b rec) int { return int(a.seq) - int(b.seq) })
	for i, r := range want {
		if r.seq != uint64(i+1) {
			t.Fatalf("seqs not consecutive from 1: position %d has seq %d", i, r.seq)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, Options{})
	if replay := replayAll(t, l, 0); !slices.Equal(replay, want) {
		t.Fatalf("replay has %d records, want %d (or they differ)", len(replay), len(want))
	}
	if n := len(logNames(t, fsys)); n < 3 {
		t.Fatalf("%d files: the test should rotate", n)
	}
}

// slowSyncFS makes every file fsync take a while, as a disk's does, so
// that appends pile up behind it.
type slowSyncFS struct {
	*crashfs.FS
	delay time.Duration
}

type slowSyncFile struct {
	vfs.File
	delay time.Duration
}

func (f slowSyncFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{file, f.delay}, nil
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay)
	return f.File.Sync()
}

// TestGroupCommitBatches checks that appends waiting for an fsync share
// the next one: far fewer fsyncs than records.
func TestGroupCommitBatches(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, slowSyncFS{fsys, 2 * time.Millisecond}, Options{})
	before := fsys.Syncs()
	const writers, each = 32, 20
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := l.Append(context.Background(), payload(g, i, 200)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	syncs := fsys.Syncs() - before
	st := l.Stats()
	t.Logf("%d records in %d commits, %d fsyncs", writers*each, st.Commits, syncs)
	if st.Records != writers*each || syncs > writers*each/4 || st.Commits > writers*each/4 {
		t.Fatalf("%d records took %d commits and %d fsyncs: group commit does not batch", st.Records, st.Commits, syncs)
	}
	if got := replayAll(t, l, 0); len(got) != writers*each {
		t.Fatalf("replayed %d records", len(got))
	}
}

func TestRotationAndRelease(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{SegmentSize: 900})
	var want []rec
	for i := range 40 {
		// Header 20 bytes, records 24+290: the third record of a file passes 900 bytes.
		want = append(want, appendAll(t, l, payload(0, i, 290))...)
	}
	names := logNames(t, fsys)
	if len(names) != 14 {
		t.Fatalf("files %v, want 14", names)
	}
	for i, n := range names {
		if want := fileName(uint64(1 + 3*i)); n != want {
			t.Fatalf("file %d is %s, want %s", i, n, want)
		}
	}
	// Files all of whose records are <= upTo go; the one holding upTo+1 stays.
	if err := l.Release(7); err != nil {
		t.Fatal(err)
	}
	if names := logNames(t, fsys); names[0] != fileName(7) || len(names) != 12 {
		t.Fatalf("after Release(7): %v", names)
	}
	if err := l.Release(9); err != nil {
		t.Fatal(err)
	}
	if names := logNames(t, fsys); names[0] != fileName(10) || len(names) != 11 {
		t.Fatalf("after Release(9): %v", names)
	}
	if err := l.Replay(5, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrReleased) {
		t.Fatalf("replay of released records: %v", err)
	}
	if got := replayAll(t, l, 9); !slices.Equal(got, want[9:]) {
		t.Fatalf("replay after release: %d records", len(got))
	}
	if st := l.Stats(); st.FirstSeq != 10 || st.LastSeq != 40 || st.Files != 11 {
		t.Fatalf("stats %+v", st)
	}
	// Never the last file, which carries the next seq.
	if err := l.Release(math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	if names := logNames(t, fsys); !slices.Equal(names, []string{fileName(40)}) {
		t.Fatalf("after Release(max): %v", names)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, Options{SegmentSize: 900})
	if got := replayAll(t, l, 39); !slices.Equal(got, want[39:]) {
		t.Fatalf("replay after reopen: %v", got)
	}
	if got := appendAll(t, l, []byte("next")); got[0].seq != 41 {
		t.Fatalf("seq after reopen %d, want 41", got[0].seq)
	}
}

// TestEmptyFiles: a log reopened without appends starts no file; a last
// file without records carries the next seq and is replaced by the next
// commit's file.
func TestEmptyFiles(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{FirstSeq: 100})
	if st := l.Stats(); st.FirstSeq != 100 || st.LastSeq != 99 || st.Files != 0 {
		t.Fatalf("empty log stats %+v", st)
	}
	l.Close()
	if names := logNames(t, fsys); len(names) != 0 {
		t.Fatalf("an empty log made files %v", names)
	}
	l = openLog(t, fsys, Options{FirstSeq: 100})
	want := appendAll(t, l, []byte("a"), []byte("b"))
	if want[0].seq != 100 {
		t.Fatalf("first seq %d, want Options.FirstSeq 100", want[0].seq)
	}
	l.Close()
	// A header-only last file (what a repair of a torn first commit leaves).
	if err := vfs.WriteFileAtomic(fsys, dir, fileName(102), appendFileHeader(nil, 102)); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, Options{FirstSeq: 7}) // ignored: the log has files
	if st := l.Stats(); st.LastSeq != 101 || st.Files != 2 {
		t.Fatalf("stats %+v", st)
	}
	want = append(want, appendAll(t, l, []byte("c"))...)
	if names := logNames(t, fsys); !slices.Equal(names, []string{fileName(100), fileName(102)}) {
		t.Fatalf("files %v", names)
	}
	if got := replayAll(t, l, 99); !slices.Equal(got, want) {
		t.Fatalf("replay %v, want %v", got, want)
	}
}

func TestErrors(t *testing.T) {
	fsys := crashfs.New()
	l := openLog(t, fsys, Options{MaxRecordSize: 100})
	ctx := context.Background()
	if _, err := l.Append(ctx, make([]byte, 101)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
	if _, err := l.AppendBatch(ctx, [][]byte{{1}, make([]byte, 101)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized record in a batch: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Append(cancelled, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v", err)
	}
	if _, err := Open(fsys, dir, Options{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second Open of the directory: %v", err)
	}
	if got := appendAll(t, l, make([]byte, 100)); got[0].seq != 1 {
		t.Fatalf("seq %d after refused appends, want 1", got[0].seq)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	for _, opt := range []Options{{SegmentSize: -1}, {MaxRecordSize: MaxRecordSizeLimit + 1}} {
		if _, err := Open(fsys, dir, opt); err == nil {
			t.Fatalf("options %+v accepted", opt)
		}
	}
}

// blockingSyncFS blocks every file fsync until release is closed.
type blockingSyncFS struct {
	*crashfs.FS
	entered chan struct{}
	release chan struct{}
}

type blockingSyncFile struct {
	vfs.File
	fs blockingSyncFS
}

func (f blockingSyncFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return blockingSyncFile{file, f}, nil
}

func (f blockingSyncFile) Sync() error {
	select {
	case f.fs.entered <- struct{}{}:
	default:
	}
	<-f.fs.release
	return f.File.Sync()
}

// waitQueued waits until n appends wait in l's queue.
func waitQueued(l *Log, n int) {
	for {
		l.mu.Lock()
		queued := len(l.queue)
		l.mu.Unlock()
		if queued == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancelWhileQueued: an append whose context ends while it waits
// behind a commit returns at once and is never written; one that a
// commit took waits for the commit.
func TestCancelWhileQueued(t *testing.T) {
	fsys := blockingSyncFS{crashfs.New(), make(chan struct{}, 1), make(chan struct{})}
	l := openLog(t, fsys, Options{})
	first := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), []byte("first"))
		first <- err
	}()
	<-fsys.entered // the first commit is in its fsync
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, []byte("cancelled"))
		queued <- err
	}()
	waitQueued(l, 1) // the second append
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued append: %v", err)
	}
	close(fsys.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := appendAll(t, l, []byte("third")); got[0].seq != 2 {
		t.Fatalf("seq %d, want 2: the cancelled append took a seq", got[0].seq)
	}
	if got := replayAll(t, l, 0); !slices.Equal(got, []rec{{1, "first"}, {2, "third"}}) {
		t.Fatalf("replay %v", got)
	}
}

// TestGroupLimit: a commit takes queued appends up to its record limit
// (never splitting a batch); the rest wait for the next commit.
func TestGroupLimit(t *testing.T) {
	fsys := blockingSyncFS{crashfs.New(), make(chan struct{}, 1), make(chan struct{})}
	l := openLog(t, fsys, Options{})
	l.groupLimit = 5
	if _, err := l.AppendBatch(context.Background(), make([][]byte, 6)); err == nil {
		t.Fatal("a batch over the group limit was accepted")
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := l.Append(context.Background(), []byte("first")); err != nil {
			t.Error(err)
		}
	})
	<-fsys.entered // the first commit is in its fsync
	for g := range 4 {
		wg.Go(func() {
			if _, err := l.AppendBatch(context.Background(), [][]byte{payload(g, 0, 9), payload(g, 1, 9), payload(g, 2, 9)}); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(l, 4) // all four batches
	close(fsys.release)
	wg.Wait()
	if st := l.Stats(); st.Commits != 5 || st.Records != 13 {
		t.Fatalf("stats %+v: want 5 commits (1, then one batch of 3 each)", st)
	}
	if got := replayAll(t, l, 0); len(got) != 13 {
		t.Fatalf("replayed %d records", len(got))
	}
}
