package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/crashfs"
)

// TestImportCompactAfter: ImportOptions.CompactAfter changes only how an
// import's spilled runs are compressed (fast zstd, rewritten by the
// compaction that follows): the stored trails are the same, a
// one-flush import writes the same bytes as without it, and after the
// compaction of the post-import policy the app takes the same bytes.
func TestImportCompactAfter(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 1))
	evs := make([]event.Event, 100_000)
	for i := range evs {
		u := r.IntN(3000)
		evs[i] = event.Event{UserID: fmt.Sprintf("u%d", u), Name: names[r.IntN(len(names))],
			Time: 1_600_000_000_000_000 + int64(r.IntN(1e9)),
			Props: []event.Prop{
				{Name: "channel", Value: event.String(fmt.Sprintf("channel-%d", u%7))}, // one per user, as the bench's
				{Name: "price", Value: event.Float(float64(r.IntN(100)) + 0.99)},
			}}
	}
	ctx := context.Background()
	run := func(flushRows int, after bool) (map[string]string, int64, int64) {
		st := openOn(t, crashfs.New(), 2)
		if _, err := st.Import(ctx, "app", []Source{&sliceSource{evs: evs}}, ImportOptions{FlushRows: flushRows, CompactAfter: after}); err != nil {
			t.Fatal(err)
		}
		a, _ := st.App("app")
		imported := a.Current().Bytes()
		if _, err := st.Compact(ctx, "app", CompactOptions{MinRuns: ImportCompactMinRuns}); err != nil {
			t.Fatal(err)
		}
		return appTrails(t, st), imported, a.Current().Bytes()
	}
	want, oneBytes, _ := run(0, false)
	got, oneFast, _ := run(0, true)
	sameTrails(t, "one flush with CompactAfter", got, want)
	if oneFast != oneBytes {
		t.Fatalf("one flush: %d bytes with CompactAfter, %d without; want the same", oneFast, oneBytes)
	}
	slow, slowImported, slowCompacted := run(30_000, false)
	fast, fastImported, fastCompacted := run(30_000, true)
	sameTrails(t, "spilled import without CompactAfter", slow, want)
	sameTrails(t, "spilled import with CompactAfter", fast, want)
	if fastCompacted != slowCompacted {
		t.Fatalf("after compaction: %d bytes with CompactAfter, %d without; want the same", fastCompacted, slowCompacted)
	}
	if fastImported == slowImported {
		t.Fatalf("spilled runs: %d bytes with CompactAfter and without; want fast zstd's (other) sizes", fastImported)
	}
	t.Logf("spilled runs: %d bytes with CompactAfter, %d without; compacted %d", fastImported, slowImported, fastCompacted)
}
