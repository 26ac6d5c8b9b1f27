// Package vfs is the small filesystem interface the store writes and reads
// through: the operating system's filesystem in production, and in tests
// an in-memory filesystem that can simulate a power loss (pebble's
// vfs.NewCrashableMem, adapted by package internal/crashfs) or inject
// faults. It holds only what the store needs: whole-file creation,
// positioned reads, fsync of files and directories, rename, remove and
// listing.
//
// The durability rules are POSIX's, which the crash-simulating filesystem
// enforces: data written to a file survives a power loss only after the
// file's Sync; a file's name (its directory entry, including one made by
// Rename) only after its directory's Sync.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is an open file. Files opened by FS.Create are written
// sequentially; files opened by FS.Open are read with Read or ReadAt. A
// File is not safe for concurrent use except ReadAt, which may be called
// from several goroutines at once (pread).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the file's data durable (fsync). On a directory opened
	// with FS.OpenDir it makes its entries durable.
	Sync() error
	// Stat returns the file's size and times.
	Stat() (fs.FileInfo, error)
}

// FS is a filesystem. Names are paths in the FS's own syntax (on the
// operating system's, as filepath builds them). Errors for a missing file
// match errors.Is(err, fs.ErrNotExist).
type FS interface {
	// Create creates the file name for writing, truncating it if it
	// exists.
	Create(name string) (File, error)
	// Open opens the file name for reading.
	Open(name string) (File, error)
	// OpenDir opens the directory name, for Sync.
	OpenDir(name string) (File, error)
	// Remove removes the file or empty directory name.
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname if it exists
	// (atomically on POSIX filesystems).
	Rename(oldname, newname string) error
	// MkdirAll creates the directory dir and its parents as needed.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names of the entries of directory dir, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size, times and mode of name.
	Stat(name string) (fs.FileInfo, error)
	// Lock takes a lock named by the file name (created if missing)
	// without waiting: shared locks exclude only an exclusive one; an
	// exclusive lock excludes every other, in this process (another
	// Lock call) and in others. An exclusive holder's description
	// (holder, e.g. "spur serve (pid 1234)") is recorded so that a
	// refused caller can name it. The lock lasts until the returned
	// Closer is closed (or the process ends). A held lock gives a
	// *LockedError (errors.Is ErrLocked).
	Lock(name string, shared bool, holder string) (io.Closer, error)
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
}
func (osFS) Open(name string) (File, error)              { return os.Open(name) }
func (osFS) OpenDir(name string) (File, error)           { return os.Open(name) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (osFS) Lock(name string, shared bool, holder string) (io.Closer, error) {
	return lockOS(name, shared, holder)
}
func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents)) // os.ReadDir sorts by name
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// SyncDir fsyncs directory dir of fsys, making its entries durable.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// WriteFileAtomic replaces the file dir/name of fsys with data so that a
// crash or power loss at any instant leaves either the old content or the
// new one: it writes dir/name.tmp, fsyncs it, renames it over dir/name and
// fsyncs dir. On an error before the rename dir/name is unchanged (the
// temporary file is removed); an error from the final directory fsync
// means the new content is in place but may not be durable.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	return SyncDir(fsys, dir)
}

// MkdirAllSync is MkdirAll that also makes the new directories durable:
// it fsyncs the parent of every directory it creates, so that a power
// loss cannot drop a directory (and everything in it) that a later sync
// of a file inside it seemed to make durable.
func MkdirAllSync(fsys FS, dir string, perm fs.FileMode) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAllSync(fsys, parent, perm); err != nil {
			return err
		}
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	if parent == dir {
		return nil
	}
	return SyncDir(fsys, parent)
}

// ReadFile reads the whole file name of fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Exists reports whether name exists in fsys; errors other than "not
// found" are returned.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
