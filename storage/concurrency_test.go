package storage

import (
	"context"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// concurrentQueries is how many queries TestQueriesWhileWriting runs:
// docs/storage.md §1's promise is shown by ≥ 10,000 (issue #15: CI runs them in
// its -tags purego pass); -short and -race builds (ten times slower) run
// 1,000.
func concurrentQueries(t *testing.T) int64 {
	if testing.Short() || raceEnabled {
		return 1_000
	}
	return 10_000
}

// TestQueriesWhileWriting runs imports and compactions in a loop while
// four goroutines query pinned versions (docs/storage.md §1): every answer must
// equal the reference answer of the version the query pinned (computed
// from the events alone by trailModel), no query may fail, and when the
// writes end and the last reader is gone, the directory holds only the
// files of the current version.
func TestQueriesWhileWriting(t *testing.T) {
	ctx := context.Background()
	st := openTest(t, 4)
	r := rand.New(rand.NewPCG(7, 7))
	var ids idPool
	var m trailModel
	first := compactEvents(r, 400, 50, 1_600_000_000_000_000, &ids)
	m.addEvents(first)
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: first}}, ImportOptions{FlushRows: 100}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")

	// want[generation] is the reference answer of that version, stored
	// before the write that publishes it starts.
	var want sync.Map
	want.Store(a.Current().Generation, m.trails())
	want0 := int64(concurrentQueries(t))
	var queries, wrong, failed atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for queries.Load() < want0 {
				v, err := a.Acquire()
				if err != nil {
					failed.Add(1)
					t.Errorf("reader %d: acquire: %v", w, err)
					return
				}
				got, err := scanTrails(v)
				ref, ok := want.Load(v.Generation)
				v.Release()
				queries.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					t.Errorf("reader %d: query of generation %d: %v", w, v.Generation, err)
				case !ok || !maps.Equal(got, ref.(map[string]string)):
					wrong.Add(1)
					t.Errorf("reader %d: generation %d answered wrong (reference known: %v)", w, v.Generation, ok)
				}
				if failed.Load()+wrong.Load() > 0 {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	writes := 0
	for running := true; running; writes++ {
		select {
		case <-done:
			running = false
			continue
		default:
		}
		gen := a.Current().Generation
		if writes%3 == 2 {
			want.Store(gen+1, m.trails())
			if _, err := a.Compact(ctx, CompactOptions{Force: writes%2 == 0, MaxSegmentRows: 150}); err != nil {
				t.Fatalf("compaction %d: %v", writes, err)
			}
			continue
		}
		evs := compactEvents(r, 40, 80, 1_600_000_000_000_000+int64(writes)*3_000_000, &ids)
		m.addEvents(evs)
		want.Store(gen+1, m.trails())
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: 25}); err != nil {
			t.Fatalf("import %d: %v", writes, err)
		}
	}
	<-done
	t.Logf("%d queries, %d writes, %d errors, %d wrong answers; generation %d", queries.Load(), writes, failed.Load(), wrong.Load(), a.Current().Generation)
	if failed.Load() > 0 || wrong.Load() > 0 {
		t.Fatalf("%d failed and %d wrong queries", failed.Load(), wrong.Load())
	}
	if writes < 10 {
		t.Fatalf("only %d writes ran during the queries", writes)
	}
	assertNoOrphans(t, a)
	if _, err := a.Compact(ctx, CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, a)
}
