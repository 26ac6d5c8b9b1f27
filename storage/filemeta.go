package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spurdb/spur/storage/vfs"
)

// fileMeta is the file Metastore (the package doc's layout): per app,
// DIR/apps/APP/CATALOG (or a legacy manifest.json), SETTINGS, LOCK and
// meta/COLLECTION/ID.doc; for the store, DIR/LOCK and
// DIR/meta/COLLECTION/ID.doc. Leases are flocks (vfs.FS.Lock).
type fileMeta struct {
	fs  vfs.FS
	dir string // the store directory

	mu   sync.Mutex
	apps map[string]*fileMetastore
}

var _ Metastore = (*fileMeta)(nil)

// newFileMeta returns the file Metastore of store directory dir,
// creating DIR/apps unless readOnly (then it must exist).
func newFileMeta(fsys vfs.FS, dir string, readOnly bool) (*fileMeta, error) {
	if readOnly {
		if _, err := fsys.Stat(filepath.Join(dir, "apps")); err != nil {
			return nil, fmt.Errorf("storage: %s is not a Spur store: %w", dir, err)
		}
	} else if err := vfs.MkdirAllSync(fsys, filepath.Join(dir, "apps"), 0o755); err != nil {
		return nil, fmt.Errorf("storage: create store directory: %w", err)
	}
	return &fileMeta{fs: fsys, dir: dir, apps: map[string]*fileMetastore{}}, nil
}

func (m *fileMeta) appDir(app string) string { return filepath.Join(m.dir, "apps", app) }

// app returns app's catalog files.
func (m *fileMeta) app(app string) *fileMetastore {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.apps[app]
	if a == nil {
		a = &fileMetastore{fs: m.fs, dir: m.appDir(app)}
		m.apps[app] = a
	}
	return a
}

// Apps lists the folders of DIR/apps with a valid app name: holding a
// CATALOG or a legacy manifest.json, or with all any.
func (m *fileMeta) Apps(_ context.Context, all bool) ([]string, error) {
	ents, err := m.fs.List(filepath.Join(m.dir, "apps"))
	if err != nil {
		return nil, fmt.Errorf("storage: list apps: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !ValidAppName(e) {
			continue
		}
		if all {
			if fi, err := m.fs.Stat(m.appDir(e)); err == nil && fi.IsDir() {
				names = append(names, e)
			}
			continue
		}
		for _, f := range []string{catalogName, legacyManifestName} {
			if ok, _ := vfs.Exists(m.fs, filepath.Join(m.appDir(e), f)); ok {
				names = append(names, e)
				break
			}
		}
	}
	return names, nil // fs.List sorts
}

// Load reads app's CATALOG (or legacy manifest.json).
func (m *fileMeta) Load(_ context.Context, app string) (*Catalog, CatalogStamp, error) {
	a := m.app(app)
	c, st, err := a.load()
	switch {
	case err == nil:
		a.remember(st, c.Generation)
	case errors.Is(err, ErrNoCatalog):
		a.remember(st, 0)
	}
	return c, st, err
}

// Stamp stats app's catalog file.
func (m *fileMeta) Stamp(_ context.Context, app string) (CatalogStamp, error) {
	return m.app(app).stamp()
}

// Publish swaps app's catalog file (fileMetastore.publish) when its
// generation is prev's. The generation on disk is known without reading
// the file when its stamp is the one this process last loaded or wrote
// (the writer lease keeps other processes out meanwhile); otherwise the
// file is read.
func (m *fileMeta) Publish(_ context.Context, app string, prev, next *Catalog) (bool, error) {
	a := m.app(app)
	if err := vfs.MkdirAllSync(m.fs, m.appDir(app), 0o755); err != nil {
		return false, fmt.Errorf("create app directory: %w", err)
	}
	if prev != nil {
		cur, err := a.generation()
		if err != nil {
			return false, err
		}
		if cur != prev.Generation {
			return false, fmt.Errorf("publish catalog generation %d: the catalog is at generation %d, not %d: %w",
				next.Generation, cur, prev.Generation, ErrConflict)
		}
	}
	inPlace, err := a.publish(prev, next)
	if inPlace {
		st, serr := a.stamp()
		if serr != nil {
			st = CatalogStamp{}
		}
		a.remember(st, next.Generation)
	}
	return inPlace, err
}

// Settings reads app's SETTINGS file.
func (m *fileMeta) Settings(_ context.Context, app string) (*Settings, error) {
	return m.app(app).loadSettings()
}

// leasePath returns the lock file of lease n, and the directory to create
// first ("" for the store's lease, whose directory exists).
func (m *fileMeta) leasePath(n LeaseName) (dir, path string) {
	switch {
	case n.Collection != "":
		dir = m.collDir(DocCollection(n))
		return dir, filepath.Join(dir, metaLock)
	case n.App != "":
		dir = m.appDir(n.App)
		return dir, filepath.Join(dir, lockName)
	}
	return "", filepath.Join(m.dir, lockName)
}

