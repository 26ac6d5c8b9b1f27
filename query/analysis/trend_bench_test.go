package analysis_test

import (
	"testing"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// BenchmarkTrendEventBreakdown: count and users series under an
// event-column breakdown of six values, the per-event slot path of
// Trend.Add (whose per-user marks live apart from the slots' state).
func BenchmarkTrendEventBreakdown(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	for i := range d.trails {
		tr := &d.trails[i]
		c := trail.Column{Set: make([]bool, len(tr.Times)), Bits: make([]uint64, len(tr.Times))}
		for j := range c.Set {
			c.Set[j], c.Bits[j] = j%7 != 0, uint64((i+j/3)%6)
		}
		tr.Cols = []trail.Column{c}
	}
	spec := analysis.TrendSpec{
		Bounds: timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday),
		From:   d.from, To: d.to,
		Series:    []analysis.TrendSeries{{Math: analysis.MathCount}, {Math: analysis.MathUsers, Bit: 1}, {Math: analysis.MathUsers, Bit: 3}},
		Breakdown: analysis.KeySource{From: analysis.KeyEvent, Index: 0},
	}
	runTrendBench(b, d.chunked(0), spec, false)
}
