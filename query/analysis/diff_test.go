package analysis_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// Differential tests: kernels against the naive reference implementations
// on seeded random data with many ties, event and user properties, with
// users spread over 1-3 accumulators merged in random order. Results must
// be identical, for every math, breakdown source, grouping and list.

const diffSeeds = 250

var (
	diffMatchers = []string{"a", "b", "c", "d", "a", "b", testutil.Any, "a|b", "c|d", "b|c|d"}
	diffZones    = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}
	diffWindows  = []int64{0, 1, 30 * 60e6, 30*60e6 + 1, 30*60e6 - 1, 60 * 60e6, 90 * 60e6, 6 * 3600e6, 86400e6, 14 * 86400e6}
	// breakdown sources: event properties, user properties
	diffEventProps = []string{"s", "n", "f", "b"}
	diffUserProps  = []string{"tier", "age", "vip", "score"}
)

type diffCase struct {
	r    *rand.Rand
	data testutil.Data
	evs  []testutil.Ev
	opts testutil.RandomOptions
	plan *shardPlan
}

func newDiffCase(seed int64) *diffCase {
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	opts := testutil.RandomOptions{Users: 3 + r.IntN(12), Events: 20 + r.IntN(250), Props: true}
	if r.IntN(4) == 0 {
		opts.Quantum = 1e6 // dense: many near-ties
	}
	evs := testutil.RandomEvents(seed, opts)
	return &diffCase{
		r: r, opts: opts, evs: evs,
		data: testutil.Data{Events: evs, Users: testutil.RandomUsers(seed, evs)},
		plan: &shardPlan{r: r, shards: 1 + r.IntN(3)},
	}
}

// rangeIn picks [from, to) inside (or slightly around) the data's span.
func (d *diffCase) rangeIn() (from, to int64) {
	start := time.Date(2021, 3, 26, 0, 0, 0, 0, time.UTC).UnixMicro()
	span := 4 * 86400e6
	q := int64(30 * 60e6)
	from = start - q + d.r.Int64N(int64(span)/q)*q + int64(d.r.IntN(3)-1)
	to = from + 1 + d.r.Int64N(int64(span))
	return from, to
}

func (d *diffCase) loc(t *testing.T) *time.Location {
	loc, err := time.LoadLocation(diffZones[d.r.IntN(len(diffZones))])
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// breakdown picks no breakdown (1 in 3), an event or a user property.
func (d *diffCase) breakdown() *testutil.Breakdown {
	switch d.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return &testutil.Breakdown{Prop: diffEventProps[d.r.IntN(4)]}
	}
	return &testutil.Breakdown{Prop: diffUserProps[d.r.IntN(4)], User: true}
}

// trailSpec returns the trail columns for a breakdown plus extra event
// columns, and the kernel's key source.
func trailSpec(b *testutil.Breakdown, matchers []string, cols ...string) (testutil.TrailSpec, analysis.KeySource) {
	ts := testutil.TrailSpec{Cols: cols}
	for _, m := range matchers {
		ts.Matchers = append(ts.Matchers, testutil.Matcher{Event: m})
	}
	var src analysis.KeySource
	switch {
	case b == nil:
	case b.User:
		ts.UserCols = []string{b.Prop}
		src = analysis.KeySource{From: analysis.KeyUser, Index: 0}
	default:
		ts.Cols = append(ts.Cols, b.Prop)
		src = analysis.KeySource{From: analysis.KeyEvent, Index: len(ts.Cols) - 1}
	}
	return ts, src
}

// keyLabel renders a kernel key as the naive references render values.
func keyLabel(k analysis.Key, b *testutil.Breakdown, dicts testutil.Dicts) string {
	if b == nil {
		return ""
	}
	if k == otherKey {
		return testutil.Other
	}
	if !k.Set {
		return "(none)"
	}
	typ, name := testutil.EventProps[b.Prop], b.Prop
	if b.User {
		typ, name = testutil.UserProps[b.Prop], "user:"+b.Prop
	}
	switch typ {
	case event.TypeString:
		return dicts[name][k.Bits]
	case event.TypeFloat:
		return testutil.Render(event.Float(math.Float64frombits(k.Bits)), time.UTC)
	case event.TypeBool:
		return strconv.FormatBool(k.Bits != 0)
	}
	return strconv.FormatInt(int64(k.Bits), 10)
}

