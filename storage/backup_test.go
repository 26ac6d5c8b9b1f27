package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// openDir opens a store on directory dir of fs (nil: the OS's) with the
// given config fields.
func openDir(t *testing.T, fsys vfs.FS, dir string, writer bool, live *LiveOptions) *Store {
	t.Helper()
	st, err := Open(Config{Dir: dir, FS: fsys, Shards: 2, Writer: writer, Live: live, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// putDocs saves one document in the app's collection "insights" and one
// in the store's collection "keys", named after tag.
func putDocs(t *testing.T, st *Store, tag string) {
	t.Helper()
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := a.Collection("insights")
	if _, err := c.Put("i-"+tag, []byte(`{"q":"`+tag+`"}`)); err != nil {
		t.Fatal(err)
	}
	k, _ := st.Collection("keys")
	if _, err := k.Put("k-"+tag, []byte(`{"scope":"admin"}`)); err != nil {
		t.Fatal(err)
	}
}

// docIDs returns the ids of the app's insights and the store's keys.
func docIDs(t *testing.T, st *Store) (insights, keys []string) {
	t.Helper()
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := a.Collection("insights")
	k, _ := st.Collection("keys")
	for _, x := range []struct {
		c   *Collection
		out *[]string
	}{{c, &insights}, {k, &keys}} {
		docs, err := x.c.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			*x.out = append(*x.out, d.ID)
		}
	}
	return insights, keys
}

// TestBackupDuringIngestionThenRestore (docs/storage.md §8): a backup taken
// while live requests keep arriving holds every request acknowledged
// before it started — flushed or only in the log, with the id graph, the
// documents — and restores into a store that verifies clean, answers
// exactly as the version the backup pinned (the same requests imported
// from files: every person's trail), and takes live events again.
func TestBackupDuringIngestionThenRestore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	st := openDir(t, nil, filepath.Join(root, "store"), true, &quietLive)
	ref := openOn(t, crashfs.New(), 2)
	var ids idPool
	const n = 40
	var reqs []liveRequest
	want := []map[string]string{nil}
	for k := range n {
		req := newLiveRequest(r, 1+r.IntN(30), 25, 1_600_000_000_000_000+int64(k%4)*3_000_000, &ids)
		req.identify(r)
		reqs = append(reqs, req)
		importRequest(t, ref, req)
		want = append(want, appTrails(t, ref))
	}
	for k := range 10 {
		ingestRequest(t, st, reqs[k])
		if k == 4 {
			if err := st.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
		}
	}
	putDocs(t, st, "a")

	// Requests keep arriving during the backup.
	var acked atomic.Int64
	acked.Store(10)
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := 10; k < n; k++ {
			evs, users := reqs[k].clone()
			if _, err := st.Ingest(ctx, "app", evs, users); err != nil {
				t.Error(err)
				return
			}
			acked.Add(1)
		}
	})
	before := int(acked.Load())
	bk := filepath.Join(root, "backup")
	rep, err := st.Backup(ctx, bk, BackupOptions{})
	after := int(acked.Load())
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup with %d..%d requests acknowledged: %+v", before, after, *rep)
	if rep.FilesLinked == 0 || rep.FilesCopied != 0 || rep.Documents != 2 {
		t.Fatalf("linked %d, copied %d, documents %d: want links only, 2 documents", rep.FilesLinked, rep.FilesCopied, rep.Documents)
	}
	rec, err := ReadBackup(nil, bk)
	if err != nil || len(rec.Apps) != 1 || rec.Apps[0].App != "app" {
		t.Fatalf("backup record %+v, %v", rec, err)
	}

	to := filepath.Join(root, "restored")
	rrep, err := Restore(ctx, bk, to, RestoreOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rrep.Verify) != 1 || rrep.Findings() != 0 {
		t.Fatalf("restore verify: %+v", rrep.Verify)
	}
	got := func() map[string]string {
		rs := openDir(t, nil, to, false, nil)
		defer rs.Close()
		if ins, keys := docIDs(t, rs); !slices.Equal(ins, []string{"i-a"}) || !slices.Equal(keys, []string{"k-a"}) {
			t.Fatalf("restored documents %v %v", ins, keys)
		}
		a, _ := rs.App("app")
		if a.Current().Identity == (IdentityPos{}) {
			t.Fatal("the restored app has no id graph")
		}
		return appTrails(t, rs)
	}()
	// Exactly the version the backup pinned: its requests, each one log
	// record.
	k := int(rep.Apps[0].LogSeq)
	if k < before || k > after+1 || rep.Apps[0].LogRecords == 0 {
		t.Fatalf("the backup holds %d requests (%d in its log), want between %d (acknowledged before the backup) and %d", k, rep.Apps[0].LogRecords, before, after+1)
	}
	if !maps.Equal(got, want[k]) {
		t.Fatalf("the restored store answers as %d requests (-1: none), not as the %d the backup holds",
			slices.IndexFunc(want, func(w map[string]string) bool { return maps.Equal(w, got) }), k)
	}

	// The restored store takes live events after the backup's log position.
	rs := openDir(t, nil, to, true, &quietLive)
	more := newLiveRequest(r, 5, 3, 1_700_000_000_000_000, &idPool{next: 1 << 20})
	ingestRequest(t, rs, more)
	if maps.Equal(appTrails(t, rs), got) {
		t.Fatal("one more request on the restored store changed nothing")
	}
}

