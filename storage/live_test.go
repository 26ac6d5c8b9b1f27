package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/trail"
)

// openLiveOn opens a store with live ingestion on fs (a restart, when fs
// is a crashed copy: the logs are replayed).
func openLiveOn(t *testing.T, fs *crashfs.FS, shards int, opt LiveOptions) *Store {
	t.Helper()
	st, err := Open(Config{Dir: "store", FS: fs, Shards: shards, Writer: true, Live: &opt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// quietLive are live options under which nothing happens in the
// background during a test: flushes only when asked (FlushLive, Close),
// no compaction of an idle app.
var quietLive = LiveOptions{FlushAge: time.Hour, FlushBytes: 1 << 40, NoIdleCompact: true}

// liveRequest is one Ingest call's input and the rows a file import of the
// same data would take: its events and the users rows of its user writes.
type liveRequest struct {
	evs   []event.Event
	users []UserWrite
	rows  []event.Event // the user writes as users-file rows (SetEvent / SetOnceEvent)
}

// newLiveRequest returns n events (compactEvents: ties, insert ids,
// duplicates) with user property writes on some (set and set-once).
func newLiveRequest(r *rand.Rand, n, users int, t0 int64, ids *idPool) liveRequest {
	req := liveRequest{evs: compactEvents(r, n, users, t0, ids)}
	ws := compactWrites(r, n, users, t0)
	for i := range req.evs {
		if r.IntN(3) != 0 || len(ws[i].Props) == 0 {
			continue
		}
		once := r.IntN(3) == 0
		req.users = append(req.users, UserWrite{Index: i, Props: ws[i].Props, Once: once})
		name := SetEvent
		if once {
			name = SetOnceEvent
		}
		req.rows = append(req.rows, event.Event{UserID: req.evs[i].UserID, Time: req.evs[i].Time, Name: name, Props: slices.Clone(ws[i].Props)})
	}
	return req
}

// identify appends to the request a few `$identify` events joining two
// of its users (docs/identity.md §2; some are refused, some repeat a join).
func (q *liveRequest) identify(r *rand.Rand) {
	n := len(q.evs)
	for range 1 + r.IntN(3) {
		t, a := q.evs[r.IntN(n)], q.evs[r.IntN(n)]
		q.evs = append(q.evs, event.Event{UserID: t.UserID, Name: IdentifyEvent, Time: t.Time,
			Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String(a.UserID)}}})
	}
}

// clone returns a deep copy of the request's events and user writes
// (Ingest coerces them in place).
func (q liveRequest) clone() ([]event.Event, []UserWrite) {
	evs := slices.Clone(q.evs)
	for i := range evs {
		evs[i].Props = slices.Clone(evs[i].Props)
	}
	users := slices.Clone(q.users)
	for i := range users {
		users[i].Props = slices.Clone(users[i].Props)
	}
	return evs, users
}

// importRequest imports req into st as files would come: its events, then
// its user writes.
func importRequest(t *testing.T, st *Store, req liveRequest) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: req.evs}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(req.rows) > 0 {
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: req.rows}}, ImportOptions{Kind: KindUsers}); err != nil {
			t.Fatal(err)
		}
	}
}

func ingestRequest(t *testing.T, st *Store, req liveRequest) {
	t.Helper()
	evs, users := req.clone()
	rep, err := st.Ingest(context.Background(), "app", evs, users)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted != len(req.evs) || len(rep.Rejected) > 0 {
		t.Fatalf("accepted %d of %d, rejected %v", rep.Accepted, len(req.evs), rep.Rejected)
	}
}