// otherKey is the group key the tests use for merged values.
var otherKey = analysis.Key{Bits: 1}

// relabel returns the data with property "_g" on every event: the
// event's breakdown value when kept, else "~other", so that the naive
// reference computes grouped rows with breakdown "_g".
func relabel(data testutil.Data, b *testutil.Breakdown, kept map[string]bool) testutil.Data {
	users := testutil.CurrentUsers(data.Users)
	out := testutil.Data{Users: data.Users}
	for _, e := range data.Events {
		v := e.Props[b.Prop]
		if b.User {
			v = users[e.User][b.Prop]
		}
		l := testutil.Render(v, time.UTC)
		if !kept[l] {
			l = "~other"
		}
		p := maps.Clone(e.Props)
		if p == nil {
			p = map[string]event.Value{}
		}
		p["_g"] = event.String(l)
		e.Props = p
		out.Events = append(out.Events, e)
	}
	return out
}

// pickKept returns a random subset of labels.
func (d *diffCase) pickKept(labels []string) map[string]bool {
	kept := map[string]bool{}
	for _, l := range labels {
		if d.r.IntN(2) == 0 {
			kept[l] = true
		}
	}
	return kept
}

func rowsByLabel(rows []testutil.TrendRow) map[string]testutil.TrendRow {
	m := map[string]testutil.TrendRow{}
	for _, r := range rows {
		m[r.Value] = r
	}
	return m
}

func TestDiffTrend(t *testing.T) {
	withData := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		iv := timebucket.Interval(1 + d.r.IntN(4))
		loc := d.loc(t)
		q := testutil.TrendQuery{Bounds: timebucket.Bounds(from, to, iv, loc, timebucket.WeekStart(d.r.IntN(2))), From: from, To: to}
		q.Breakdown = d.breakdown()
		var cols []string
		var series []analysis.TrendSeries
		// Series i uses mask bit bitOf[i] (not i), as in a second-pass
		// accumulator that holds one series of a query.
		bitOf := d.r.Perm(6)
		trailMatchers := slices.Repeat([]string{"zz"}, 6)
		for i := range 1 + d.r.IntN(4) {
			m := analysis.TrendMath(d.r.IntN(int(analysis.MathMAU) + 1))
			q.Events = append(q.Events, diffMatchers[d.r.IntN(len(diffMatchers))])
			q.Math = append(q.Math, m)
			trailMatchers[bitOf[i]] = q.Events[i]
			ts := analysis.TrendSeries{Math: m, Bit: bitOf[i]}
			prop := ""
			if m.NeedsProperty() {
				prop = []string{"n", "f"}[d.r.IntN(2)]
				ts.Col, ts.Float = len(cols), prop == "f"
				cols = append(cols, prop)
			}
			q.Props = append(q.Props, prop)
			series = append(series, ts)
		}
		spec := analysis.TrendSpec{Bounds: q.Bounds, From: from, To: to, Series: series}
		tspec, src := trailSpec(q.Breakdown, trailMatchers, cols...)
		spec.Breakdown = src
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		run := func(spec analysis.TrendSpec, plan *shardPlan, fd feeder) *analysis.Trend {
			return accumulate(t, trails, plan, fd, func() (*analysis.Trend, error) { return analysis.NewTrend(spec) })
		}
		// sameChunked requires the result of spec to be want when the
		// trails come in chunks of every length.
		sameChunked := func(spec analysis.TrendSpec, want analysis.TrendResult) {
			for _, fd := range chunkFeeders(seed) {
				if c := run(spec, fd.plan(d.plan), fd).Result(nil); !reflect.DeepEqual(c, want) {
					t.Fatalf("seed %d: trend %v fed chunks of about %d events\nchunked %+v\nwhole   %+v", seed, q.Math, fd.maxLen, c, want)
				}
			}
		}
		acc := run(spec, d.plan, feeder{})
		got := acc.Result(nil)
		sameChunked(spec, got)
		want := testutil.NaiveTrend(d.data, q)
		var labels []string
		for s := range series {
			gotRows := map[string]testutil.TrendRow{}
			for _, row := range got.Series[s].Rows {
				l := keyLabel(row.Key, q.Breakdown, dicts)
				gotRows[l] = testutil.TrendRow{Value: l, Buckets: row.Buckets, Total: row.Total}
				if s == 0 {
					labels = append(labels, l)
				}
				if row.Events > 0 {
					withData++
				}
			}
			if w := rowsByLabel(want[s]); !reflect.DeepEqual(gotRows, w) {
				t.Fatalf("seed %d: trend series %d (%v %s) breakdown %+v\nkernel %+v\nnaive  %+v", seed, s, q.Math[s], q.Events[s], q.Breakdown, gotRows, w)
			}
		}
		if q.Breakdown == nil {
			continue
		}
		// Grouping: the kept values stay, the rest merge into one row.
		kept := d.pickKept(labels)
		rq := q
		rq.Breakdown = &testutil.Breakdown{Prop: "_g"}
		want = testutil.NaiveTrend(relabel(d.data, q.Breakdown, kept), rq)
		grouped := acc.Result(func(s int, k analysis.Key) analysis.Key {
			if kept[keyLabel(k, q.Breakdown, dicts)] {
				return k
			}
			return otherKey
		})
		for s := range series {
			w := rowsByLabel(want[s])
			if q.Math[s].Mergeable() {
				for _, row := range grouped.Series[s].Rows {
					l := keyLabel(row.Key, q.Breakdown, dicts)
					if l == testutil.Other {
						l = "~other"
					}
					if g := (testutil.TrendRow{Value: l, Buckets: row.Buckets, Total: row.Total}); !reflect.DeepEqual(g, w[l]) {
						t.Fatalf("seed %d: series %d %v grouped row %q: kernel %+v naive %+v", seed, s, q.Math[s], l, g, w[l])
					}
				}
			}
		}
		// A second pass with Group computes the merged row of every math.
		gspec := spec
		gspec.Group = &analysis.KeyGroup{Other: otherKey, DropKept: true,
			Kept: keysWhere(trails, src, func(k analysis.Key) bool { return kept[keyLabel(k, q.Breakdown, dicts)] })}
		second := run(gspec, d.plan, feeder{}).Result(nil)
		sameChunked(gspec, second)
		for s := range series {
			w := rowsByLabel(want[s])["~other"]
			var g testutil.TrendRow
			for _, row := range second.Series[s].Rows {
				if row.Key != otherKey {
					t.Fatalf("seed %d: Group pass produced key %+v", seed, row.Key)
				}
				g = testutil.TrendRow{Value: "~other", Buckets: row.Buckets, Total: row.Total}
			}
			if w.Buckets == nil && g.Buckets == nil {
				continue
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d: series %d %v other row: kernel %+v naive %+v", seed, s, q.Math[s], g, w)
			}
		}
	}
	if withData < diffSeeds {
		t.Errorf("only %d rows with data over %d seeds", withData, diffSeeds)
	}
}

