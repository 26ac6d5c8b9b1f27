package storage

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sliceSource is a Source over events in memory; errAt makes row errAt
// (0-based) fail with err.
type sliceSource struct {
	evs   []event.Event
	i     int
	errAt int
	err   error
}

func (s *sliceSource) Next(ev *event.Event) error {
	if s.i >= len(s.evs) {
		return io.EOF
	}
	i := s.i
	s.i++
	if s.err != nil && i == s.errAt {
		return s.err
	}
	*ev = s.evs[i]
	ev.Props = slices.Clone(s.evs[i].Props)
	return nil
}

var names = []string{"a", "b", "c", "d"}

// randomEvents returns n events over users u0..u(users-1) with many time
// ties, in random arrival order.
func randomEvents(r *rand.Rand, n, users int, t0 int64) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{
			UserID: fmt.Sprintf("u%d", r.IntN(users)),
			Time:   t0 + int64(r.IntN(40))*1_000_000,
			Name:   names[r.IntN(len(names))],
			Pos:    event.Pos{File: "mem", Line: int64(i + 1)},
		}
		if r.IntN(3) == 0 {
			evs[i].Props = []event.Prop{{Name: "price", Value: event.Float(float64(r.IntN(100)) / 4)}}
		}
	}
	return evs
}

type ev struct {
	t    int64
	name string
}

// collect scans snap and returns each user's trail as (time, name) pairs,
// decoding masks built as "bit i = names[i]".
func collect(t *testing.T, snap *Version, from, to int64, want []string, workers int) (map[string][]ev, ScanStats) {
	t.Helper()
	return collectChunked(t, snap, from, to, want, workers, 0, false)
}

// collectChunked is collect with trails handed over in chunks of at most
// chunk events (0: the default), checked by chunkChecker, through Prepass
// and Visit with prepass.
func collectChunked(t *testing.T, snap *Version, from, to int64, want []string, workers, chunk int, prepass bool) (map[string][]ev, ScanStats) {
	t.Helper()
	masks := func(meta *segment.Meta) []uint64 {
		out := make([]uint64, len(meta.EventNames))
		for c, n := range meta.EventNames {
			if i := slices.Index(want, n); i >= 0 {
				out[c] = 1 << i
			}
		}
		return out
	}
	var mu, emu sync.Mutex
	var errs []string
	got := map[string][]ev{}
	visit := func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		id := string(u.ID)
		if _, dup := got[id]; dup {
			t.Errorf("user %s visited twice", id)
		}
		var out []ev
		for i, ts := range tr.Times {
			out = append(out, ev{ts, want[bitIndex(tr.Mask[i])]})
		}
		got[id] = out
	}
	vs := newChunkVisitors(workers, prepass, &emu, &errs, visit)
	st, err := snap.Scan(context.Background(), ScanSpec{From: from, To: to, Masks: masks, ChunkEvents: chunk}, vs)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	for _, e := range errs {
		t.Error(e)
	}
	return got, st
}

type visitFunc func(UserKey, *trail.Trail)

func (f visitFunc) Visit(u UserKey, t *trail.Trail) { f(u, t) }

func bitIndex(m uint64) int {
	for i := 0; i < 64; i++ {
		if m == 1<<i {
			return i
		}
	}
	panic(fmt.Sprintf("mask %b has not exactly one bit", m))
}

// expected is the naive trail: per user, the events in (time, arrival) order.
func expected(imports [][]event.Event, from, to int64, want []string) map[string][]ev {
	out := map[string][]ev{}
	for _, evs := range imports {
		for _, e := range evs {
			if e.Time < from || e.Time >= to || !slices.Contains(want, e.Name) {
				continue
			}
			out[e.UserID] = append(out[e.UserID], ev{e.Time, e.Name})
		}
	}
	for u := range out {
		slices.SortStableFunc(out[u], func(a, b ev) int { return cmp.Compare(a.t, b.t) })
	}
	return out
}

