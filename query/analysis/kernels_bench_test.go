package analysis_test

import (
	"math/rand/v2"
	"testing"

	"github.com/spurdb/spur/internal/cputime"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// withColumn returns d's trails with one more column: per event an item
// of 40 with Zipf frequencies (an event name), always set, or, with
// sparse, a value of 5 set on the events of bit 1 or 2 (a channel on ad
// events).
func withColumn(d *benchData, sparse bool) []trail.Trail {
	r := rand.New(rand.NewPCG(3, 5))
	z := rand.NewZipf(r, 1.1, 1, 39)
	out := make([]trail.Trail, len(d.trails))
	for i, tr := range d.trails {
		c := trail.Column{Set: make([]bool, len(tr.Times)), Bits: make([]uint64, len(tr.Times))}
		for k := range tr.Times {
			switch {
			case !sparse:
				c.Set[k], c.Bits[k] = true, z.Uint64()
			case tr.Mask[k]&6 != 0:
				c.Set[k], c.Bits[k] = true, uint64(r.IntN(5))
			}
		}
		tr.Cols = []trail.Column{c}
		out[i] = tr
	}
	return out
}

func benchKernel(b *testing.B, d *benchData, trails []trail.Trail, add func(*trail.Trail)) {
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		for i := range trails {
			add(&trails[i])
		}
	}
	reportEvents(b, d.events, cpu0)
}

// BenchmarkStickiness: one series of the most common bit by day over 30
// days, as bench/queries/stickiness_daily_30d.json.
func BenchmarkStickiness(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	s, err := analysis.NewStickiness(analysis.StickinessSpec{Bounds: timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday),
		From: d.from, To: d.to, Series: []int{0}, MinEvents: 1})
	if err != nil {
		b.Fatal(err)
	}
	benchKernel(b, d, d.trails, s.Add)
}

// BenchmarkLifecycle: weekly lifecycle of bit 1 with every event "seen"
// (bit 0 and 1 … as a $any matcher: all bits).
func BenchmarkLifecycle(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	trails := make([]trail.Trail, len(d.trails))
	for i, tr := range d.trails {
		m := make([]uint64, len(tr.Mask))
		for k, x := range tr.Mask {
			m[k] = x | 1<<8
		}
		trails[i] = trail.Trail{Times: tr.Times, Mask: m}
	}
	bounds := timebucket.Bounds(d.from, d.to, timebucket.Week, nil, timebucket.Monday)
	bounds = append([]int64{bounds[0] - 7*day}, bounds...)
	c, err := analysis.NewLifecycle(analysis.LifecycleSpec{Bounds: bounds, From: d.from, To: d.to, Active: 1, Seen: 8})
	if err != nil {
		b.Fatal(err)
	}
	benchKernel(b, d, trails, c.Add)
}

// BenchmarkPaths: paths of every event (items: 40 names), 5 steps from
// the first event of bit 0 in each 30-minute session, as
// bench/queries/paths_5_from_screen_view.json.
func BenchmarkPaths(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	trails := withColumn(d, false)
	p, err := analysis.NewPaths(analysis.PathsSpec{From: d.from, To: d.to, Include: 15, Start: 1, NameCol: 0, PropCol: -1,
		Ellipsis: 40, SessionGap: 30 * 60e6, Steps: 5})
	if err != nil {
		b.Fatal(err)
	}
	benchKernel(b, d, trails, p.Add)
}

// BenchmarkAttribution: conversions bit 3, touchpoints bits 1 (7 days) and
// 2 (1 day) with a channel, subsequent events bit 0 (30 days), every
// model.
func BenchmarkAttribution(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	trails := withColumn(d, true)
	for _, m := range []analysis.AttributionModel{analysis.LastTouch, analysis.TimeDecay} {
		b.Run(m.String(), func(b *testing.B) {
			a, err := analysis.NewAttribution(analysis.AttributionSpec{From: d.from, To: d.to, Conversion: 3,
				Touchpoints: []analysis.Touchpoint{{Bit: 1, Lookback: 7 * day}, {Bit: 2, Lookback: day}}, Channel: 0,
				Model: m, HalfLife: day, Value: analysis.ValueCol{Col: -1}, Subsequent: 0, SubsequentWindow: 30 * day,
				SubsequentValue: analysis.ValueCol{Col: -1}})
			if err != nil {
				b.Fatal(err)
			}
			benchKernel(b, d, trails, a.Add)
		})
	}
}