func TestDiffFunnel(t *testing.T) {
	converted := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		q := testutil.FunnelQuery{Window: diffWindows[d.r.IntN(len(diffWindows))], From: from, To: to}
		for range 2 + d.r.IntN(4) {
			q.Steps = append(q.Steps, diffMatchers[d.r.IntN(len(diffMatchers))])
		}
		got, gotPaths := runFunnel(t, d.evs, q, d.plan)
		want, wantPaths := testutil.NaiveFunnel(testutil.Data{Events: d.evs}, q)
		for u, p := range wantPaths {
			if p.Step == 0 {
				delete(wantPaths, u)
			}
		}
		if !reflect.DeepEqual(gotPaths, wantPaths) {
			for u := range wantPaths {
				if !reflect.DeepEqual(gotPaths[u], wantPaths[u]) {
					t.Errorf("seed %d user %s: kernel %+v naive %+v", seed, u, gotPaths[u], wantPaths[u])
				}
			}
			t.Fatalf("seed %d: funnel %+v: per-user paths differ\n%s", seed, q, dumpUser(d.evs))
		}
		if !reflect.DeepEqual(got.Steps, want.Steps) {
			t.Fatalf("seed %d: funnel %+v\nkernel %+v\nnaive  %+v", seed, q, got.Steps, want.Steps)
		}
		if got.Steps[len(got.Steps)-1].Users > 0 {
			converted++
		}
		diffFunnelBreakdown(t, d, q, seed)
	}
	// The generator must exercise full conversions, not only step 1.
	if converted < diffSeeds/5 {
		t.Errorf("only %d of %d seeds had users completing the funnel", converted, diffSeeds)
	}
}

