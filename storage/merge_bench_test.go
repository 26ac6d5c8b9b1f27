package storage

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage/segment"
)

// genStore returns a store of shards shards (closed when b ends) holding
// app "g": n generated events (gen seed 1) imported with opt.
func genStore(b *testing.B, n int64, shards int, opt ImportOptions) *Store {
	st, err := Open(Config{Dir: b.TempDir(), Shards: shards, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	g, _ := gen.New(gen.Config{Events: n, Seed: 1})
	if _, err := st.Import(context.Background(), "g", []Source{gen.Source{G: g}}, opt); err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkScanMerged measures the general path of the scan (mergeUser:
// users whose rows are in several segments of a shard, as after imports
// not yet compacted) over 1M generated events flushed in four segments
// per shard, with BenchmarkScan's matchers; events/s counts scanned rows.
func BenchmarkScanMerged(b *testing.B) {
	const n = 1_000_000
	a, _ := genStore(b, n, 4, ImportOptions{FlushRows: n / 4}).App("g")
	snap := snapOf(b, a)
	for _, c := range []struct {
		name   string
		events []string
	}{
		{"funnel4", []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}},
		{"all", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchScan(b, snap, ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(c.events)}, n)
		})
	}
}

// BenchmarkScanLongTrail measures the scan of one user's 1M events
// imported in eight segments whose times interleave (each segment holds
// the user in blocks of its own): mergeLong's streaming merge, with one
// matcher per event name.
func BenchmarkScanLongTrail(b *testing.B) {
	st, err := Open(Config{Dir: b.TempDir(), Shards: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const n = 1 << 20
	importWhale(b, st, n, 8, 0)
	a, _ := st.App("w")
	benchScan(b, snapOf(b, a), ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(names)}, n)
}

// importWhale imports n events of user "whale" into app "w" of st, in
// parts imports (segments) whose times interleave: event i of part p at
// second i·parts+p, named names[i mod 4]. Blocks hold blockRows rows (0:
// the default).
func importWhale(tb testing.TB, st *Store, n, parts, blockRows int) {
	evs := make([]event.Event, n/parts)
	for p := range parts {
		for i := range evs {
			evs[i] = event.Event{UserID: "whale", Name: names[i%len(names)], Time: int64(i*parts+p) * 1_000_000}
		}
		if _, err := st.Import(context.Background(), "w", []Source{&sliceSource{evs: evs}}, ImportOptions{BlockRows: blockRows}); err != nil {
			tb.Fatal(err)
		}
	}
}

// nameMasks returns ScanSpec.Masks giving event name events[i] bit i, or
// with no names bit 0 to every event.
func nameMasks(events []string) func(m *segment.Meta) []uint64 {
	return func(m *segment.Meta) []uint64 {
		out := make([]uint64, len(m.EventNames))
		for i, name := range m.EventNames {
			if j := slices.Index(events, name); j >= 0 || events == nil {
				out[i] = 1 << max(j, 0)
			}
		}
		return out
	}
}
