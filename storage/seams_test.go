package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/storage/wal"
)

// sendRequests sends n random requests of size/2 to 3·size/2 events over
// users users (newLiveRequest, one second apart) to st — ingested live,
// or imported — and imports them into ref. It returns the requests.
func sendRequests(t *testing.T, r *rand.Rand, n, size, users int, st *Store, live bool, ref *Store) []liveRequest {
	t.Helper()
	var ids idPool
	var out []liveRequest
	t0 := int64(1_600_000_000_000_000)
	for b := range n {
		req := newLiveRequest(r, size/2+r.IntN(size), users, t0+int64(b)*5_000_000, &ids)
		if live {
			ingestRequest(t, st, req)
		} else {
			importRequest(t, st, req)
		}
		importRequest(t, ref, req)
		out = append(out, req)
	}
	return out
}

// acquired returns the current version of st's app, released when the
// test ends.
func acquired(t *testing.T, st *Store, app string) *Version {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Release)
	return v
}

// memBucket is a Bucket in memory: a second implementation, as a remote
// one would be, to check that the store reaches segments only through
// the interface.
type memBucket struct {
	app     string
	mu      sync.Mutex
	objects map[string][]byte
}

type memWriter struct {
	b    *memBucket
	name string
	buf  bytes.Buffer
}

func (w *memWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *memWriter) Sync() error                 { return nil }
func (w *memWriter) Close() error {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	w.b.objects[w.name] = bytes.Clone(w.buf.Bytes())
	return nil
}

type memObject struct{ *bytes.Reader }

func (o memObject) Close() error         { return nil }
func (o memObject) Size() (int64, error) { return o.Reader.Size(), nil }

func (b *memBucket) Create(_ context.Context, name string) (segment.File, error) {
	return &memWriter{b: b, name: name}, nil
}

func (b *memBucket) Open(_ context.Context, name string) (Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[name]
	if !ok {
		return nil, fmt.Errorf("mem://%s/%s: %w", b.app, name, fs.ErrNotExist)
	}
	return memObject{bytes.NewReader(data)}, nil
}

func (b *memBucket) List(context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.objects)), nil
}

func (b *memBucket) Remove(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objects[name]; !ok {
		return fmt.Errorf("mem://%s/%s: %w", b.app, name, fs.ErrNotExist)
	}
	delete(b.objects, name)
	return nil
}

func (b *memBucket) SyncNames(context.Context) error { return nil }
func (b *memBucket) Describe(name string) string     { return "mem://" + b.app + "/" + name }

// memBuckets returns a Config.Buckets keeping each app's memBucket in
// buckets.
func memBuckets(buckets map[string]*memBucket) func(string) (Bucket, error) {
	var mu sync.Mutex
	return func(app string) (Bucket, error) {
		mu.Lock()
		defer mu.Unlock()
		if buckets[app] == nil {
			buckets[app] = &memBucket{app: app, objects: map[string][]byte{}}
		}
		return buckets[app], nil
	}
}