// compactAndDelete compacts the events of shard shard of app "app" (its
// files replaced) and deletes the app's insight "i-a".
func compactAndDelete(t *testing.T, st *Store, shard int) {
	t.Helper()
	if _, err := st.Compact(context.Background(), "app", CompactOptions{Force: true, only: map[shardKind]bool{{shard, KindEvents}: true}}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	c, _ := a.Collection("insights")
	if err := c.Delete("i-a", 0); err != nil {
		t.Fatal(err)
	}
}

// segNames returns the segment file names of app "app"'s current catalog.
func segNames(t *testing.T, st *Store) []string {
	t.Helper()
	a, err := st.App("app")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range a.Current().Segments {
		out = append(out, s.File)
	}
	return out
}

// TestBackupIncremental: a second backup into the same directory places
// only the segment files it lacks and removes, after its catalog, those
// the new snapshot does not reference (and deleted documents); a backup
// with Copy copies; the destination must be empty or a backup; restore
// refuses an incomplete backup and a non-empty target.
func TestBackupIncremental(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	src := filepath.Join(root, "store")
	st := openDir(t, nil, src, false, nil)
	var ids idPool
	for k := range 3 {
		req := newLiveRequest(r, 50, 30, 1_600_000_000_000_000+int64(k)*5_000_000, &ids)
		req.identify(r)
		importRequest(t, st, req)
	}
	putDocs(t, st, "a")
	putDocs(t, st, "b")
	first := segNames(t, st)
	bk := filepath.Join(root, "backup")

	rep, err := st.Backup(ctx, bk, BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesLinked != len(first) || rep.FilesCopied+rep.FilesKept+rep.FilesRemoved != 0 || rep.Documents != 4 {
		t.Fatalf("first backup of %d segments: %+v", len(first), *rep)
	}
	// Nothing changed: nothing placed, nothing removed.
	rep, err = st.Backup(ctx, bk, BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesKept != len(first) || rep.FilesLinked+rep.FilesCopied+rep.FilesRemoved != 0 || rep.MetaBytes == 0 {
		t.Fatalf("second backup, no change: %+v", *rep)
	}

	// New data, a compaction (most files replaced), a document deleted.
	req := newLiveRequest(r, 60, 30, 1_600_000_100_000_000, &ids)
	importRequest(t, st, req)
	mid := segNames(t, st)
	compactAndDelete(t, st, 0)
	last := segNames(t, st)
	var added, gone, common int
	for _, n := range last {
		if slices.Contains(first, n) {
			common++
		} else {
			added++
		}
	}
	for _, n := range first {
		if !slices.Contains(last, n) {
			gone++
		}
	}
	if added == 0 || gone == 0 || common == 0 {
		t.Fatalf("the test needs added, removed and common files: %d %d %d (%v → %v → %v)", added, gone, common, first, mid, last)
	}
	rep, err = st.Backup(ctx, bk, BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("incremental backup: %d segments added, %d gone, %d common: %+v", added, gone, common, *rep)
	if rep.FilesLinked != added || rep.FilesKept != common || rep.FilesRemoved != gone+1 || rep.Documents != 3 {
		t.Fatalf("incremental backup (%d added, %d gone, %d common, a document deleted): %+v", added, gone, common, *rep)
	}
	onDisk, err := os.ReadDir(filepath.Join(bk, "apps", "app", "seg"))
	if err != nil || len(onDisk) != len(last) {
		t.Fatalf("%d files in the backup's seg directory, want %d (%v)", len(onDisk), len(last), err)
	}
	if _, err := os.Stat(filepath.Join(bk, "apps", "app", "meta", "insights", "i-a.doc")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted document is still in the backup: %v", err)
	}

	// Copy: separate files.
	cp := filepath.Join(root, "copy")
	rep, err = st.Backup(ctx, cp, BackupOptions{Copy: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FilesCopied != len(last) || rep.FilesLinked != 0 || rep.BytesCopied != rep.Bytes {
		t.Fatalf("backup with Copy: %+v", *rep)
	}
	fi1, _ := os.Stat(filepath.Join(src, "apps", "app", "seg", last[0]))
	fi2, _ := os.Stat(filepath.Join(cp, "apps", "app", "seg", last[0]))
	fi3, _ := os.Stat(filepath.Join(bk, "apps", "app", "seg", last[0]))
	if os.SameFile(fi1, fi2) || !os.SameFile(fi1, fi3) {
		t.Fatal("Copy linked, or the default copied")
	}

	// Both restore to the store's answers.
	wantTrails := appTrails(t, st)
	for i, from := range []string{bk, cp} {
		to := filepath.Join(root, fmt.Sprintf("restored%d", i))
		if _, err := Restore(ctx, from, to, RestoreOptions{Copy: i == 1}); err != nil {
			t.Fatal(err)
		}
		rs := openDir(t, nil, to, false, nil)
		if got := appTrails(t, rs); !maps.Equal(got, wantTrails) {
			t.Fatalf("restored from %s: the trails differ", from)
		}
		if ins, keys := docIDs(t, rs); !slices.Equal(ins, []string{"i-b"}) || !slices.Equal(keys, []string{"k-a", "k-b"}) {
			t.Fatalf("restored documents %v %v", ins, keys)
		}
		rs.Close()
	}

	// Refusals.
	if _, err := Restore(ctx, bk, filepath.Join(root, "restored0"), RestoreOptions{}); err == nil {
		t.Fatal("restore into a non-empty directory")
	}
	if _, err := Restore(ctx, src, filepath.Join(root, "x"), RestoreOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("restore from a store that is not a backup: %v", err)
	}
	if _, err := st.Backup(ctx, filepath.Join(root, "restored0"), BackupOptions{}); err == nil {
		t.Fatal("backup into a store that is not a backup")
	}
	if _, err := st.Backup(ctx, filepath.Join(src, "apps", "bk"), BackupOptions{}); err == nil {
		t.Fatal("backup into the store")
	}
	if err := os.WriteFile(filepath.Join(bk, BackupMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, bk, filepath.Join(root, "y"), RestoreOptions{}); !errors.Is(err, ErrIncompleteBackup) {
		t.Fatalf("restore of an incomplete backup: %v", err)
	}
	// A backup into it again completes it.
	if _, err := st.Backup(ctx, bk, BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBackup(nil, bk); err != nil {
		t.Fatal(err)
	}
}

// TestBackupCrashAtEverySyncPoint simulates a power loss at every sync
// point of a first backup and of an incremental one (hard links, or
// copies; with live events in the log, or none), with only synced data surviving and with 30 % of unsynced
// blocks and directory entries surviving too: on each crashed filesystem
// the backup directory is the old complete snapshot, the new complete
// one (which restores, verifies clean and answers as the store did at
// that backup), or reported incomplete by ReadBackup and refused by
// Restore.
func TestBackupCrashAtEverySyncPoint(t *testing.T) {
	ctx := context.Background()
	for seed := range 3 {
		for _, unsynced := range []int{0, 30} {
			copyFiles, live := seed == 1, seed > 0
			t.Run(fmt.Sprintf("seed%d-unsynced%d-copy%v-live%v", seed, unsynced, copyFiles, live), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(seed), 31))
				fsys := crashfs.New()
				var st *Store
				if live {
					st = openLiveOn(t, fsys, 2, quietLive)
				} else {
					st = openOn(t, fsys, 2)
				}
				var ids idPool
				// write adds a request: live (flushed or left in the log at
				// random), or imported.
				write := func(req liveRequest) {
					if !live {
						importRequest(t, st, req)
						return
					}
					ingestRequest(t, st, req)
					if r.IntN(2) == 0 {
						if err := st.FlushLive(ctx, "app"); err != nil {
							t.Fatal(err)
						}
					}
				}
				for k := range 3 {
					req := newLiveRequest(r, 40, 20, 1_600_000_000_000_000+int64(k)*5_000_000, &ids)
					req.identify(r)
					write(req)
				}
				if live { // a request only in the log
					ingestRequest(t, st, newLiveRequest(r, 20, 20, 1_600_000_050_000_000, &ids))
				}
				putDocs(t, st, "a")
				opt := BackupOptions{Copy: copyFiles}
				type snapshot struct {
					gen    uint64
					trails map[string]string
					docs   [2][]string
				}
				snap := func() snapshot {
					ins, keys := docIDs(t, st)
					a, _ := st.App("app")
					return snapshot{a.Current().Generation, appTrails(t, st), [2][]string{ins, keys}}
				}
				check := func(what string, states []*crashfs.FS, old *snapshot, new snapshot) {
					t.Helper()
					var sawOld, sawNew, sawIncomplete bool
					restored := 0
					for i, cfs := range states {
						rec, err := ReadBackup(cfs, "bk")
						switch {
						case errors.Is(err, ErrIncompleteBackup):
							sawIncomplete = true
							if _, err := Restore(ctx, "bk", "r", RestoreOptions{FS: cfs}); !errors.Is(err, ErrIncompleteBackup) {
								t.Fatalf("%s: sync point %d: restore of an incomplete backup: %v", what, i, err)
							}
							continue
						case errors.Is(err, fs.ErrNotExist) && old == nil:
							continue // before the first backup's marker
						case err != nil:
							t.Fatalf("%s: sync point %d of %d: %v", what, i, len(states), err)
						}
						var w snapshot
						switch rec.Apps[0].Generation {
						case new.gen:
							w, sawNew = new, true
						case old.gen:
							w, sawOld = *old, true
						default:
							t.Fatalf("%s: sync point %d: a backup of generation %d", what, i, rec.Apps[0].Generation)
						}
						if i == len(states)-1 && w.gen != new.gen {
							t.Fatalf("%s: the backup returned, but after a power loss the directory holds the old one", what)
						}
						rrep, err := Restore(ctx, "bk", "r", RestoreOptions{FS: cfs, Logger: slog.New(slog.DiscardHandler)})
						if err != nil {
							var found []Finding
							if rrep != nil {
								for _, v := range rrep.Verify {
									found = append(found, v.Findings...)
								}
							}
							t.Fatalf("%s: sync point %d: restore: %v %v", what, i, err, found)
						}
						rs := openDir(t, cfs, "r", false, nil)
						if got := appTrails(t, rs); !maps.Equal(got, w.trails) {
							t.Fatalf("%s: sync point %d: the restored store answers otherwise than the store at the backup", what, i)
						}
						if ins, keys := docIDs(t, rs); !slices.Equal(ins, w.docs[0]) || !slices.Equal(keys, w.docs[1]) {
							t.Fatalf("%s: sync point %d: restored documents %v %v, want %v", what, i, ins, keys, w.docs)
						}
						rs.Close()
						restored++
					}
					if !sawNew || !sawIncomplete || (old != nil && !sawOld) {
						t.Fatalf("%s: saw old %v, new %v, incomplete %v over %d sync points", what, sawOld, sawNew, sawIncomplete, len(states))
					}
					t.Logf("%s: %d power-loss states, %d of them complete backups restored and checked", what, len(states), restored)
				}

				first := snap()
				var logged uint64 // log records backed up
				states, err := crashStates(t, fsys, unsynced, r, func() error {
					rep, err := st.Backup(ctx, "bk", opt)
					if err == nil {
						logged += rep.LogRecords
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				check("first backup", states, nil, first)

				// New data, a compaction, documents changed.
				write(newLiveRequest(r, 40, 20, 1_600_000_100_000_000, &ids))
				if live {
					if err := st.FlushLive(ctx, "app"); err != nil {
						t.Fatal(err)
					}
				}
				compactAndDelete(t, st, 1)
				putDocs(t, st, "b")
				if live {
					ingestRequest(t, st, newLiveRequest(r, 20, 20, 1_600_000_200_000_000, &ids)) // only in the log
				}
				second := snap()
				states, err = crashStates(t, fsys, unsynced, r, func() error {
					rep, err := st.Backup(ctx, "bk", opt)
					if err == nil && (rep.FilesKept == 0 || rep.FilesRemoved == 0) {
						t.Errorf("the second backup kept %d files and removed %d", rep.FilesKept, rep.FilesRemoved)
					}
					if err == nil {
						logged += rep.LogRecords
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if live && logged == 0 {
					t.Fatal("no backup held live records of the log")
				}
				check("incremental backup", states, &first, second)
			})
		}
	}
}