func openTest(t *testing.T, shards int) *Store {
	t.Helper()
	st, err := Open(Config{Dir: t.TempDir(), Shards: shards, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// quietLogger drops the store's logs below errors.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// TestScanMergesImports imports three batches (small flushes and blocks, so
// users span many segments and blocks) and checks that every scan yields
// exactly the naive per-user trails, for several ranges, matcher sets and
// worker counts.
func TestScanMergesImports(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		st := openTest(t, 1<<r.IntN(4))
		var imports [][]event.Event
		for range 3 {
			evs := randomEvents(r, 50+r.IntN(400), 1+r.IntN(60), 1_600_000_000_000_000+int64(r.IntN(20))*1_000_000)
			imports = append(imports, evs)
			_, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}},
				ImportOptions{FlushRows: 20 + r.IntN(200), BlockRows: 1 + r.IntN(64)})
			if err != nil {
				t.Fatalf("seed %d: import: %v", seed, err)
			}
		}
		a, err := st.App("app")
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			from, to int64
			want     []string
		}{
			{math.MinInt64, math.MaxInt64, names},
			{1_600_000_000_000_000 + 10_000_000, 1_600_000_000_000_000 + 30_000_000, names},
			{math.MinInt64, math.MaxInt64, []string{"b", "d"}},
			{math.MinInt64, math.MaxInt64, []string{"zzz"}},
		}
		// As imported (several segments per shard: merged per user), then
		// compacted into one run per shard (drained block by block).
		for round := range 2 {
			if round == 1 {
				if _, err := a.Compact(context.Background(), CompactOptions{Force: true, BlockRows: 1 + r.IntN(64)}); err != nil {
					t.Fatal(err)
				}
			}
			snap := snapOf(t, a)
			for _, c := range cases {
				for _, workers := range []int{1, 3} {
					chunk := []int{0, 1, 2, 5}[r.IntN(4)]
					got, _ := collectChunked(t, snap, c.from, c.to, c.want, workers, chunk, r.IntN(2) == 0)
					want := expected(imports, c.from, c.to, c.want)
					if len(got) != len(want) {
						t.Fatalf("seed %d %v: %d users, want %d", seed, c, len(got), len(want))
					}
					for u, w := range want {
						if !slices.Equal(got[u], w) {
							t.Fatalf("seed %d round %d %v: user %s trail\n got %v\nwant %v", seed, round, c, u, got[u], w)
						}
					}
				}
			}
		}
	}
}

