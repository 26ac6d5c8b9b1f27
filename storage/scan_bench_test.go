package storage

import (
	"context"
	"testing"

	"github.com/spurdb/spur/internal/cputime"
	"github.com/spurdb/spur/trail"
)

type countVisitor struct{ events, users int64 }

func (c *countVisitor) Visit(_ UserKey, t *trail.Trail) {
	c.users++
	c.events += int64(len(t.Times))
}

// BenchmarkScan measures the trail scan (decode, k-way merge, matcher
// masks) over 1M generated events with a 4-of-40-events matcher (a funnel's
// shape, ~13% of rows), a one-event matcher (~0.6%) and every event
// matching; events/s counts scanned rows.
func BenchmarkScan(b *testing.B) {
	const n = 1_000_000
	a, _ := genStore(b, n, 4, ImportOptions{}).App("g")
	snap := snapOf(b, a)
	for _, c := range []struct {
		name   string
		events []string
	}{
		{"funnel4", []string{"view_item", "add_to_cart", "begin_checkout", "purchase"}},
		{"purchase", []string{"purchase"}}, // ~0.6% of rows: the branching (sparse) filter
		{"all", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchScan(b, snap, ScanSpec{From: 0, To: 1 << 62, Masks: nameMasks(c.events)}, n)
		})
	}
}

// benchScan times spec over snap (after one warm-up scan that opens and
// verifies the segments) and reports allocations and scanned events/s;
// events is the number of rows the snapshot holds.
func benchScan(b *testing.B, snap *Version, spec ScanSpec, events int) {
	vs := []Visitor{&countVisitor{}}
	if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for range b.N {
		if _, err := snap.Scan(context.Background(), spec, vs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		// One visitor: one scanning goroutine, so this is the per-core
		// speed even when other processes share the machine.
		b.ReportMetric(float64(events)*float64(b.N)/cpu.Seconds()/1e6, "Mevents/cpu-s")
	}
}