// TestIngestEqualsImport: events ingested live — in requests, with user
// property writes, sealed by every query, merged in memory, flushed at
// random moments, compacted, replayed after a restart and after a power
// loss — are answered exactly as the same data imported from files:
// every trail (events, properties, user properties), duplicates dropped,
// visible as soon as Ingest returns.
func TestIngestEqualsImport(t *testing.T) {
	for seed := range 4 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 5))
			fs := crashfs.New()
			st := openLiveOn(t, fs, 2, quietLive)
			ref := openOn(t, crashfs.New(), 2)
			var ids idPool
			t0 := int64(1_600_000_000_000_000)
			for b := range 12 {
				req := newLiveRequest(r, 1+r.IntN(80), 25, t0+int64(b%4)*5_000_000, &ids)
				ingestRequest(t, st, req)
				importRequest(t, ref, req)
				// Visible on return.
				sameTrails(t, fmt.Sprintf("after request %d", b), appTrails(t, st), appTrails(t, ref))
				liveStep(t, st, r, r.IntN(5))
			}
			want := appTrails(t, ref)
			sameTrails(t, "at the end", appTrails(t, st), want)
			// A power loss: the log replays what is not flushed.
			crashed := openLiveOn(t, fs.Crash(0, nil), 2, quietLive)
			sameTrails(t, "after a power loss", appTrails(t, crashed), want)
			// A clean restart: Close flushed everything.
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			a, _ := st.App("app")
			if a.live.Load() != nil {
				t.Fatal("the live layer survived Close")
			}
			again := openOn(t, fs.Crash(0, nil), 2) // no live layer: only what was published
			sameTrails(t, "after Close, without the log", appTrails(t, again), want)
		})
	}
}

