// Package crashfs adapts pebble's in-memory filesystem
// (github.com/cockroachdb/pebble/v2/vfs, NewCrashableMem and CrashClone) to
// the store's filesystem interface (package storage/vfs), for crash tests:
// a test runs a write against an FS, takes CrashClone at a sync point to
// get the filesystem a power loss at that instant would leave (only
// synced data and synced directory entries survive), and opens the store
// on it. It is a test dependency only; nothing in production imports it.
package crashfs

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/spurdb/spur/storage/vfs"
)

// FS is a crash-simulating in-memory filesystem. Its methods are safe for
// concurrent use. OnSync, if set, is called after every successful Sync
// of a file or directory (a sync point), with the FS, from the syncing
// goroutine.
type FS struct {
	mem   *pvfs.MemFS
	locks *vfs.MemLocks // shared by the crash clones of one FS: locks are not on disk

	mu     sync.Mutex
	onSync func()
	syncs  int
	full   bool // SetFull: writes fail with ENOSPC
}

// SetFull makes every later Write, Create and Sync fail with
// syscall.ENOSPC (a full disk) while full is true.
func (f *FS) SetFull(full bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full = full
}

func (f *FS) isFull() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full
}

// New returns an empty crash-simulating filesystem.
func New() *FS { return &FS{mem: pvfs.NewCrashableMem(), locks: &vfs.MemLocks{}} }

// Mem returns the underlying pebble filesystem (for errorfs wrapping or
// inspection).
func (f *FS) Mem() *pvfs.MemFS { return f.mem }

// SetOnSync sets the function called after every successful sync (nil:
// none).
func (f *FS) SetOnSync(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onSync = fn
}

// Syncs returns the number of successful syncs so far.
func (f *FS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Crash returns the filesystem a power loss now would leave: exactly the
// synced data and directory entries when unsynced is 0; with unsynced > 0
// each unsynced block or entry survives with that probability (percent),
// drawn from rng.
func (f *FS) Crash(unsynced int, rng *rand.Rand) *FS {
	cfg := pvfs.CrashCloneCfg{UnsyncedDataPercent: unsynced}
	if unsynced > 0 {
		cfg.RNG = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	}
	return &FS{mem: f.mem.CrashClone(cfg), locks: &vfs.MemLocks{}}
}

func (f *FS) synced() {
	f.mu.Lock()
	f.syncs++
	fn := f.onSync
	f.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Create implements vfs.FS.
func (f *FS) Create(name string) (vfs.File, error) {
	if f.isFull() {
		return nil, &fs.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	file, err := f.mem.Create(name, pvfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return &file2{File: file, fs: f}, nil
}

// Open implements vfs.FS.
func (f *FS) Open(name string) (vfs.File, error) {
	file, err := f.mem.Open(name)
	if err != nil {
		return nil, err
	}
	return &file2{File: file, fs: f}, nil
}

// OpenDir implements vfs.FS.
func (f *FS) OpenDir(name string) (vfs.File, error) {
	file, err := f.mem.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &file2{File: file, fs: f}, nil
}

// Remove implements vfs.FS.
func (f *FS) Remove(name string) error { return f.mem.Remove(name) }

// Rename implements vfs.FS.
func (f *FS) Rename(oldname, newname string) error { return f.mem.Rename(oldname, newname) }

// MkdirAll implements vfs.FS.
func (f *FS) MkdirAll(dir string, perm fs.FileMode) error { return f.mem.MkdirAll(dir, perm) }

// List implements vfs.FS (sorted).
func (f *FS) List(dir string) ([]string, error) {
	names, err := f.mem.List(dir)
	slices.Sort(names)
	return names, err
}

// Link implements vfs.Linker: a hard link, durable after a sync of its
// directory, like a create.
func (f *FS) Link(oldname, newname string) error { return f.mem.Link(oldname, newname) }

// Stat implements vfs.FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.mem.Stat(name) }

// Lock implements vfs.FS with an in-memory lock table (a crash drops
// every lock, as a process's death does).
func (f *FS) Lock(name string, shared bool, holder string) (io.Closer, error) {
	return f.locks.Lock(name, shared, holder)
}

// file2 is a pebble file as a vfs.File.
type file2 struct {
	pvfs.File
	fs *FS
}

func (f *file2) Stat() (fs.FileInfo, error) { return f.File.Stat() }

func (f *file2) Write(p []byte) (int, error) {
	if f.fs.isFull() {
		return 0, &fs.PathError{Op: "write", Path: "file", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f *file2) Sync() error {
	if f.fs.isFull() {
		return &fs.PathError{Op: "sync", Path: "file", Err: syscall.ENOSPC}
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.synced()
	return nil
}

var _ vfs.FS = (*FS)(nil)
