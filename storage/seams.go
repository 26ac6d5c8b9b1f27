package storage

import (
	"context"
	"io"
	"path/filepath"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/storage/wal"
)

// The seams of scale-out (docs/architecture.md §3; docs/roadmap.md): the store
// reaches its persistent state only through the interfaces of this file
// — the segment Bucket of each app, the write-ahead Log of each app's
// live layer, and the Metastore (catalogs, app list, writer leases,
// documents). Each has one implementation today, files under
// Config.Dir written through Config.FS (the on-disk layout of the
// package doc, with its sync points); Config selects another. A remote
// implementation (S3, Kafka, PostgreSQL) gets a context on every call
// that may do I/O, and names — never file paths — through the interface.

// Bucket holds the segment objects of one app by name (segment file
// names, such as "e-0003-5-9-g12-0.seg"). Its methods are safe for
// concurrent use. Errors for a missing object match fs.ErrNotExist.
type Bucket interface {
	// Create creates object name for writing, replacing one of that name
	// (a write retried after a crash writes the same names). The caller
	// owns the returned writer: it writes the object sequentially, calls
	// Sync (the bytes are durable) and then Close. Before Close returns
	// nil the object may be missing or partial; the store never reads
	// an object it has not closed, nor publishes one before SyncNames.
	Create(ctx context.Context, name string) (segment.File, error)
	// Open opens object name for reading. The caller owns the Object and
	// must Close it; it stays readable while open, even if Remove is
	// called meanwhile (an open file, or a remote reader that holds the
	// object's version).
	Open(ctx context.Context, name string) (Object, error)
	// List returns the names of every object, sorted (none when the app
	// has no bucket yet). It may include objects being created.
	List(ctx context.Context) ([]string, error)
	// Remove deletes object name.
	Remove(ctx context.Context, name string) error
	// SyncNames makes the names of the objects created and closed so far
	// durable (a directory fsync; a no-op where Close is the commit), so
	// that a catalog published next never references a name a crash can
	// lose.
	SyncNames(ctx context.Context) error
	// Describe returns where object name is, for messages and reports
	// (a file path, a URL). It does no I/O.
	Describe(name string) string
}

// Object is a bucket object open for reading: positioned reads, safe from
// several goroutines at once, and its size.
type Object interface {
	io.ReaderAt
	io.Closer
	// Size returns the object's size in bytes. It may do I/O on its first
	// call (a stat) and then returns the same answer.
	Size() (int64, error)
}

// Log is one app's write-ahead log (docs/ingest.md §2): the live layer appends
// each acknowledged request to it before applying it, replays what its
// catalog does not cover when it opens, and releases what a flush
// published. *wal.Log (package storage/wal, files through vfs.FS) is its
// implementation; its documentation details each method. Methods are
// safe for concurrent use.
type Log interface {
	// Append writes rec as the next record and returns its seq once it
	// is durable and applied (wal.Options.Apply, in seq order). rec is
	// the caller's again when Append returns. An error means the record
	// was not acknowledged (after a crash it may or may not be in the
	// log). Once a commit took the record, Append waits for its outcome
	// even if ctx ends.
	Append(ctx context.Context, rec []byte) (uint64, error)
	// AppendBatch writes recs as consecutive records of one commit,
	// atomically, and returns the seq of recs[0]; as Append otherwise.
	AppendBatch(ctx context.Context, recs [][]byte) (uint64, error)
	// Replay calls fn, in seq order, with every record after seq after
	// (no context: it runs once at open, bounded by the log's length)
	// (rec borrowed until fn returns). It is called once, after the open
	// and before the first append; fn's error stops it and is returned.
	// Damage found while reading is an error matching ErrCorruption;
	// records already released give wal.ErrReleased.
	Replay(after uint64, fn func(seq uint64, rec []byte) error) error
	// Release lets the log delete every record up to seq upTo (published
	// in a catalog: their events are in segments). It may keep some.
	Release(upTo uint64) error
	// Rotate makes the next append start a new log file, so that a
	// Release past it can delete every record before it.
	Rotate()
	// Repair says what the open cut from a torn tail (a write never
	// acknowledged), if anything.
	Repair() (wal.Repair, bool)
	// Stats returns the log's current figures (for metrics).
	Stats() wal.Stats
	// Close commits and applies the appends already queued and closes
	// the log; later calls fail with wal.ErrClosed.
	Close() error
}

// LogStore opens the write-ahead logs of a store's apps.
type LogStore interface {
	// OpenLog opens app's log (creating it when missing), checking what
	// it holds (see wal.Open: a torn tail is cut, other damage matches
	// ErrCorruption), with opt's first seq, file size and apply
	// function. The log takes app's log lease: another open of the same
	// log, in this process or another, fails with an error matching
	// ErrLocked. The caller must Close it.
	OpenLog(ctx context.Context, app string, opt wal.Options) (Log, error)
	// HasLog reports whether app has a log (live events were ingested
	// into it): the store opens those at start.
	HasLog(ctx context.Context, app string) (bool, error)
}

// fileLogs is the file LogStore: DIR/apps/APP/wal through the store's
// vfs.FS.
type fileLogs struct {
	fs  vfs.FS
	dir string // the store directory
}

var _ LogStore = fileLogs{}

