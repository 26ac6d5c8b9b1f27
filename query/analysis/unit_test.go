package analysis_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

const day = int64(86400e6)

func TestSpecValidation(t *testing.T) {
	b := []int64{0, day, 2 * day}
	trendCases := []struct {
		spec analysis.TrendSpec
		want string
	}{
		{analysis.TrendSpec{Bounds: b, From: day, To: day}, "empty range"},
		{analysis.TrendSpec{Bounds: b[:1], From: 0, To: 1}, "need at least 2"},
		{analysis.TrendSpec{Bounds: []int64{0, 0, day}, From: 0, To: 1}, "not increasing"},
		{analysis.TrendSpec{Bounds: b, From: -1, To: 1}, "do not cover"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 2*day + 1}, "do not cover"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1}, "0 series"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: make([]analysis.TrendSeries, 65)}, "65 series"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{Math: 99}}}, "unknown math"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{}, {}}}, "shared"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{Math: analysis.MathMedian}, {Math: analysis.MathSum}}}, "shared"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{Math: analysis.MathMedian}, {Math: analysis.MathP90, Col: 1}}}, "shared"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{Math: analysis.MathMedian}, {Math: analysis.MathP90, Float: true}}}, "shared"},
		{analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{Bit: 64}}}, "out of range"},
	}
	for _, c := range trendCases {
		if _, err := analysis.NewTrend(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewTrend(%+v) error %v, want %q", c.spec, err, c.want)
		}
	}
	funnelCases := []struct {
		spec analysis.FunnelSpec
		list *analysis.FunnelList
		want string
	}{
		{analysis.FunnelSpec{Steps: 1, To: 1}, nil, "1 steps"},
		{analysis.FunnelSpec{Steps: 33, To: 1}, nil, "33 steps"},
		{analysis.FunnelSpec{Steps: 2, Window: -1, To: 1}, nil, "window"},
		{analysis.FunnelSpec{Steps: 2, Window: analysis.MaxFunnelWindow + 1, To: 1}, nil, "window"},
		{analysis.FunnelSpec{Steps: 2, From: 1, To: 1}, nil, "empty range"},
		{analysis.FunnelSpec{Steps: 2, To: 1}, &analysis.FunnelList{Step: 3}, "list"},
		{analysis.FunnelSpec{Steps: 2, To: 1}, &analysis.FunnelList{Step: 1, Keep: -1}, "list"},
	}
	for _, c := range funnelCases {
		if _, err := analysis.NewFunnel(c.spec, analysis.FunnelOptions{List: c.list}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewFunnel(%+v, %+v) error %v, want %q", c.spec, c.list, err, c.want)
		}
	}
	ok := analysis.RetentionSpec{Bounds: []int64{0, day, 2 * day, 3 * day}, Periods: 3, From: 0, To: day}
	retentionCases := []struct {
		mod  func(*analysis.RetentionSpec)
		want string
	}{
		{func(s *analysis.RetentionSpec) { s.Periods = 0 }, "0 periods"},
		{func(s *analysis.RetentionSpec) { s.Periods = 4 }, "want bounds extended"},
		{func(s *analysis.RetentionSpec) { s.Type = 2 }, "invalid type"},
		{func(s *analysis.RetentionSpec) { s.Windows = analysis.WindowsRolling }, "rolling period"},
		{func(s *analysis.RetentionSpec) { s.To = 4 * day }, "do not cover"},
		{func(s *analysis.RetentionSpec) { s.List = &analysis.RetentionList{Cohort: 1} }, "list cell"},
		{func(s *analysis.RetentionSpec) { s.List = &analysis.RetentionList{Period: 3} }, "list cell"},
	}
	if _, err := analysis.NewRetention(ok); err != nil {
		t.Fatalf("NewRetention(valid): %v", err)
	}
	for _, c := range retentionCases {
		s := ok
		c.mod(&s)
		if _, err := analysis.NewRetention(s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRetention(%+v) error %v, want %q", s, err, c.want)
		}
	}
}

