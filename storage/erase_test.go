package storage

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// eventsByID counts the events of each distinct id app's current
// version shows, and the user property writes of each (as "users:ID").
func eventsByID(t *testing.T, st *Store, app string) map[string]int {
	t.Helper()
	return ofCurrent(t, st, app, func(v *Version) map[string]int { return countByID(t, v) })
}

// countByID is eventsByID of version v.
func countByID(t *testing.T, v *Version) map[string]int {
	var mu sync.Mutex
	out := map[string]int{}
	spec := ScanSpec{From: -1 << 62, To: 1 << 62, DistinctIDs: true, AllUsers: true,
		Masks: func(meta *segment.Meta) []uint64 { return allOnes(len(meta.EventNames)) }}
	visit := visitFunc(func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		if len(tr.Times) > 0 {
			out[string(u.ID)] += len(tr.Times)
		}
	})
	if _, err := v.Scan(context.Background(), spec, []Visitor{visit}); err != nil {
		t.Fatal(err)
	}
	// The users table: every id with a property write.
	uspec := ScanSpec{Kind: KindUsers, From: -1 << 62, To: 1 << 62, DistinctIDs: true,
		Masks: func(meta *segment.Meta) []uint64 { return allOnes(len(meta.EventNames)) }}
	uvisit := visitFunc(func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		out["users:"+string(u.ID)] += len(tr.Times)
	})
	if _, err := v.Scan(context.Background(), uspec, []Visitor{uvisit}); err != nil {
		t.Fatal(err)
	}
	return out
}

func allOnes(n int) []uint64 {
	m := make([]uint64, n)
	for i := range m {
		m[i] = 1
	}
	return m
}

