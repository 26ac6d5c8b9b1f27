package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spurdb/spur/storage/vfs"
)

// DefaultShards is the shard count of a new app when Config.Shards is 0.
const DefaultShards = 16

// DefaultWriteMemory is Config.WriteMemory when it is 0: 512 MiB.
const DefaultWriteMemory int64 = 512 << 20

// ErrNotFound is matched (errors.Is) by the error for an app that does not
// exist.
var ErrNotFound = errors.New("not found")

// ErrNoCatalog is matched (errors.Is) by the error of a write to an app
// whose directory holds segment files but no readable catalog: the store
// refuses to write (a write would treat every file as unreferenced) until
// `spur recover` rebuilds the catalog (docs/storage.md §3).
var ErrNoCatalog = errors.New("no readable catalog")

// ErrLocked is matched (errors.Is) by the error of a write refused because
// another process holds the writer role (a *LockedError).
var ErrLocked = vfs.ErrLocked

// LockedError says who holds the writer role of an app: a write was
// refused because Holder ("spur serve (pid 1234)", or "" when unknown)
// writes it (docs/storage.md §4). It matches ErrLocked.
type LockedError struct {
	App    string
	Holder string
}

// Error names the app and the holder, and what to do.
func (e *LockedError) Error() string {
	h := e.Holder
	if h == "" {
		h = "another process"
	}
	msg := fmt.Sprintf("app %q is being written by %s", e.App, h)
	if strings.HasPrefix(e.Holder, "spur serve") {
		return msg + ": send imports to its API (--url), or stop it"
	}
	return msg + ": wait for it to finish"
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

var appNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidAppName reports whether name matches docs/analytics.md §1's app name rule
// `[a-z0-9][a-z0-9_-]{0,63}`.
func ValidAppName(name string) bool { return appNameRE.MatchString(name) }

// Config configures a Store.
type Config struct {
	// Dir is the store directory; created if missing (unless ReadOnly).
	Dir string
	// FS is the filesystem the store reads and writes through; nil means
	// the operating system's (vfs.Default). Tests pass a crash-simulating
	// one.
	FS vfs.FS
	// Shards is the shard count given to apps created by this Store: a power
	// of two from 1 to MaxShards; 0 means DefaultShards. Existing apps keep
	// the count in their catalog.
	Shards int
	// Writer takes the store's writer role for the Store's whole life
	// (docs/storage.md §4; `spur serve`): Open fails with a *LockedError while
	// another process writes, and other processes' writes are refused
	// until Close. Without it, each write takes the role of its app for
	// its own duration (a CLI import), and the Store otherwise only reads,
	// seeing other processes' publications from its next Acquire on.
	Writer bool
	// ReadOnly opens an existing store directory without creating it (a
	// mistyped --data of a read-only command fails instead of creating an
	// empty store); writes fail.
	ReadOnly bool
	// Holder describes this process in lock files, so that a refused
	// writer can name it: "spur serve", "spur import". The process id is
	// appended. "" means the program name.
	Holder string
	// WriteMemory bounds the memory of one import or compaction, bytes
	// (docs/storage.md §5; --write-memory); 0 means DefaultWriteMemory.
	WriteMemory int64
	// VerifyOnOpen runs the full check of segment.Reader.Verify (every
	// chunk's checksum, every decoded value against the footer) on the
	// first open of every segment in this process, so that a corrupt byte
	// anywhere in a file fails the first query that opens it. Without it
	// (the default) Open checks each file's header, trailer and footer
	// checksum and the footer against the catalog, and every read checks
	// the CRC-32C of each chunk it reads, so a query never answers from a
	// corrupt chunk; App.Verify (`spur verify`) checks everything on
	// demand. The full check costs a decode of every column of every file.
	VerifyOnOpen bool
	// Logger receives import and maintenance logs; nil means slog.Default().
	Logger *slog.Logger
	// Metastore, when not nil, holds the store's catalogs, app list,
	// writer leases and documents instead of the files under Dir
	// (CATALOG, SETTINGS, LOCK, meta/) through FS. Recover needs the
	// files.
	Metastore Metastore
	// Buckets, when not nil, opens the segment Bucket of an app (a valid
	// app name) instead of the files DIR/apps/APP/seg through FS: called
	// once per app the Store opens, and by Verify. Recover needs the
	// files (it moves damaged ones aside).
	Buckets func(app string) (Bucket, error)
	// Logs, when not nil, opens the write-ahead logs of the apps'
	// live layers instead of the files DIR/apps/APP/wal through FS
	// (package storage/wal). Recover needs the files.
	Logs LogStore
	// Live enables live ingestion (Store.Ingest; ingest.md): it needs
	// Writer. Open then opens the live layer of every app that has a
	// write-ahead log, replaying the records its catalog does not cover,
	// so that every acknowledged event is visible from the start; Close
	// flushes the live layers. nil means no live ingestion.
	Live *LiveOptions
	// Now is the clock of the apps' retention (Catalog.Retention: which
	// events queries see, imports take and compaction keeps) and, unless
	// LiveOptions.Now is set, of live ingestion; nil means
	// LiveOptions.Now when set, else time.Now. Tests fix it.
	Now func() time.Time
}

// Store is an embedded Spur store rooted at one directory. It is safe for
// concurrent use. Several Stores may exist in one process (no globals).
type Store struct {
	cfg    Config
	fs     vfs.FS
	log    *slog.Logger
	holder string
	role   io.Closer // the store's writer role (Config.Writer), or nil
	meta   Metastore // catalogs, apps, leases, documents: Config.Metastore or the files
	logs   LogStore  // the apps' write-ahead logs: Config.Logs or the files

	mu       sync.Mutex // guards apps (the map, not the apps' versions), deleting and collMu
	apps     map[string]*App
	deleting map[string]bool        // apps DeleteApp is removing (deleteapp.go)
	collMu   map[string]*sync.Mutex // per store-level document collection: this process's writers (Store.Collection)

	// scanners hold per-worker scan states with their decode buffers
	// between scans, arenas the person join's copied parts
	// (personscan.go).
	scanners freeList[shardScanner]
	arenas   freeList[partArena]

	// expireStop ends, and expireDone reports the end of, the background
	// loop that drops the apps' expired segments (retention.go; with
	// Config.Live); nil without it. stopExpiry stops it once.
	expireStop, expireDone chan struct{}
	stopExpiry             sync.Once
}

// freeList keeps values of one kind between scans for reuse (a free
// list, not a sync.Pool: a GC must not drop tens of MiB of buffers that
// the next query re-allocates): at most 2·GOMAXPROCS. Safe for
// concurrent use.
type freeList[T any] struct {
	mu   sync.Mutex
	idle []*T
}

// get returns an idle value or a new one.
func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.idle); n > 0 {
		x := f.idle[n-1]
		f.idle = f.idle[:n-1]
		return x
	}
	return new(T)
}

