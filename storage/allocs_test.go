package storage

import (
	"context"
	"testing"

	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage/segment"
)

// TestScanAllocationsDoNotGrowWithEvents is the CI form of the regression
// alarm for the scan's hot path (allocation counts are noise-free): a
// steady-state scan allocates a small constant per scan (goroutines,
// per-segment mask tables), never per event or per block.
func TestScanAllocationsDoNotGrowWithEvents(t *testing.T) {
	allocs := func(events int64) float64 {
		st, err := Open(Config{Dir: t.TempDir(), Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		g, _ := gen.New(gen.Config{Events: events, Seed: 3})
		if _, err := st.Import(context.Background(), "g", []Source{gen.Source{G: g}}, ImportOptions{BlockRows: 4096}); err != nil {
			t.Fatal(err)
		}
		a, _ := st.App("g")
		snap := snapOf(t, a)
		masks := func(m *segment.Meta) []uint64 {
			out := make([]uint64, len(m.EventNames))
			for i := range out {
				out[i] = uint64(i&3) + 1
			}
			return out
		}
		spec := ScanSpec{From: 0, To: 1 << 62, Masks: masks}
		vs := []Visitor{&countVisitor{}}
		scan := func() {
			if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
				t.Fatal(err)
			}
		}
		scan() // open, verify, size the buffers
		return testing.AllocsPerRun(5, scan)
	}
	small, large := allocs(20_000), allocs(200_000)
	if large > small || large > 32 {
		t.Fatalf("scan allocations: %v per scan at 20k events, %v at 200k events (want constant, ≤ 32)", small, large)
	}
}