// diffFunnelBreakdown checks the funnel per breakdown value, the grouped
// rows and the per-step user lists against the naive reference.
func diffFunnelBreakdown(t *testing.T, d *diffCase, q testutil.FunnelQuery, seed int64) {
	q.Breakdown = d.breakdown()
	if q.Breakdown == nil {
		q.Breakdown = &testutil.Breakdown{Prop: "s"}
	}
	spec := analysis.FunnelSpec{Steps: len(q.Steps), Window: q.Window, From: q.From, To: q.To}
	tspec, src := trailSpec(q.Breakdown, q.Steps)
	trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
	list := &analysis.FunnelList{Step: 1 + d.r.IntN(len(q.Steps)), Dropped: d.r.IntN(2) == 0, Keep: 1000}
	// Without a list on odd seeds: Result then computes a group of one
	// key on the accumulator's own duration lists.
	flist := list
	if seed%2 == 1 {
		flist = nil
	}
	assign, shards, order := d.plan.split(len(trails))
	accs := make([]*analysis.Funnel, shards)
	for i := range accs {
		var err error
		if accs[i], err = analysis.NewFunnel(spec, analysis.FunnelOptions{Key: src, List: flist}); err != nil {
			t.Fatal(err)
		}
	}
	for i, ut := range trails {
		accs[assign[i]].Add(&ut.Trail)
	}
	for _, s := range order[1:] {
		if err := accs[order[0]].Merge(accs[s]); err != nil {
			t.Fatal(err)
		}
	}
	_, paths := testutil.NaiveFunnel(d.data, q)
	groups := testutil.NaiveFunnelBreakdown(d.data, q, paths)
	res := accs[order[0]].Result(nil)
	if all := testutil.FunnelUsers(paths, list.Step, list.Dropped); flist != nil && (res.List.Count() != int64(len(all)) || !slices.Equal(res.List.Page(0, 1000), orEmpty(all))) {
		t.Fatalf("seed %d: overall list %+v: kernel %d %v naive %v", seed, list, res.List.Count(), res.List.Page(0, 1000), all)
	}
	if want := testutil.FunnelTable(paths, len(q.Steps)); !reflect.DeepEqual(res.Steps, want) {
		t.Fatalf("seed %d: all-users table of the breakdown\nkernel %+v\nnaive  %+v", seed, res.Steps, want)
	}
	var labels []string
	for _, g := range res.Groups {
		l := keyLabel(g.Key, q.Breakdown, dicts)
		labels = append(labels, l)
		i := slices.IndexFunc(groups, func(ng testutil.FunnelGroup) bool { return ng.Value == l })
		if i < 0 {
			t.Fatalf("seed %d: kernel group %q not in naive groups", seed, l)
		}
		if !reflect.DeepEqual(g.Steps, groups[i].Steps) {
			t.Fatalf("seed %d: funnel group %q\nkernel %+v\nnaive  %+v", seed, l, g.Steps, groups[i].Steps)
		}
		users := testutil.FunnelUsers(groups[i].Paths, list.Step, list.Dropped)
		if flist != nil && (g.List.Count() != int64(len(users)) || !slices.Equal(g.List.Page(0, 1000), orEmpty(users))) {
			t.Fatalf("seed %d: group %q list %+v: kernel %v naive %v", seed, l, list, g.List.Page(0, 1000), users)
		}
	}
	if len(res.Groups) != len(groups) {
		t.Fatalf("seed %d: %d kernel groups, %d naive", seed, len(res.Groups), len(groups))
	}
	// Grouping merges exactly.
	kept := d.pickKept(labels)
	rest := map[string]testutil.NaivePath{}
	for _, g := range groups {
		if !kept[g.Value] {
			maps.Copy(rest, g.Paths)
		}
	}
	grouped := accs[order[0]].Result(func(k analysis.Key) analysis.Key {
		if kept[keyLabel(k, q.Breakdown, dicts)] {
			return k
		}
		return otherKey
	})
	for _, g := range grouped.Groups {
		if g.Key == otherKey {
			if !reflect.DeepEqual(g.Steps, testutil.FunnelTable(rest, len(q.Steps))) {
				t.Fatalf("seed %d: merged group %+v, naive %+v", seed, g.Steps, testutil.FunnelTable(rest, len(q.Steps)))
			}
			continue
		}
		if l := keyLabel(g.Key, q.Breakdown, dicts); !kept[l] {
			t.Fatalf("seed %d: group %q is not kept but was not merged", seed, l)
		}
	}
	// The accumulator stays usable: a second Result gives the first's
	// tables.
	if again := accs[order[0]].Result(nil); !reflect.DeepEqual(again.Steps, res.Steps) || !reflect.DeepEqual(stepsOf(again.Groups), stepsOf(res.Groups)) {
		t.Fatalf("seed %d: a second Result differs", seed)
	}
}

