package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
)

// writeTxn is one write of an app in progress (an import, a compaction, a
// recovery): it holds the app's writer role — the in-process write mutex
// and, unless the Store holds the store's role for its life, the
// cross-process locks — and the catalog it builds on. Segment files it
// creates are removed unless published.
type writeTxn struct {
	a       *App
	base    *Catalog
	locks   []io.Closer
	mu      sync.Mutex // guards created: parallel flush and compaction workers create files
	created []string   // segment files created and not yet published
	// dropLive names the live segments the published catalog will hold
	// (a flush's): publish removes them from the live layer as it adopts.
	dropLive map[string]bool
	// force makes the next publish replace whatever catalog is there
	// (recovery), not only base's generation (Metastore.Publish).
	force bool
}

// beginWrite takes app a's writer role and returns the write. It refuses
// (docs/storage.md §3, §4) with a *LockedError naming the holder when another
// process writes the app or holds the store's role, and with an error
// matching ErrNoCatalog when the app's directory holds segment files but
// no readable catalog. It adopts a catalog another process published
// since this one last looked, and removes the segment files that the
// catalog proves unreferenced and no version of this process pins (the
// leftovers of an interrupted write, or files a reader pinned when they
// were replaced).
func (a *App) beginWrite() (_ *writeTxn, err error) {
	t, err := a.takeRole()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			t.end()
		}
	}()
	c, st, err := a.ms.load()
	switch {
	case errors.Is(err, ErrNoCatalog):
		if err := a.checkNoSegments(); err != nil {
			return nil, err
		}
		t.base = a.published()
	case err != nil:
		return nil, fmt.Errorf("app %q: refusing to write over an unreadable catalog (`spur verify --app %s` lists the damage, `spur recover --app %s` rebuilds it): %w",
			a.name, a.name, a.name, err)
	default:
		if c.Identity != a.ident.pos() && a.live.Load() == nil {
			// Another process published a graph since this one loaded it.
			if err := a.loadIdentity(c); err != nil {
				return nil, err
			}
		}
		if err := a.adopt(c, st); err != nil {
			return nil, err
		}
		t.base = c
	}
	if err := a.removeOrphans(t.base); err != nil {
		return nil, err
	}
	return t, nil
}

// takeRole takes app a's writer role (see writeTxn) without reading its
// catalog: the part of beginWrite that App.Recover needs too.
func (a *App) takeRole() (_ *writeTxn, err error) {
	s := a.store
	if s.cfg.ReadOnly {
		return nil, fmt.Errorf("app %q: the store is open read-only", a.name)
	}
	a.writeMu.Lock()
	return a.lockRole()
}

// lockRole is takeRole with a.writeMu already held: it takes the
// cross-process locks without waiting. On error it unlocks a.writeMu.
func (a *App) lockRole() (_ *writeTxn, err error) {
	s := a.store
	t := &writeTxn{a: a}
	defer func() {
		if err != nil {
			t.end()
		}
	}()
	if a.deleted.Load() {
		return nil, fmt.Errorf("app %q: %w", a.name, ErrAppDeleted)
	}
	if s.role == nil {
		ctx := context.Background()
		l, err := s.meta.Lease(ctx, LeaseName{}, true, "")
		if err != nil {
			return nil, a.locked(err, true)
		}
		t.locks = append(t.locks, l)
		if l, err = s.meta.Lease(ctx, LeaseName{App: a.name}, false, s.holder); err != nil {
			return nil, a.locked(err, false)
		}
		t.locks = append(t.locks, l)
	}
	a.mu.Lock()
	a.roleOK = true
	a.mu.Unlock()
	return t, nil
}

// locked turns a lease failure into a *LockedError naming the holder: the
// app lease's holder, or for the store's lease (storeLease, held by spur
// serve) its holder.
func (a *App) locked(err error, storeLease bool) error {
	var le *vfs.LockedError
	if !errors.As(err, &le) {
		return fmt.Errorf("app %q: take the writer lock: %w", a.name, err)
	}
	if storeLease && le.Holder == "" {
		le.Holder = "another process"
	}
	return &LockedError{App: a.name, Holder: le.Holder}
}

// adopt makes c, read from the metastore with stamp st, the current
// version when it is newer than the one held.
func (a *App) adopt(c *Catalog, st CatalogStamp) error { return a.adoptDropping(c, st, nil) }

// adoptDropping is adopt that also removes the live segments named in
// drop (a flush's, which c now holds) from the live layer, in the same
// swap of the current version: no version shows both or neither.
func (a *App) adoptDropping(c *Catalog, st CatalogStamp, drop map[string]bool) error {
	var lv *liveView
	l := a.live.Load()
	if l != nil {
		l.mu.Lock() // before a.mu; keeps the live layer as lv shows it until the swap
		defer l.mu.Unlock()
		lv = l.viewLocked(drop)
	}
	a.mu.Lock()
	same := a.cur.Generation == c.Generation && a.cur.Generation > 0 && len(drop) == 0
	if same {
		a.stamp = st
	}
	a.mu.Unlock()
	if same {
		return nil
	}
	v, err := a.newVersion(c, lv)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.cur
	a.cur, a.stamp = v, st
	a.releaseLocked(old)
	a.mu.Unlock()
	if l != nil {
		l.dropLocked(drop)
		l.dirty = false
	}
	return nil
}