// TestConfigBuckets: a store whose segments live in another Bucket
// implementation (Config.Buckets) answers as the file store, through
// imports and compactions, and writes no segment file.
func TestConfigBuckets(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 26))
	buckets := map[string]*memBucket{}
	fsys := crashfs.New()
	st, err := Open(Config{Dir: "store", FS: fsys, Shards: 4, Logger: slog.New(slog.DiscardHandler), Buckets: memBuckets(buckets)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := openOn(t, crashfs.New(), 4)
	sendRequests(t, r, 5, 50, 30, st, false, ref)
	sameTrails(t, "imported", appTrails(t, st), appTrails(t, ref))
	for _, s := range []*Store{st, ref} {
		if _, err := s.Compact(ctx, "app", CompactOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	sameTrails(t, "compacted", appTrails(t, st), appTrails(t, ref))
	a, _ := st.App("app")
	if n := len(buckets["app"].objects); n != len(a.Current().Segments) {
		t.Fatalf("%d objects in the bucket, %d segments in the catalog", n, len(a.Current().Segments))
	}
	if names, err := fsys.List("store/apps/app/seg"); err == nil && len(names) > 0 {
		t.Fatalf("segment files written beside Config.Buckets: %v", names)
	}
	rep, err := st.Verify(ctx, "app")
	if err != nil || len(rep.Findings) > 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// otherFSLogs is a LogStore keeping the logs on another filesystem than
// the store's, counting appends: a second implementation of the seam.
type otherFSLogs struct {
	fileLogs
	appends *int64
	mu      *sync.Mutex
}

type countingLog struct {
	Log
	s otherFSLogs
}

func (l countingLog) Append(ctx context.Context, rec []byte) (uint64, error) {
	l.s.mu.Lock()
	*l.s.appends++
	l.s.mu.Unlock()
	return l.Log.Append(ctx, rec)
}

func (s otherFSLogs) OpenLog(ctx context.Context, app string, opt wal.Options) (Log, error) {
	l, err := s.fileLogs.OpenLog(ctx, app, opt)
	if err != nil {
		return nil, err
	}
	return countingLog{l, s}, nil
}

// TestConfigLogs: a store whose write-ahead logs come from Config.Logs
// appends every request there, and a restart replays them from there.
func TestConfigLogs(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 26))
	logFS := crashfs.New()
	var n int64
	logs := otherFSLogs{fileLogs: fileLogs{fs: logFS, dir: "logs"}, appends: &n, mu: &sync.Mutex{}}
	open := func(fsys *crashfs.FS) *Store {
		opt := quietLive
		st, err := Open(Config{Dir: "store", FS: fsys, Shards: 2, Writer: true, Live: &opt, Logs: logs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	fsys := crashfs.New()
	st := open(fsys)
	ref := openOn(t, crashfs.New(), 2)
	sendRequests(t, r, 4, 40, 20, st, true, ref)
	want := appTrails(t, ref)
	sameTrails(t, "ingested", appTrails(t, st), want)
	if n != 4 {
		t.Fatalf("%d appends to Config.Logs, want 4", n)
	}
	if ok, _ := vfs.Exists(fsys, "store/apps/app/wal"); ok {
		t.Fatal("a log directory in the store beside Config.Logs")
	}
	// A power loss of the store's filesystem and of the log's: the log
	// replays every acknowledged request.
	logs.fileLogs.fs = logFS.Crash(0, nil)
	again := open(fsys.Crash(0, nil))
	defer again.Close()
	sameTrails(t, "replayed", appTrails(t, again), want)
	st.CloseContext(context.Background())
}

// memMeta is a Metastore in memory, as a database would hold it: encoded
// catalogs, a publish counter for stamps, in-process leases.
type memMeta struct {
	mu       sync.Mutex
	catalogs map[string][]byte
	settings map[string][]byte
	stamps   map[string]CatalogStamp
	n        int64
	leases   map[LeaseName]*memLease
	docs     map[DocCollection]map[string][]byte
}

type memLease struct {
	excl   bool
	shared int
	holder string
}

func newMemMeta() *memMeta {
	return &memMeta{catalogs: map[string][]byte{}, settings: map[string][]byte{}, stamps: map[string]CatalogStamp{},
		leases: map[LeaseName]*memLease{}, docs: map[DocCollection]map[string][]byte{}}
}

func (m *memMeta) Apps(_ context.Context, all bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.catalogs)), nil
}

func (m *memMeta) Load(_ context.Context, app string) (*Catalog, CatalogStamp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.catalogs[app]
	if !ok {
		return nil, CatalogStamp{}, fmt.Errorf("app %q: %w", app, ErrNoCatalog)
	}
	c, err := decodeCatalog(m.Describe(app, nil, ""), b)
	return c, m.stamps[app], err
}

func (m *memMeta) Stamp(_ context.Context, app string) (CatalogStamp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stamps[app], nil
}

func (m *memMeta) Publish(_ context.Context, app string, prev, next *Catalog) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev != nil {
		var cur uint64
		if b, ok := m.catalogs[app]; ok {
			c, err := decodeCatalog(app, b)
			if err != nil {
				return false, err
			}
			cur = c.Generation
		}
		if cur != prev.Generation {
			return false, fmt.Errorf("generation %d, not %d: %w", cur, prev.Generation, ErrConflict)
		}
	}
	s := next.settings()
	m.settings[app] = encodeSettings(&s)
	m.catalogs[app] = encodeCatalog(next)
	m.n++
	m.stamps[app] = CatalogStamp{A: int64(next.Generation), B: m.n}
	return true, nil
}

func (m *memMeta) Settings(_ context.Context, app string) (*Settings, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.settings[app]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return decodeSettings(app, b)
}

type memRelease func()

func (f memRelease) Close() error { f(); return nil }

func (m *memMeta) Lease(_ context.Context, n LeaseName, shared bool, holder string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[n]
	if l == nil {
		l = &memLease{}
		m.leases[n] = l
	}
	if l.excl || !shared && l.shared > 0 {
		return nil, &vfs.LockedError{Name: fmt.Sprint(n), Holder: l.holder}
	}
	if shared {
		l.shared++
		return memRelease(func() { m.mu.Lock(); l.shared--; m.mu.Unlock() }), nil
	}
	l.excl, l.holder = true, holder
	return memRelease(func() { m.mu.Lock(); l.excl = false; m.mu.Unlock() }), nil
}

func (m *memMeta) LeaseHolder(_ context.Context, n LeaseName) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[n]; l != nil {
		return l.holder, nil
	}
	return "", nil
}

func (m *memMeta) ReadDoc(_ context.Context, c DocCollection, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.docs[c][id]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return slices.Clone(b), nil
}

func (m *memMeta) ListDocs(_ context.Context, c DocCollection) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.docs[c])), nil
}

func (m *memMeta) WriteDoc(_ context.Context, c DocCollection, id string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.docs[c] == nil {
		m.docs[c] = map[string][]byte{}
	}
	m.docs[c][id] = slices.Clone(data)
	return nil
}

