package storage

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/crashfs"
)

// crashStates runs op against a store on fs and returns, for every sync
// point op passes (every successful fsync of a file or directory), the
// filesystem a power loss right after it would leave — with exactly the
// synced data (unsynced 0) or, for unsynced > 0, each unsynced block and
// directory entry kept with that probability — plus one taken after op
// returned.
func crashStates(t *testing.T, fs *crashfs.FS, unsynced int, rng *rand.Rand, op func() error) ([]*crashfs.FS, error) {
	t.Helper()
	var mu sync.Mutex
	var states []*crashfs.FS
	fs.SetOnSync(func() {
		mu.Lock()
		defer mu.Unlock()
		states = append(states, fs.Crash(unsynced, rng))
	})
	err := op()
	fs.SetOnSync(nil)
	states = append(states, fs.Crash(unsynced, rng))
	return states, err
}

// openOn opens a store on fs (as a restart after a power loss would).
func openOn(t *testing.T, fs *crashfs.FS, shards int) *Store {
	t.Helper()
	st, err := Open(Config{Dir: "store", FS: fs, Shards: shards, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// appTrails returns every user's trail of app "app" in st.
func appTrails(t *testing.T, st *Store) map[string]string {
	t.Helper()
	return trailsOf(t, st, "app")
}

// TestCrashAtEverySyncPoint simulates a power loss at every sync point of
// an import and of a compaction (docs/storage.md §2: after a crash or power
// loss at any instant the store opens at the old version or the new one;
// nothing published is lost): on each crashed filesystem the store opens,
// answers exactly as before or exactly as after the write, verifies
// clean (orphans aside), and takes the next write.
func TestCrashAtEverySyncPoint(t *testing.T) {
	ctx := context.Background()
	for seed := range 4 {
		for _, unsynced := range []int{0, 30} {
			t.Run(fmt.Sprintf("seed%d-unsynced%d", seed, unsynced), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(seed), 99))
				fs := crashfs.New()
				st := openOn(t, fs, 2)
				var ids idPool
				first := compactEvents(r, 300, 30, 1_600_000_000_000_000, &ids)
				if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: first}}, ImportOptions{FlushRows: 70, BlockRows: 16}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: compactWrites(r, 60, 30, 1_600_000_000_000_000)}},
					ImportOptions{Kind: KindUsers}); err != nil {
					t.Fatal(err)
				}
				before := appTrails(t, st)

				// A power loss during an import.
				second := compactEvents(r, 200, 40, 1_600_000_100_000_000, &ids)
				states, err := crashStates(t, fs, unsynced, r, func() error {
					_, err := st.Import(ctx, "app", []Source{&sliceSource{evs: second}}, ImportOptions{FlushRows: 60, BlockRows: 16})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				afterImport := appTrails(t, st)
				if maps.Equal(afterImport, before) {
					t.Fatal("the import changed nothing")
				}
				checkCrashed(t, "import", states, before, afterImport, second)

				// A power loss during a compaction.
				states, err = crashStates(t, fs, unsynced, r, func() error {
					_, err := st.Compact(ctx, "app", CompactOptions{Force: true, MaxSegmentRows: 90, BlockRows: 8})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := appTrails(t, st); !maps.Equal(got, afterImport) {
					t.Fatal("the compaction changed the trails")
				}
				checkCrashed(t, "compaction", states, afterImport, afterImport, second)
			})
		}
	}
}

// checkCrashed opens the store on every crashed filesystem of a write and
// checks it: the trails are old's or new's (and new's on the last state,
// taken after the write returned), verify finds nothing but orphans, and a
// further import works and is seen.
func checkCrashed(t *testing.T, what string, states []*crashfs.FS, old, new map[string]string, more []event.Event) {
	t.Helper()
	if len(states) < 4 {
		t.Fatalf("%s: only %d sync points", what, len(states))
	}
	sawOld, sawNew := false, false
	for i, fs := range states {
		st := openOn(t, fs, 2)
		got := appTrails(t, st)
		switch {
		case maps.Equal(got, new):
			sawNew = true
		case maps.Equal(got, old):
			sawOld = true
			if i == len(states)-1 {
				t.Fatalf("%s: the write returned, but after a power loss the store is at the old version", what)
			}
		default:
			t.Fatalf("%s: power loss at sync point %d of %d: the store answers neither as before nor as after the write", what, i, len(states))
		}
		rep, err := st.Verify(context.Background(), "app")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			if f.Kind != "orphan" {
				t.Fatalf("%s: power loss at sync point %d: verify: %v", what, i, f)
			}
		}
		// The next write cleans up and works.
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: more[:5]}}, ImportOptions{}); err != nil {
			t.Fatalf("%s: power loss at sync point %d: the next import: %v", what, i, err)
		}
		a, _ := st.App("app")
		assertNoOrphans(t, a)
	}
	if !sawNew || (!sawOld && old != nil && !maps.Equal(old, new)) {
		t.Fatalf("%s: crash states saw old %v, new %v", what, sawOld, sawNew)
	}
}