func (f fileLogs) logDir(app string) string { return filepath.Join(f.dir, "apps", app, logDir) }

// OpenLog opens DIR/apps/APP/wal.
func (f fileLogs) OpenLog(_ context.Context, app string, opt wal.Options) (Log, error) {
	l, err := wal.Open(f.fs, f.logDir(app), opt)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// HasLog reports whether DIR/apps/APP/wal exists.
func (f fileLogs) HasLog(_ context.Context, app string) (bool, error) {
	return vfs.Exists(f.fs, f.logDir(app))
}

// Metastore holds a store's small, strongly consistent state: each app's
// catalog (the published version, docs/storage.md §2) and the second copy of
// its settings, the list of apps, the writer leases (docs/storage.md §4), and
// documents (saved cohorts, insights, dashboards; the server's access
// keys). The files under Config.Dir are its implementation by default
// (checksummed files swapped atomically, flock leases); PostgreSQL, one
// transaction per publish, is the remote one docs/roadmap.md plans. Methods
// are safe for concurrent use. App names are valid (ValidAppName),
// collection names and document ids valid too; callers check.
type Metastore interface {
	// Apps returns the names of the apps, sorted: those with a catalog,
	// or with all every app that holds any state (also one whose catalog
	// is missing or unreadable: for verify and recover).
	Apps(ctx context.Context, all bool) ([]string, error)
	// Load returns app's current catalog (the caller owns it) and its
	// stamp. Errors: one matching ErrNoCatalog when app has none,
	// ErrCorruption or ErrUnsupportedVersion when it cannot be read, I/O.
	Load(ctx context.Context, app string) (*Catalog, CatalogStamp, error)
	// Stamp returns the stamp of app's current catalog, cheaply (no
	// decoding): the zero stamp when it has none. A reader compares it
	// with the stamp of what it loaded to notice another process's
	// publication.
	Stamp(ctx context.Context, app string) (CatalogStamp, error)
	// Publish makes next app's catalog, atomically: after a crash at any
	// instant the catalog is prev or next. It is a compare-and-swap on the
	// generation: when app's current catalog is not at prev.Generation (0:
	// none), nothing is written and the error matches ErrConflict; prev
	// nil publishes over whatever is there (recovery). The caller holds
	// the writer role of app (app's lease, or the store's exclusive). inPlace reports that next is app's catalog
	// (then an error says it may not be durable: the caller adopts next
	// and reports the error); !inPlace means prev still is. Publish
	// does not retain prev or next.
	Publish(ctx context.Context, app string, prev, next *Catalog) (inPlace bool, err error)
	// Settings returns the second, independently kept copy of app's
	// settings (recovery and verify compare it with the catalog). A
	// missing copy matches fs.ErrNotExist.
	Settings(ctx context.Context, app string) (*Settings, error)
	// Lease takes the lease name without waiting (see LeaseName) and
	// returns what gives it back. A shared lease excludes only an
	// exclusive one; an exclusive one excludes every other, in this
	// process and in others. holder describes an exclusive holder ("spur
	// serve (pid 1234)") for LeaseHolder. A held lease gives an error
	// matching ErrLocked (a *vfs.LockedError naming the holder when
	// known). The lease lasts until Close (or the process ends).
	Lease(ctx context.Context, name LeaseName, shared bool, holder string) (io.Closer, error)
	// LeaseHolder returns what the last exclusive holder of lease name
	// recorded ("" when nothing): to name who writes an app when the
	// store's lease is refused.
	LeaseHolder(ctx context.Context, name LeaseName) (string, error)
	// ReadDoc returns the bytes of document id of collection c (the
	// caller owns them; the store checks them). A missing document
	// matches fs.ErrNotExist.
	ReadDoc(ctx context.Context, c DocCollection, id string) ([]byte, error)
	// ListDocs returns the ids of collection c's documents, sorted (none
	// when it has none).
	ListDocs(ctx context.Context, c DocCollection) ([]string, error)
	// WriteDoc replaces (or creates) document id with data, atomically:
	// after a crash it is the old or the new one. The caller holds c's
	// lease (LeaseName{App, Collection}).
	WriteDoc(ctx context.Context, c DocCollection, id string, data []byte) error
	// RemoveDoc removes document id, durably; a missing one matches
	// fs.ErrNotExist. The caller holds c's lease.
	RemoveDoc(ctx context.Context, c DocCollection, id string) error
	// Describe says where app's catalog is (a file path, a URL), and with
	// a collection where document id is: for messages. It does no I/O.
	Describe(app string, c *DocCollection, id string) string
}

// CatalogStamp identifies one state of an app's catalog cheaply (see
// Metastore.Stamp): equal stamps mean the same catalog. What its fields
// hold is the Metastore's (the files: size and modification time; a
// database: the generation). The zero value means no catalog.
type CatalogStamp struct{ A, B int64 }

// LeaseName names a writer lease: the store's (App and Collection ""),
// taken exclusive by a Store with Config.Writer for its life and shared
// by every other write; an app's (App set), exclusive, taken by whoever
// writes its catalog and segments; a document collection's (Collection
// set; App "" for a store-level one), exclusive, taken by each document
// write.
type LeaseName struct{ App, Collection string }

// DocCollection names a collection of documents: of an app, or of the
// store when App is "".
type DocCollection struct{ App, Collection string }