// Lease flocks DIR/LOCK (the store), DIR/apps/APP/LOCK (an app) or the
// collection's META.LOCK, creating the directory first.
func (m *fileMeta) Lease(_ context.Context, n LeaseName, shared bool, holder string) (io.Closer, error) {
	dir, path := m.leasePath(n)
	if dir != "" {
		if err := vfs.MkdirAllSync(m.fs, dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	return m.fs.Lock(path, shared, holder)
}

// LeaseHolder reads the lock file's holder line.
func (m *fileMeta) LeaseHolder(_ context.Context, n LeaseName) (string, error) {
	_, path := m.leasePath(n)
	b, err := vfs.ReadFile(m.fs, path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// collDir is the directory of collection c.
func (m *fileMeta) collDir(c DocCollection) string {
	if c.App == "" {
		return filepath.Join(m.dir, metaDir, c.Collection)
	}
	return filepath.Join(m.appDir(c.App), metaDir, c.Collection)
}

func (m *fileMeta) docPath(c DocCollection, id string) string {
	return filepath.Join(m.collDir(c), id+docExt)
}

// ReadDoc reads the document's file (at most maxDocFileSize+1 bytes: a
// larger file is corruption, which decodeDoc reports).
func (m *fileMeta) ReadDoc(_ context.Context, c DocCollection, id string) ([]byte, error) {
	path := m.docPath(c, id)
	f, err := m.fs.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDocFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// ListDocs lists the collection's ID.doc files.
func (m *fileMeta) ListDocs(_ context.Context, c DocCollection) ([]string, error) {
	ents, err := m.fs.List(m.collDir(c))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e, docExt); ok && ValidDocID(id) {
			ids = append(ids, id) // not META.LOCK, nor a temporary file left by a crash
		}
	}
	return ids, nil
}

// WriteDoc replaces the document's file atomically (vfs.WriteFileAtomic).
func (m *fileMeta) WriteDoc(_ context.Context, c DocCollection, id string, data []byte) error {
	return vfs.WriteFileAtomic(m.fs, m.collDir(c), id+docExt, data)
}

// RemoveDoc removes the document's file and syncs its directory.
func (m *fileMeta) RemoveDoc(_ context.Context, c DocCollection, id string) error {
	if err := m.fs.Remove(m.docPath(c, id)); err != nil {
		return err
	}
	return vfs.SyncDir(m.fs, m.collDir(c))
}

// Describe returns the path of app's CATALOG, or of a document's file.
func (m *fileMeta) Describe(app string, c *DocCollection, id string) string {
	if c != nil {
		return m.docPath(*c, id)
	}
	return m.app(app).path()
}

// isLegacy reports whether app's catalog is still a legacy manifest.json
// (which has no SETTINGS file yet).
func (m *fileMeta) isLegacy(app string) bool { return m.app(app).isLegacy() }

// The legacy cohorts file of an app (before collections): read, its
// cohorts moved into documents, then renamed (App.MigrateCohorts). Only
// file stores have one.

func (m *fileMeta) legacyCohortsPath(app string) string {
	return filepath.Join(m.appDir(app), legacyCohorts)
}

// legacyCohorts returns the bytes of app's legacy cohorts.json and its
// path (nil bytes when there is none).
func (m *fileMeta) legacyCohorts(app string) ([]byte, string, error) {
	path := m.legacyCohortsPath(app)
	b, err := vfs.ReadFile(m.fs, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, nil
	}
	return b, path, err
}

// hasLegacyCohorts reports whether app has a legacy cohorts.json.
func (m *fileMeta) hasLegacyCohorts(app string) bool {
	_, err := m.fs.Stat(m.legacyCohortsPath(app))
	return !errors.Is(err, fs.ErrNotExist)
}

// retireLegacyCohorts renames app's cohorts.json to
// cohorts.json.migrated, durably.
func (m *fileMeta) retireLegacyCohorts(app string) error {
	if err := m.fs.Rename(m.legacyCohortsPath(app), filepath.Join(m.appDir(app), legacyCohortsDone)); err != nil {
		return fmt.Errorf("set aside migrated %s: %w", legacyCohorts, err)
	}
	return vfs.SyncDir(m.fs, m.appDir(app))
}

// appMeta is one app's view of the store's Metastore, for the store's
// internal calls (which have no context: the file implementation does
// not block on one).
type appMeta struct {
	m   Metastore
	app string
}

func (am appMeta) load() (*Catalog, CatalogStamp, error) {
	return am.m.Load(context.Background(), am.app)
}

func (am appMeta) stamp() (CatalogStamp, error) { return am.m.Stamp(context.Background(), am.app) }

func (am appMeta) publish(prev, next *Catalog) (bool, error) {
	return am.m.Publish(context.Background(), am.app, prev, next)
}

func (am appMeta) loadSettings() (*Settings, error) {
	return am.m.Settings(context.Background(), am.app)
}

// path says where the app's catalog is (Metastore.Describe).
func (am appMeta) path() string { return am.m.Describe(am.app, nil, "") }

// isLegacy reports whether the app's catalog is a legacy manifest.json
// (only a file store has one).
func (am appMeta) isLegacy() bool {
	fm, ok := am.m.(*fileMeta)
	return ok && fm.isLegacy(am.app)
}