// liveStep moves app "app" of st on by step k: 0 flushes the live layer,
// 1 merges its memory segments (a random kind of merge, drawn from r), 2
// compacts; any other k does nothing.
func liveStep(t *testing.T, st *Store, r *rand.Rand, k int) {
	t.Helper()
	ctx := context.Background()
	switch k {
	case 0:
		if err := st.FlushLive(ctx, "app"); err != nil {
			t.Fatal(err)
		}
	case 1:
		a, _ := st.App("app")
		if err := a.live.Load().mergeMemory(ctx, r.IntN(2) == 0); err != nil {
			t.Fatal(err)
		}
	case 2:
		if _, err := st.Compact(ctx, "app", CompactOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// openLiveAtNoon opens a one-shard live store whose clock stands at
// 2026-11-25 12:00 UTC, returned too.
func openLiveAtNoon(t *testing.T) (*Store, time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	opt := quietLive
	opt.Now = func() time.Time { return now }
	return openLiveOn(t, crashfs.New(), 1, opt), now
}

// TestIngestRejects: per-event rejection naming the field; the good events
// of the request are stored.
func TestIngestRejects(t *testing.T) {
	st, now := openLiveAtNoon(t)
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	evs := []event.Event{
		{UserID: "u1", Name: "a", Time: t0, Props: []event.Prop{{Name: "price", Value: event.Int(3)}}},
		{UserID: "u1", Name: "a", Time: t0, Props: []event.Prop{{Name: "price", Value: event.String("x")}}},
		{UserID: "u2", Name: "a", Time: now.Add(25 * time.Hour).UnixMicro()},
		{UserID: "", Name: "a", Time: t0},
		{UserID: "u3", Name: "b", Time: t0},
		{UserID: "u4", Name: "b", Time: t0, Props: []event.Prop{{Name: "price", Value: event.Float(2.5)}}},
	}
	users := []UserWrite{
		{Index: 4, Props: []event.Prop{{Name: "plan", Value: event.String("pro")}}},
		{Index: 4, Once: true, Props: []event.Prop{{Name: "age", Value: event.Int(7)}}},
		{Index: 0, Props: []event.Prop{{Name: "plan", Value: event.Int(3)}}},
	}
	rep, err := st.Ingest(ctx, "app", evs, users)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Rejected {
		got = append(got, fmt.Sprintf("%d %s", r.Index, r.Field))
	}
	// Event 0's user write fixes plan as int: event 4's "pro" does not fit.
	want := []string{"1 properties.price", "2 timestamp", "3 user_id", "4 user_properties.plan"}
	if rep.Accepted != 2 || !slices.Equal(got, want) {
		t.Fatalf("accepted %d, rejected %v (%+v), want 2 and %v", rep.Accepted, got, rep.Rejected, want)
	}
	a, _ := st.App("app")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if n := v.Rows(KindEvents); n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
	// price: int by event 0, widened to float by event 5.
	types := map[string]event.Type{}
	for _, p := range v.EventProps {
		types[p.Name] = p.Type
	}
	if types["price"] != event.TypeFloat {
		t.Fatalf("event properties %v", v.EventProps)
	}
}

// TestIngestDropBadValues: with IngestOptions.DropBadValues the events of
// TestIngestRejects that failed on a property are stored without it, the
// drops listed; events failing on their user id or timestamp are still
// rejected.
func TestIngestDropBadValues(t *testing.T) {
	st, now := openLiveAtNoon(t)
	ctx := context.Background()
	t0 := now.Add(-time.Hour).UnixMicro()
	evs := []event.Event{
		{UserID: "u1", Name: "a", Time: t0, Props: []event.Prop{{Name: "price", Value: event.Int(3)}}},
		{UserID: "u1", Name: "a", Time: t0, Props: []event.Prop{{Name: "n", Value: event.Int(1)},
			{Name: "price", Value: event.String("x")}, {Name: "", Value: event.Int(2)}, {Name: "m", Value: event.Int(2)}}},
		{UserID: "u2", Name: "a", Time: now.Add(25 * time.Hour).UnixMicro()},
		{UserID: "", Name: "a", Time: t0},
		{UserID: "u3", Name: "b", Time: t0},
	}
	users := []UserWrite{
		{Index: 4, Props: []event.Prop{{Name: "plan", Value: event.String("pro")}, {Name: "age", Value: event.Int(7)}}},
		{Index: 0, Props: []event.Prop{{Name: "plan", Value: event.Int(3)}}},
	}
	rep, err := st.IngestWith(ctx, "app", evs, users, nil, IngestOptions{DropBadValues: true})
	if err != nil {
		t.Fatal(err)
	}
	var rejected, dropped []string
	for _, r := range rep.Rejected {
		rejected = append(rejected, fmt.Sprintf("%d %s", r.Index, r.Field))
	}
	for _, r := range rep.Dropped {
		dropped = append(dropped, fmt.Sprintf("%d %s", r.Index, r.Field))
	}
	wantRejected := []string{"2 timestamp", "3 user_id"}
	wantDropped := []string{"1 properties.", "1 properties.price", "4 user_properties.plan"}
	if rep.Accepted != 3 || !slices.Equal(rejected, wantRejected) || !slices.Equal(dropped, wantDropped) {
		t.Fatalf("accepted %d, rejected %v, dropped %v (%+v); want 3, %v, %v", rep.Accepted, rejected, dropped, rep.Dropped, wantRejected, wantDropped)
	}
	if got := len(evs[1].Props); got != 2 || evs[1].Props[0].Name != "n" || evs[1].Props[1].Name != "m" {
		t.Fatalf("event 1 kept %+v, want n and m", evs[1].Props)
	}
	a, _ := st.App("app")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if n := v.Rows(KindEvents); n != 3 {
		t.Fatalf("%d events stored, want 3", n)
	}
}

// TestIngestBackpressure: over the memory limit, Ingest stores nothing and
// says so; after a flush it takes events again.
func TestIngestBackpressure(t *testing.T) {
	opt := quietLive
	opt.Memory = 64 << 10
	st := openLiveOn(t, crashfs.New(), 2, opt)
	r := rand.New(rand.NewPCG(1, 2))
	var ids idPool
	var refused error
	sent := 0
	for range 200 {
		req := newLiveRequest(r, 100, 50, 1_600_000_000_000_000, &ids)
		evs, users := req.clone()
		_, err := st.Ingest(context.Background(), "app", evs, users)
		if err != nil {
			refused = err
			break
		}
		sent++
	}
	if !errors.Is(refused, ErrBackpressure) {
		t.Fatalf("after %d requests: %v, want ErrBackpressure", sent, refused)
	}
	if err := st.FlushLive(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	req := newLiveRequest(r, 10, 5, 1_600_000_000_000_000, &ids)
	ingestRequest(t, st, req)
}

// TestIngestConcurrentWithQueries: concurrent Ingest calls and queries
// while the background loop seals, merges and flushes: every query sees
// each request whole or not at all, and at least the requests
// acknowledged before it started.
func TestIngestConcurrentWithQueries(t *testing.T) {
	opt := LiveOptions{FlushAge: 50 * time.Millisecond, FlushBytes: 32 << 10}
	st := openLiveOn(t, crashfs.New(), 4, opt)
	const writers, requests, size = 4, 40, 25
	var acked sync.Map // request id → true once acknowledged
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			for i := range requests {
				id := fmt.Sprintf("r%d-%d", w, i)
				evs := make([]event.Event, size)
				for k := range evs {
					// Every event of a request has the request's id as its
					// event name, on its own user.
					evs[k] = event.Event{UserID: fmt.Sprintf("%s-u%d", id, k), Name: id, Time: 1_600_000_000_000_000 + int64(k)}
				}
				if _, err := st.Ingest(context.Background(), "app", evs, nil); err != nil {
					errs <- err
					return
				}
				acked.Store(id, true)
			}
		})
	}
	stop := make(chan struct{})
	var qwg sync.WaitGroup
	queries := 0
	qwg.Go(func() {
		for {
			select {
			case <-stop:
				if queries >= 10 { // the last ones after the writes, on a slow machine
					return
				}
			default:
			}
			queries++
			var before []string
			acked.Range(func(k, _ any) bool { before = append(before, k.(string)); return true })
			a, err := st.App("app")
			if err != nil {
				continue // not created yet
			}
			v, err := a.Acquire()
			if err != nil {
				errs <- err
				return
			}
			counts := map[string]int{}
			users, err := usersByEvent(v)
			v.Release()
			if err != nil {
				errs <- err
				return
			}
			for name, n := range users {
				counts[name] = n
			}
			for name, n := range counts {
				if n != size {
					errs <- fmt.Errorf("request %s: %d of its %d events visible", name, n, size)
					return
				}
			}
			for _, id := range before {
				if counts[id] != size {
					errs <- fmt.Errorf("request %s acknowledged before the query started but not visible", id)
					return
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	qwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// usersByEvent returns, per event name, the number of events of a version
// (each event is its own user in TestIngestConcurrentWithQueries).
func usersByEvent(v *Version) (map[string]int, error) {
	var mu sync.Mutex
	out := map[string]int{}
	var names []string
	spec := ScanSpec{From: -1 << 62, To: 1 << 62,
		Compile: func(ref SegmentRef, meta *segment.Meta) (*SegmentPlan, error) {
			sp := &SegmentPlan{Masks: make([]uint64, len(meta.EventNames))}
			mu.Lock()
			defer mu.Unlock()
			for c, n := range meta.EventNames {
				i := slices.Index(names, n)
				if i < 0 {
					i = len(names)
					names = append(names, n)
				}
				sp.Masks[c] = uint64(i) + 1 // the event's index + 1, decoded below
			}
			return sp, nil
		},
	}
	visit := visitFunc(func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range tr.Mask {
			out[names[m-1]]++
		}
	})
	if _, err := v.Scan(context.Background(), spec, []Visitor{visit}); err != nil {
		return nil, err
	}
	return out, nil
}

// TestLiveStats reports the live layer.
func TestLiveStats(t *testing.T) {
	st := openLiveOn(t, crashfs.New(), 2, quietLive)
	r := rand.New(rand.NewPCG(3, 4))
	var ids idPool
	ingestRequest(t, st, newLiveRequest(r, 50, 10, 1_600_000_000_000_000, &ids))
	s := st.LiveStats()
	if len(s) != 1 || s[0].App != "app" || s[0].LastAppliedSeq != 1 || s[0].UnflushedBytes <= 0 || s[0].LogBytes <= 0 {
		t.Fatalf("%+v", s)
	}
	if err := st.FlushLive(context.Background(), "app"); err != nil {
		t.Fatal(err)
	}
	s = st.LiveStats()
	if s[0].UnflushedBytes != 0 || s[0].PublishedLogSeq != 1 || s[0].MemorySegments != 0 {
		t.Fatalf("after a flush: %+v", s)
	}
}

// TestLiveCrashAtEverySyncPoint simulates a power loss at every sync point
// (every fsync of a log file, segment, catalog or directory) while
// requests are ingested and flushed (docs/ingest.md §2: a crash after a 200
// loses nothing): on each crashed filesystem the store opens, replays its
// log, and answers exactly as the acknowledged requests imported from
// files would — plus, perhaps, the one in flight — then takes the next
// request.
//
// With persons, requests also carry identity operations ($identify
// events joining the request's users, some refused): after the power
// loss every acknowledged operation holds (the trails are persons').
func TestLiveCrashAtEverySyncPoint(t *testing.T) {
	ctx := context.Background()
	for seed := range 3 {
		for _, unsynced := range []int{0, 30} {
			persons := seed > 0
			t.Run(fmt.Sprintf("seed%d-unsynced%d-persons%v", seed, unsynced, persons), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(seed), 77))
				fs := crashfs.New()
				opt := quietLive
				opt.LogFileSize = 2 << 10 // rotate often
				st := openLiveOn(t, fs, 2, opt)
				ref := openOn(t, crashfs.New(), 2)
				var ids idPool
				var reqs []liveRequest
				want := []map[string]string{nil} // after k acknowledged requests
				acked := 0
				type state struct {
					fs    *crashfs.FS
					acked int
				}
				var mu sync.Mutex
				var states []state
				fs.SetOnSync(func() {
					mu.Lock()
					defer mu.Unlock()
					states = append(states, state{fs.Crash(unsynced, r), acked})
				})
				for k := range 10 {
					req := newLiveRequest(r, 1+r.IntN(40), 20, 1_600_000_000_000_000+int64(k%3)*3_000_000, &ids)
					if persons {
						req.identify(r)
					}
					reqs = append(reqs, req)
					importRequest(t, ref, req)
					want = append(want, appTrails(t, ref))
					ingestRequest(t, st, req)
					mu.Lock()
					acked++
					mu.Unlock()
					if r.IntN(3) == 0 {
						if err := st.FlushLive(ctx, "app"); err != nil {
							t.Fatal(err)
						}
					}
				}
				fs.SetOnSync(nil)
				states = append(states, state{fs.Crash(unsynced, r), acked})
				if len(states) < 20 {
					t.Fatalf("only %d sync points", len(states))
				}
				t.Logf("%d power-loss states over %d requests", len(states), len(reqs))
				for i, s := range states {
					crashed := openLiveOn(t, s.fs, 2, opt)
					var got map[string]string
					if _, err := crashed.App("app"); err == nil || !errors.Is(err, ErrNotFound) {
						got = appTrails(t, crashed)
					}
					if !maps.Equal(got, want[s.acked]) && (s.acked == len(reqs) || !maps.Equal(got, want[s.acked+1])) {
						t.Fatalf("power loss at sync point %d of %d, %d requests acknowledged: the store answers as neither %d nor %d requests",
							i, len(states), s.acked, s.acked, s.acked+1)
					}
					// It takes the next request and sees it.
					more := newLiveRequest(r, 5, 3, 1_700_000_000_000_000, &idPool{next: 1 << 20})
					ingestRequest(t, crashed, more)
					if n := len(appTrails(t, crashed)); n < len(got) {
						t.Fatalf("sync point %d: %d users after one more request, %d before", i, n, len(got))
					}
					if err := crashed.Close(); err != nil {
						t.Fatalf("sync point %d: close: %v", i, err)
					}
				}
			})
		}
	}
}

// TestIngestDiskFull: while the disk is full, Ingest stores nothing and
// says so (ErrDiskFull), flushes fail and are retried; once space is
// back, requests are taken again and nothing acknowledged is lost.
func TestIngestDiskFull(t *testing.T) {
	ctx := context.Background()
	fs := crashfs.New()
	st := openLiveOn(t, fs, 2, quietLive)
	ref := openOn(t, crashfs.New(), 2)
	r := rand.New(rand.NewPCG(9, 9))
	var ids idPool
	req := newLiveRequest(r, 30, 10, 1_600_000_000_000_000, &ids)
	ingestRequest(t, st, req)
	importRequest(t, ref, req)
	fs.SetFull(true)
	evs, users := newLiveRequest(r, 30, 10, 1_600_000_000_000_000, &ids).clone()
	if _, err := st.Ingest(ctx, "app", evs, users); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Ingest on a full disk: %v, want ErrDiskFull", err)
	}
	if err := st.FlushLive(ctx, "app"); err == nil {
		t.Fatal("a flush on a full disk succeeded")
	}
	sameTrails(t, "while the disk is full", appTrails(t, st), appTrails(t, ref))
	fs.SetFull(false)
	req = newLiveRequest(r, 30, 10, 1_600_000_000_000_000, &ids)
	ingestRequest(t, st, req)
	importRequest(t, ref, req)
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	want := appTrails(t, ref)
	sameTrails(t, "after space is back", appTrails(t, st), want)
	crashed := openLiveOn(t, fs.Crash(0, nil), 2, quietLive)
	sameTrails(t, "after a power loss", appTrails(t, crashed), want)
}

// TestLogDamageRefusesWritesAndRecovers (docs/ingest.md §2): damage in the
// write-ahead log other than a torn tail makes the app refuse writes while
// its queries and the other apps keep serving; `spur recover` (Recover)
// sets the damaged log aside, keeps every intact record, and reports the
// lost range: the app then answers with every request but the damaged one.
func TestLogDamageRefusesWritesAndRecovers(t *testing.T) {
	ctx := context.Background()
	fs := crashfs.New()
	opt := quietLive
	opt.LogFileSize = 1 // a file per commit
	st := openLiveOn(t, fs, 2, opt)
	r := rand.New(rand.NewPCG(12, 12))
	var ids idPool
	var reqs []liveRequest
	for k := range 6 {
		req := newLiveRequest(r, 20+r.IntN(20), 10, 1_600_000_000_000_000+int64(k)*1_000_000, &ids)
		reqs = append(reqs, req)
		ingestRequest(t, st, req)
	}
	if err := st.Close(); err != nil { // flushes: the log is released but its last file
		t.Fatal(err)
	}
	st = openLiveOn(t, fs, 2, opt)
	for k := range 6 {
		req := newLiveRequest(r, 20+r.IntN(20), 10, 1_600_000_100_000_000+int64(k)*1_000_000, &ids)
		reqs = append(reqs, req)
		ingestRequest(t, st, req)
	}
	crashed := fs.Crash(0, nil)
	// Damage the third of the log's files (a record in the middle).
	dir := "store/apps/app/wal"
	names, _ := crashed.List(dir)
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") {
			logs = append(logs, n)
		}
	}
	slices.Sort(logs)
	if len(logs) < 5 {
		t.Fatalf("log files %v", logs)
	}
	victim := filepath.Join(dir, logs[2])
	b, err := vfs.ReadFile(crashed, victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0x40
	f, err := crashed.Create(victim)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Sync()
	f.Close()

	damaged := openLiveOn(t, crashed, 2, opt)
	evs, users := reqs[0].clone()
	if _, err := damaged.Ingest(ctx, "app", evs, users); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "spur recover --app app") {
		t.Fatalf("Ingest into an app with a damaged log: %v", err)
	}
	before := appTrails(t, damaged) // its queries serve: the flushed requests
	if len(before) == 0 {
		t.Fatal("the app's queries answer nothing")
	}
	other, users2 := reqs[1].clone()
	if _, err := damaged.Ingest(ctx, "other", other, users2); err != nil {
		t.Fatalf("another app refuses writes: %v", err)
	}
	damaged.Close()

	// Recovery, as `spur recover` runs it (no live layer).
	rst := openOn(t, crashed, 2)
	rep, err := rst.Recover(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Log == nil || len(rep.Log.Lost) != 1 || rep.Log.Lost[0].FirstSeq != rep.Log.Lost[0].LastSeq || rep.Log.Lost[0].FirstSeq == 0 {
		t.Fatalf("log recovery %+v", rep.Log)
	}
	lost := int(rep.Log.Lost[0].FirstSeq) - 1 // request k has seq k+1
	if !slices.ContainsFunc(rep.SetAside, func(a AsideFile) bool { return strings.HasSuffix(a.File, "/wal") }) {
		t.Fatalf("the damaged log was not set aside: %v", rep.SetAside)
	}
	rst.Close()
	ref := openOn(t, crashfs.New(), 2)
	for k, req := range reqs {
		if k != lost {
			importRequest(t, ref, req)
		}
	}
	again := openLiveOn(t, crashed, 2, opt)
	sameTrails(t, fmt.Sprintf("after recovery (request %d lost)", lost), appTrails(t, again), appTrails(t, ref))
	ingestRequest(t, again, newLiveRequest(r, 5, 3, 1_700_000_000_000_000, &idPool{next: 1 << 20}))
}

// TestLiveMemorySegmentsBounded: seals of different sizes — at each
// query (Acquire) and at the background's rounds — interleave size tiers
// in arrival order; the in-memory merges still bring every shard and kind
// down to about liveMaxSegments (TestIngestEqualsImport checks the trails).
func TestLiveMemorySegmentsBounded(t *testing.T) {
	st := openLiveOn(t, crashfs.New(), 2, quietLive)
	r := rand.New(rand.NewPCG(5, 6))
	var ids idPool
	a, _ := st.App("app")
	for i := range 200 {
		// Big and small seals in turn: tiers that never line up by four.
		n := 3
		if i%2 == 0 {
			n = 2000
		}
		ingestRequest(t, st, newLiveRequest(r, n, 50, 1_600_000_000_000_000, &ids))
		if i == 0 {
			a, _ = st.App("app")
		}
		v, err := a.Acquire() // seals the tails into in-memory segments
		if err != nil {
			t.Fatal(err)
		}
		v.Release()
	}
	l := a.live.Load()
	l.maintain(context.Background(), false)
	s := st.LiveStats()
	if max := 2 * 2 * (liveMaxSegments + liveMergeFanout); s[0].MemorySegments > max {
		t.Fatalf("%d in-memory segments after the merges, want at most %d", s[0].MemorySegments, max)
	}
	t.Logf("%d in-memory segments", s[0].MemorySegments)
	// Nothing applied since that round: the next one merges each shard's
	// and kind's segments into one, and every trail stays as it was.
	want := appTrails(t, st)
	l.maintain(context.Background(), false)
	if s := st.LiveStats(); s[0].MemorySegments != 2*2 {
		t.Fatalf("idle: %d in-memory segments, want 4", s[0].MemorySegments)
	}
	sameTrails(t, "after the idle merge", appTrails(t, st), want)
}

// TestLiveIdleCompaction: flushes leave a shard in several runs (one per
// flush, fewer than tiered compaction merges); once ingestion pauses and
// everything is flushed, the background rounds merge every shard and
// kind into one run (compactIdle), and no trail changes. With
// NoIdleCompact the runs stay.
func TestLiveIdleCompaction(t *testing.T) {
	for _, off := range []bool{false, true} {
		opt := quietLive
		opt.NoIdleCompact = off
		st := openLiveOn(t, crashfs.New(), 2, opt)
		r := rand.New(rand.NewPCG(7, 8))
		var ids idPool
		ctx := context.Background()
		ingestFlushes(t, st, r, &ids, 3, 3000, 200)
		a, _ := st.App("app")
		maxRuns := func(kind SegmentKind) int { return slices.Max(a.published().ShardRuns(kind)) }
		if maxRuns(KindEvents) != 3 || maxRuns(KindUsers) != 3 {
			t.Fatalf("after 3 flushes: at most %d events runs and %d users runs per shard, want 3", maxRuns(KindEvents), maxRuns(KindUsers))
		}
		want := appTrails(t, st)
		l := a.live.Load()
		for range 3 { // the first round may see the last request applied since the previous one
			l.maintain(ctx, false)
		}
		wantRuns := 1
		if off {
			wantRuns = 3
		}
		if e, u := maxRuns(KindEvents), maxRuns(KindUsers); e != wantRuns || u != wantRuns {
			t.Fatalf("NoIdleCompact %v: idle rounds left at most %d events runs and %d users runs per shard, want %d", off, e, u, wantRuns)
		}
		sameTrails(t, "after the idle compaction", appTrails(t, st), want)
	}
}

// TestLiveMergesYieldToFlush: the in-memory merges stop after a round
// once a flush is due (flushDue), so that maintain flushes under steady
// ingestion; without a flush due they go on until no tier has
// liveMergeFanout segments. Sixteen seals of one size need two rounds.
func TestLiveMergesYieldToFlush(t *testing.T) {
	segs := func(due bool) int {
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		opt := quietLive
		opt.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		st := openLiveOn(t, crashfs.New(), 1, opt)
		ctx := context.Background()
		one := func(k int) {
			evs := make([]event.Event, 2000)
			for i := range evs {
				evs[i] = event.Event{UserID: fmt.Sprintf("u%d", i%100), Name: "a", Time: now.Add(-time.Hour).UnixMicro() + int64(k*2000+i)}
			}
			if _, err := st.Ingest(ctx, "app", evs, nil); err != nil {
				t.Fatal(err)
			}
		}
		one(0)
		a, _ := st.App("app")
		l := a.live.Load()
		l.maint.Lock() // no background round from here on
		defer l.maint.Unlock()
		for k := 1; k <= 16; k++ {
			one(k)
			v, err := a.Acquire() // seals
			if err != nil {
				t.Fatal(err)
			}
			v.Release()
		}
		if due {
			mu.Lock()
			now = now.Add(2 * opt.FlushAge)
			mu.Unlock()
		}
		if err := l.mergeMemory(ctx, false); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.segs)
	}
	notDue, due := segs(false), segs(true)
	t.Logf("in-memory segments after the merges: %d with no flush due, %d with one due", notDue, due)
	if due <= notDue {
		t.Fatalf("in-memory segments after the merges: %d with a flush due, %d without; want more with one due (the merges yield after a round)", due, notDue)
	}
}