func stepsOf(gs []analysis.FunnelGroup) [][]analysis.FunnelStepResult {
	var out [][]analysis.FunnelStepResult
	for _, g := range gs {
		out = append(out, g.Steps)
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func dumpUser(evs []testutil.Ev) string {
	s := ""
	for i, e := range evs {
		s += fmt.Sprintf("%d %s %d %s\n", i, e.User, e.Time, e.Name)
	}
	return s
}

// randomRetentionQuery draws a retention query (of the default type,
// windows and criterion) for diff case d.
func randomRetentionQuery(t *testing.T, d *diffCase) testutil.RetentionQuery {
	from, to := d.rangeIn()
	return testutil.RetentionQuery{
		Start:     diffMatchers[d.r.IntN(len(diffMatchers))],
		Return:    diffMatchers[d.r.IntN(len(diffMatchers))],
		Interval:  timebucket.Interval(1 + d.r.IntN(3)),
		WeekStart: timebucket.WeekStart(d.r.IntN(2)),
		Periods:   1 + d.r.IntN(8),
		From:      from, To: to,
		Common: testutil.Common{Loc: d.loc(t)},
	}
}

func TestDiffRetention(t *testing.T) {
	nonEmpty := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		base := randomRetentionQuery(t, d)
		for combo := range 8 {
			q := base
			q.Type = analysis.RetentionType(combo & 1)
			q.Windows = analysis.RetentionWindows(combo >> 1 & 1)
			q.Criterion = analysis.RetentionCriterion(combo >> 2 & 1)
			ext := q.Periods - 1 + d.r.IntN(3)
			got := runRetention(t, d.evs, q, ext, d.plan, feeder{})
			want := testutil.NaiveRetention(testutil.Data{Events: d.evs}, q)[0].Cohorts
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: retention %v/%v/%v %+v\nkernel %+v\nnaive  %+v", seed, q.Type, q.Windows, q.Criterion, q, got, want)
			}
			for _, fd := range chunkFeeders(seed) {
				if c := runRetention(t, d.evs, q, ext, fd.plan(d.plan), fd); !reflect.DeepEqual(c, got) {
					t.Fatalf("seed %d: retention %v/%v/%v fed chunks of about %d events\nchunked %+v\nwhole   %+v", seed, q.Type, q.Windows, q.Criterion, fd.maxLen, c, got)
				}
			}
			for _, c := range got {
				if len(c.Retained) > 1 && c.Retained[1] > 0 {
					nonEmpty++
					break
				}
			}
			diffRetentionBreakdown(t, d, q, seed)
		}
	}
	if nonEmpty < diffSeeds {
		t.Errorf("only %d of %d runs retained anyone at period 1", nonEmpty, 8*diffSeeds)
	}
}

