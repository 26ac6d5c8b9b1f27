package storage

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/crashfs"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// scanShards scans v's events and users segments (AllUsers) over the
// shards sel (nil: all) and returns every visited user's trail as text:
// its times and a bit per event name.
func scanShards(t *testing.T, v *Version, sel []int) map[string]string {
	t.Helper()
	masks := func(meta *segment.Meta) []uint64 {
		out := make([]uint64, len(meta.EventNames))
		for c, n := range meta.EventNames {
			h := fnv.New64a()
			h.Write([]byte(n))
			out[c] = 1 << (h.Sum64() % 64)
		}
		return out
	}
	var mu sync.Mutex
	got := map[string]*strings.Builder{}
	visit := visitFunc(func(u UserKey, tr *trail.Trail) {
		mu.Lock()
		defer mu.Unlock()
		b := got[string(u.ID)]
		if b == nil {
			b = &strings.Builder{}
			got[string(u.ID)] = b
		}
		for i, ts := range tr.Times {
			fmt.Fprintf(b, "%d:%x ", ts, tr.Mask[i])
		}
	})
	vs := []Visitor{visit, visit, visit}
	if _, err := v.Scan(context.Background(), ScanSpec{From: -1 << 62, To: 1 << 62, Masks: masks, AllUsers: true, Shards: sel}, vs); err != nil {
		t.Fatalf("scan of shards %v: %v", sel, err)
	}
	out := map[string]string{}
	for id, b := range got {
		out[id] = b.String()
	}
	return out
}

// checkPlacement checks, on v, that every user a scan of one shard sh
// visits has ShardOf(id) == sh, that every user is in one shard, and that
// a scan over a random subset of the shards plus one over its complement
// visit exactly the users and trails of the full scan.
func checkPlacement(t *testing.T, what string, v *Version, r *rand.Rand) {
	t.Helper()
	full := scanShards(t, v, nil)
	if len(full) == 0 {
		t.Fatalf("%s: no users", what)
	}
	seen := map[string]int{}
	for sh := range v.Shards {
		for id := range scanShards(t, v, []int{sh}) {
			if got := ShardOf(id, v.Shards); got != sh {
				t.Fatalf("%s: user %q stored in shard %d, ShardOf says %d", what, id, sh, got)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s: user %q in shards %d and %d", what, id, prev, sh)
			}
			seen[id] = sh
		}
	}
	if len(seen) != len(full) {
		t.Fatalf("%s: %d users over the shards one by one, %d in the full scan", what, len(seen), len(full))
	}
	var a, b []int
	for sh := range v.Shards {
		if r.IntN(2) == 0 {
			a = append(a, sh)
		} else {
			b = append(b, sh)
		}
	}
	a, b = append([]int{}, a...), append([]int{}, b...) // empty, not nil: no shard
	union := scanShards(t, v, a)
	for id, tr := range scanShards(t, v, b) {
		if _, dup := union[id]; dup {
			t.Fatalf("%s: user %q in the scans of shards %v and %v", what, id, a, b)
		}
		union[id] = tr
	}
	if !maps.Equal(union, full) {
		t.Fatalf("%s: the scans of shards %v and %v differ from the full scan", what, a, b)
	}
}

// TestShardOfIsWhereUsersAre: the users that imports (events and user
// property writes) and live ingestion (in memory, then flushed) put in a
// shard are those ShardOf places there, and a scan split over
// complementary shard subsets is the full scan.
func TestShardOfIsWhereUsersAre(t *testing.T) {
	ctx := context.Background()
	for seed := range 3 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 26))
			shards := []int{1, 4, 8}[seed]
			live := openLiveOn(t, crashfs.New(), shards, quietLive)
			imp := openOn(t, crashfs.New(), shards)
			sendRequests(t, r, 4, 60, 40, live, true, imp)
			t0 := int64(1_600_000_000_000_000)
			// Users with property writes only (no event).
			ws := compactWrites(r, 50, 80, t0)
			if _, err := imp.Import(ctx, "app", []Source{&sliceSource{evs: ws}}, ImportOptions{Kind: KindUsers}); err != nil {
				t.Fatal(err)
			}
			check := func(what string, st *Store) { checkPlacement(t, what, acquired(t, st, "app"), r) }
			check("import", imp)
			check("live, in memory", live)
			if err := live.FlushLive(ctx, "app"); err != nil {
				t.Fatal(err)
			}
			check("live, flushed", live)
		})
	}
}

func TestShardOf(t *testing.T) {
	for _, id := range []string{"", "u1", "user-éè", strings.Repeat("x", 100)} {
		h := segment.UserHash([]byte(id))
		if UserHash(id) != h {
			t.Fatalf("UserHash(%q) = %x, segment.UserHash %x", id, UserHash(id), h)
		}
		for _, n := range []int{1, 2, 16, MaxShards} {
			if got, want := ShardOf(id, n), int(h%uint64(n)); got != want {
				t.Fatalf("ShardOf(%q, %d) = %d, want %d", id, n, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ShardOf("some-user-id", 16) }); n != 0 {
		t.Fatalf("ShardOf allocates %v times", n)
	}
}

func TestScanShardsInvalid(t *testing.T) {
	st := openTest(t, 4)
	if _, err := st.Import(context.Background(), "app", []Source{&sliceSource{evs: randomEvents(rand.New(rand.NewPCG(1, 2)), 50, 10, 1e15)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := st.App("app")
	v := snapOf(t, a)
	defer v.Release()
	masks := func(meta *segment.Meta) []uint64 { return make([]uint64, len(meta.EventNames)) }
	for _, sel := range [][]int{{4}, {-1}, {1, 0}, {2, 2}} {
		_, err := v.Scan(context.Background(), ScanSpec{From: 0, To: 1 << 62, Masks: masks, Shards: sel}, []Visitor{visitFunc(func(UserKey, *trail.Trail) {})})
		if err == nil || !strings.Contains(err.Error(), "ScanSpec.Shards") {
			t.Fatalf("Shards %v: err %v, want a ScanSpec.Shards error", sel, err)
		}
	}
	if got := scanShards(t, v, []int{}); len(got) != 0 {
		t.Fatalf("an empty shard list visited %d users", len(got))
	}
}