func TestMergeShapeMismatchErrors(t *testing.T) {
	b := []int64{0, day, 2 * day}
	t1, _ := analysis.NewTrend(analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{}}})
	t2, _ := analysis.NewTrend(analysis.TrendSpec{Bounds: b, From: 0, To: 1, Series: []analysis.TrendSeries{{}, {Bit: 1}}})
	f1, _ := analysis.NewFunnel(analysis.FunnelSpec{Steps: 2, To: 1}, analysis.FunnelOptions{})
	f2, _ := analysis.NewFunnel(analysis.FunnelSpec{Steps: 3, To: 1}, analysis.FunnelOptions{})
	r1, _ := analysis.NewRetention(analysis.RetentionSpec{Bounds: b, Periods: 1, To: 1})
	r2, _ := analysis.NewRetention(analysis.RetentionSpec{Bounds: b, Periods: 2, To: 1})
	for name, f := range map[string]func() error{
		"trend": func() error { return t1.Merge(t2) }, "funnel": func() error { return f1.Merge(f2) }, "retention": func() error { return r1.Merge(r2) },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: Merge of different shapes returned no error", name)
		}
	}
}

// TestEmptyTrails: users without events or without a step-1/start event
// contribute nothing (brief rule 4).
func TestEmptyTrails(t *testing.T) {
	b := []int64{0, day, 2 * day}
	tr, _ := analysis.NewTrend(analysis.TrendSpec{Bounds: b, From: 0, To: day, Series: []analysis.TrendSeries{{Math: analysis.MathUsers}}})
	fu, _ := analysis.NewFunnel(analysis.FunnelSpec{Steps: 2, Window: day, From: 0, To: day}, analysis.FunnelOptions{})
	re, _ := analysis.NewRetention(analysis.RetentionSpec{Bounds: b, Periods: 2, From: 0, To: day})
	onlyLater := trail.Trail{Times: []int64{5, 6}, Mask: []uint64{2, 2}}
	for _, trail := range []trail.Trail{{}, onlyLater} {
		tr.Add(&trail)
		fu.Add(&trail)
		re.Add(&trail)
	}
	if got := tr.Result(nil).Series[0].Rows[0]; got.Total != 0 || got.Buckets[0] != 0 {
		t.Errorf("trend of empty trails: %+v", got)
	}
	for _, s := range fu.Result(nil).Steps {
		if s.Users != 0 || s.HasTime {
			t.Errorf("funnel of empty trails: %+v", s)
		}
	}
	if got := re.Result(nil).Groups[0].Cohorts[0]; got.Size != 0 {
		t.Errorf("retention of empty trails: %+v", got)
	}
}

func TestQuantile(t *testing.T) {
	cases := []struct {
		x    []int64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]int64{7}, 0.5, 7},
		{[]int64{1, 2}, 0.5, 1.5},
		{[]int64{1, 2, 3, 4}, 0.5, 2.5},
		{[]int64{1, 2, 3, 4}, 0.75, 3.25},
		{[]int64{1, 2, 3, 4}, 1, 4},
		{[]int64{1, 2, 3, 4}, 0, 1},
		{[]int64{10, 20, 40, 100}, 0.5, 30},
		{[]int64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 0.9, 90},
	}
	for _, c := range cases {
		if got := analysis.Quantile(c.x, c.q); got != c.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", c.x, c.q, got, c.want)
		}
	}
}