func TestImportAbortsOnBadRowsAndLeavesStoreUnchanged(t *testing.T) {
	st := openTest(t, 4)
	r := rand.New(rand.NewPCG(1, 2))
	good := randomEvents(r, 100, 10, 1_600_000_000_000_000)
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: good}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	before := snapOf(t, a).Catalog

	bad := randomEvents(r, 50, 10, 1_600_000_000_000_000)
	bad[6].Props = []event.Prop{{Name: "price", Value: event.String("cheap")}} // wrong type
	bad[8].UserID = ""
	_, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: bad}}, ImportOptions{FlushRows: 10})
	var ie *ImportError
	if !errors.As(err, &ie) {
		t.Fatalf("want *ImportError, got %v", err)
	}
	if ie.Report.Rejected != 2 || len(ie.Report.Errors) != 2 || ie.Report.Errors[0].Pos.Line != 7 ||
		ie.Report.Errors[0].Field != "price" || ie.Report.Errors[1].Pos.Line != 9 || ie.Report.Errors[1].Field != "user_id" {
		t.Fatalf("report does not name lines 7 (price) and 9 (user_id): %v", err)
	}
	if snapOf(t, a).Catalog != before {
		t.Fatal("snapshot changed by an aborted import")
	}
	assertNoOrphans(t, a)

	// A fatal error from the source mid-way also applies nothing.
	_, err = st.Import(context.Background(), "app", []Source{&sliceSource{evs: good, errAt: 70, err: errors.New("disk on fire")}},
		ImportOptions{FlushRows: 10})
	if err == nil || snapOf(t, a).Catalog != before {
		t.Fatalf("fatal source error: err=%v, snapshot changed=%v", err, snapOf(t, a).Catalog != before)
	}
	assertNoOrphans(t, a)

	// With MaxErrors the good rows are applied and the bad ones reported.
	rep, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: bad}}, ImportOptions{MaxErrors: 2})
	if err != nil || rep.Applied != 48 || rep.Rejected != 2 {
		t.Fatalf("max-errors import: rep=%+v err=%v", rep, err)
	}
	// A reopened store sees the same published state.
	st2, err := Open(Config{Dir: st.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	a2, err := st2.App("app")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snapOf(t, a2).Rows(KindEvents), int64(148); got != want {
		t.Fatalf("reopened store has %d rows, want %d", got, want)
	}
}

func assertNoOrphans(t *testing.T, a *App) {
	t.Helper()
	ents, _ := a.bucket.List(context.Background())
	if n := len(a.Current().Segments); len(ents) != n {
		t.Fatalf("%d files in seg/ (%v), %d published", len(ents), ents, n)
	}
}

func TestInsertIDDeduplication(t *testing.T) {
	st := openTest(t, 2)
	mk := func(id, user string, sec int64) event.Event {
		return event.Event{UserID: user, Time: sec * 1_000_000, Name: "a", InsertID: id}
	}
	// x at u1 1s twice: one event; x at u1 3s: another event (other time).
	first := []event.Event{mk("x", "u1", 1), mk("y", "u2", 2), mk("x", "u1", 3), mk("x", "u1", 1)}
	rep, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: first}}, ImportOptions{})
	if err != nil || rep.Applied != 3 || rep.Duplicates != 1 {
		t.Fatalf("first import: %+v %v", rep, err)
	}
	// y sent again: dropped by the scan (not by the import, which keeps
	// no set of the app's ids); z twice in one import: dropped there.
	second := []event.Event{mk("y", "u2", 2), mk("z", "u3", 4), mk("z", "u3", 4), {UserID: "u3", Time: 5, Name: "a"}}
	rep, err = st.Import(context.Background(), "app", []Source{&sliceSource{evs: second}}, ImportOptions{})
	if err != nil || rep.Applied != 3 || rep.Duplicates != 1 {
		t.Fatalf("second import: %+v %v", rep, err)
	}
	a, _ := st.App("app")
	check := func(what string) {
		got, _ := collect(t, snapOf(t, a), math.MinInt64, math.MaxInt64, names, 1)
		if len(got["u1"]) != 2 || got["u1"][0].t != 1_000_000 || len(got["u2"]) != 1 || len(got["u3"]) != 2 {
			t.Fatalf("%s: %v", what, got)
		}
	}
	check("imported")
	rep2, err := a.Compact(context.Background(), CompactOptions{Force: true})
	if err != nil || rep2.Duplicates != 1 {
		t.Fatalf("compaction: %+v %v", rep2, err)
	}
	check("compacted")
}

// TestInsertIDDeduplicationTies checks the import's deduplication on tie
// groups of both sizes its builder handles (up to 32 events of a user at
// one time compared pairwise, larger ones through a set) against the
// rule's count: per user and time, one event per distinct (name, insert
// id), and every event without an insert id.
func TestInsertIDDeduplicationTies(t *testing.T) {
	for _, ties := range []int{20, 200} {
		t.Run(fmt.Sprint(ties), func(t *testing.T) {
			st := openTest(t, 2)
			r := rand.New(rand.NewPCG(uint64(ties), 5))
			var evs []event.Event
			want := map[string]int{}
			seen := map[string]bool{}
			for u := range 3 {
				user := fmt.Sprintf("u%d", u)
				for range ties {
					ev := event.Event{UserID: user, Time: 7_000_000, Name: []string{"a", "b"}[r.IntN(2)]}
					if r.IntN(5) > 0 {
						ev.InsertID = fmt.Sprintf("id-%d", r.IntN(ties/4))
					}
					k := user + "/" + ev.Name + "/" + ev.InsertID
					if ev.InsertID == "" || !seen[k] {
						want[user]++
					}
					seen[k] = true
					evs = append(evs, ev)
				}
			}
			if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			a, _ := st.App("app")
			got, _ := collect(t, snapOf(t, a), math.MinInt64, math.MaxInt64, names, 1)
			for user, n := range want {
				if len(got[user]) != n {
					t.Errorf("user %s: %d events, want %d", user, len(got[user]), n)
				}
			}
		})
	}
}

