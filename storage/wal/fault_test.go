package wal

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// faultFS injects the failures of a full or failing disk into a
// crash-simulating filesystem.
type faultFS struct {
	*crashfs.FS
	mu           sync.Mutex
	space        int64 // bytes writes may still add; < 0: unlimited
	failSyncs    int   // file fsyncs still to fail (EIO, data left unsynced)
	failDirSyncs int   // directory fsyncs still to fail
}

type faultFile struct {
	vfs.File
	name string
	fs   *faultFS
}

func (f *faultFS) Create(name string) (vfs.File, error) {
	f.mu.Lock()
	full := f.space == 0
	f.mu.Unlock()
	if full {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{file, name, f}, nil
}

func (f *faultFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{file, name, f}, nil
}

// Write writes what fits and fails with ENOSPC for the rest, as a full
// disk's short write does.
func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	n := len(p)
	if f.fs.space >= 0 {
		n = int(min(int64(n), f.fs.space))
		f.fs.space -= int64(n)
	}
	f.fs.mu.Unlock()
	w, err := f.File.Write(p[:n])
	if err == nil && n < len(p) {
		err = &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return w, err
}

func (f *faultFile) Sync() error {
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	fail := &f.fs.failSyncs
	if st.IsDir() {
		fail = &f.fs.failDirSyncs
	}
	failed := *fail > 0
	if failed {
		*fail--
	}
	f.fs.mu.Unlock()
	if failed { // the data stays unsynced: a crash loses it
		return &fs.PathError{Op: "fsync", Path: f.name, Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (f *faultFS) set(fn func(*faultFS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// appliedLog opens a log on fsys that records what Apply saw.
func appliedLog(t *testing.T, fsys vfs.FS) (*Log, func() []rec) {
	var mu sync.Mutex
	var applied []rec
	l := openLog(t, fsys, Options{Apply: func(first uint64, recs [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range recs {
			applied = append(applied, rec{first + uint64(i), string(r)})
		}
	}})
	return l, func() []rec {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(applied)
	}
}

// checkAfterFailure checks that the log l on mem holds exactly want:
// after a power loss that keeps only synced data, after one that keeps all
// the unsynced data too (the failed commit's bytes in the abandoned file),
// both while l is open and after it is closed, and after a clean reopen.
func checkAfterFailure(t *testing.T, mem *crashfs.FS, l *Log, want []rec) {
	t.Helper()
	check := func() {
		for _, kept := range []int{0, 100} {
			l := openLog(t, mem.Crash(kept, rand.New(rand.NewPCG(1, 2))), Options{})
			if got := replayAll(t, l, 0); !slices.Equal(got, want) {
				t.Fatalf("after a crash keeping %d%% of unsynced data: %d records, want %d", kept, len(got), len(want))
			}
			l.Close()
		}
	}
	check()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check()
	l = openLog(t, mem, Options{})
	if got := replayAll(t, l, 0); !slices.Equal(got, want) {
		t.Fatalf("after a reopen: %d records, want %d", len(got), len(want))
	}
}

// newFaultFS returns a crash-simulating filesystem and a fault-injecting
// view of it, with no fault set.
func newFaultFS() (*crashfs.FS, *faultFS) {
	mem := crashfs.New()
	return mem, &faultFS{FS: mem, space: -1}
}

// TestFsyncFailure: an append whose fsync fails is not acknowledged nor
// applied; the log never writes that file again (after a failed fsync its
// pages may be gone while the kernel calls them clean), the next commit
// reuses the seqs in a new file, and the failed record never comes back —
// after a crash keeping every unsynced byte or after a clean reopen.
func TestFsyncFailure(t *testing.T) {
	mem, fsys := newFaultFS()
	l, applied := appliedLog(t, fsys)
	want := appendAll(t, l, []byte("1"), []byte("2"), []byte("3"))
	fsys.set(func(f *faultFS) { f.failSyncs = 1 })
	if seq, err := l.Append(context.Background(), []byte("failed")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing fsync: seq %d, %v", seq, err)
	}
	failedFile := filepath.Join(dir, fileName(1))
	st, err := mem.Stat(failedFile)
	if err != nil {
		t.Fatal(err)
	}
	if names := logNames(t, mem); !slices.Equal(names, []string{fileName(1), fileName(4)}) {
		t.Fatalf("after the failure: files %v, want the new file for seq 4 made at once", names)
	}
	want = append(want, appendAll(t, l, []byte("4"), []byte("5"))...)
	if want[3].seq != 4 {
		t.Fatalf("the append after the failure got seq %d, want 4 (the failed commit's)", want[3].seq)
	}
	if st2, _ := mem.Stat(failedFile); st2.Size() != st.Size() {
		t.Fatalf("the file whose fsync failed was written again: %d bytes, then %d", st.Size(), st2.Size())
	}
	if got := applied(); !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	if s := l.Stats(); s.Failures != 1 || s.LastSeq != 5 {
		t.Fatalf("stats %+v", s)
	}
	checkAfterFailure(t, mem, l, want)
}

// TestDiskFull: while the disk is full every append fails with ENOSPC,
// nothing of it is applied or comes back later; once space is free again
// appends succeed without a reopen.
func TestDiskFull(t *testing.T) {
	mem, fsys := newFaultFS()
	l, applied := appliedLog(t, fsys)
	want := appendAll(t, l, payload(0, 0, 500))
	fsys.set(func(f *faultFS) { f.space = 700 }) // the next record fits, the one after does not
	want = append(want, appendAll(t, l, payload(0, 1, 500))...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3 {
				if _, err := l.Append(context.Background(), payload(g+1, i, 500)); !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("append on a full disk: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if got := applied(); !slices.Equal(got, want) {
		t.Fatalf("applied %v while the disk was full", got)
	}
	fsys.set(func(f *faultFS) { f.space = -1 })
	more := appendAll(t, l, payload(9, 0, 500), payload(9, 1, 500))
	if more[0].seq != 3 {
		t.Fatalf("first seq after the disk has space again: %d, want 3", more[0].seq)
	}
	want = append(want, more...)
	if got := replayAll(t, l, 0); !slices.Equal(got, want) {
		t.Fatalf("replay %d records, want %d", len(got), len(want))
	}
	if s := l.Stats(); s.Failures < 2 {
		t.Fatalf("stats %+v", s)
	}
	checkAfterFailure(t, mem, l, want)
}

// TestDirSyncFailure: a new file's records are acknowledged only once its
// directory entry is durable.
func TestDirSyncFailure(t *testing.T) {
	mem, fsys := newFaultFS()
	l := openLog(t, fsys, Options{})
	fsys.set(func(f *faultFS) { f.failDirSyncs = 2 }) // the first commit's, and the fence's
	if _, err := l.Append(context.Background(), []byte("lost")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing directory fsync: %v", err)
	}
	want := appendAll(t, l, []byte("kept"))
	if want[0].seq != 1 {
		t.Fatalf("seq %d, want 1", want[0].seq)
	}
	checkAfterFailure(t, mem, l, want)
}

// TestStopBeforeFence documents the window the package doc names: if the
// process stops after a failed fsync and before the new file could be
// made (here the disk filled up), a restart replays the failed commit's
// intact record — never acknowledged, never applied before the restart.
// Everything acknowledged is there, and the log opens.
func TestStopBeforeFence(t *testing.T) {
	mem, fsys := newFaultFS()
	l := openLog(t, fsys, Options{})
	want := appendAll(t, l, []byte("acked"))
	// The failed commit's write fits exactly; its fsync fails; the new
	// file cannot be created.
	fsys.set(func(f *faultFS) { f.failSyncs, f.space = 1, int64(recordHeaderSize+len("failed")) })
	if _, err := l.Append(context.Background(), []byte("failed")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	if names := logNames(t, mem); !slices.Equal(names, []string{fileName(1)}) {
		t.Fatalf("files %v: the new file should have failed", names)
	}
	l.Close()
	fsys.set(func(f *faultFS) { f.space = -1 })
	l = openLog(t, fsys, Options{})
	if got := replayAll(t, l, 0); !slices.Equal(got, append(want, rec{2, "failed"})) {
		t.Fatalf("replay %v", got)
	}
}