func TestMean(t *testing.T) {
	sizes := []int64{10, 20, 0}
	retained := [][]int64{{10, 5, 2}, {20, 4, 0}, {0, 0, 0}}
	complete := [][]bool{{true, true, true}, {true, true, false}, {true, false, false}}
	got := analysis.Mean(sizes, retained, complete)
	want := []float64{1, 9.0 / 30, 0.2}
	if len(got) != len(want) {
		t.Fatalf("Mean = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Mean[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := analysis.Mean(nil, nil, nil); len(got) != 0 {
		t.Errorf("Mean of nothing = %v", got)
	}
}

// TestMeanLargeDurations checks the 128-bit duration sum: int64 would
// overflow with these values.
func TestMeanLargeDurations(t *testing.T) {
	f, _ := analysis.NewFunnel(analysis.FunnelSpec{Steps: 2, Window: analysis.MaxFunnelWindow, From: 0, To: 1}, analysis.FunnelOptions{})
	const users = 400_000 // 400k × 366 days > 2^63 µs
	p := analysis.FunnelPath{Step: 2}
	p.Times[1] = analysis.MaxFunnelWindow
	var tr trail.Trail
	for range users {
		f.AddPath(&p, &tr)
	}
	got := f.Result(nil).Steps[1]
	if want := float64(analysis.MaxFunnelWindow) / 1e6; got.AvgSeconds != want || got.MedianSeconds != want {
		t.Errorf("avg %v median %v, want %v", got.AvgSeconds, got.MedianSeconds, want)
	}
}

func TestParseOptions(t *testing.T) {
	for _, c := range []struct {
		s    string
		ok   bool
		want string
	}{
		{"count", true, "count"}, {"users", true, "users"}, {"", false, ""}, {"sum", true, "sum"}, {"p99", true, "p99"},
		{"count_per_user_median", true, "count_per_user_median"}, {"mau", true, "mau"}, {"p50", false, ""},
	} {
		m, err := analysis.ParseTrendMath(c.s)
		if (err == nil) != c.ok || (c.ok && m.String() != c.want) {
			t.Errorf("ParseTrendMath(%q) = %v, %v", c.s, m, err)
		}
	}
	if v, err := analysis.ParseRetentionType(""); err != nil || v != analysis.TypeFirstTime {
		t.Errorf("default type: %v %v", v, err)
	}
	if v, err := analysis.ParseRetentionType("recurring"); err != nil || v != analysis.TypeRecurring {
		t.Errorf("recurring: %v %v", v, err)
	}
	if v, err := analysis.ParseRetentionWindows("rolling"); err != nil || v != analysis.WindowsRolling {
		t.Errorf("rolling: %v %v", v, err)
	}
	if v, err := analysis.ParseRetentionCriterion("on_or_after"); err != nil || v != analysis.CriterionOnOrAfter {
		t.Errorf("on_or_after: %v %v", v, err)
	}
	if _, err := analysis.ParseRetentionCriterion("after"); err == nil || !strings.Contains(err.Error(), "on_or_after") {
		t.Errorf("bad criterion error %v should list the accepted names", err)
	}
	if s := analysis.RetentionWindows(9).String(); s != "windows(9)" {
		t.Errorf("invalid windows String = %q", s)
	}
}

func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"", "count", "users", "p90", "wau", "first_time", "recurring", "calendar", "rolling", "on", "on_or_after", "On",
		"strict", "unordered", "trends", "time_to_convert", "first_touch", "all_steps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := analysis.ParseTrendMath(s); err == nil && v.String() != s {
			t.Fatalf("ParseTrendMath(%q) = %v", s, v)
		}
		if v, err := analysis.ParseRetentionType(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseRetentionType(%q) = %v", s, v)
		}
		if v, err := analysis.ParseRetentionWindows(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseRetentionWindows(%q) = %v", s, v)
		}
		if v, err := analysis.ParseRetentionCriterion(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseRetentionCriterion(%q) = %v", s, v)
		}
		if v, err := analysis.ParseFunnelOrder(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseFunnelOrder(%q) = %v", s, v)
		}
		if v, err := analysis.ParseFunnelView(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseFunnelView(%q) = %v", s, v)
		}
		if v, err := analysis.ParseFunnelAttribution(s); err == nil && s != "" && v.String() != s {
			t.Fatalf("ParseFunnelAttribution(%q) = %v", s, v)
		}
	})
}

// TestAddDoesNotAllocate checks the per-event (and, after warm-up,
// per-user) allocation freedom of the kernels.
func TestAddDoesNotAllocate(t *testing.T) {
	evs := testutil.RandomEvents(7, testutil.RandomOptions{Users: 5, Events: 400})
	q := testutil.RetentionQuery{Start: "a", Return: testutil.Any, Interval: timebucket.Day, Periods: 4,
		Type: analysis.TypeRecurring, From: evs[0].Time - 2*day, To: evs[0].Time + 2*day}
	trails := testutil.BuildTrails(evs, []string{"a", "b", "c", "d"})
	bounds := timebucket.Bounds(q.From, q.To, timebucket.Day, nil, timebucket.Monday)
	tr, _ := analysis.NewTrend(analysis.TrendSpec{Bounds: bounds, From: q.From, To: q.To,
		Series: []analysis.TrendSeries{{Math: analysis.MathCount}, {Math: analysis.MathUsers, Bit: 1}, {Bit: 2}, {Math: analysis.MathUsers, Bit: 3}}})
	spec := analysis.FunnelSpec{Steps: 4, Window: day, From: q.From, To: q.To}
	var st analysis.FunnelScratch
	re, _ := analysis.NewRetention(retentionSpec(q, q.Periods))
	run := func() {
		for _, ut := range trails {
			tr.Add(&ut.Trail)
			analysis.FunnelUser(&ut.Trail, &spec, &st)
			re.Add(&ut.Trail)
		}
	}
	run() // grow scratch
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("Add allocates %v times per run", n)
	}
}

