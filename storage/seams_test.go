package storage

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/storage/wal"
)

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
	var names []string
	for n := range b.objects {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
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

// TestConfigBuckets: a store whose segments live in another Bucket
// implementation (Config.Buckets) answers as the file store, through
// imports and compactions, and writes no segment file.
func TestConfigBuckets(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 26))
	buckets := map[string]*memBucket{}
	var mu sync.Mutex
	fsys := crashfs.New()
	st, err := Open(Config{Dir: "store", FS: fsys, Shards: 4, Logger: slog.New(slog.DiscardHandler),
		Buckets: func(app string) (Bucket, error) {
			mu.Lock()
			defer mu.Unlock()
			if buckets[app] == nil {
				buckets[app] = &memBucket{app: app, objects: map[string][]byte{}}
			}
			return buckets[app], nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := openOn(t, crashfs.New(), 4)
	var ids idPool
	t0 := int64(1_600_000_000_000_000)
	for b := range 5 {
		req := newLiveRequest(r, 30+r.IntN(50), 30, t0+int64(b)*5_000_000, &ids)
		importRequest(t, st, req)
		importRequest(t, ref, req)
	}
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
	var ids idPool
	t0 := int64(1_600_000_000_000_000)
	for b := range 4 {
		req := newLiveRequest(r, 10+r.IntN(40), 20, t0+int64(b)*5_000_000, &ids)
		ingestRequest(t, st, req)
		importRequest(t, ref, req)
	}
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
