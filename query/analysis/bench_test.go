package analysis_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/cputime"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// benchData is an in-memory input: shop-like sessions of users over 30
// days, about 100 events per user, each matching one of the bits 0..3
// (view, cart, checkout, purchase), with 5% timestamp ties.
type benchData struct {
	trails   []trail.Trail
	events   int
	from, to int64
}

var benchStart = time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// Event mixes: the probability of bits 0..3.
var (
	// mixShop follows the real OTTO sample in data/otto-sample (93%
	// clicks, 6% carts, 1% orders) with a checkout step in between.
	mixShop = [4]float64{0.90, 0.06, 0.03, 0.01}
	// mixAdversarial has frequent later steps in random order and an
	// almost absent final step: many step changes, no early exit.
	mixAdversarial = [4]float64{0.72, 0.18, 0.0998, 0.0002}
)

func makeBenchData(users int, mix [4]float64) *benchData {
	r := rand.New(rand.NewPCG(42, 7))
	d := &benchData{from: benchStart, to: benchStart + 30*day}
	for range users {
		n := 20 + r.IntN(160)
		tr := trail.Trail{Times: make([]int64, n), Mask: make([]uint64, n)}
		t := d.from + r.Int64N(30*day)
		for i := range n {
			switch x := r.Float64(); {
			case x < 0.05 && i > 0: // tie with the previous event
			case x < 0.10: // next session
				t += r.Int64N(3 * day)
			default:
				t += 1e6 + r.Int64N(180e6)
			}
			tr.Times[i] = t
			x := r.Float64()
			b := 0
			for b < 3 && x >= mix[b] {
				x -= mix[b]
				b++
			}
			tr.Mask[i] = 1 << b
		}
		d.events += n
		d.trails = append(d.trails, tr)
	}
	return d
}

// reportEvents reports the events per second of a benchmark and, where
// the platform tells, its process CPU time per op since cpu0
// (cputime.Process before the loop): a figure that the machine's other
// load disturbs less than wall time.
func reportEvents(b *testing.B, events int, cpu0 time.Duration) {
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if cpu0 > 0 {
		b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// chunked returns d with every trail cut into chunks of about maxLen
// events (testutil.Chunks), in order; maxLen 0 returns d.
func (d *benchData) chunked(maxLen int) *benchData {
	if maxLen == 0 {
		return d
	}
	r := rand.New(rand.NewPCG(42, 10))
	c := &benchData{events: d.events, from: d.from, to: d.to}
	for i := range d.trails {
		c.trails = append(c.trails, testutil.Chunks(&d.trails[i], r, maxLen)...)
	}
	return c
}

// benchChunk is the chunk length of the chunked benchmarks: chunks of 1
// to 32 events (testutil.Chunks), about 6 per trail.
const benchChunk = 32

// benchFunnel runs one funnel query per iteration (a new accumulator, so
// allocations are those of one query: the growth of the duration lists).
func benchFunnel(b *testing.B, d *benchData) {
	spec := analysis.FunnelSpec{Steps: 4, Window: 7 * day, From: d.from, To: d.to}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		f, err := analysis.NewFunnel(spec, analysis.FunnelOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, tr := range d.trails {
			f.Add(&tr)
		}
	}
	reportEvents(b, d.events, cpu0)
}

// BenchmarkFunnel4Steps: 10k users, ~1M events with the shop mix; the
// kernel stops reading a trail once step 4 is reached.
func BenchmarkFunnel4Steps(b *testing.B) {
	benchFunnel(b, makeBenchData(10000, mixShop))
}

// BenchmarkFunnel4StepsAdversarial: frequent step changes and a final
// step that almost never happens, so nearly every trail is read to its end.
func BenchmarkFunnel4StepsAdversarial(b *testing.B) {
	benchFunnel(b, makeBenchData(10000, mixAdversarial))
}

// remask returns a copy of d's trails with each event's mask mapped by f.
func remask(d *benchData, f func(uint64) uint64) *benchData {
	c := *d
	c.trails = make([]trail.Trail, len(d.trails))
	for i, tr := range d.trails {
		m := make([]uint64, len(tr.Mask))
		for j, v := range tr.Mask {
			m[j] = f(v)
		}
		c.trails[i] = trail.Trail{Times: tr.Times, Mask: m}
	}
	return &c
}

// benchFunnelOpt runs one query per iteration with the given spec and
// options over d (chunks of about chunk events each when chunk > 0).
func benchFunnelOpt(b *testing.B, d *benchData, spec analysis.FunnelSpec, opt analysis.FunnelOptions, chunk int) {
	trails := d.chunked(chunk).trails
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		f, err := analysis.NewFunnel(spec, opt)
		if err != nil {
			b.Fatal(err)
		}
		for i := range trails {
			f.Add(&trails[i])
		}
	}
	reportEvents(b, d.events, cpu0)
}

// The docs/analytics.md §11 modes over the shop mix: strict order (every event carries the
// strict bit 4), an exclusion (checkout, bit 2, between steps 1 and 3 of a
// view → cart → purchase funnel), conversion over time by week, time to
// convert, the unordered funnel, and the ordered funnel over chunks of
// about 64 events.
func BenchmarkFunnelModes(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	spec := analysis.FunnelSpec{Steps: 4, Window: 7 * day, From: d.from, To: d.to}
	b.Run("strict", func(b *testing.B) {
		s := spec
		s.Order, s.Events = analysis.OrderStrict, 1<<4
		benchFunnelOpt(b, remask(d, func(m uint64) uint64 { return m | 1<<4 }), s, analysis.FunnelOptions{}, 0)
	})
	b.Run("strict_sparse", func(b *testing.B) {
		// As in generated data: most events are other events (4 in 5
		// views become other events).
		s := spec
		s.Order, s.Events = analysis.OrderStrict, 1<<4
		n := 0
		benchFunnelOpt(b, remask(d, func(m uint64) uint64 {
			n++
			if m == 1 && n%5 != 0 {
				return 1 << 4
			}
			return m | 1<<4
		}), s, analysis.FunnelOptions{}, 0)
	})
	b.Run("exclusion", func(b *testing.B) {
		s := analysis.FunnelSpec{Steps: 3, Window: 7 * day, From: d.from, To: d.to,
			Exclusions: []analysis.FunnelExclusion{{Bit: 3, From: 1, To: 3}}}
		// view → bit 0, cart → bit 1, purchase → bit 2, checkout → bit 3
		benchFunnelOpt(b, remask(d, func(m uint64) uint64 { return m&3 | m>>3&1<<2 | m>>2&1<<3 }), s, analysis.FunnelOptions{}, 0)
	})
	b.Run("trends_week", func(b *testing.B) {
		opt := analysis.FunnelOptions{View: analysis.ViewTrends, Bounds: timebucket.Bounds(d.from, d.to, timebucket.Week, nil, timebucket.Monday)}
		benchFunnelOpt(b, d, spec, opt, 0)
	})
	b.Run("time_to_convert", func(b *testing.B) {
		benchFunnelOpt(b, d, spec, analysis.FunnelOptions{View: analysis.ViewTimeToConvert}, 0)
	})
	b.Run("unordered", func(b *testing.B) {
		s := spec
		s.Order = analysis.OrderUnordered
		benchFunnelOpt(b, d, s, analysis.FunnelOptions{}, 0)
	})
	b.Run("chunked64", func(b *testing.B) {
		benchFunnelOpt(b, d, spec, analysis.FunnelOptions{}, 64)
	})
}

// BenchmarkTrend: count and users series (Trend's addCounts loop) over
// the shop mix, daily buckets; BenchmarkTrendChunks the same with the
// trails in chunks.
func BenchmarkTrend(b *testing.B)       { benchTrend(b, 0) }
func BenchmarkTrendChunks(b *testing.B) { benchTrend(b, benchChunk) }

func benchTrend(b *testing.B, chunk int) {
	d := makeBenchData(10000, mixShop)
	spec := analysis.TrendSpec{
		Bounds: timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday),
		From:   d.from, To: d.to,
		Series: []analysis.TrendSeries{{Math: analysis.MathCount}, {Math: analysis.MathUsers, Bit: 1}, {Math: analysis.MathCount, Bit: 2}, {Math: analysis.MathUsers, Bit: 3}},
	}
	runTrendBench(b, d.chunked(chunk), spec, false)
}