// TestExactSum: sums of floats of every magnitude (subnormal to 1e308,
// both signs) and ints (to ±2^63) equal the big.Float sum rounded once,
// whatever the order and the split into merged parts.
func TestExactSum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var vals []float64
		var ints []int64
		want := new(big.Float).SetPrec(4096)
		for range 1 + r.IntN(60) {
			switch r.IntN(5) {
			case 0:
				v := math.Ldexp(r.Float64()-0.5, r.IntN(2100)-1074) // any exponent, subnormals included
				vals = append(vals, v)
				want.Add(want, new(big.Float).SetFloat64(v))
			case 1:
				v := int64(r.Uint64())
				if r.IntN(10) == 0 {
					v = math.MinInt64
				}
				ints = append(ints, v)
				want.Add(want, new(big.Float).SetInt64(v))
			default:
				v := float64(r.IntN(2000)-1000) / 8
				vals = append(vals, v)
				want.Add(want, new(big.Float).SetFloat64(v))
			}
		}
		wf, _ := want.Float64()
		wm, _ := new(big.Float).SetPrec(53).Quo(want, big.NewFloat(float64(len(vals)+len(ints)))).Float64()
		for perm := range 3 {
			r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
			parts := make([]analysis.ExactSum, 1+perm)
			for i, v := range vals {
				parts[i%len(parts)].AddFloat(v)
			}
			for i, v := range ints {
				parts[(i+1)%len(parts)].AddInt(v)
			}
			for i := 1; i < len(parts); i++ {
				parts[0].Merge(&parts[i])
			}
			if got := parts[0].Float64(); got != wf+0 {
				t.Fatalf("round %d: sum %v, want %v", round, got, wf)
			}
			if got := parts[0].Mean(int64(len(vals) + len(ints))); got != wm+0 {
				t.Fatalf("round %d: mean %v, want %v", round, got, wm)
			}
		}
	}
	var s analysis.ExactSum
	s.AddFloat(math.Inf(1))
	s.AddFloat(1)
	if s.Float64() != math.Inf(1) {
		t.Errorf("+Inf sum = %v", s.Float64())
	}
	s.AddFloat(math.Inf(-1))
	if !math.IsNaN(s.Float64()) {
		t.Errorf("+Inf + -Inf = %v", s.Float64())
	}
	var z analysis.ExactSum
	z.AddFloat(math.Copysign(0, -1))
	if v := z.Float64(); v != 0 || math.Signbit(v) || z.Mean(0) != 0 {
		t.Errorf("sum of -0 = %v, want +0", v)
	}
}

// TestUserList: counts every user, keeps the smallest ids, pages in byte
// order, and merges disjoint lists exactly in any order.
func TestUserList(t *testing.T) {
	ids := []string{"u10", "u2", "u1", "a", "zz", "u3", "b"}
	one := analysis.UserList{Keep: 4}
	x, y := analysis.UserList{Keep: 4}, analysis.UserList{Keep: 4}
	for i, id := range ids {
		one.Add([]byte(id))
		if i%2 == 0 {
			x.Add([]byte(id))
		} else {
			y.Add([]byte(id))
		}
	}
	if err := y.Merge(&x); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*analysis.UserList{&one, &y} {
		if l.Count() != 7 || !slices.Equal(l.Page(0, 4), []string{"a", "b", "u1", "u10"}) ||
			!slices.Equal(l.Page(2, 2), []string{"u1", "u10"}) || len(l.Page(9, 2)) != 0 || l.Bytes() == 0 {
			t.Errorf("list %d %v %v", l.Count(), l.Page(0, 4), l.Page(2, 2))
		}
	}
	var count analysis.UserList
	count.Add([]byte("x"))
	if count.Count() != 1 || len(count.Page(0, 10)) != 0 {
		t.Error("a list without Keep counts but keeps nothing")
	}
}

