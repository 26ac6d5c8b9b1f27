package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
)

// Version is one published state of an app pinned by a reader
// (storage.md §1, pebble's version set, Prometheus's pendingReaders): the
// embedded Catalog (immutable) and its segment files, which stay open and
// on disk until every Version referencing them is released and a newer
// one is current. Get one with App.Acquire and give it back with Release;
// a query pins one Version for its whole life, so no write that runs
// meanwhile changes its answer or removes a file it reads.
type Version struct {
	*Catalog
	app   *App
	files map[string]*segFile // by file name; immutable
	refs  int                 // readers plus 1 while current (App.mu)
}

// segFile is one segment file shared by the versions that reference it:
// the file is opened when the first version referencing it is made (so
// that another process deleting it cannot break a version this process
// loaded) and its footer is read on first use.
type segFile struct {
	ref  SegmentRef
	refs int // versions referencing it (App.mu)
	f    vfs.File

	once sync.Once
	r    *segment.Reader
	err  error
}

// close closes the file, once (App.mu held).
func (f *segFile) close() error {
	var err error
	if f.f != nil {
		err = f.f.Close() // the reader reads f, and closes nothing itself
	}
	f.r, f.f = nil, nil
	return err
}

// App returns the app the version belongs to.
func (v *Version) App() *App { return v.app }

// Release gives the version back. Files that no current or pinned version
// references any more are closed, and deleted when this process holds
// the app's writer role (otherwise the next write's cleanup deletes
// them, the catalog proving them unreferenced). Release must be called
// exactly once per Acquire.
func (v *Version) Release() {
	a := v.app
	a.mu.Lock()
	unref := a.releaseLocked(v)
	a.mu.Unlock()
	if len(unref) > 0 {
		a.tryCleanup()
	}
}

// releaseLocked drops one reference to v (a.mu held). It returns the
// files that became unreferenced but could not be deleted because this
// process does not hold the app's writer role.
func (a *App) releaseLocked(v *Version) (unref []string) {
	v.refs--
	if v.refs > 0 {
		return nil
	}
	if v.refs < 0 {
		panic(fmt.Sprintf("storage: version %d of app %q released more often than acquired", v.Generation, a.name))
	}
	for name, f := range v.files {
		f.refs--
		if f.refs > 0 {
			continue
		}
		delete(a.files, name)
		if err := f.close(); err != nil {
			a.store.log.Warn("close segment", "app", a.name, "file", name, "err", err)
		}
		if a.roleOK || a.store.role != nil {
			a.removeFile(name)
		} else {
			unref = append(unref, name)
		}
	}
	return unref
}

// tryCleanup deletes the segment files the catalog on disk proves
// unreferenced, if it can take the app's writer role at once (another
// writer's next write does it otherwise). It is how a process that does
// not hold the role for its life (an embedder without Config.Writer)
// keeps the directory to the catalogued files once the last reader of a
// replaced version is done.
func (a *App) tryCleanup() {
	if a.store.cfg.ReadOnly || !a.writeMu.TryLock() {
		return
	}
	t, err := a.lockRole()
	if err != nil {
		return
	}
	defer t.end()
	if c, _, err := a.ms.load(); err == nil {
		a.removeOrphans(c)
	}
}

// removeFile deletes an unreferenced segment file (a.mu held; the caller
// holds the writer role). A failure is logged: the file is an orphan that
// the next write's cleanup retries.
func (a *App) removeFile(name string) {
	if err := a.bucket.remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.store.log.Warn("remove unreferenced segment (retried by the next write)", "app", a.name, "file", name, "err", err)
		return
	}
	a.store.log.Debug("removed unreferenced segment", "app", a.name, "file", name)
}

// newVersion makes a Version of c with one reference (the caller's),
// opening the files not yet open. A missing file is corruption of the
// catalog (a file it references is gone): reported with the catalog
// path. Readers of other processes' versions may see that when a writer
// deleted a file between their catalog read and the open; they retry.
func (a *App) newVersion(c *Catalog) (*Version, error) {
	v := &Version{Catalog: c, app: a, files: make(map[string]*segFile, len(c.Segments)), refs: 1}
	a.mu.Lock()
	defer a.mu.Unlock()
	var opened []*segFile
	for _, ref := range c.Segments {
		f := a.files[ref.File]
		if f == nil {
			file, err := a.bucket.open(ref.File)
			if err != nil {
				for _, o := range opened {
					o.close()
					delete(a.files, o.ref.File)
				}
				for _, g := range v.files {
					g.refs--
				}
				if errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("app %q: segment %s of catalog generation %d is missing: %w",
						a.name, ref.File, c.Generation, &CorruptionError{Path: a.ms.path(), Msg: "references a missing segment file " + ref.File})
				}
				return nil, fmt.Errorf("app %q: open segment: %w", a.name, err)
			}
			f = &segFile{ref: ref, f: file}
			a.files[ref.File] = f
			opened = append(opened, f)
		}
		f.refs++
		v.files[ref.File] = f
	}
	return v, nil
}

// Reader returns the open reader of segment ref of v, reading the footer
// on first use and checking it against ref (and with Config.VerifyOnOpen
// verifying the whole file). Errors: I/O errors, or corruption
// (errors.Is ErrCorruption): a damaged file, or a footer that disagrees
// with the catalog.
func (v *Version) Reader(ref SegmentRef) (*segment.Reader, error) {
	f := v.files[ref.File]
	if f == nil {
		return nil, fmt.Errorf("storage: segment %s is not in version %d of app %q", ref.File, v.Generation, v.app.name)
	}
	f.once.Do(func() {
		path := v.app.bucket.path(ref.File)
		r, err := openReader(f.f, path)
		if err != nil {
			f.err = err
			return
		}
		if err := checkFooter(ref, r.Meta(), path); err != nil {
			f.err = err
			return
		}
		if v.app.store.cfg.VerifyOnOpen {
			if err := r.Verify(); err != nil {
				f.err = err
				return
			}
		}
		f.r = r
	})
	return f.r, f.err
}

// checkFooter cross-checks a catalog entry against its segment's footer
// (storage.md §2): a disagreement is corruption, naming the segment.
func checkFooter(ref SegmentRef, m *segment.Meta, path string) error {
	bad := func(what string, cat, foot any) error {
		return &CorruptionError{Path: path, Msg: fmt.Sprintf("the catalog says %s %v, the footer %v", what, cat, foot)}
	}
	switch {
	case m.Rows != ref.Rows:
		return bad("rows", ref.Rows, m.Rows)
	case m.Users != ref.Users:
		return bad("users", ref.Users, m.Users)
	case m.MinTime != ref.MinTime || m.MaxTime != ref.MaxTime:
		return bad("time range", [2]int64{ref.MinTime, ref.MaxTime}, [2]int64{m.MinTime, m.MaxTime})
	}
	if n := len(m.Blocks); n > 0 && (ref.FirstHash != 0 || ref.LastHash != 0) &&
		(m.Blocks[0].FirstHash != ref.FirstHash || m.Blocks[n-1].LastHash != ref.LastHash) {
		return bad("user-hash range", [2]uint64{ref.FirstHash, ref.LastHash}, [2]uint64{m.Blocks[0].FirstHash, m.Blocks[n-1].LastHash})
	}
	return nil
}