func (m *memMeta) RemoveDoc(_ context.Context, c DocCollection, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.docs[c][id]; !ok {
		return fs.ErrNotExist
	}
	delete(m.docs[c], id)
	return nil
}

func (m *memMeta) Describe(app string, c *DocCollection, id string) string {
	if c != nil {
		return fmt.Sprintf("mem://%s/%s/%s", c.App, c.Collection, id)
	}
	return "mem://" + app
}

// TestNoFileAccessBesideTheSeams: a store whose Metastore, Buckets and
// Logs are all other implementations writes nothing through its FS —
// through imports, live ingestion, flushes, compactions, documents and
// store-level documents — and answers as a file store; its writer lease
// refuses a second writer.
func TestNoFileAccessBesideTheSeams(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 26))
	meta := newMemMeta()
	logFS := crashfs.New()
	var n int64
	storeFS := crashfs.New()
	opt := quietLive
	cfg := Config{Dir: "store", FS: storeFS, Shards: 4, Writer: true, Live: &opt, Logger: slog.New(slog.DiscardHandler),
		Metastore: meta, Buckets: memBuckets(map[string]*memBucket{}),
		Logs: otherFSLogs{fileLogs: fileLogs{fs: logFS, dir: "logs"}, appends: &n, mu: &sync.Mutex{}}}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Open(cfg); !errorsIsLocked(err) {
		t.Fatalf("a second writer: %v, want ErrLocked", err)
	}
	ref := openOn(t, crashfs.New(), 4)
	imp := sendRequests(t, r, 4, 40, 25, st, true, ref)[3]
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	sendRequests(t, r, 2, 40, 25, st, true, ref)
	for _, s := range []*Store{st, ref} {
		if _, err := s.Compact(ctx, "app", CompactOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, "imp", []Source{&sliceSource{evs: imp.evs}}, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	trailsOf := func(s *Store, app string) map[string]string { return recordTrails(t, acquired(t, s, app)) }
	sameTrails(t, "imported", trailsOf(st, "imp"), trailsOf(ref, "imp"))
	sameTrails(t, "seams", appTrails(t, st), appTrails(t, ref))
	a, _ := st.App("app")
	col, err := a.Collection("insights")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := col.Create("one", []byte(`{"q":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Update("one", 1, []byte(`{"q":2}`)); err != nil {
		t.Fatal(err)
	}
	keys, _ := st.Collection("keys")
	if _, err := keys.Put("k", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if docs, err := col.List(); err != nil || len(docs) != 1 || string(docs[0].Body) != `{"q":2}` {
		t.Fatalf("documents: %v %v", docs, err)
	}
	if apps, err := st.Apps(); err != nil || !slices.Equal(apps, []string{"app", "imp"}) {
		t.Fatalf("apps: %v %v", apps, err)
	}
	if rep, err := st.Verify(ctx, "app"); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if ok, err := vfs.Exists(storeFS, "store"); ok || err != nil {
		names, _ := storeFS.List("store")
		t.Fatalf("files beside the seams: %v (%v)", names, err)
	}
}

func errorsIsLocked(err error) bool { return errors.Is(err, ErrLocked) }

// TestFilePublishIsCompareAndSwap: the file Metastore publishes only over
// the generation the caller names: a stale one (another process published
// meanwhile) is ErrConflict and writes nothing; nil publishes over
// anything (recovery).
func TestFilePublishIsCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	fsys := crashfs.New()
	m1, err := newFileMeta(fsys, "store", false)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := newFileMeta(fsys, "store", false) // another process
	c1 := &Catalog{App: "app", Shards: 4, Generation: 1}
	if _, err := m1.Publish(ctx, "app", &Catalog{App: "app"}, c1); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Publish(ctx, "app", &Catalog{App: "app"}, c1); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second first publish: %v, want ErrConflict", err)
	}
	c, _, err := m2.Load(ctx, "app")
	if err != nil || c.Generation != 1 {
		t.Fatalf("load: %v %v", c, err)
	}
	c2 := c.clone()
	c2.Generation = 2
	if _, err := m2.Publish(ctx, "app", c, c2); err != nil {
		t.Fatal(err)
	}
	// m1 remembers generation 1; the file's stamp changed, so it reads it.
	c3 := c1.clone()
	c3.Generation = 2
	c3.NextSeq = 7
	if in, err := m1.Publish(ctx, "app", c1, c3); in || !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale publish: in place %v, %v; want ErrConflict", in, err)
	}
	if c, _, _ := m1.Load(ctx, "app"); c.NextSeq != 0 || c.Generation != 2 {
		t.Fatalf("after a refused publish: generation %d next seq %d", c.Generation, c.NextSeq)
	}
	c3.Generation = 9
	if _, err := m1.Publish(ctx, "app", nil, c3); err != nil {
		t.Fatalf("a forced publish: %v", err)
	}
	if c, _, _ := m2.Load(ctx, "app"); c.Generation != 9 {
		t.Fatalf("after a forced publish: generation %d", c.Generation)
	}
}
