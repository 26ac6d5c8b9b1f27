package query

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/storage"
)

// evSource feeds testutil events to an import.
type evSource struct {
	evs []testutil.Ev
	i   int
}

func (s *evSource) Next(ev *event.Event) error {
	if s.i == len(s.evs) {
		return io.EOF
	}
	e := s.evs[s.i]
	s.i++
	*ev = event.Event{UserID: e.User, Time: e.Time, Name: e.Name, Props: sortedProps(e.Props), Pos: event.Pos{File: "mem", Line: int64(s.i)}}
	return nil
}

// userSource feeds testutil user property writes to a users import.
type userSource struct {
	ws []testutil.UserWrite
	i  int
}

func (s *userSource) Next(ev *event.Event) error {
	if s.i == len(s.ws) {
		return io.EOF
	}
	w := s.ws[s.i]
	s.i++
	*ev = event.Event{UserID: w.User, Time: w.Time, Name: w.Op, Props: sortedProps(w.Props), Pos: event.Pos{File: "users", Line: int64(s.i)}}
	return nil
}

func sortedProps(m map[string]event.Value) []event.Prop {
	var ps []event.Prop
	for n, v := range m {
		ps = append(ps, event.Prop{Name: n, Value: v})
	}
	slices.SortFunc(ps, func(a, b event.Prop) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return ps
}

var zones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}

// TestDifferentialAgainstNaive is the end-to-end differential test:
// random trails with many ties, repeated events, event properties and
// user property writes are imported (in 1–3 imports, into 1–8 shards, so
// trails span segments) and, per seed, a trend, a funnel, a retention and
// a cohort query with random options — typed filters of every operator on
// event and user properties (per matcher and global), every trend math,
// breakdowns by event or user property with limits, cohort filters of
// every condition kind, and paged user lists — run through the JSON query
// path must equal the naive reference implementation of the spec exactly,
// for 200 seeds.
func TestDifferentialAgainstNaive(t *testing.T) { runSeeds(t, 200, 40, diffSeed) }

// runSeeds runs f as a subtest per seed 0..seeds-1 (short of them with
// -short).
func runSeeds(t *testing.T, seeds, short int, f func(*testing.T, int64)) {
	if testing.Short() {
		seeds = short
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { f(t, int64(seed)) })
	}
}

// diffGen draws random query parts as both JSON and naive form.
type diffGen struct {
	r        *rand.Rand
	from, to int64
	loc      *time.Location
	around   runner // runs the queries (nil: runJSON)
}

// runner runs query q on eng and returns its result (runJSON, or a
// wrapper of it that changes q or checks more).
type runner func(t *testing.T, eng *Engine, q map[string]any) Result

// run runs q on eng with g.around, else runJSON.
func (g *diffGen) run(t *testing.T, eng *Engine, q map[string]any) Result {
	t.Helper()
	if g.around != nil {
		return g.around(t, eng, q)
	}
	return runJSON(t, eng, q)
}

var eventPropNames = []string{"s", "n", "f", "b"}
var userPropNames = []string{"tier", "age", "vip", "score"}

// value draws a constant for a property of type t: the JSON form (at
// times of another type that coerces losslessly) and the typed value.
func (g *diffGen) value(t event.Type, user bool) (any, event.Value) {
	switch t {
	case event.TypeString:
		vals := []string{"x", "y", "z", "w", "q"}
		if user {
			vals = []string{"gold", "silver", "bronze", "tin"}
		}
		v := vals[g.r.IntN(len(vals))]
		return v, event.String(v)
	case event.TypeInt:
		v := int64(g.r.IntN(25) - 3)
		if user {
			v = int64(17 + g.r.IntN(15))
		}
		if g.r.IntN(4) == 0 {
			return fmt.Sprint(v), event.Int(v) // "5" coerces to int 5
		}
		return v, event.Int(v)
	case event.TypeFloat:
		v := float64(g.r.IntN(31)-10) / 4
		if user {
			v = float64(g.r.IntN(100)) / 8
		}
		if v == float64(int64(v)) && g.r.IntN(2) == 0 {
			return int64(v), event.Float(v) // int coerces to float
		}
		return v, event.Float(v)
	}
	b := g.r.IntN(2) == 0
	if g.r.IntN(4) == 0 {
		return fmt.Sprint(b), event.Bool(b) // "true" coerces to bool
	}
	return b, event.Bool(b)
}

