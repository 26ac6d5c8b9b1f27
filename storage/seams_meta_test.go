package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

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
	var names []string
	for a := range m.catalogs {
		names = append(names, a)
	}
	slices.Sort(names)
	return names, nil
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
	var ids []string
	for id := range m.docs[c] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
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
	buckets := map[string]*memBucket{}
	var bmu sync.Mutex
	logFS := crashfs.New()
	var n int64
	storeFS := crashfs.New()
	opt := quietLive
	cfg := Config{Dir: "store", FS: storeFS, Shards: 4, Writer: true, Live: &opt, Logger: slog.New(slog.DiscardHandler),
		Metastore: meta,
		Buckets: func(app string) (Bucket, error) {
			bmu.Lock()
			defer bmu.Unlock()
			if buckets[app] == nil {
				buckets[app] = &memBucket{app: app, objects: map[string][]byte{}}
			}
			return buckets[app], nil
		},
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
	var ids idPool
	t0 := int64(1_600_000_000_000_000)
	var imp liveRequest
	for b := range 6 {
		req := newLiveRequest(r, 20+r.IntN(40), 25, t0+int64(b)*5_000_000, &ids)
		ingestRequest(t, st, req)
		importRequest(t, ref, req)
		if b == 3 {
			imp = req
			if err := st.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []*Store{st, ref} {
		if _, err := s.Compact(ctx, "app", CompactOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, "imp", []Source{&sliceSource{evs: imp.evs}}, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	trailsOf := func(s *Store, app string) map[string]string {
		a, err := s.App(app)
		if err != nil {
			t.Fatal(err)
		}
		v, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		return recordTrails(t, v)
	}
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