func TestCohortCondValidate(t *testing.T) {
	ok := analysis.CohortCond{Op: analysis.CohortAnd, Kids: []analysis.CohortCond{
		{Op: analysis.CohortPerformed, Bit: 3, From: 0, To: day, N: 1},
		{Op: analysis.CohortNot, Kids: []analysis.CohortCond{{Op: analysis.CohortUserFlag, Flag: 2}}},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []analysis.CohortCond{
		{Op: analysis.CohortNot},
		{Op: analysis.CohortPerformed, Bit: 64},
		{Op: analysis.CohortFirstPerformed, From: 2, To: 1},
		{Op: analysis.CohortUserFlag, Flag: -1},
		{Op: 99},
		{Op: analysis.CohortOr, Kids: []analysis.CohortCond{{Op: analysis.CohortPerformed, Count: 7}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
	// The empty trail performed nothing; "count = 0" holds.
	var empty trail.Trail
	zero := analysis.CohortCond{Op: analysis.CohortPerformed, Count: analysis.CountEQ, N: 0, To: day}
	zs, oks := analysis.NewCohortState(&zero), analysis.NewCohortState(&ok)
	zs.Add(&empty)
	oks.Add(&empty)
	if !zs.In(0) || oks.In(0) {
		t.Error("cohort state on an empty trail")
	}
}

// TestTrendSharedQuantileBit checks that quantile series of one column on
// a shared bit (one value list) give the same rows as the same series on
// bits of their own, with a breakdown and merged keys.
func TestTrendSharedQuantileBit(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	bounds := []int64{0, day, 2 * day, 3 * day}
	maths := []analysis.TrendMath{analysis.MathMedian, analysis.MathP90, analysis.MathP99, analysis.MathP75}
	var shared, own analysis.TrendSpec
	for _, sp := range []*analysis.TrendSpec{&shared, &own} {
		*sp = analysis.TrendSpec{Bounds: bounds, From: 0, To: 3 * day, Breakdown: analysis.KeySource{From: analysis.KeyEvent, Index: 1}}
	}
	for i, m := range maths {
		shared.Series = append(shared.Series, analysis.TrendSeries{Math: m, Bit: 0, Float: true})
		own.Series = append(own.Series, analysis.TrendSeries{Math: m, Bit: i, Float: true})
	}
	a, err := analysis.NewTrend(shared)
	if err != nil {
		t.Fatal(err)
	}
	b, err := analysis.NewTrend(own)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[uint64][]float64{} // by breakdown value: the values in range
	for range 300 {
		n := r.IntN(30)
		tr := trail.Trail{Times: make([]int64, n), Mask: make([]uint64, n), Cols: make([]trail.Column, 2)}
		ts := r.Int64N(3 * day)
		for i := range n {
			tr.Times[i] = ts
			ts += r.Int64N(day / 4)
			set := r.IntN(5) > 0
			v := r.NormFloat64() * 100
			tr.Cols[0].Set = append(tr.Cols[0].Set, set)
			tr.Cols[0].Bits = append(tr.Cols[0].Bits, math.Float64bits(v))
			tr.Cols[1].Set = append(tr.Cols[1].Set, true)
			tr.Cols[1].Bits = append(tr.Cols[1].Bits, uint64(r.IntN(4)))
		}
		for i := range n {
			tr.Mask[i] = uint64(r.IntN(2)) // bit 0: every series matches
			if tr.Mask[i] != 0 && tr.Cols[0].Set[i] && tr.Times[i] < 3*day {
				k := tr.Cols[1].Bits[i]
				vals[k] = append(vals[k], math.Float64frombits(tr.Cols[0].Bits[i]))
			}
		}
		a.Add(&tr)
		for i := range n {
			tr.Mask[i] *= 0xf // bits 0..3, one per series
		}
		b.Add(&tr)
	}
	odd := func(_ int, k analysis.Key) analysis.Key { return analysis.Key{Set: true, Bits: k.Bits % 2} }
	for _, group := range []func(int, analysis.Key) analysis.Key{nil, odd} {
		ra, rb := a.Result(group), b.Result(group)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("shared bit:\n%+v\nown bits:\n%+v", ra, rb)
		}
		if len(ra.Series[0].Rows) == 0 {
			t.Fatal("no rows")
		}
		// Each row's range total is the quantile of its values.
		for si, m := range maths {
			for _, row := range ra.Series[si].Rows {
				var vs []float64
				for k, v := range vals {
					if g := (analysis.Key{Set: true, Bits: k}); group == nil && g == row.Key || group != nil && group(si, g) == row.Key {
						vs = append(vs, v...)
					}
				}
				slices.Sort(vs)
				if want := analysis.QuantileFloat(vs, m.Level()); row.Total != want {
					t.Fatalf("series %d (%v) row %+v: total %v, want %v", si, m, row.Key, row.Total, want)
				}
			}
		}
	}
}