// filter draws a filter on an event (or user) property.
func (g *diffGen) filter(user bool) (map[string]any, testutil.Filter) {
	name := eventPropNames[g.r.IntN(4)]
	t := testutil.EventProps[name]
	if user {
		name = userPropNames[g.r.IntN(4)]
		t = testutil.UserProps[name]
	}
	ops := []string{"eq", "neq", "in", "not_in", "gt", "gte", "lt", "lte", "is_set", "is_not_set"}
	if t == event.TypeString {
		ops = append(ops, "contains", "not_contains", "contains")
	}
	op := ops[g.r.IntN(len(ops))]
	js := map[string]any{"property": name, "op": op}
	if user {
		js["source"] = "user"
	}
	f := testutil.Filter{Prop: name, Op: op, User: user}
	switch op {
	case "is_set", "is_not_set":
	case "in", "not_in":
		var arr []any
		for range 1 + g.r.IntN(3) {
			j, v := g.value(t, user)
			arr = append(arr, j)
			f.Values = append(f.Values, v)
		}
		js["value"] = arr
	case "contains", "not_contains":
		s := []string{"x", "y", "", "ol", "xy", "r"}[g.r.IntN(6)]
		js["value"], f.Values = s, []event.Value{event.String(s)}
	default:
		j, v := g.value(t, user)
		js["value"], f.Values = j, []event.Value{v}
	}
	return js, f
}

// filters draws up to max filters (event and user).
func (g *diffGen) filters(max int) ([]map[string]any, []testutil.Filter) {
	var js []map[string]any
	var fs []testutil.Filter
	for range g.r.IntN(max + 1) {
		j, f := g.filter(g.r.IntN(3) == 0)
		js, fs = append(js, j), append(fs, f)
	}
	return js, fs
}

var diffNames = []string{"a", "b", "c", "d", "$any", "zz"}

func (g *diffGen) name() string { return diffNames[g.r.IntN(len(diffNames))] }

// matcher draws an event matcher with filters.
func (g *diffGen) matcher() (map[string]any, testutil.Matcher) {
	n := g.name()
	js := map[string]any{"event": n}
	wj, wf := g.filters(2)
	if len(wj) > 0 {
		js["where"] = wj
	}
	return js, testutil.Matcher{Event: n, Where: wf}
}

// breakdown draws a breakdown (or none) with a limit.
func (g *diffGen) breakdown() (map[string]any, *testutil.Breakdown) {
	if g.r.IntN(3) == 0 {
		return nil, nil
	}
	b := &testutil.Breakdown{Prop: eventPropNames[g.r.IntN(4)], User: g.r.IntN(2) == 0, Limit: g.r.IntN(5)}
	if b.User {
		b.Prop = userPropNames[g.r.IntN(4)]
	}
	js := map[string]any{"property": b.Prop}
	if b.User {
		js["source"] = "user"
	}
	if b.Limit > 0 {
		js["limit"] = b.Limit
	} else {
		b.Limit = DefaultBreakdownLimit
	}
	return js, b
}

// window draws a performed-condition window: none (the query range), last
// N days before to, or an absolute range.
func (g *diffGen) window() (map[string]any, int64, int64) {
	switch g.r.IntN(3) {
	case 0:
		return nil, g.from, g.to
	case 1:
		n := 1 + g.r.IntN(3)
		return map[string]any{"last_days": n}, g.to - int64(n)*day, g.to
	}
	a := g.from + g.r.Int64N(3*day) - day
	b := a + 1 + g.r.Int64N(3*day)
	return map[string]any{"from": fmtInstant(a), "to": fmtInstant(b)}, a, b
}