// diffRetentionBreakdown checks the retention table per breakdown value
// (the start event's property or the user's) and the users of a random
// cell against the naive reference.
func diffRetentionBreakdown(t *testing.T, d *diffCase, q testutil.RetentionQuery, seed int64) {
	q.Breakdown = d.breakdown()
	if q.Breakdown == nil {
		q.Breakdown = &testutil.Breakdown{Prop: "tier", User: true}
	}
	spec := retentionSpec(q, q.Periods)
	nc := len(timebucket.Bounds(q.From, q.To, q.Interval, q.Loc, q.WeekStart)) - 1
	spec.List = &analysis.RetentionList{Cohort: d.r.IntN(nc), Period: d.r.IntN(q.Periods), Keep: 1000}
	tspec, src := trailSpec(q.Breakdown, []string{q.Start, q.Return})
	spec.Breakdown = src
	trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
	run := func(plan *shardPlan, fd feeder) *analysis.Retention {
		return accumulate(t, trails, plan, fd, func() (*analysis.Retention, error) { return analysis.NewRetention(spec) })
	}
	acc := run(d.plan, feeder{})
	res := acc.Result(nil)
	allKeys := func(analysis.Key) analysis.Key { return analysis.Key{} }
	for _, fd := range chunkFeeders(seed) {
		c := run(fd.plan(d.plan), fd)
		if !sameRetention(c.Result(nil), res) || !sameRetention(c.Result(allKeys), acc.Result(allKeys)) {
			t.Fatalf("seed %d: retention %+v with breakdown and list %+v fed chunks of about %d events\nchunked %+v\nwhole   %+v", seed, q, spec.List, fd.maxLen, c.Result(nil), res)
		}
	}
	want := testutil.NaiveRetention(d.data, q)
	entries := testutil.NaiveRetentionEntries(d.data, q)
	if len(res.Groups) != len(want) {
		t.Fatalf("seed %d: %d kernel groups, %d naive", seed, len(res.Groups), len(want))
	}
	// Without the list (first_time with criterion on then takes
	// addFirstOn): the same tables.
	list := spec.List
	spec.List = nil
	noList := run(d.plan, feeder{}).Result(nil)
	spec.List = list
	for i := range noList.Groups {
		noList.Groups[i].List = res.Groups[i].List
	}
	if !sameRetention(noList, res) {
		t.Fatalf("seed %d: retention %+v with breakdown, without a list\n%+v\nwith one\n%+v", seed, q, noList, res)
	}
	for _, g := range res.Groups {
		l := keyLabel(g.Key, q.Breakdown, dicts)
		i := slices.IndexFunc(want, func(w testutil.RetentionGroup) bool { return w.Value == l })
		if i < 0 || !reflect.DeepEqual(g.Cohorts, want[i].Cohorts) {
			t.Fatalf("seed %d: retention group %q\nkernel %+v\nnaive  %+v", seed, l, g.Cohorts, want)
		}
		users := testutil.RetentionUsers(entries, spec.List.Cohort, spec.List.Period, &l, nil)
		if g.List.Count() != int64(len(users)) || !slices.Equal(g.List.Page(0, 1000), orEmpty(users)) {
			t.Fatalf("seed %d: group %q cell %+v: kernel %v naive %v", seed, l, spec.List, g.List.Page(0, 1000), users)
		}
	}
	all := acc.Result(allKeys)
	users := testutil.RetentionUsers(entries, spec.List.Cohort, spec.List.Period, nil, nil)
	var got []string
	var n int64
	if len(all.Groups) > 0 {
		got, n = all.Groups[0].List.Page(0, 1000), all.Groups[0].List.Count()
	}
	if n != int64(len(users)) || !slices.Equal(orEmpty(got), orEmpty(users)) {
		t.Fatalf("seed %d: overall cell %+v: kernel %v naive %v", seed, spec.List, got, users)
	}
}

// sameRetention reports whether two retention results have the same
// groups, tables and listed users.
func sameRetention(a, b analysis.RetentionResult) bool {
	if len(a.Groups) != len(b.Groups) {
		return false
	}
	for i, ga := range a.Groups {
		gb := b.Groups[i]
		if ga.Key != gb.Key || !reflect.DeepEqual(ga.Cohorts, gb.Cohorts) || (ga.List == nil) != (gb.List == nil) {
			return false
		}
		if ga.List != nil && (ga.List.Count() != gb.List.Count() || !slices.Equal(ga.List.Page(0, 1000), gb.List.Page(0, 1000))) {
			return false
		}
	}
	return true
}