// TestLiveIdleCompactionYields: a record applied during an idle
// compaction pass stops it after the (shard, kind) group being merged;
// the rest waits for the next idle, flushed state.
func TestLiveIdleCompactionYields(t *testing.T) {
	var st *Store
	var calls atomic.Int32
	r := rand.New(rand.NewPCG(9, 10))
	var ids idPool
	opt := quietLive
	opt.NoIdleCompact = false
	opt.OnCompact = func(time.Duration, *CompactReport) {
		if calls.Add(1) == 1 {
			ingestRequest(t, st, newLiveRequest(r, 10, 5, 1_600_000_000_000_000, &ids))
		}
	}
	st = openLiveOn(t, crashfs.New(), 2, opt)
	ctx := context.Background()
	ingestFlushes(t, st, r, &ids, 2, 2000, 100)
	a, _ := st.App("app")
	l := a.live.Load()
	for range 3 {
		l.maintain(ctx, false)
	}
	multi := 0
	for _, kind := range []SegmentKind{KindEvents, KindUsers} {
		for _, n := range a.published().ShardRuns(kind) {
			if n > 1 {
				multi++
			}
		}
	}
	if c := calls.Load(); c != 1 || multi != 3 {
		t.Fatalf("ingestion resumed during the first group: %d groups compacted and %d of 4 left in several runs, want 1 and 3", c, multi)
	}
}

// ingestFlushes ingests flushes requests of n events of users users into
// app "app" of st, each flushed on its own (FlushLive): one run per
// flush in each shard they reach.
func ingestFlushes(t *testing.T, st *Store, r *rand.Rand, ids *idPool, flushes, n, users int) {
	t.Helper()
	for range flushes {
		ingestRequest(t, st, newLiveRequest(r, n, users, 1_600_000_000_000_000, ids))
		if err := st.FlushLive(context.Background(), "app"); err != nil {
			t.Fatal(err)
		}
	}
}