// cond draws a cohort condition tree.
func (g *diffGen) cond(depth int) (map[string]any, testutil.Cond) {
	op := g.r.IntN(8)
	if depth >= 2 {
		op = 3 + g.r.IntN(5)
	}
	switch op {
	case 0, 1:
		key := []string{"and", "or"}[op]
		var kids []any
		c := testutil.Cond{Op: key}
		for range 1 + g.r.IntN(3) {
			kj, kc := g.cond(depth + 1)
			kids, c.Kids = append(kids, kj), append(c.Kids, kc)
		}
		return map[string]any{key: kids}, c
	case 2:
		kj, kc := g.cond(depth + 1)
		return map[string]any{"not": kj}, testutil.Cond{Op: "not", Kids: []testutil.Cond{kc}}
	case 3:
		j, f := g.filter(true)
		delete(j, "source")
		return map[string]any{"user_property": j}, testutil.Cond{Op: "user_property", Filter: f}
	}
	mj, m := g.matcher()
	wj, from, to := g.window()
	js := map[string]any{}
	if wj != nil {
		js["window"] = wj
	}
	switch op {
	case 4:
		js["first_performed"] = mj
		return js, testutil.Cond{Op: "first_performed", Matcher: m, From: from, To: to}
	case 5:
		js["not_performed"] = mj
		return js, testutil.Cond{Op: "performed", Matcher: m, CountOp: "eq", N: 0, From: from, To: to}
	}
	js["performed"] = mj
	c := testutil.Cond{Op: "performed", Matcher: m, CountOp: "gte", N: 1, From: from, To: to}
	if g.r.IntN(2) == 0 {
		c.CountOp = []string{"gte", "lte", "eq"}[g.r.IntN(3)]
		c.N = int64(g.r.IntN(4))
		js["count"] = map[string]any{"op": c.CountOp, "value": c.N}
	}
	return js, c
}

// common adds the global where, breakdown and cohort to a query.
func (g *diffGen) common(q map[string]any, c *testutil.Common, withBreakdown bool) {
	if wj, wf := g.filters(1); len(wj) > 0 {
		q["where"], c.Global = wj, wf
	}
	if withBreakdown {
		if bj, b := g.breakdown(); b != nil {
			q["breakdown"], c.Breakdown = bj, b
		}
	}
	if g.r.IntN(3) == 0 {
		cj, cc := g.cond(0)
		q["cohort"], c.Cohort = cj, &cc
	}
	c.Loc = g.loc
}

// page draws a list page and returns the JSON and (offset, limit).
func (g *diffGen) page(list map[string]any) (int, int) {
	off, lim := g.r.IntN(3), 1+g.r.IntN(30)
	list["offset"], list["limit"] = off, lim
	return off, lim
}

func pageOf(ids []string, off, lim int) []string {
	if off >= len(ids) {
		return []string{}
	}
	return append([]string{}, ids[off:min(len(ids), off+lim)]...)
}

// diffSeed runs the queries of one seed of TestDifferentialAgainstNaive.
func diffSeed(t *testing.T, seed int64) { diffSeedConfig(t, seed, nil) }

// diffSeedConfig is diffSeed on an engine whose Config configure changes
// (nil: none).
func diffSeedConfig(t *testing.T, seed int64, configure func(*Config)) {
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	data, eng := diffStore(t, r, seed)
	if configure != nil {
		configure(&eng.cfg)
	}
	diffCheck(t, r, data, eng, nil)
}