// liveDirAtNoon returns an opener of a live store in directory dir (on
// the operating system's files, for byte searches) with shards shards,
// whose clock stays at noon, and that noon.
func liveDirAtNoon(t *testing.T, dir string, shards int) (func() *Store, time.Time) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	opt := quietLive
	opt.Now = func() time.Time { return now }
	return func() *Store {
		t.Helper()
		st, err := Open(Config{Dir: dir, Shards: shards, Writer: true, Live: &opt, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, now
}

// filesContaining returns the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestErasePerson: an erased person (both of its distinct ids, joined by
// an identify) is hidden from the next query — events in segment files,
// in compacted ones and in the live layer, and its user properties —
// stays hidden across a restart, events sent later for its id are a new
// person, and after Erase no file of the store holds its ids or values.
func TestErasePerson(t *testing.T) {
	dir := t.TempDir()
	open, now := liveDirAtNoon(t, dir, 4)
	st := open()
	defer func() { st.Close() }()
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	const anon, known = "anon-7f3a9c01-erase-me", "alice@example.test"
	secret := event.Prop{Name: "note", Value: event.String("alice-secret-value-42")}
	ingest := func(evs []event.Event, users []UserWrite, ids []IdentityWrite) {
		t.Helper()
		if _, err := st.IngestIdentity(ctx, "app", evs, users, ids); err != nil {
			t.Fatal(err)
		}
	}
	var evs []event.Event
	for i := range 40 {
		for _, u := range []string{"bob", "carol", "dave", anon} {
			evs = append(evs, event.Event{UserID: u, Name: "view", Time: t0 + int64(i), Props: []event.Prop{secret}})
		}
	}
	// Another person's event names the anonymous id in an identity field.
	evs = append(evs, event.Event{UserID: "dave", Name: "view", Time: t0 + 50, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String(anon)}}})
	ingest(evs, []UserWrite{{Index: 3, Props: []event.Prop{{Name: "plan", Value: event.String("alice-plan-secret")}}}}, nil)
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	// The identify joins the ids; more events, some compacted, some live.
	ingest([]event.Event{{UserID: known, Name: "signup", Time: t0 + 100}}, nil,
		[]IdentityWrite{{Index: 0, Op: identity.Op{Kind: identity.Identify, T: known, O: anon, Time: t0 + 100}}})
	ingest([]event.Event{{UserID: "bob", Name: "buy", Time: t0 + 200}, {UserID: anon, Name: "buy", Time: t0 + 200, Props: []event.Prop{secret}}}, nil, nil)
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Compact(ctx, "app", CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	ingest([]event.Event{{UserID: known, Name: "buy", Time: t0 + 300, Props: []event.Prop{secret}}, {UserID: "carol", Name: "buy", Time: t0 + 300}}, nil, nil)

	before := eventsByID(t, st, "app")
	if before[anon] != 41 || before[known] != 2 || before["users:"+anon] != 1 {
		t.Fatalf("before: %v", before)
	}
	want := maps.Clone(before)
	delete(want, anon)
	delete(want, known)
	delete(want, "users:"+anon)

	dels, err := st.ErasePersons(ctx, "app", []string{known}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(dels) != 1 || !dels[0].Pending() || len(dels[0].IDs) != 2 || dels[0].IDs[0] != known {
		t.Fatalf("deletion: %+v", dels)
	}
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("after the request: %v, want %v", got, want)
	}
	// Idempotent: the pending request again, also twice in one call.
	again, err := st.ErasePersons(ctx, "app", []string{known, known}, false)
	if err != nil || again[0].ID != dels[0].ID || again[1].ID != dels[0].ID || len(again[1].IDs) != 2 {
		t.Fatalf("again: %+v %v", again, err)
	}
	// Later events of the id: a new person.
	ingest([]event.Event{{UserID: known, Name: "view", Time: t0 + 400}}, nil, nil)
	want[known] = 1
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("after a later event: %v, want %v", got, want)
	}
	// A restart (the close publishes the request) keeps it.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
	rep, err := st.Erase(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Done) != 1 || rep.Rewritten == 0 {
		t.Fatalf("erase report: %+v", rep)
	}
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("after Erase: %v, want %v", got, want)
	}
	ds, err := st.Deletions("app")
	if err != nil || len(ds) != 1 || ds[0].Pending() || ds[0].IDs != nil || len(ds[0].Hash) != 64 {
		t.Fatalf("deletions: %+v %v", ds, err)
	}
	for _, s := range []string{anon, "alice-plan-secret"} {
		if f := filesContaining(t, dir, s); len(f) > 0 {
			t.Errorf("%q still in %v", s, f)
		}
	}
	// The secret value stays in the files of bob, carol and dave's events.
	if f := filesContaining(t, dir, "alice-secret-value-42"); len(f) == 0 {
		t.Errorf("other users' values gone too")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("reopened after Erase: %v, want %v", got, want)
	}
	if vr, err := st.Verify(ctx, "app"); err != nil || len(vr.Findings) > 0 {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

// TestEraseReplay: a request acknowledged and never flushed is replayed
// from the log after a crash, at its place: the events before it hidden,
// those after it not.
func TestEraseReplay(t *testing.T) {
	fsys := crashfs.New()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	opt := quietLive
	opt.Now = func() time.Time { return now }
	st := openLiveOn(t, fsys, 2, opt)
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	for i := range 3 {
		if _, err := st.Ingest(ctx, "app", []event.Event{{UserID: "x", Name: "a", Time: t0 + int64(i)}, {UserID: "y", Name: "a", Time: t0}}, nil); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := st.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.ErasePersons(ctx, "app", []string{"x"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Ingest(ctx, "app", []event.Event{{UserID: "x", Name: "b", Time: t0 + 9}}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"x": 1, "y": 3}
	if got := eventsByID(t, st, "app"); !maps.Equal(got, want) {
		t.Fatalf("before the crash: %v, want %v", got, want)
	}
	st2 := openLiveOn(t, fsys.Crash(0, nil), 2, opt)
	if got := eventsByID(t, st2, "app"); !maps.Equal(got, want) {
		t.Fatalf("after the crash: %v, want %v", got, want)
	}
	if _, err := st2.Erase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if got := eventsByID(t, st2, "app"); !maps.Equal(got, want) {
		t.Fatalf("after Erase: %v, want %v", got, want)
	}
}

// TestEraseSuppress: with suppress, later events of the ids are dropped
// at ingestion (counted), before and after the request is done.
func TestEraseSuppress(t *testing.T) {
	st, now := openLiveAtNoon(t)
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	send := func(id string) *IngestReport {
		t.Helper()
		rep, err := st.Ingest(ctx, "app", []event.Event{{UserID: id, Name: "a", Time: t0}, {UserID: "other", Name: "a", Time: t0}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	send("s")
	if _, err := st.ErasePersons(ctx, "app", []string{"s"}, true); err != nil {
		t.Fatal(err)
	}
	if rep := send("s"); rep.Suppressed != 1 || rep.Accepted != 1 {
		t.Fatalf("pending: %+v", rep)
	}
	if _, err := st.Erase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if rep := send("s"); rep.Suppressed != 1 || rep.Accepted != 1 {
		t.Fatalf("done: %+v", rep)
	}
	if got := eventsByID(t, st, "app"); !maps.Equal(got, map[string]int{"other": 3}) {
		t.Fatalf("events: %v", got)
	}
}

// TestEraseRestore: a backup taken while an erasure is pending holds the
// request (in the write-ahead log); the restored store has completed it.
func TestEraseRestore(t *testing.T) {
	dir := t.TempDir()
	open, now := liveDirAtNoon(t, filepath.Join(dir, "src"), 2)
	st := open()
	defer st.Close()
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	if _, err := st.Ingest(ctx, "app", []event.Event{{UserID: "gone-0xabcdef", Name: "a", Time: t0}, {UserID: "kept", Name: "a", Time: t0}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ErasePersons(ctx, "app", []string{"gone-0xabcdef"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Backup(ctx, filepath.Join(dir, "bk"), BackupOptions{Copy: true}); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "restored")
	if _, err := Restore(ctx, filepath.Join(dir, "bk"), to, RestoreOptions{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	if f := filesContaining(t, to, "gone-0xabcdef"); len(f) > 0 {
		t.Errorf("the erased id is in the restored %v", f)
	}
	rs, err := Open(Config{Dir: to, ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ds, err := rs.Deletions("app")
	if err != nil || len(ds) != 1 || ds[0].Pending() {
		t.Fatalf("restored deletions: %+v %v", ds, err)
	}
	if got := eventsByID(t, rs, "app"); !maps.Equal(got, map[string]int{"kept": 1}) {
		t.Fatalf("restored: %v", got)
	}
}

// TestDeleteEvents: an events deletion (by name and range; filters are
// package query's and tested there) hides the matching events stored
// before it from the next query — in files and in the live layer — keeps
// those after it, survives a restart, and Erase removes them from the
// files.
func TestDeleteEvents(t *testing.T) {
	dir := t.TempDir()
	open, now := liveDirAtNoon(t, dir, 2)
	st := open()
	defer func() { st.Close() }()
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	send := func(evs ...event.Event) {
		t.Helper()
		if _, err := st.Ingest(ctx, "app", evs, nil); err != nil {
			t.Fatal(err)
		}
	}
	mark := event.Prop{Name: "tag", Value: event.String("bad-release-7d1f")}
	for i := range 10 {
		u := fmt.Sprintf("u%d", i)
		send(event.Event{UserID: u, Name: "test_event", Time: t0 + int64(i), Props: []event.Prop{mark}}, event.Event{UserID: u, Name: "view", Time: t0 + int64(i)})
		if i == 4 {
			if err := st.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One after the range: kept.
	send(event.Event{UserID: "u0", Name: "test_event", Time: t0 + 100})
	d, err := st.DeleteEvents(ctx, "app", EventMatch{Event: "test_event", From: t0, To: t0 + 50})
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != DeleteEvents || !d.Pending() {
		t.Fatalf("deletion: %+v", d)
	}
	// After the request: a matching event is kept.
	send(event.Event{UserID: "u1", Name: "test_event", Time: t0 + 1, Props: []event.Prop{mark}})
	want := map[string]int{"u0": 2, "u1": 2}
	for i := 2; i < 10; i++ {
		want[fmt.Sprintf("u%d", i)] = 1
	}
	check := func(when string) {
		t.Helper()
		got := eventsByID(t, st, "app")
		if !maps.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", when, got, want)
		}
		a, _ := st.App("app")
		v, _ := a.Acquire()
		defer v.Release()
		tr, err := v.UserEvents(ctx, "u3", 0, 10)
		if err != nil || tr.Total != 1 || tr.Events[0].Event != "view" {
			t.Fatalf("%s: u3's trail %+v %v", when, tr, err)
		}
	}
	check("after the request")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	check("after a restart")
	rep, err := st.Erase(ctx, "app")
	if err != nil || len(rep.Done) != 1 {
		t.Fatalf("erase: %+v %v", rep, err)
	}
	check("after Erase")
	// Only the event after the request still holds the mark.
	if f := filesContaining(t, dir, "bad-release-7d1f"); len(f) != 1 {
		t.Errorf("the mark is in %v, want one segment file", f)
	}
}

// TestEraseIdentityCopyCrash: a crash between Erase's publication and its
// rewrite of the id graph's copy (the copy of before put back) leaves the
// erased ids in the copy with the request done; the next Erase rewrites
// the copy, and verify finds nothing.
func TestEraseIdentityCopyCrash(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	opt := quietLive
	opt.Now = func() time.Time { return now }
	open := func() *Store { return openDir(t, nil, dir, true, &opt) }
	st := open()
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	const anon, known = "anon-5c1e0d7e-copy", "carol@example.test"
	if _, err := st.IngestIdentity(ctx, "app", []event.Event{{UserID: anon, Name: "view", Time: t0}, {UserID: "bob", Name: "view", Time: t0},
		{UserID: known, Name: "signup", Time: t0 + 1}}, nil,
		[]IdentityWrite{{Index: 2, Op: identity.Op{Kind: identity.Identify, T: known, O: anon, Time: t0 + 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ErasePersons(ctx, "app", []string{known}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "apps", "app", identityCopyName)
	before, err := os.ReadFile(cp)
	if err != nil || !bytes.Contains(before, []byte(anon)) {
		t.Fatalf("the id graph's copy before the erasure: %v, holds the id: %v", err, bytes.Contains(before, []byte(anon)))
	}
	st = open()
	if rep, err := st.Erase(ctx, "app"); err != nil || len(rep.Done) != 1 {
		t.Fatalf("erase: %+v %v", rep, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, before, 0o644); err != nil {
		t.Fatal(err)
	}
	st = open()
	if vr, err := st.Verify(ctx, "app"); err != nil || len(vr.Findings) != 1 || vr.Findings[0].Kind != "idgraph" {
		t.Fatalf("verify of the crashed state: %+v %v", vr, err)
	}
	if rep, err := st.Erase(ctx, "app"); err != nil || len(rep.Done) != 0 {
		t.Fatalf("erase again: %+v %v", rep, err)
	}
	for _, s := range []string{anon, known} {
		if f := filesContaining(t, dir, s); len(f) > 0 {
			t.Errorf("%q still in %v", s, f)
		}
	}
	if vr, err := st.Verify(ctx, "app"); err != nil || len(vr.Findings) > 0 {
		t.Fatalf("verify: %+v %v", vr, err)
	}
}

// TestEraseDrain: on a compacted app (one run per shard: the scan's drain
// path, with its vector and sparse filters and its users join) the
// pending erasure of random users hides exactly their events, with and
// without user ids (NoIDs), as the general path does; and after Erase.
func TestEraseDrain(t *testing.T) {
	dir := t.TempDir()
	open, now := liveDirAtNoon(t, dir, 2)
	st := open()
	defer st.Close()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	t0 := now.Add(-time.Hour).UnixMicro()
	want := map[string]map[string]int{"a": {}, "b": {}} // per event: the sparse and the dense filter
	var evs []event.Event
	var users []UserWrite
	for i := range 6000 {
		u := fmt.Sprintf("user-%d", r.IntN(700))
		name := "c"
		switch x := r.IntN(100); {
		case x < 4:
			name = "a"
		case x < 70:
			name = "b"
		}
		evs = append(evs, event.Event{UserID: u, Name: name, Time: t0 + int64(i)})
		if want[name] != nil {
			want[name][u]++
		}
		if i%50 == 0 {
			users = append(users, UserWrite{Index: len(evs) - 1, Props: []event.Prop{{Name: "plan", Value: event.String(u)}}})
		}
	}
	if _, err := st.Ingest(ctx, "app", evs, users); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Compact(ctx, "app", CompactOptions{Force: true, BlockRows: 256}); err != nil {
		t.Fatal(err)
	}
	var erase []string
	for u := range want["b"] {
		if r.IntN(10) == 0 {
			erase = append(erase, u)
		}
	}
	if _, err := st.ErasePersons(ctx, "app", erase, false); err != nil {
		t.Fatal(err)
	}
	for _, u := range erase {
		delete(want["a"], u)
		delete(want["b"], u)
	}
	check := func(when string) {
		t.Helper()
		for target, want := range want {
			total := 0
			for _, n := range want {
				total += n
			}
			for _, noIDs := range []bool{false, true} {
				var mu sync.Mutex
				got, n := map[string]int{}, 0
				spec := ScanSpec{From: -1 << 62, To: 1 << 62, NoIDs: noIDs, UserProps: 1,
					Masks: func(meta *segment.Meta) []uint64 {
						m := make([]uint64, len(meta.EventNames))
						for c, name := range meta.EventNames {
							if name == target {
								m[c] = 1
							}
						}
						return m
					},
					CompileUsers: func(_ SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
						return &UserSegmentPlan{Cols: []ColumnSource{{Prop: -1}}}, nil
					}}
				visit := visitFunc(func(u UserKey, tr *trail.Trail) {
					mu.Lock()
					defer mu.Unlock()
					n += len(tr.Times)
					if !noIDs {
						got[string(u.ID)] += len(tr.Times)
					}
				})
				ofCurrent(t, st, "app", func(v *Version) error {
					_, err := v.Scan(ctx, spec, []Visitor{visit})
					if err != nil {
						t.Fatal(err)
					}
					return nil
				})
				if n != total || !noIDs && !maps.Equal(got, want) {
					t.Fatalf("%s, event %s, NoIDs %v: %d events, want %d (%d users, want %d)", when, target, noIDs, n, total, len(got), len(want))
				}
			}
		}
	}
	check("pending")
	if _, err := st.Erase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	check("after Erase")
}
