package storage

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/storage/vfs"
	"github.com/spurdb/spur/trail"
)

// personTrails scans v (every event) and returns each visited trail's
// id with its event times.
func personTrails(t *testing.T, v *Version, distinct bool) map[string][]int64 {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]int64{}
	spec := ScanSpec{From: -1 << 62, To: 1 << 62, DistinctIDs: distinct,
		Masks: everyEvent}
	visit := visitFunc(func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		if string(u.ID) != string(tr.ID) {
			t.Errorf("key id %q, trail id %q", u.ID, tr.ID)
		}
		if _, dup := out[string(tr.ID)]; dup && tr.Offset == 0 {
			t.Errorf("trail %q visited twice", tr.ID)
		}
		out[string(tr.ID)] = append(out[string(tr.ID)], tr.Times...)
	})
	if _, err := v.Scan(context.Background(), spec, []Visitor{visit, visit}); err != nil {
		t.Fatal(err)
	}
	return out
}

// appPersonTrails is personTrails (by person) of the current version of
// st's app, released at once.
func appPersonTrails(t *testing.T, st *Store, app string) map[string][]int64 {
	t.Helper()
	a, err := st.App(app)
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	return personTrails(t, v, false)
}

func TestPersonsJoinAcrossShardsAndRestart(t *testing.T) {
	fs := crashfs.New()
	st := openLiveOn(t, fs, 8, quietLive)
	ctx := context.Background()
	evs := []event.Event{
		{UserID: "anon1", Name: "view", Time: 10},
		{UserID: "acct1", Name: "buy", Time: 20},
		{UserID: "anon1", Name: "view", Time: 30},
		{UserID: "anon2", Name: "view", Time: 50},
	}
	if _, err := st.Ingest(ctx, "shop", evs, nil); err != nil {
		t.Fatal(err)
	}
	if ShardOf("anon1", 8) == ShardOf("acct1", 8) {
		t.Fatal("pick ids in different shards")
	}
	want0 := map[string][]int64{"anon1": {10, 30}, "acct1": {20}, "anon2": {50}}
	check := func(want map[string][]int64) {
		t.Helper()
		if got := appPersonTrails(t, st, "shop"); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("persons: got %v, want %v", got, want)
		}
	}
	check(want0)
	id := []event.Event{{UserID: "acct1", Name: IdentifyEvent, Time: 40, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("anon1")}}}}
	if _, err := st.Ingest(ctx, "shop", id, nil); err != nil {
		t.Fatal(err)
	}
	want1 := map[string][]int64{"acct1": {10, 20, 30, 40}, "anon2": {50}}
	check(want1)
	// A refused identify (anon... acct1's person is identified) changes nothing.
	if _, err := st.IngestIdentity(ctx, "shop", []event.Event{{UserID: "acct2", Name: "login", Time: 60}}, nil,
		[]IdentityWrite{{Index: 0, Op: opIdentify("acct2", "acct1")}}); err != nil {
		t.Fatal(err)
	}
	want2 := map[string][]int64{"acct1": {10, 20, 30, 40}, "anon2": {50}, "acct2": {60}}
	check(want2)
	// Replayed from the log after a restart, then flushed and reopened.
	st.Close()
	st = openLiveOn(t, fs, 8, quietLive)
	check(want2)
	if err := st.FlushLive(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := st.MergePersons(ctx, "shop", "anon2", "acct2"); err != nil {
		t.Fatal(err)
	}
	want3 := map[string][]int64{"acct1": {10, 20, 30, 40}, "acct2": {50, 60}} // acct2 was identified first
	check(want3)
	st.Close()
	st = openLiveOn(t, fs, 8, quietLive)
	check(want3)
	if err := st.FlushLive(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ro, err := Open(Config{Dir: "store", FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	st = ro
	check(want3)
}

func opIdentify(t, a string) identity.Op { return identity.Op{Kind: identity.Identify, T: t, O: a} }

func TestImportAppliesIdentityInFileOrder(t *testing.T) {
	fs := crashfs.New()
	st, err := Open(Config{Dir: "store", FS: fs, Shards: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	anon := func(v string) []event.Prop { return []event.Prop{{Name: "anon", Value: event.String(v)}} }
	evs := []event.Event{
		{UserID: "d1", Name: "view", Time: 1},
		{UserID: "u1", Name: "signup", Time: 2, Props: anon("d1")}, // identify(u1, d1)
		{UserID: "d2", Name: "view", Time: 3},
		{UserID: "u2", Name: "signup", Time: 4, Props: anon("d2")}, // identify(u2, d2)
		// refused: d2's person (u2) is identified
		{UserID: "u1", Name: CreateAliasEvent, Time: 5, Props: []event.Prop{{Name: "alias", Value: event.String("d2")}}},
		{UserID: "u3", Name: MergeEvent, Time: 6, Props: []event.Prop{{Name: "alias", Value: event.String("d1")}}},
		{UserID: "x", Name: "bad", Time: 7, Props: anon(string(make([]byte, 300)))}, // rejected: id too long
	}
	rep, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{AnonymousID: "anon", MaxErrors: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rejected != 1 || rep.IdentityOps != 4 {
		t.Errorf("rejected %d, identity ops %d; want 1, 4", rep.Rejected, rep.IdentityOps)
	}
	a, _ := st.App("app")
	v, err := a.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	want := map[string][]int64{"u1": {1, 2, 5, 6}, "u2": {3, 4}}
	if got := personTrails(t, v, false); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("persons: got %v, want %v", got, want)
	}
	if p := v.Persons().LookupString("d1"); p == nil || p.ID != "u1" || len(p.DistinctIDs) != 3 {
		t.Errorf("person of d1: %+v", p)
	}
	if got := personTrails(t, v, true); len(got) != 5 {
		t.Errorf("distinct ids: %v", got)
	}
}

// overwrite replaces file name of fs with b.
func overwrite(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityDamageVerifyRecover damages the id graph file, then loses
// the catalog: verify names the damage, the copy serves, and recovery
// restores the graph from the files.
func TestIdentityDamageVerifyRecover(t *testing.T) {
	fs := crashfs.New()
	st := openLiveOn(t, fs, 4, quietLive)
	ctx := context.Background()
	evs := []event.Event{
		{UserID: "a", Name: "view", Time: 1},
		{UserID: "b", Name: "view", Time: 2},
		{UserID: "b", Name: IdentifyEvent, Time: 3, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("a")}}},
	}
	if _, err := st.Ingest(ctx, "app", evs, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	graph := "store/apps/app/" + identityName
	b, err := vfs.ReadFile(fs, graph)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 0xff
	overwrite(t, fs, graph, b)

	want := map[string][]int64{"b": {1, 2, 3}}
	trails := func(st *Store) map[string][]int64 { return appPersonTrails(t, st, "app") }
	st = openLiveOn(t, fs, 4, quietLive)
	rep, err := st.Verify(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != "idgraph" || rep.Findings[0].File != graph {
		t.Errorf("verify: %+v", rep.Findings)
	}
	if got := trails(st); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("served from the copy: %v, want %v", got, want)
	}
	st.Close()

	if err := fs.Remove("store/apps/app/CATALOG"); err != nil {
		t.Fatal(err)
	}
	st = openLiveOn(t, fs, 4, quietLive)
	if _, err := st.Recover(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if got := trails(st); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("recovered: %v, want %v", got, want)
	}
	if rep, err := st.Verify(ctx, "app"); err != nil || len(rep.Findings) != 0 {
		t.Errorf("verify after recover: %v %+v", err, rep)
	}
}

// TestIdentityNoopOnlyRestart: a store whose only identity operations
// were Noops (merge(x, x)) publishes no id graph position, so that it
// opens again (it used to publish a log position of no bytes, whose
// missing file then failed the open).
func TestIdentityNoopOnlyRestart(t *testing.T) {
	fs := crashfs.New()
	st := openLiveOn(t, fs, 2, quietLive)
	ctx := context.Background()
	if _, err := st.Ingest(ctx, "app", []event.Event{{UserID: "x", Name: "view", Time: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.MergePersons(ctx, "app", "x", "x"); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openLiveOn(t, fs, 2, quietLive)
	v := acquired(t, st, "app")
	if got := personTrails(t, v, false); !maps.EqualFunc(got, map[string][]int64{"x": {1}}, slices.Equal) {
		t.Errorf("trails %v", got)
	}
}

// prepassRecorder records the ids of Prepass and Visit calls.
type prepassRecorder struct {
	mu               sync.Mutex
	prepass, visited map[string]int // id → chunks
}

func (p *prepassRecorder) Visit(u UserKey, _ *trail.Trail) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.visited[string(u.ID)]++
}

func (p *prepassRecorder) Prepass(u UserKey, _ *trail.Trail) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prepass[string(u.ID)]++
}

// TestPersonsChunkedPrepass: a joined distinct id's own trail, long
// enough to come in chunks, shows a PrepassVisitor none of its chunks
// (only its person's merged trail is shown, Prepass then Visit).
func TestPersonsChunkedPrepass(t *testing.T) {
	fs := crashfs.New()
	st := openLiveOn(t, fs, 1, quietLive)
	ctx := context.Background()
	var evs []event.Event
	for i := range 7 {
		evs = append(evs, event.Event{UserID: "anon", Name: "view", Time: int64(10 + i)})
	}
	evs = append(evs, event.Event{UserID: "acct", Name: "buy", Time: 100},
		event.Event{UserID: "acct", Name: IdentifyEvent, Time: 101, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("anon")}}})
	if _, err := st.Ingest(ctx, "app", evs, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.FlushLive(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	v := acquired(t, st, "app")
	rec := &prepassRecorder{prepass: map[string]int{}, visited: map[string]int{}}
	spec := ScanSpec{From: -1 << 62, To: 1 << 62, ChunkEvents: 2,
		Masks: everyEvent}
	if _, err := v.Scan(ctx, spec, []Visitor{rec}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"acct": 5} // 9 events in chunks of 2
	if !maps.Equal(rec.prepass, want) || !maps.Equal(rec.visited, want) {
		t.Errorf("prepass %v, visited %v; want %v for both", rec.prepass, rec.visited, want)
	}
}

// TestPersonsUserValuesOfIdsWithoutPassingRows: a person's user values
// fold the writes of all of its ids, also of an id none of whose events
// passes the scan (here: outside its time range).
func TestPersonsUserValuesOfIdsWithoutPassingRows(t *testing.T) {
	ctx := context.Background()
	// anon's write is the latest
	joinedLiveThenFlushed(t, []int64{1, 2}, func(flush bool, v *Version) {
		var mu sync.Mutex
		got := map[string]trail.Value{}
		visit := visitFunc(func(u UserKey, tr *trail.Trail) {
			mu.Lock()
			defer mu.Unlock()
			got[string(tr.ID)] = tr.User[0]
		})
		spec := ScanSpec{From: 0, To: 20, UserProps: 1,
			Masks: everyEvent,
			CompileUsers: func(_ SegmentRef, meta *segment.Meta) (*UserSegmentPlan, error) {
				if i := slices.IndexFunc(meta.Props, func(p segment.PropMeta) bool { return p.Name == "score" }); i >= 0 {
					return &UserSegmentPlan{Props: []int{i}, Cols: []ColumnSource{{Prop: 0, Kind: ColInt}}}, nil
				}
				return &UserSegmentPlan{Cols: []ColumnSource{{Prop: -1}}}, nil
			}}
		if _, err := v.Scan(ctx, spec, []Visitor{visit, visit}); err != nil {
			t.Fatal(err)
		}
		if want := map[string]trail.Value{"acct": {Set: true, Bits: 2}}; !maps.Equal(got, want) {
			t.Errorf("flushed %v: user values %v, want %v", flush, got, want)
		}
	})
}

// joinedLiveThenFlushed sends live, into a store of 2 shards, events of
// "acct" (times 5 and, an identify joining "anon", 60) and "anon" (50),
// with user writes setting "score" to scores[i] on event i where
// scores[i] > 0; it calls check with the app's version before and after
// the live layer is flushed.
func joinedLiveThenFlushed(t *testing.T, scores []int64, check func(flush bool, v *Version)) {
	t.Helper()
	st := openLiveOn(t, crashfs.New(), 2, quietLive)
	ctx := context.Background()
	if ShardOf("acct", 2) == ShardOf("anon", 2) {
		t.Fatal("pick ids in different shards")
	}
	evs := []event.Event{
		{UserID: "acct", Name: "buy", Time: 5},
		{UserID: "anon", Name: "view", Time: 50},
		{UserID: "acct", Name: IdentifyEvent, Time: 60, Props: []event.Prop{{Name: "$anon_distinct_id", Value: event.String("anon")}}},
	}
	var users []UserWrite
	for i, sc := range scores {
		if sc > 0 {
			users = append(users, UserWrite{Index: i, Props: []event.Prop{{Name: "score", Value: event.Int(sc)}}})
		}
	}
	if _, err := st.Ingest(ctx, "app", evs, users); err != nil {
		t.Fatal(err)
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := st.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
		}
		check(flush, acquired(t, st, "app"))
	}
}

// everyEvent is a ScanSpec.Masks that matches every event with bit 0.
func everyEvent(meta *segment.Meta) []uint64 {
	m := make([]uint64, len(meta.EventNames))
	for i := range m {
		m[i] = 1
	}
	return m
}

// TestPersonsExportByDistinctID: an export writes every event and user
// under the distinct id it was sent with, joined persons or not (it used
// to export persons' merged trails, decoding strings of one shard's
// parts with another's table).
func TestPersonsExportByDistinctID(t *testing.T) {
	ctx := context.Background()
	joinedLiveThenFlushed(t, []int64{0, 1}, func(flush bool, v *Version) {
		var got []string
		if err := v.ExportEvents(ctx, 0, 100, func(e *ExportEvent) error {
			got = append(got, string(e.UserID)+" "+e.Event)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := v.ExportUsers(ctx, func(u *ExportUser) error {
			got = append(got, fmt.Sprintf("%s %v", u.UserID, u.Props))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		want := []string{"acct $identify", "acct buy", "anon [{score 1}]", "anon view"}
		if !slices.Equal(got, want) {
			t.Errorf("flushed %v: exported %q, want %q", flush, got, want)
		}
	})
}