// diffCheck draws from r a trend, a funnel, a retention and a cohort
// query (with lists) and checks each answer of eng against the naive
// reference over data; around, when not nil, runs each query instead of
// runJSON.
func diffCheck(t *testing.T, r *rand.Rand, data testutil.Data, eng *Engine, around runner) {
	tz := zones[r.IntN(len(zones))]
	loc, _ := time.LoadLocation(tz)
	span0 := time.Date(2021, 3, 25, 0, 0, 0, 0, time.UTC).UnixMicro()
	instant := func() int64 { return span0 + r.Int64N(6*24)*3600e6 + r.Int64N(3)*1e6 }
	from := instant()
	to := from + 1 + r.Int64N(5*86400e6)
	g := &diffGen{r: r, from: from, to: to, loc: loc, around: around}
	rng := map[string]string{"from": fmtInstant(from), "to": fmtInstant(to)}
	ivs := []timebucket.Interval{timebucket.Hour, timebucket.Day, timebucket.Week, timebucket.Month}

	// Trend.
	{
		iv := ivs[r.IntN(3)]
		tq := testutil.TrendQuery{Bounds: timebucket.Bounds(from, to, iv, loc, timebucket.Monday), From: from, To: to}
		var series []map[string]any
		for range 1 + r.IntN(3) {
			mj, m := g.matcher()
			mth := analysis.TrendMath(r.IntN(int(analysis.MathMAU) + 1))
			mj["math"] = mth.String()
			prop := ""
			if mth.NeedsProperty() {
				prop = []string{"n", "f"}[r.IntN(2)]
				mj["property"] = prop
			}
			tq.Events, tq.Math, tq.Where, tq.Props = append(tq.Events, m.Event), append(tq.Math, mth), append(tq.Where, m.Where), append(tq.Props, prop)
			series = append(series, mj)
		}
		q := map[string]any{"kind": "trend", "app": "d", "range": rng, "tz": tz, "interval": iv.String(), "series": series}
		g.common(q, &tq.Common, true)
		res := g.run(t, eng, q).(*TrendResult)
		want := testutil.NaiveTrend(data, tq)
		var flat []testutil.TrendRow
		for _, rows := range want {
			flat = append(flat, rows...)
		}
		if len(res.Series) != len(flat) {
			t.Fatalf("trend %s: %d series rows, want %d", js(q), len(res.Series), len(flat))
		}
		for i, w := range flat {
			got := res.Series[i]
			gv := ""
			if got.BreakdownValue != nil {
				gv = *got.BreakdownValue
			}
			vals := make([]float64, len(got.Buckets))
			for b, bk := range got.Buckets {
				vals[b] = bk.Value
				if bk.Start != formatTime(tq.Bounds[b], loc) {
					t.Fatalf("trend bucket %d starts %s want %s", b, bk.Start, formatTime(tq.Bounds[b], loc))
				}
			}
			if gv != w.Value || got.Total != w.Total || !slices.Equal(vals, w.Buckets) {
				t.Fatalf("trend %s\nrow %d: got %q %v total %v\nwant %q %v total %v", js(q), i, gv, vals, got.Total, w.Value, w.Buckets, w.Total)
			}
		}
	}
	// Funnel.
	n := 2 + r.IntN(3)
	windows := []string{"30m", "1h", "90m", "1d", "2d"}
	win := windows[r.IntN(len(windows))]
	w, _ := ParseDuration(win)
	fq := testutil.FunnelQuery{Window: w, From: from, To: to}
	var steps []map[string]any
	for range n {
		mj, m := g.matcher()
		fq.Steps, fq.Where = append(fq.Steps, m.Event), append(fq.Where, m.Where)
		steps = append(steps, mj)
	}
	q := map[string]any{"kind": "funnel", "app": "d", "range": rng, "tz": tz, "steps": steps, "window": win}
	g.common(q, &fq.Common, true)
	var list map[string]any
	var off, lim, step int
	var dropped bool
	if r.IntN(2) == 0 {
		step, dropped = 1+r.IntN(n), r.IntN(2) == 0
		list = map[string]any{"step": step, "dropped": dropped}
		off, lim = g.page(list)
		q["list"] = list
	}
	want, paths := testutil.NaiveFunnel(data, fq)
	var groups []testutil.FunnelGroup
	if fq.Breakdown != nil {
		groups = testutil.NaiveFunnelBreakdown(data, fq, paths)
		if list != nil && r.IntN(2) == 0 && len(groups) > 0 {
			list["breakdown_value"] = groups[r.IntN(len(groups))].Value
		}
	}
	res := g.run(t, eng, q).(*FunnelResult)
	checkSteps := func(what string, got []FunnelStep, want []analysis.FunnelStepResult) {
		for k, s := range want {
			g := got[k]
			if g.Users != s.Users || g.Conversion != s.Conversion || g.ConversionFromPrevious != s.ConversionFromPrevious ||
				(g.AvgSeconds != nil) != s.HasTime || (s.HasTime && (*g.AvgSeconds != s.AvgSeconds || *g.MedianSeconds != s.MedianSeconds)) {
				t.Fatalf("funnel %s %s step %d: got %+v want %+v", js(q), what, k+1, g, s)
			}
		}
	}
	checkSteps("overall", res.Steps, want.Steps)
	if len(res.Breakdown) != len(groups) {
		t.Fatalf("funnel %s: %d breakdown groups, want %d", js(q), len(res.Breakdown), len(groups))
	}
	for i, gr := range groups {
		if res.Breakdown[i].Value != gr.Value {
			t.Fatalf("funnel %s: group %d is %q, want %q", js(q), i, res.Breakdown[i].Value, gr.Value)
		}
		checkSteps(gr.Value, res.Breakdown[i].Steps, gr.Steps)
	}
	if list != nil {
		ps := paths
		if bv, ok := list["breakdown_value"]; ok {
			ps = nil
			for _, gr := range groups {
				if gr.Value == bv {
					ps = gr.Paths
				}
			}
		}
		users := testutil.FunnelUsers(ps, step, dropped)
		if res.List.Users != int64(len(users)) || !reflect.DeepEqual(res.List.UserIDs, pageOf(users, off, lim)) {
			t.Fatalf("funnel %s: list %d %v, want %d %v", js(q), res.List.Users, res.List.UserIDs, len(users), pageOf(users, off, lim))
		}
	}
	// Retention, every option.
	{
		iv := ivs[r.IntN(4)]
		rq := testutil.RetentionQuery{Interval: iv, Periods: 1 + r.IntN(6),
			Type: analysis.RetentionType(r.IntN(2)), Windows: analysis.RetentionWindows(r.IntN(2)),
			Criterion: analysis.RetentionCriterion(r.IntN(2)), From: from, To: to, WeekStart: timebucket.WeekStart(r.IntN(2))}
		if iv == timebucket.Hour && to-from > 2*86400e6 {
			rq.Interval = timebucket.Day
		}
		sj, sm := g.matcher()
		rj, rm := g.matcher()
		rq.Start, rq.StartWhere, rq.Return, rq.ReturnWhere = sm.Event, sm.Where, rm.Event, rm.Where
		q := map[string]any{"kind": "retention", "app": "d", "range": rng, "tz": tz, "start": sj,
			"return": rj, "period": rq.Interval.String(), "periods": rq.Periods,
			"type": rq.Type.String(), "windows": rq.Windows.String(), "criterion": rq.Criterion.String(),
			"week_start": []string{"monday", "sunday"}[rq.WeekStart]}
		g.common(q, &rq.Common, true)
		want := testutil.NaiveRetention(data, rq)
		starts := timebucket.Bounds(from, to, rq.Interval, loc, rq.WeekStart)
		var list map[string]any
		var off, lim, cell, period int
		var value *string
		var kept []string
		if r.IntN(2) == 0 {
			cell, period = r.IntN(len(starts)-1), r.IntN(rq.Periods)
			list = map[string]any{"cohort_start": fmtInstant(starts[cell] + r.Int64N(starts[cell+1]-starts[cell])), "period": period}
			off, lim = g.page(list)
			if rq.Breakdown != nil && r.IntN(2) == 0 && len(want) > 0 {
				v := want[r.IntN(len(want))].Value
				list["breakdown_value"], value = v, &v
			}
			for _, w := range want {
				if w.Value != testutil.Other {
					kept = append(kept, w.Value)
				}
			}
			q["list"] = list
		}
		res := g.run(t, eng, q).(*RetentionResult)
		var flat []analysis.RetentionCohort
		var values []string
		for _, w := range want {
			for _, c := range w.Cohorts {
				flat, values = append(flat, c), append(values, w.Value)
			}
		}
		if len(res.Cohorts) != len(flat) {
			t.Fatalf("retention %s: %d rows want %d", js(q), len(res.Cohorts), len(flat))
		}
		for c, wc := range flat {
			gc := res.Cohorts[c]
			gv := ""
			if gc.BreakdownValue != nil {
				gv = *gc.BreakdownValue
			}
			if gv != values[c] || gc.Size != wc.Size || fmt.Sprint(gc.Retained) != fmt.Sprint(wc.Retained) || gc.Start != formatTime(wc.Start, loc) {
				t.Fatalf("retention %s row %d: got %q %s %d %v want %q %s %d %v", js(q), c, gv, gc.Start, gc.Size, gc.Retained,
					values[c], formatTime(wc.Start, loc), wc.Size, wc.Retained)
			}
		}
		if list != nil {
			users := testutil.RetentionUsers(testutil.NaiveRetentionEntries(data, rq), cell, period, value, kept)
			if res.List.Users != int64(len(users)) || !reflect.DeepEqual(res.List.UserIDs, pageOf(users, off, lim)) {
				t.Fatalf("retention %s: list %d %v, want %d %v", js(q), res.List.Users, res.List.UserIDs, len(users), pageOf(users, off, lim))
			}
		}
	}
	// Cohort: count and list.
	{
		cj, cc := g.cond(0)
		q := map[string]any{"kind": "cohort", "app": "d", "range": rng, "tz": tz, "cohort": cj}
		list := map[string]any{}
		off, lim := g.page(list)
		q["list"] = list
		res := g.run(t, eng, q).(*CohortResult)
		var users []string
		for u := range testutil.CohortMembers(data, cc) {
			users = append(users, u)
		}
		sort.Strings(users)
		if res.Users != int64(len(users)) || !reflect.DeepEqual(res.UserIDs, pageOf(users, off, lim)) {
			t.Fatalf("cohort %s: %d %v, want %d %v", js(q), res.Users, res.UserIDs, len(users), pageOf(users, off, lim))
		}
	}
}