func TestAppIsolationAndNames(t *testing.T) {
	st := openTest(t, 2)
	evs := []event.Event{{UserID: "u", Time: 1, Name: "a"}}
	if _, err := st.Import(context.Background(), "one", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.App("two"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown app: %v", err)
	}
	if _, err := st.Import(context.Background(), "Bad Name", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err == nil {
		t.Fatal("invalid app name accepted")
	}
	apps, _ := st.Apps()
	if !slices.Equal(apps, []string{"one"}) {
		t.Fatalf("apps = %v", apps)
	}
}

// TestCorruptSegmentFailsScan flips bytes of a published segment, one at a
// time: in a fresh store a scan either fails with a corruption error
// naming the file (when it reads the damaged chunk, or the damage is in
// the footer or framing) or returns exactly the undamaged answer (the
// damaged chunk was not needed) — never a different answer — and
// App.Verify always reports the file.
func TestCorruptSegmentFailsScan(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(Config{Dir: dir, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	evs := randomEvents(r, 300, 20, 1_600_000_000_000_000)
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: 64}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	ref := snapOf(t, a).Segments[0]
	st.Close()
	path := filepath.Join(dir, "apps", "app", segDir, ref.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	scan := func() (string, *App, error) {
		st, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		a, _ := st.App("app")
		var sb strings.Builder
		_, err = snapOf(t, a).Scan(context.Background(), ScanSpec{From: math.MinInt64, To: math.MaxInt64,
			Masks: func(m *segment.Meta) []uint64 { return slices.Repeat([]uint64{1}, len(m.EventNames)) }},
			[]Visitor{visitFunc(func(u UserKey, tr *trail.Trail) { fmt.Fprintln(&sb, string(u.ID), tr.Times) })})
		return sb.String(), a, err
	}
	want, _, err := scan()
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for off := 0; off < len(orig); off += 1 + len(orig)/97 {
		b := bytes.Clone(orig)
		b[off] ^= 0x20
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, a, err := scan()
		isCorrupt := errors.Is(err, segment.ErrCorruption) && strings.Contains(err.Error(), ref.File)
		if err != nil && !isCorrupt || err == nil && got != want {
			t.Fatalf("byte %d flipped: want a corruption error naming %s or the undamaged answer, got %v", off, ref.File, err)
		}
		if isCorrupt {
			failed++
		}
		rep, err := a.store.Verify(context.Background(), "app")
		if err != nil || len(rep.Findings) != 1 || rep.Findings[0].Kind != "corruption" || !strings.Contains(rep.Findings[0].File, ref.File) {
			t.Fatalf("byte %d flipped: Verify = %+v, %v; want one corruption finding naming %s", off, rep, err, ref.File)
		}
	}
	if failed == 0 {
		t.Fatal("no flipped byte failed the scan")
	}
}

// TestImportSeesOtherProcessPublication: two Stores on one directory (two
// processes) import in turn; each import starts from the catalog on disk,
// so neither loses the other's segments, and both see every row.
func TestImportSeesOtherProcessPublication(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Config{Dir: dir, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(Config{Dir: dir, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := rand.New(rand.NewPCG(5, 6))
	imp := func(st *Store, n int) {
		t.Helper()
		evs := randomEvents(r, n, 10, 1_600_000_000_000_000)
		if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: evs}}, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	imp(a, 100)
	if _, err := b.App("app"); err != nil { // b caches the app at generation 1
		t.Fatal(err)
	}
	imp(a, 50)
	imp(b, 30)
	for _, st := range []*Store{a, b} {
		app, _ := st.App("app")
		m, _, err := app.ms.load()
		if err != nil {
			t.Fatal(err)
		}
		if rows := m.Rows(KindEvents); rows != 180 {
			t.Fatalf("catalog on disk has %d rows, want 180", rows)
		}
	}
	app, _ := b.App("app")
	if rows := snapOf(t, app).Rows(KindEvents); rows != 180 {
		t.Fatalf("b's snapshot has %d rows, want 180", rows)
	}
}

// TestAppWriteLock checks the app's writer role across two stores on one
// directory, as two processes would hold it: the second writer is refused
// with a *LockedError naming the first (its Config.Holder and pid) while
// the first holds it, and gets it once released; a store opened with
// Config.Writer (spur serve) refuses every other writer for its life.
func TestAppWriteLock(t *testing.T) {
	dir := t.TempDir()
	var apps [2]*App
	for i := range apps {
		st, err := Open(Config{Dir: dir, Shards: 1, Holder: fmt.Sprintf("writer%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if apps[i], err = st.app("locked", true); err != nil {
			t.Fatal(err)
		}
	}
	w, err := apps[0].takeRole()
	if err != nil {
		t.Fatal(err)
	}
	var le *LockedError
	if _, err := apps[1].takeRole(); !errors.As(err, &le) || !strings.HasPrefix(le.Holder, "writer0 (pid ") {
		t.Fatalf("second writer while the first holds the role: %v", err)
	}
	w.end()
	w2, err := apps[1].takeRole()
	if err != nil {
		t.Fatalf("second writer after the first released the role: %v", err)
	}
	w2.end()

	srv, err := Open(Config{Dir: dir, Writer: true, Holder: "spur serve"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: dir, Writer: true, Holder: "spur serve"}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "spur serve (pid") {
		t.Fatalf("a second server: %v", err)
	}
	_, err = apps[1].takeRole()
	if !errors.As(err, &le) || !strings.Contains(err.Error(), `app "locked" is being written by spur serve (pid `) || !strings.Contains(err.Error(), "send imports to its API") {
		t.Fatalf("a CLI write while the server runs: %v", err)
	}
	srv.Close()
	w3, err := apps[1].takeRole()
	if err != nil {
		t.Fatalf("a CLI write after the server stopped: %v", err)
	}
	w3.end()
}

// snapOf acquires app a's current version for the rest of test t.
func snapOf(t testing.TB, a *App) *Version {
	t.Helper()
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Release)
	return v
}

// TestSetOnceWrites: user property writes named SetOnceEvent set a
// property only where no SetEvent write does, the earliest winning (a tie
// to the earlier arrival), across imports and after compaction
// (docs/ingest.md §1 user_properties_once).
func TestSetOnceWrites(t *testing.T) {
	st := openTest(t, 2)
	ctx := context.Background()
	w := func(user, name string, sec int64, tier string) event.Event {
		return event.Event{UserID: user, Name: name, Time: sec * 1_000_000, Props: []event.Prop{{Name: "tier", Value: event.String(tier)}}}
	}
	imports := [][]event.Event{
		{w("u1", SetOnceEvent, 5, "a"), w("u1", SetOnceEvent, 3, "b"), w("u2", SetEvent, 9, "x"), w("u3", SetOnceEvent, 2, "c")},
		{w("u2", SetOnceEvent, 1, "y"), w("u3", SetOnceEvent, 2, "d"), w("u4", SetEvent, 1, "p"), w("u4", SetEvent, 2, "q")},
	}
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: []event.Event{{UserID: "u1", Name: "a", Time: 1}}}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, evs := range imports {
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{Kind: KindUsers}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := st.App("app")
	want := map[string]string{"u1": `"b"`, "u2": `"x"`, "u3": `"c"`, "u4": `"q"`}
	check := func(what string) {
		got := recordTrails(t, snapOf(t, a))
		for u, tier := range want {
			if !strings.Contains(got[u], "user: "+tier+" ") {
				t.Errorf("%s: user %s: %q, want tier %s", what, u, got[u], tier)
			}
		}
	}
	check("imported")
	if _, err := a.Compact(ctx, CompactOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}