// BenchmarkTrendMaths: the general loop of Trend.Add — a sum of a float
// property, count_per_user_avg, wau and users over the shop mix with
// daily buckets; BenchmarkTrendMathsChunks the same with the trails in
// chunks.
func BenchmarkTrendMaths(b *testing.B)       { benchTrendMaths(b, 0) }
func BenchmarkTrendMathsChunks(b *testing.B) { benchTrendMaths(b, benchChunk) }

func benchTrendMaths(b *testing.B, chunk int) {
	d := makeBenchData(10000, mixShop)
	addPrice(d)
	spec := analysis.TrendSpec{
		Bounds: timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday),
		From:   d.from, To: d.to,
		Series: []analysis.TrendSeries{{Math: analysis.MathSum, Bit: 0, Col: 0, Float: true}, {Math: analysis.MathCountPerUserAvg, Bit: 1},
			{Math: analysis.MathWAU, Bit: 2}, {Math: analysis.MathUsers, Bit: 3}},
	}
	runTrendBench(b, d.chunked(chunk), spec, true)
}

// runTrendBench adds d's trails to a Trend of spec per iteration: always
// the same accumulator, or with fresh a new one (the allocations are then
// those of one query: here the growth of the per-user counts and sums).
func runTrendBench(b *testing.B, d *benchData, spec analysis.TrendSpec, fresh bool) {
	tr, err := analysis.NewTrend(spec)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if fresh {
			tr, _ = analysis.NewTrend(spec)
		}
		for _, t := range d.trails {
			tr.Add(&t)
		}
	}
	reportEvents(b, d.events, cpu0)
}

// BenchmarkRetention runs the retention kernel over the shop mix (start:
// bit 0, return: bit 1, 6% of events) and, in the any-return cases, with
// every event a return event, as in bench/queries/retention_install_daily.json
// (return "$any"); BenchmarkRetentionChunks the same with the trails in
// chunks.
func BenchmarkRetention(b *testing.B)       { benchRetention(b, 0) }
func BenchmarkRetentionChunks(b *testing.B) { benchRetention(b, benchChunk) }