func js(q map[string]any) string {
	b, _ := json.Marshal(q)
	return string(b)
}

func fmtInstant(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }

func runJSON(t *testing.T, eng *Engine, q map[string]any) Result {
	t.Helper()
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, eng, string(b))
}

// diffStore imports random data for a seed (in 1–3 imports into 1–8
// shards, with user property writes) and returns it and an engine over it.
func diffStore(t *testing.T, r *rand.Rand, seed int64) (testutil.Data, *Engine) {
	evs := testutil.RandomEvents(seed, testutil.RandomOptions{Users: 3 + r.IntN(25), Events: 50 + r.IntN(500), Props: true})
	data := testutil.Data{Events: evs, Users: testutil.RandomUsers(seed, evs)}
	st := openStore(t, t.TempDir(), 1<<r.IntN(4))
	// Split into consecutive imports: arrival order is preserved.
	cuts := []int{0, r.IntN(len(evs) + 1), len(evs)}
	if r.IntN(2) == 0 {
		cuts = []int{0, len(evs)}
	}
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] == cuts[i+1] {
			continue
		}
		_, err := st.Import(context.Background(), "d", []storage.Source{&evSource{evs: evs[cuts[i]:cuts[i+1]]}},
			storage.ImportOptions{BlockRows: 1 + r.IntN(100), FlushRows: 10 + r.IntN(300)})
		if err != nil {
			t.Fatal(err)
		}
	}
	ucut := r.IntN(len(data.Users) + 1)
	for _, part := range [][]testutil.UserWrite{data.Users[:ucut], data.Users[ucut:]} {
		if len(part) == 0 {
			continue
		}
		if _, err := st.Import(context.Background(), "d", []storage.Source{&userSource{ws: part}},
			storage.ImportOptions{Kind: storage.KindUsers, BlockRows: 1 + r.IntN(50)}); err != nil {
			t.Fatal(err)
		}
	}
	return data, New(st, Config{Workers: 1 + r.IntN(3)})
}
