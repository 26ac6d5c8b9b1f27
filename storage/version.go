package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/storage/segment"
)

// Version is one published state of an app pinned by a reader
// (docs/storage.md §1, pebble's version set, Prometheus's pendingReaders): the
// embedded Catalog (immutable) and its segment files, which stay open and
// on disk until every Version referencing them is released and a newer
// one is current. Get one with App.Acquire and give it back with Release;
// a query pins one Version for its whole life, so no write that runs
// meanwhile changes its answer or removes a file it reads.
//
// With live ingestion the embedded Catalog is a view: the published
// catalog plus the live layer's sealed segments (held in memory, named
// with livePrefix), its schema and the number of the last write-ahead-log
// record applied (LogSeq): what every request acknowledged before the
// version was made holds. Published returns the catalog alone.
type Version struct {
	*Catalog
	disk  *Catalog // the published catalog (Catalog itself without live segments)
	app   *App
	files map[string]*segFile // by file name; immutable
	refs  int                 // readers plus 1 while current (App.mu)
	// persons is the id graph as of the version (Persons).
	persons *identity.Snapshot
	// erase indexes the pending deletions of Deletions (eraseIndex),
	// built on first use.
	eraseOnce sync.Once
	erase     *eraseIndex
}

// erasing returns the index of the version's pending deletions, nil when
// none is pending.
func (v *Version) erasing() *eraseIndex {
	v.eraseOnce.Do(func() { v.erase = newEraseIndex(v.Deletions, v.EventProps, v.DelSalt) })
	return v.erase
}

// Published returns the catalog the version was made of, without the live
// layer's segments: what the app's catalog file holds. It is immutable.
func (v *Version) Published() *Catalog { return v.disk }

// liveView is what the live layer adds to a published catalog in a
// version: its sealed segments, the schema as of its last applied record,
// and that record's number.
type liveView struct {
	segs       []liveSeg
	eventProps []event.PropType
	userProps  []event.PropType
	logSeq     uint64
	dels       []Deletion // applied deletion requests not yet published
}

// liveSeg is a sealed segment of the live layer: its catalog entry
// (ref.File begins with livePrefix) and its bytes, immutable.
type liveSeg struct {
	ref  SegmentRef
	data []byte
}

// segFile is one segment file shared by the versions that reference it:
// the file is opened when the first version referencing it is made (so
// that another process deleting it cannot break a version this process
// loaded) and its footer is read on first use.
type segFile struct {
	ref  SegmentRef
	refs int // versions referencing it (App.mu)
	f    Object
	mem  []byte // a live segment's bytes (then f is nil)

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
	f.r, f.f, f.mem = nil, nil, nil
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
		live := f.mem != nil
		if err := f.close(); err != nil {
			a.store.log.Warn("close segment", "app", a.name, "file", name, "err", err)
		}
		if live {
			continue // memory only: nothing to delete
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
	if err := a.bucket.Remove(context.Background(), name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.store.log.Warn("remove unreferenced segment (retried by the next write)", "app", a.name, "file", name, "err", err)
		return
	}
	a.store.log.Debug("removed unreferenced segment", "app", a.name, "file", name)
}

// newVersion makes a Version of published catalog c and the live layer's
// view lv (nil: none) with one reference (the caller's), opening the
// files not yet open. A missing file is corruption of the catalog (a file
// it references is gone): reported with the catalog path. Readers of
// other processes' versions may see that when a writer deleted a file
// between their catalog read and the open; they retry.
func (a *App) newVersion(c *Catalog, lv *liveView) (*Version, error) {
	view := c
	mem := map[string][]byte{}
	if lv != nil {
		view = c.clone()
		for _, s := range lv.segs {
			view.Segments = append(view.Segments, s.ref)
			view.NextSeq = max(view.NextSeq, s.ref.SeqMax+1)
			mem[s.ref.File] = s.data
		}
		sortSegments(view.Segments)
		view.EventProps, view.UserProps = lv.eventProps, lv.userProps
		view.LogSeq = max(view.LogSeq, lv.logSeq)
		if len(lv.dels) > 0 {
			view.Deletions = append(slices.Clip(c.Deletions), lv.dels...)
		}
	}
	v := &Version{Catalog: view, disk: c, app: a, files: make(map[string]*segFile, len(view.Segments)), refs: 1,
		persons: a.ident.snapshot()}
	a.mu.Lock()
	defer a.mu.Unlock()
	var opened []*segFile
	for _, ref := range view.Segments {
		f := a.files[ref.File]
		if f == nil && mem[ref.File] != nil {
			f = &segFile{ref: ref, mem: mem[ref.File]}
			a.files[ref.File] = f
			opened = append(opened, f)
		}
		if f == nil {
			file, err := a.bucket.Open(context.Background(), ref.File)
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
		path := v.app.bucket.Describe(ref.File)
		var r *segment.Reader
		var err error
		if f.mem != nil {
			path = fmt.Sprintf("live segment %s of app %q", ref.File, v.app.name)
			r, err = segment.NewReader(bytes.NewReader(f.mem), int64(len(f.mem)), path)
		} else {
			r, err = openReader(f.f, path)
		}
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
// (docs/storage.md §2): a disagreement is corruption, naming the segment.
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
	if id := m.Identity; id.Kind != segment.KindNone {
		// Format 4 on: the footer says which segment it is.
		switch {
		case id.Kind != ref.Kind.segmentKind() || id.Shard != ref.Shard:
			return bad("kind and shard", fmt.Sprintf("%s %d", ref.Kind, ref.Shard), fmt.Sprintf("%s %d", id.Kind, id.Shard))
		case id.SeqMin != ref.SeqMin || id.SeqMax != ref.SeqMax:
			return bad("arrival range", [2]int64{ref.SeqMin, ref.SeqMax}, [2]int64{id.SeqMin, id.SeqMax})
		case id.Generation != ref.Generation:
			return bad("generation", ref.Generation, id.Generation)
		}
	}
	if n := len(m.Blocks); n > 0 && (ref.FirstHash != 0 || ref.LastHash != 0) &&
		(m.Blocks[0].FirstHash != ref.FirstHash || m.Blocks[n-1].LastHash != ref.LastHash) {
		return bad("user-hash range", [2]uint64{ref.FirstHash, ref.LastHash}, [2]uint64{m.Blocks[0].FirstHash, m.Blocks[n-1].LastHash})
	}
	return nil
}
