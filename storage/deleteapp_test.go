package storage

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/vfs"
)

// TestDeleteApp: an app with flushed and live events, a saved document
// and an id graph is gone whole when DeleteApp returns — its directory,
// its listing, its queries — while another app is untouched; a later
// write of the name starts a new app holding only the new events; a
// .deleted- directory a crash left is removed by the next Open.
func TestDeleteApp(t *testing.T) {
	ctx := context.Background()
	fs := crashfs.New()
	st := openLiveOn(t, fs, 2, quietLive)
	r := rand.New(rand.NewPCG(1, 2))
	var ids idPool
	t0 := int64(1_600_000_000_000_000)
	for _, app := range []string{"gone", "kept"} {
		req := newLiveRequest(r, 50, 10, t0, &ids)
		if _, err := st.Ingest(ctx, app, req.evs, req.users); err != nil {
			t.Fatal(err)
		}
		if err := st.FlushLive(ctx, app); err != nil {
			t.Fatal(err)
		}
		req = newLiveRequest(r, 30, 10, t0+1e9, &ids) // live, unflushed
		if _, err := st.Ingest(ctx, app, req.evs, req.users); err != nil {
			t.Fatal(err)
		}
		a, err := st.App(app)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.Collection("insights")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put("i1", []byte(`{"name":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.MergePersons(ctx, "gone", "a", "b"); err != nil {
		t.Fatal(err)
	}
	kept := trailsOf(t, st, "kept")

	d, err := st.DeleteApp(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if d.Files == 0 || d.Bytes == 0 {
		t.Errorf("deleted %+v", d)
	}
	names, _ := fs.List("store/apps")
	if !slices.Equal(names, []string{"kept"}) {
		t.Errorf("apps directory after the delete: %v", names)
	}
	if apps, _ := st.Apps(); !slices.Equal(apps, []string{"kept"}) {
		t.Errorf("Apps: %v", apps)
	}
	if _, err := st.App("gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("App(gone): %v", err)
	}
	if _, err := st.DeleteApp(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	sameTrails(t, "the other app", trailsOf(t, st, "kept"), kept)

	// The name again: a new app of the new events only.
	req := newLiveRequest(r, 5, 3, t0+2e9, &ids)
	rep, err := st.Ingest(ctx, "gone", req.evs, req.users)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.App("gone")
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	n := v.Rows(KindEvents)
	ps := v.Persons()
	v.Release()
	if n != int64(rep.Accepted) || ps != nil && ps.Refused() != 0 {
		t.Errorf("the new app holds %d events (want %d)", n, rep.Accepted)
	}
	if c, err := a.Collection("insights"); err != nil {
		t.Fatal(err)
	} else if _, err := c.Get("i1"); err == nil {
		t.Error("the deleted app's document is back")
	}

	// A crash between the rename and the removal: the next Open removes
	// the .deleted- directory.
	leftover := filepath.Join("store/apps", deletedPrefix+"old-1")
	if err := fs.MkdirAll(filepath.Join(leftover, "seg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(fs, filepath.Join(leftover, "seg"), "x.seg", []byte("x")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := openLiveOn(t, fs, 2, quietLive)
	if ok, _ := vfs.Exists(fs, leftover); ok {
		t.Error("the .deleted- directory outlived a writer's Open")
	}
	sameTrails(t, "after reopening", trailsOf(t, st2, "kept"), kept)
}

// trailsOf returns every user's trail of app name in st.
func trailsOf(t *testing.T, st *Store, name string) map[string]string {
	t.Helper()
	return ofCurrent(t, st, name, func(v *Version) map[string]string { return recordTrails(t, v) })
}

// ofCurrent returns f of the current version of app name in st, released
// when f returns.
func ofCurrent[T any](t *testing.T, st *Store, name string, f func(v *Version) T) T {
	t.Helper()
	a, err := st.App(name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	return f(v)
}

// TestDeleteAppCrash: a power loss at every sync point of DeleteApp
// leaves a store that opens with the app whole (its flushed and live
// events) or gone without a trace, and gone after DeleteApp returned.
func TestDeleteAppCrash(t *testing.T) {
	ctx := context.Background()
	for _, unsynced := range []int{0, 30} {
		r := rand.New(rand.NewPCG(3, uint64(unsynced)))
		fs := crashfs.New()
		st := openLiveOn(t, fs, 2, quietLive)
		var ids idPool
		for i := range 2 {
			req := newLiveRequest(r, 40, 8, 1_600_000_000_000_000+int64(i)*1e9, &ids)
			if _, err := st.Ingest(ctx, "app", req.evs, req.users); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				if err := st.FlushLive(ctx, "app"); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := appTrails(t, st)
		states, err := crashStates(t, fs, unsynced, r, func() error {
			_, err := st.DeleteApp(ctx, "app")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(states) < 2 {
			t.Fatalf("only %d states", len(states))
		}
		for i, cfs := range states {
			st2, err := Open(Config{Dir: "store", FS: cfs, Shards: 2, Writer: true, Live: &quietLive, Logger: st.log})
			if err != nil {
				t.Fatalf("state %d of %d: open: %v", i, len(states), err)
			}
			_, err = st2.App("app")
			switch {
			case errors.Is(err, ErrNotFound):
				if names, _ := cfs.List("store/apps"); len(names) != 0 {
					t.Errorf("state %d: the app is gone but the apps directory holds %v", i, names)
				}
			case err != nil:
				t.Errorf("state %d: %v", i, err)
			case i == len(states)-1:
				t.Errorf("state %d: the app outlived DeleteApp's return", i)
			default:
				if got := appTrails(t, st2); !maps.Equal(got, before) {
					t.Errorf("state %d: the app is there but changed", i)
				}
			}
			st2.Close()
		}
	}
}