// checkNoSegments is the refusal of docs/storage.md §3 for an app without a
// catalog: an error matching ErrNoCatalog, naming spur recover, when its
// directory holds segment files.
func (a *App) checkNoSegments() error {
	names, err := a.bucket.List(context.Background())
	if err != nil {
		return fmt.Errorf("app %q: list segments: %w", a.name, err)
	}
	if n := countSegmentFiles(names); n > 0 {
		return fmt.Errorf("app %q holds %d segment files but no catalog (%s): refusing to read or write it; run `spur recover --app %s` to rebuild the catalog: %w",
			a.name, n, a.ms.path(), a.name, ErrNoCatalog)
	}
	return nil
}

// countSegmentFiles counts the names that are segment files.
func countSegmentFiles(names []string) int {
	n := 0
	for _, name := range names {
		if validSegmentName(name) {
			n++
		}
	}
	return n
}

// removeOrphans deletes the files of the segment directory that catalog
// c does not reference and no version of this process pins (docs/storage.md
// §3: a readable catalog proves them unreferenced). Files that are not
// segment files (by name) are left alone and logged.
func (a *App) removeOrphans(c *Catalog) error {
	names, err := a.bucket.List(context.Background())
	if err != nil {
		return fmt.Errorf("app %q: list segments: %w", a.name, err)
	}
	live := make(map[string]bool, len(c.Segments))
	for _, s := range c.Segments {
		live[s.File] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range names {
		if live[name] || a.files[name] != nil {
			continue
		}
		if !validSegmentName(name) && filepath.Ext(name) != ".tmp" {
			a.store.log.Warn("unknown file in the segment directory left alone", "app", a.name, "file", name)
			continue
		}
		if err := a.bucket.Remove(context.Background(), name); errors.Is(err, fs.ErrNotExist) {
			continue // a reader's release removed it meanwhile
		} else if err != nil {
			return fmt.Errorf("app %q: remove unreferenced segment %s: %w", a.name, name, err)
		}
		a.store.log.Debug("removed a segment file the catalog does not reference (left by an interrupted write, or replaced while pinned)",
			"app", a.name, "file", name)
	}
	return nil
}

// create creates segment file name for this write. The first file of a
// new app's first write is preceded by the app's empty catalog
// (generation 1): a crash during that write then leaves a catalog that
// proves its files unreferenced (docs/storage.md §2, §3), not segment files
// without a catalog, which refuse writes until `spur recover`.
func (t *writeTxn) create(name string) (segment.File, error) {
	t.mu.Lock()
	if t.base.Generation == 0 {
		empty := t.base.clone()
		if err := t.publish(empty); err != nil {
			t.mu.Unlock()
			return nil, fmt.Errorf("app %q: create its catalog: %w", t.a.name, err)
		}
	}
	t.mu.Unlock()
	f, err := t.a.bucket.Create(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", name, err)
	}
	t.mu.Lock()
	t.created = append(t.created, name)
	t.mu.Unlock()
	return f, nil
}

// outputGen is the catalog generation this write's segments are written
// for: the base's next, counting the empty catalog create publishes first
// for a new app.
func (t *writeTxn) outputGen() uint64 {
	if t.base.Generation == 0 {
		return 2
	}
	return t.base.Generation + 1
}

// publish makes next (whose new segment files this write created, wrote
// and synced) the app's current version: it makes the files' names
// durable, swaps the catalog atomically (docs/storage.md §2) and adopts next;
// files only the previous version referenced are deleted once no reader
// pins it. next.Generation is set to base's + 1. When the catalog could not
// be swapped, the error is returned and the created files are removed by
// end. When it was swapped but perhaps not durably (the directory fsync
// failed), next is adopted and the error says so.
func (t *writeTxn) publish(next *Catalog) error {
	a := t.a
	next.Generation = t.base.Generation + 1 // the base may have become create's empty catalog
	if len(t.created) > 0 {
		if err := a.bucket.SyncNames(context.Background()); err != nil {
			return fmt.Errorf("app %q: sync segment directory: %w", a.name, err)
		}
	}
	if err := a.persistIdentity(next); err != nil {
		return err
	}
	prev := t.base
	if t.force {
		prev = nil
	}
	inPlace, err := a.ms.publish(prev, next)
	if !inPlace {
		return fmt.Errorf("app %q: %w", a.name, err)
	}
	// Files created but not published (a compaction output left empty)
	// stay for end to remove.
	if len(t.created) > 0 {
		published := make(map[string]bool, len(next.Segments))
		for _, s := range next.Segments {
			published[s.File] = true
		}
		t.created = slices.DeleteFunc(t.created, func(name string) bool { return published[name] })
	}
	t.force = false
	st, _ := a.ms.stamp()
	if verr := a.adoptDropping(next, st, t.dropLive); verr != nil {
		// Published, but this process cannot open the new version (out of
		// descriptors?): forget the stamp so the next Acquire reloads it.
		a.mu.Lock()
		a.stamp = CatalogStamp{}
		a.mu.Unlock()
		return errors.Join(err, fmt.Errorf("app %q: published generation %d but cannot open it: %w", a.name, next.Generation, verr))
	}
	t.base = next
	return err
}

// end finishes the write: removes the created files not published and
// gives up the writer role.
func (t *writeTxn) end() {
	a := t.a
	for _, name := range t.created {
		if err := a.bucket.Remove(context.Background(), name); err != nil {
			a.store.log.Warn("remove an unpublished segment (removed by the next write)", "app", a.name, "file", name, "err", err)
		}
	}
	t.created = nil
	a.mu.Lock()
	a.roleOK = false
	a.mu.Unlock()
	for i := len(t.locks) - 1; i >= 0; i-- {
		t.locks[i].Close()
	}
	t.locks = nil
	a.writeMu.Unlock()
}
