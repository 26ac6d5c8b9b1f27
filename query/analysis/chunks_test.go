package analysis_test

import (
	"testing"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// TestChunkedAddAllocatesNothing: once warmed up, adding users' trails in
// chunks allocates nothing — the state kept between a user's chunks lives
// in the accumulators (trend marks and a few words, retention entries, a
// count per cohort condition) — for every retention mode, the trend maths
// without value lists and a cohort condition of every leaf kind.
func TestChunkedAddAllocatesNothing(t *testing.T) {
	d := makeBenchData(200, mixShop)
	addPrice(d)
	chunks := d.chunked(8).trails
	feed := func(add func(*trail.Trail)) func() {
		return func() {
			for i := range chunks {
				add(&chunks[i])
			}
		}
	}
	check := func(name string, add func(*trail.Trail)) {
		t.Helper()
		f := feed(add)
		f() // warm up: breakdown slots, scratch
		if n := testing.AllocsPerRun(5, f); n != 0 {
			t.Errorf("%s: %v allocations per pass over %d chunks", name, n, len(chunks))
		}
	}
	bounds := timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday)
	tr, err := analysis.NewTrend(analysis.TrendSpec{Bounds: bounds, From: d.from, To: d.to,
		Series: []analysis.TrendSeries{{Math: analysis.MathCount}, {Math: analysis.MathUsers, Bit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	check("trend count, users", tr.Add)
	tr, err = analysis.NewTrend(analysis.TrendSpec{Bounds: bounds, From: d.from, To: d.to,
		Series: []analysis.TrendSeries{{Math: analysis.MathMax, Col: 0, Float: true}, {Math: analysis.MathUsers, Bit: 1},
			{Math: analysis.MathWAU, Bit: 2}, {Math: analysis.MathMAU, Bit: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	check("trend max, users, wau, mau", tr.Add)
	for combo := range 8 {
		spec := analysis.RetentionSpec{
			Bounds: timebucket.Extend(bounds, 7, timebucket.Day, nil, timebucket.Monday), Periods: 7,
			Type: analysis.RetentionType(combo & 1), Windows: analysis.RetentionWindows(combo >> 1 & 1),
			Criterion: analysis.RetentionCriterion(combo >> 2 & 1), Period: timebucket.DayMicros,
			From: d.from, To: d.to, List: &analysis.RetentionList{Cohort: 3, Period: 1},
		}
		r, err := analysis.NewRetention(spec)
		if err != nil {
			t.Fatal(err)
		}
		check(spec.Type.String()+"/"+spec.Windows.String()+"/"+spec.Criterion.String(), r.Add)
	}
	cs := analysis.NewCohortState(&analysis.CohortCond{Op: analysis.CohortOr, Kids: []analysis.CohortCond{
		{Op: analysis.CohortPerformed, Bit: 1, From: d.from, To: d.to, Count: analysis.CountGTE, N: 3},
		{Op: analysis.CohortFirstPerformed, Bit: 3, From: d.from, To: d.to},
	}})
	check("cohort", func(c *trail.Trail) {
		cs.Add(c)
		if !c.More {
			cs.In(0)
		}
	})
}