// put keeps x for a later get, unless enough are idle already.
func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.idle) < 2*runtime.GOMAXPROCS(0) {
		f.idle = append(f.idle, x)
	}
}

// maxIdleArenaBytes bounds a person-join arena kept for the next scan:
// the rows of the joined persons' parts a worker copied (about 10 % of
// 50M events at 16 bytes each for the funnel of docs/persons.md's cost
// measurement).
const maxIdleArenaBytes = 128 << 20

// putArena keeps a for the next scan's join, emptied, unless it is large.
func (s *Store) putArena(a *partArena) {
	if a.bytes() > maxIdleArenaBytes {
		return
	}
	a.reset()
	s.arenas.put(a)
}

// Lock file names: the store's writer role (Config.Writer: exclusive; a
// write of one app: shared) and an app's (exclusive, by whoever writes it).
const lockName = "LOCK"

// Open opens the store directory cfg.Dir (creating it unless
// cfg.ReadOnly). Errors: an invalid Config, a missing directory with
// ReadOnly (matching fs.ErrNotExist), I/O errors, and with cfg.Writer a
// *LockedError when another process writes the store.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("storage: Config.Dir is empty")
	}
	if cfg.Shards == 0 {
		cfg.Shards = DefaultShards
	}
	if !validShards(uint64(max(cfg.Shards, 0))) {
		return nil, fmt.Errorf("storage: shard count %d is not a power of two in [1, %d]", cfg.Shards, MaxShards)
	}
	if cfg.WriteMemory == 0 {
		cfg.WriteMemory = DefaultWriteMemory
	}
	if cfg.WriteMemory < 16<<20 {
		return nil, fmt.Errorf("storage: write memory %d bytes is below the minimum of 16 MiB", cfg.WriteMemory)
	}
	if cfg.Writer && cfg.ReadOnly {
		return nil, errors.New("storage: Config.Writer and Config.ReadOnly exclude each other")
	}
	if cfg.Live != nil && !cfg.Writer {
		return nil, errors.New("storage: Config.Live needs Config.Writer (one process writes the write-ahead logs)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
		if cfg.Live != nil && cfg.Live.Now != nil {
			cfg.Now = cfg.Live.Now
		}
	}
	if cfg.Live != nil && cfg.Live.Now == nil {
		live := *cfg.Live
		live.Now = cfg.Now
		cfg.Live = &live
	}
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	meta := cfg.Metastore
	if meta == nil {
		fm, err := newFileMeta(fsys, cfg.Dir, cfg.ReadOnly)
		if err != nil {
			return nil, err
		}
		meta = fm
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	holder := cfg.Holder
	if holder == "" {
		holder = filepath.Base(os.Args[0])
	}
	s := &Store{cfg: cfg, fs: fsys, meta: meta, log: log, apps: map[string]*App{},
		holder: fmt.Sprintf("%s (pid %d)", holder, os.Getpid())}
	if s.logs = cfg.Logs; s.logs == nil {
		s.logs = fileLogs{fs: fsys, dir: cfg.Dir}
	}
	if cfg.Writer {
		role, err := meta.Lease(context.Background(), LeaseName{}, false, s.holder)
		if err != nil {
			return nil, s.storeLocked(err)
		}
		s.role = role
		if cfg.Metastore == nil {
			s.removeDeletedApps()
		}
	}
	if cfg.Live != nil {
		if err := s.openLogs(); err != nil {
			s.Close()
			return nil, err
		}
		s.expireStop, s.expireDone = make(chan struct{}), make(chan struct{})
		go s.expireLoop()
	}
	return s, nil
}

// openLogs opens the live layer of every app with a write-ahead log. An
// app whose log or catalog is damaged is logged and left closed: it
// refuses writes (its Ingest fails, naming spur recover) while the other
// apps and its queries keep serving (docs/ingest.md §2).
func (s *Store) openLogs() error {
	names, err := s.AppDirs()
	if err != nil {
		return err
	}
	for _, name := range names {
		if ok, _ := s.logs.HasLog(context.Background(), name); !ok {
			continue
		}
		a, err := s.app(name, true)
		if err == nil {
			_, err = a.openLive()
		}
		if err != nil {
			s.log.Error("app refuses live writes", "app", name, "err", err)
		}
	}
	return nil
}

// storeLocked turns the failure to take the store's writer role into an
// error naming the holder: the store's (another server) or, while a CLI
// write holds it shared, the writer of an app.
func (s *Store) storeLocked(err error) error {
	var le *vfs.LockedError
	if !errors.As(err, &le) {
		return fmt.Errorf("storage: take the writer role of %s: %w", s.cfg.Dir, err)
	}
	if le.Holder != "" {
		return fmt.Errorf("storage: the store %s is being written by %s: %w", s.cfg.Dir, le.Holder, err)
	}
	ctx := context.Background()
	names, _ := s.meta.Apps(ctx, true)
	for _, name := range names {
		h, rerr := s.meta.LeaseHolder(ctx, LeaseName{App: name})
		if rerr == nil && h != "" {
			return fmt.Errorf("storage: app %q of store %s is being written by %s: %w", name, s.cfg.Dir, h, err)
		}
	}
	return fmt.Errorf("storage: the store %s is being written by another process: %w", s.cfg.Dir, err)
}

// Close flushes the live layers (ctx-free: see CloseContext), closes
// every open segment file and log, and gives up the writer role.
// Versions acquired before Close must not be read after it.
func (s *Store) Close() error { return s.CloseContext(context.Background()) }

// CloseContext is Close with ctx bounding the flush of the live layers:
// what is not flushed when ctx ends stays in the write-ahead logs, to be
// replayed by the next Open.
func (s *Store) CloseContext(ctx context.Context) error {
	s.stopExpiry.Do(func() {
		if s.expireStop != nil {
			close(s.expireStop)
			<-s.expireDone
		}
	})
	var errs []error
	for _, a := range s.openApps() {
		if l := a.live.Load(); l != nil {
			errs = append(errs, l.close(ctx))
			a.live.Store(nil)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.apps {
		errs = append(errs, a.close())
	}
	s.apps = map[string]*App{}
	if s.role != nil {
		errs = append(errs, s.role.Close())
		s.role = nil
	}
	return errors.Join(errs...)
}

// openApps returns the apps this Store has opened.
func (s *Store) openApps() []*App {
	s.mu.Lock()
	defer s.mu.Unlock()
	apps := make([]*App, 0, len(s.apps))
	for _, a := range s.apps {
		apps = append(apps, a)
	}
	return apps
}

// Dir returns the store directory.
func (s *Store) Dir() string { return s.cfg.Dir }

// Apps returns the names of the apps in the store that have a catalog,
// sorted (Metastore.Apps; in a file store the folders of DIR/apps holding
// a CATALOG or a legacy manifest.json).
func (s *Store) Apps() ([]string, error) { return s.meta.Apps(context.Background(), false) }

// AppDirs returns the names of every app of the store, sorted, also
// those without a readable catalog (for `spur verify`; in a file store
// every app folder).
func (s *Store) AppDirs() ([]string, error) { return s.meta.Apps(context.Background(), true) }

// App returns the named app. The error matches ErrNotFound if the app has
// never been written, ErrCorruption (or ErrUnsupportedVersion) if its
// catalog cannot be read.
func (s *Store) App(name string) (*App, error) {
	return s.app(name, false)
}

// app returns the named app, loading its catalog on first use; with
// create, an app that does not exist yet is returned with an empty
// catalog (generation 0), to be published by its first write.
func (s *Store) app(name string, create bool) (*App, error) {
	if !ValidAppName(name) {
		return nil, fmt.Errorf("invalid app name %q: want [a-z0-9][a-z0-9_-]{0,63}", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleting[name] {
		return nil, fmt.Errorf("app %q: %w", name, ErrAppDeleted)
	}
	if a := s.apps[name]; a != nil {
		return a, nil
	}
	a := &App{store: s, name: name, dir: filepath.Join(s.cfg.Dir, "apps", name), files: map[string]*segFile{}}
	a.ms = appMeta{s.meta, name}
	var err error
	if a.bucket, err = s.bucketOf(name); err != nil {
		return nil, err
	}
	c, stamp, err := a.ms.load()
	switch {
	case errors.Is(err, ErrNoCatalog):
		if err := a.checkNoSegments(); err != nil {
			return nil, err
		}
		if !create {
			return nil, fmt.Errorf("app %q: %w", name, ErrNotFound)
		}
		c = &Catalog{App: name, Shards: s.cfg.Shards}
	case err != nil:
		return nil, fmt.Errorf("app %q: unreadable catalog (`spur verify --app %s` lists the damage, `spur recover --app %s` rebuilds the catalog): %w",
			name, name, name, err)
	}
	if err := a.loadIdentity(c); err != nil {
		return nil, err
	}
	v, err := a.newVersion(c, nil)
	if err != nil {
		return nil, err
	}
	a.cur, a.stamp = v, stamp
	s.apps[name] = a
	return a, nil
}

// bucketOf returns the segment Bucket of app name: Config.Buckets's, or
// the files DIR/apps/NAME/seg.
func (s *Store) bucketOf(name string) (Bucket, error) {
	if s.cfg.Buckets == nil {
		return &dirBucket{fs: s.fs, dir: filepath.Join(s.cfg.Dir, "apps", name, segDir)}, nil
	}
	b, err := s.cfg.Buckets(name)
	if err != nil {
		return nil, fmt.Errorf("app %q: open its segment bucket: %w", name, err)
	}
	return b, nil
}

// App is one tenant's isolated dataset: a sequence of published versions
// (docs/storage.md §1), the current one and those still pinned by readers.
type App struct {
	store  *Store
	name   string
	dir    string
	ms     appMeta
	bucket Bucket

	writeMu sync.Mutex // one write at a time in this process

	mu     sync.Mutex   // guards cur, stamp, files, writing and the refcounts
	cur    *Version     // the current version; holds one reference
	stamp  CatalogStamp // the catalog cur was loaded from (reload check)
	files  map[string]*segFile
	roleOK bool                   // this process holds the app's writer role now
	collMu map[string]*sync.Mutex // per document collection: this process's writers (Collection)

	deleted  atomic.Bool             // Store.DeleteApp removes the app: writes refuse (ErrAppDeleted)
	ident    appIdentity             // the id graph (identity.go)
	live     atomic.Pointer[liveApp] // the live layer, once the app has taken live events (Store.Ingest)
	liveOpen sync.Mutex              // serializes openLive
	seqNext  int64                   // the next arrival rank this process hands out (allocSeq; a.mu)
}

// Name returns the app name.
func (a *App) Name() string { return a.name }

// Acquire pins the app's current version for a reader (a query): its
// segment files stay readable and on disk until Release, whatever is
// published meanwhile. With a live layer, the version shows every live
// event applied before the call (docs/ingest.md §2: acknowledged means
// visible). When another process has published since this one
// last looked (and this process does not hold the app's writer role),
// the newer version is loaded first. The caller must call Release
// exactly once. Errors: a catalog that has become unreadable
// (ErrCorruption) or I/O errors while loading a newer version.
func (a *App) Acquire() (*Version, error) {
	if l := a.live.Load(); l != nil {
		if err := l.refresh(); err != nil {
			return nil, err
		}
	} else if err := a.refresh(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cur.refs++
	return a.cur, nil
}

// Current returns the app's current catalog without pinning it: for
// metadata (names, counts, the schema's property types), including the
// live layer's (see Version). Segment files must be read through an
// acquired Version. The Catalog is immutable.
func (a *App) Current() *Catalog {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur.Catalog
}

// DataVersion returns a number that grows with every change of the app's
// data this process makes or sees: every publication (an import, flush,
// compaction) and every live request applied. A cache keyed by it is never
// stale; it equals Catalog.DataVersion of a version acquired after it
// when nothing changed in between.
func (a *App) DataVersion() int64 {
	c := a.published()
	seq := c.LogSeq
	if l := a.live.Load(); l != nil {
		l.mu.Lock()
		seq = max(seq, l.applied)
		l.mu.Unlock()
	}
	return int64(c.Generation + seq)
}

// published returns the app's current published catalog (Current without
// the live layer).
func (a *App) published() *Catalog {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur.disk
}

// refresh loads the catalog another process published since this one
// last looked, unless this process holds the app's writer role (then
// nobody else publishes).
func (a *App) refresh() error {
	a.mu.Lock()
	skip := a.roleOK || a.store.role != nil
	stamp := a.stamp
	a.mu.Unlock()
	if skip {
		return nil
	}
	now, err := a.ms.stamp()
	if err != nil || now == stamp {
		return nil // an unreadable stat: keep serving the version held
	}
	c, st, err := a.ms.load()
	if err != nil {
		if errors.Is(err, ErrNoCatalog) {
			return nil
		}
		return err
	}
	if c.Identity != a.ident.pos() {
		if err := a.loadIdentity(c); err != nil {
			return err
		}
	}
	v, err := a.newVersion(c, nil)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.Generation <= a.cur.Generation {
		a.releaseLocked(v)
		a.stamp = st
		return nil
	}
	old := a.cur
	a.cur, a.stamp = v, st
	a.releaseLocked(old)
	return nil
}

func (a *App) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for name, f := range a.files {
		errs = append(errs, f.close())
		delete(a.files, name)
	}
	return errors.Join(errs...)
}