// TestDiffCohort: the cohort condition evaluator against the naive
// CohortMembers on random condition trees (performed with count
// operators and windows, not_performed, first_performed, user_property,
// and/or/not).
func TestDiffCohort(t *testing.T) {
	members := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		var matchers []string
		var flags []testutil.Filter
		var gen func(depth int) (analysis.CohortCond, testutil.Cond)
		gen = func(depth int) (analysis.CohortCond, testutil.Cond) {
			op := d.r.IntN(7)
			if depth >= 3 {
				op = 3 + d.r.IntN(4)
			}
			switch op {
			case 0, 1:
				n := 1 + d.r.IntN(3)
				kc := analysis.CohortCond{Op: analysis.CohortAnd}
				nc := testutil.Cond{Op: "and"}
				if op == 1 {
					kc.Op, nc.Op = analysis.CohortOr, "or"
				}
				for range n {
					k, c := gen(depth + 1)
					kc.Kids, nc.Kids = append(kc.Kids, k), append(nc.Kids, c)
				}
				return kc, nc
			case 2:
				k, c := gen(depth + 1)
				return analysis.CohortCond{Op: analysis.CohortNot, Kids: []analysis.CohortCond{k}}, testutil.Cond{Op: "not", Kids: []testutil.Cond{c}}
			case 3:
				f := testutil.Filter{Prop: "tier", Op: "eq", Values: []event.Value{event.String("gold")}, User: true}
				if d.r.IntN(2) == 0 {
					f = testutil.Filter{Prop: "age", Op: []string{"gt", "lte", "is_set", "is_not_set"}[d.r.IntN(4)], Values: []event.Value{event.Int(24)}, User: true}
				}
				flags = append(flags, f)
				return analysis.CohortCond{Op: analysis.CohortUserFlag, Flag: len(flags) - 1}, testutil.Cond{Op: "user_property", Filter: f}
			}
			m := diffMatchers[d.r.IntN(len(diffMatchers))]
			matchers = append(matchers, m)
			from, to := d.rangeIn()
			if op == 4 {
				return analysis.CohortCond{Op: analysis.CohortFirstPerformed, Bit: len(matchers) - 1, From: from, To: to},
					testutil.Cond{Op: "first_performed", Matcher: testutil.Matcher{Event: m}, From: from, To: to}
			}
			ops := []string{"gte", "lte", "eq"}
			ci := d.r.IntN(3)
			n := int64(d.r.IntN(4))
			return analysis.CohortCond{Op: analysis.CohortPerformed, Bit: len(matchers) - 1, From: from, To: to, Count: analysis.CountOp(ci), N: n},
				testutil.Cond{Op: "performed", Matcher: testutil.Matcher{Event: m}, CountOp: ops[ci], N: n, From: from, To: to}
		}
		kc, nc := gen(0)
		if err := kc.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(matchers) > 64 {
			continue
		}
		want := testutil.CohortMembers(d.data, nc)
		trails, _ := testutil.BuildTrailsWith(d.data, testutil.TrailSpec{Matchers: toMatchers(matchers)})
		byUser := map[string]trail.Trail{}
		for _, ut := range trails {
			byUser[ut.User] = ut.Trail
		}
		current := testutil.CurrentUsers(d.data.Users)
		universe := map[string]bool{}
		for _, e := range d.data.Events {
			universe[e.User] = true
		}
		for _, w := range d.data.Users {
			universe[w.User] = true
		}
		users := slices.Sorted(maps.Keys(universe))
		// One state for every user, whole trails or chunks of every
		// length.
		st := analysis.NewCohortState(&kc)
		// inCohort feeds every user's trail to add through fd and returns
		// the users st then says are in the cohort.
		inCohort := func(fd feeder, add func(*trail.Trail)) map[string]bool {
			got := map[string]bool{}
			for _, u := range users {
				var fl uint64
				for i, f := range flags {
					if f.Holds(current[u][f.Prop]) {
						fl |= 1 << i
					}
				}
				tr := byUser[u]
				fd.add(&tr, add)
				if st.In(fl) {
					got[u] = true
				}
			}
			return got
		}
		for _, fd := range append([]feeder{{}}, chunkFeeders(seed)...) {
			got := inCohort(fd, st.Add)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: cohort %+v fed chunks of about %d events\nkernel %v\nnaive  %v", seed, nc, fd.maxLen, got, want)
			}
			if fd.maxLen == 0 {
				members += len(got)
			}
		}
		// The state moves between chunks: encoded and decoded after each.
		got := inCohort(chunked(seed, 3), func(c *trail.Trail) {
			st.Add(c)
			enc, err := st.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if st, err = analysis.DecodeCohortState(&kc, enc); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: cohort %+v with its state moved between chunks\nkernel %v\nnaive  %v", seed, nc, got, want)
		}
	}
	if members < diffSeeds {
		t.Errorf("only %d members over %d seeds", members, diffSeeds)
	}
}

func toMatchers(names []string) []testutil.Matcher {
	out := make([]testutil.Matcher, len(names))
	for i, n := range names {
		out[i] = testutil.Matcher{Event: n}
	}
	return out
}