func benchRetention(b *testing.B, chunk int) {
	d := makeBenchData(10000, mixShop)
	anyReturn := &benchData{events: d.events, from: d.from, to: d.to}
	for _, tr := range d.trails {
		m := make([]uint64, len(tr.Mask))
		for i, x := range tr.Mask {
			m[i] = x | 2
		}
		anyReturn.trails = append(anyReturn.trails, trail.Trail{Times: tr.Times, Mask: m})
	}
	for _, c := range []struct {
		name string
		typ  analysis.RetentionType
		win  analysis.RetentionWindows
		data *benchData
	}{
		{"first_time/calendar", analysis.TypeFirstTime, analysis.WindowsCalendar, d},
		{"first_time/calendar/any-return", analysis.TypeFirstTime, analysis.WindowsCalendar, anyReturn},
		{"recurring/calendar", analysis.TypeRecurring, analysis.WindowsCalendar, d},
		{"recurring/calendar/any-return", analysis.TypeRecurring, analysis.WindowsCalendar, anyReturn},
		{"recurring/rolling", analysis.TypeRecurring, analysis.WindowsRolling, d},
	} {
		d := c.data.chunked(chunk)
		b.Run(c.name, func(b *testing.B) {
			bounds := timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday)
			spec := analysis.RetentionSpec{
				Bounds:  timebucket.Extend(bounds, 7, timebucket.Day, nil, timebucket.Monday),
				Periods: 7, Type: c.typ, Windows: c.win, Period: timebucket.DayMicros,
				From: d.from, To: d.to,
			}
			r, err := analysis.NewRetention(spec)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cputime.Process()
			for b.Loop() {
				for _, t := range d.trails {
					r.Add(&t)
				}
			}
			reportEvents(b, d.events, cpu0)
		})
	}
}

// logUniformMicros returns a duration log-uniform between 1 s and 7 days,
// in µs: the shape of funnel times to convert.
func logUniformMicros(r *rand.Rand) int64 {
	const lo, hi = 1e6, float64(7 * day)
	return int64(lo * math.Pow(hi/lo, r.Float64()))
}

// BenchmarkFunnelResult: the merge side of a 4-step funnel, 2M users who
// all convert (three lists of 2M log-uniform durations, each exact
// median computed twice: over all users and for the one group).
func BenchmarkFunnelResult(b *testing.B) {
	const users = 2_000_000
	spec := analysis.FunnelSpec{Steps: 4, Window: 7 * day, From: benchStart, To: benchStart + 30*day}
	f, err := analysis.NewFunnel(spec, analysis.FunnelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 8))
	var tr trail.Trail
	for range users {
		p := analysis.FunnelPath{Step: 4}
		p.Times[0] = benchStart + r.Int64N(20*day)
		for k := 1; k < 4; k++ {
			p.Times[k] = p.Times[k-1] + logUniformMicros(r)
		}
		f.AddPath(&p, &tr)
	}
	b.ReportAllocs()
	for b.Loop() {
		res := f.Result(nil)
		if !res.Steps[3].HasTime {
			b.Fatal("no time to convert")
		}
	}
}

// addPrice gives every event of d a float price of 1 … 54.60 in column 0.
func addPrice(d *benchData) {
	r := rand.New(rand.NewPCG(42, 9))
	for i := range d.trails {
		tr := &d.trails[i]
		c := trail.Column{Set: make([]bool, len(tr.Times)), Bits: make([]uint64, len(tr.Times))}
		for j := range c.Set {
			c.Set[j] = true
			c.Bits[j] = math.Float64bits(math.Round(100*math.Exp(4*r.Float64())) / 100)
		}
		tr.Cols = []trail.Column{c}
	}
}

// BenchmarkTrendResultPercentiles: the merge side of a trend with daily
// buckets over 30 days and median (of views' price), p99 (of every
// event's price) and count_per_user_median (of all events) series, ~1M
// events of 10k users.
func BenchmarkTrendResultPercentiles(b *testing.B) {
	d := makeBenchData(10000, mixShop)
	addPrice(d)
	for i := range d.trails {
		for j := range d.trails[i].Mask {
			d.trails[i].Mask[j] |= 1<<4 | 1<<5 // every event: p99 and count-per-user series
		}
	}
	spec := analysis.TrendSpec{
		Bounds: timebucket.Bounds(d.from, d.to, timebucket.Day, nil, timebucket.Monday),
		From:   d.from, To: d.to,
		Series: []analysis.TrendSeries{
			{Math: analysis.MathMedian, Bit: 0, Col: 0, Float: true},
			{Math: analysis.MathP99, Bit: 4, Col: 0, Float: true},
			{Math: analysis.MathCountPerUserMedian, Bit: 5},
		},
	}
	tr, err := analysis.NewTrend(spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range d.trails {
		tr.Add(&t)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := tr.Result(nil); len(res.Series) != 3 {
			b.Fatal("missing series")
		}
	}
}
