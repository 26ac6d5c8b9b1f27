package storage

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// personTrails scans v (every event) and returns each visited trail's
// id with its event times.
func personTrails(t *testing.T, v *Version, distinct bool) map[string][]int64 {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]int64{}
	spec := ScanSpec{From: -1 << 62, To: 1 << 62, DistinctIDs: distinct,
		Masks: func(meta *segment.Meta) []uint64 {
			m := make([]uint64, len(meta.EventNames))
			for i := range m {
				m[i] = 1
			}
			return m
		}}
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
		a, err := st.App("shop")
		if err != nil {
			t.Fatal(err)
		}
		v, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		if got := personTrails(t, v, false); !maps.EqualFunc(got, want, slices.Equal) {
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
