package wal

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// crashState is the filesystem a power loss at one sync point leaves, and
// what had been promised by then.
type crashState struct {
	fs       *crashfs.FS
	acked    map[uint64]string // appends that had returned: seq → record
	applied  map[uint64]string // records Apply had seen
	released uint64            // the largest upTo passed to Release (records <= it may be gone)
}

// pointFS calls point after every write to a file and every removal, so
// that a test can simulate a power loss there too: at a sync point the
// log has no unsynced data (it writes the next commit only after the
// fsync), between a write and its fsync it has.
type pointFS struct {
	*crashfs.FS
	point func()
}

type pointFile struct {
	vfs.File
	point func()
}

func (f pointFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return pointFile{file, f.point}, nil
}

func (f pointFS) Remove(name string) error {
	err := f.FS.Remove(name)
	f.point()
	return err
}

func (f pointFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.point()
	return n, err
}

// TestCrashAtEverySyncPoint is the log's core proof. Writers append
// records and batches from several goroutines while the log rotates and
// releases files; at every sync point (every successful fsync of a file or
// the directory), and after every write and removal, a power loss is
// simulated — keeping exactly the synced data, or also each unsynced
// 4 KiB block and directory entry with probability 30 %. On every such
// filesystem the log must open (a torn
// tail repaired, nothing refused), hold every record whose Append had
// returned or that Apply had seen, intact and in order, hold nothing that
// was not appended, open again without a repair and take the next append.
func TestCrashAtEverySyncPoint(t *testing.T) {
	const writers, appends = 4, 40
	for seed := range 4 {
		for _, unsynced := range []int{0, 30} {
			t.Run(fmt.Sprintf("seed%d-unsynced%d", seed, unsynced), func(t *testing.T) {
				fsys := crashfs.New()
				var mu sync.Mutex
				rng := rand.New(rand.NewPCG(uint64(seed), 1))
				acked, applied, attempted := map[uint64]string{}, map[uint64]string{}, map[string]bool{}
				var released uint64
				var states []crashState
				crash := func() {
					mu.Lock()
					defer mu.Unlock()
					// What was promised before the crash, then the crash.
					st := crashState{acked: maps.Clone(acked), applied: maps.Clone(applied), released: released}
					st.fs = fsys.Crash(unsynced, rng)
					states = append(states, st)
				}
				fsys.SetOnSync(crash)
				l := openLog(t, pointFS{fsys, crash}, Options{SegmentSize: 8 << 10, Apply: func(first uint64, recs [][]byte) {
					mu.Lock()
					defer mu.Unlock()
					for i, r := range recs {
						applied[first+uint64(i)] = string(r)
					}
				}})
				var wg sync.WaitGroup
				for g := range writers {
					wg.Go(func() {
						r := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
						n := 0
						next := func() []byte {
							n++
							b := payload(g, n, 16+r.IntN(3000))
							mu.Lock()
							attempted[string(b)] = true
							mu.Unlock()
							return b
						}
						for i := range appends {
							recs := [][]byte{next()}
							if i%5 == 4 {
								for range 1 + r.IntN(3) {
									recs = append(recs, next())
								}
							}
							seq, err := l.AppendBatch(context.Background(), recs)
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							for j, b := range recs {
								acked[seq+uint64(j)] = string(b)
							}
							upTo := uint64(0)
							if g == 0 && i%10 == 9 && seq > 30 {
								upTo = seq - 30
								released = max(released, upTo)
							}
							mu.Unlock()
							if upTo > 0 {
								if err := l.Release(upTo); err != nil {
									t.Error(err)
								}
							}
						}
					})
				}
				wg.Wait()
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				fsys.SetOnSync(nil)
				states = append(states, crashState{fs: fsys.Crash(unsynced, rng), acked: acked, applied: applied, released: released})
				repairs := 0
				for i, st := range states {
					if checkCrashState(t, fmt.Sprintf("state %d of %d", i, len(states)), st, attempted) {
						repairs++
					}
				}
				t.Logf("%d crash points, %d records acknowledged, %d torn tails repaired", len(states), len(acked), repairs)
				if unsynced > 0 && repairs == 0 {
					t.Error("no crash state had a torn tail: the test does not exercise the repair")
				}
			})
		}
	}
}

// checkCrashState opens the log on st.fs and checks it against what was
// promised; it reports whether Open repaired a torn tail.
func checkCrashState(t *testing.T, name string, st crashState, attempted map[string]bool) bool {
	t.Helper()
	l, err := Open(st.fs, dir, Options{})
	if err != nil {
		t.Fatalf("%s: open after the crash: %v", name, err)
	}
	_, repaired := l.Repair()
	got := replayAll(t, l, st.released)
	l.Close()
	bySeq := map[uint64]string{}
	seen := map[string]bool{}
	for i, r := range got {
		if r.seq != st.released+1+uint64(i) {
			t.Fatalf("%s: replay after %d: record %d has seq %d", name, st.released, i, r.seq)
		}
		if !attempted[r.data] || seen[r.data] {
			t.Fatalf("%s: seq %d holds a record never appended, or appended once and found twice", name, r.seq)
		}
		seen[r.data] = true
		bySeq[r.seq] = r.data
	}
	for _, promised := range []map[uint64]string{st.acked, st.applied} {
		for seq, data := range promised {
			if seq > st.released && bySeq[seq] != data {
				t.Fatalf("%s: seq %d was acknowledged or applied but is lost or changed after the crash", name, seq)
			}
		}
	}
	// The repaired log opens clean and goes on.
	l, err = Open(st.fs, dir, Options{})
	if err != nil {
		t.Fatalf("%s: second open: %v", name, err)
	}
	defer l.Close()
	if rep, again := l.Repair(); again {
		t.Fatalf("%s: second open repaired again: %+v", name, rep)
	}
	if again := replayAll(t, l, st.released); !slices.Equal(again, got) {
		t.Fatalf("%s: the second open replays differently", name)
	}
	next := appendAll(t, l, []byte("after the crash"))
	if want := st.released + uint64(len(got)) + 1; next[0].seq != want {
		t.Fatalf("%s: next seq %d, want %d", name, next[0].seq, want)
	}
	return repaired
}

// TestCrashDuringRepair: a power loss at any sync point of Open's repair
// leaves a log that opens with the same records.
func TestCrashDuringRepair(t *testing.T) {
	base, want := sampleLog(t)
	last := readFile(t, base, fileName(11))
	for _, unsynced := range []int{0, 30} {
		rng := rand.New(rand.NewPCG(5, uint64(unsynced)))
		fsys := base.Crash(0, nil)
		writeFile(t, fsys, fileName(11), append(slices.Clone(last[:len(last)-5]), make([]byte, 9000)...))
		var states []*crashfs.FS
		fsys.SetOnSync(func() { states = append(states, fsys.Crash(unsynced, rng)) })
		l := openLog(t, fsys, Options{})
		if _, ok := l.Repair(); !ok {
			t.Fatal("no repair")
		}
		l.Close()
		fsys.SetOnSync(nil)
		for i, st := range states {
			l, err := Open(st, dir, Options{})
			if err != nil {
				t.Fatalf("unsynced %d, state %d: %v", unsynced, i, err)
			}
			if got := replayAll(t, l, 0); !slices.Equal(got, want[:23]) {
				t.Fatalf("unsynced %d, state %d: %d records, want 23", unsynced, i, len(got))
			}
			l.Close()
		}
	}
}
