package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spurdb/spur/storage/vfs"
)

// Deleting an app (docs/storage.md §7, "An app"): Store.DeleteApp removes
// the app whole — catalog, settings, id graph, segments, write-ahead log,
// live layer, saved documents — so that nothing of it is left when it
// returns. In a file store everything of app NAME lives under
// DIR/apps/NAME: the directory is renamed to DIR/apps/.deleted-NAME-N
// (one atomic rename, made durable by a sync of DIR/apps), which is the
// moment the app stops existing for every reader and every later open,
// and then removed file by file. A crash after the rename leaves the
// .deleted- directory, which no listing reads (it is not an app name)
// and the next Open by a writer removes; a crash before it leaves the app
// as it was.

// deletedPrefix starts the name of an app directory being removed.
const deletedPrefix = ".deleted-"

// ErrAppDeleted is matched by the errors of writes to an app deleted
// while they waited (Store.DeleteApp); it matches ErrNotFound too.
var ErrAppDeleted = fmt.Errorf("%w: the app was deleted", ErrNotFound)

// DeletedApp is what Store.DeleteApp removed.
type DeletedApp struct {
	App   string `json:"app"`
	Files int    `json:"files"` // files removed
	Bytes int64  `json:"bytes"` // their size
}

// DeleteApp removes app name whole (docs/storage.md §7): when it returns,
// its directory is gone, no query or write of this Store sees it, and a
// later write of that name starts a new, empty app. It waits for the
// app's writes in progress in this process (an import, a flush, a
// compaction) and refuses those that were waiting (ErrAppDeleted); the
// live layer is closed without flushing (its events go with the app).
// Queries running on the app may fail. A damaged app (unreadable catalog)
// is deleted too. It needs the store's writer role (Config.Writer) and
// the file seams (no Config.Metastore, Buckets or Logs). Errors: an
// unknown app (ErrNotFound), the role's, I/O — a failure after the
// rename is only logged: the .deleted- directory is removed by the next
// Open.
func (s *Store) DeleteApp(ctx context.Context, name string) (*DeletedApp, error) {
	if !ValidAppName(name) {
		return nil, fmt.Errorf("invalid app name %q: want [a-z0-9][a-z0-9_-]{0,63}", name)
	}
	if s.role == nil {
		return nil, fmt.Errorf("app %q: deleting an app needs the store's writer role (storage.Config.Writer, as spur serve holds it)", name)
	}
	if s.cfg.Metastore != nil || s.cfg.Buckets != nil || s.cfg.Logs != nil {
		return nil, fmt.Errorf("app %q: deleting an app is built for the file store only", name)
	}
	dir := filepath.Join(s.cfg.Dir, "apps", name)
	if ok, err := vfs.Exists(s.fs, dir); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("app %q: %w", name, ErrNotFound)
		}
		return nil, err
	}
	s.mu.Lock()
	if s.deleting == nil {
		s.deleting = map[string]bool{}
	}
	if s.deleting[name] {
		s.mu.Unlock()
		return nil, fmt.Errorf("app %q: being deleted already", name)
	}
	s.deleting[name] = true
	a := s.apps[name]
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.deleting, name)
		s.mu.Unlock()
	}()

	if a != nil {
		a.deleted.Store(true)
		if l := a.live.Load(); l != nil {
			l.drop()
			a.live.Store(nil)
		}
		a.writeMu.Lock() // the writes in progress end; those waiting fail (lockRole)
		defer a.writeMu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		if a != nil {
			a.deleted.Store(false)
		}
		return nil, err
	}
	out := &DeletedApp{App: name}
	if err := s.sizeTree(dir, out); err != nil {
		return nil, fmt.Errorf("app %q: %w", name, err)
	}
	trash := filepath.Join(s.cfg.Dir, "apps", deletedPrefix+name+"-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := s.fs.Rename(dir, trash); err != nil {
		if a != nil {
			a.deleted.Store(false)
		}
		return nil, fmt.Errorf("app %q: %w", name, err)
	}
	if err := vfs.SyncDir(s.fs, filepath.Dir(dir)); err != nil {
		s.log.Warn("deleted app: syncing the apps directory", "app", name, "err", err)
	}
	s.mu.Lock()
	if s.apps[name] == a {
		delete(s.apps, name)
	}
	s.mu.Unlock()
	if a != nil {
		if err := a.close(); err != nil {
			s.log.Warn("deleted app: closing its files", "app", name, "err", err)
		}
	}
	if err := removeTree(s.fs, trash, nil); err != nil {
		s.log.Warn("deleted app: removing its files (the next start removes the rest)", "app", name, "dir", trash, "err", err)
	}
	return out, nil
}

// sizeTree adds the files under dir and their bytes to d.
func (s *Store) sizeTree(dir string, d *DeletedApp) error {
	names, err := s.fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := s.fs.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := s.sizeTree(p, d); err != nil {
				return err
			}
			continue
		}
		d.Files++
		d.Bytes += fi.Size()
	}
	return nil
}

// removeTree removes dir and everything under it: its files with
// removeFile (nil: fsys.Remove), then its directories, deepest first. A
// path that is gone already is skipped.
func removeTree(fsys vfs.FS, dir string, removeFile func(path string) error) error {
	if removeFile == nil {
		removeFile = fsys.Remove
	}
	fi, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return removeFile(dir)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeTree(fsys, filepath.Join(dir, n), removeFile); err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}

// removeDeletedApps removes the .deleted- app directories a crash left
// (DeleteApp), at a writer's Open.
func (s *Store) removeDeletedApps() {
	apps := filepath.Join(s.cfg.Dir, "apps")
	names, err := s.fs.List(apps)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasPrefix(n, deletedPrefix) {
			if err := removeTree(s.fs, filepath.Join(apps, n), nil); err != nil {
				s.log.Warn("removing a deleted app's directory", "dir", n, "err", err)
			}
		}
	}
}
