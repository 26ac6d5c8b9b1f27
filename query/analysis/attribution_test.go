package analysis_test

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// attrCase is an attribution query turned into kernel input: bit 0 the
// conversion, then the touchpoints, then the subsequent matcher; columns
// channel, value, subsequent value, then the breakdown's.
type attrCase struct {
	trails []testutil.UserTrail
	spec   analysis.AttributionSpec
	dicts  testutil.Dicts
	q      testutil.AttributionQuery
}

func newAttrCase(d testutil.Data, q testutil.AttributionQuery) *attrCase {
	ms := []testutil.Matcher{q.Conversion}
	spec := analysis.AttributionSpec{From: q.From, To: q.To, Conversion: 0, Model: q.Model, HalfLife: q.HalfLife, First: q.First,
		Channel: 0, Value: analysis.ValueCol{Col: -1}, Subsequent: -1, SubsequentValue: analysis.ValueCol{Col: -1}, SubsequentWindow: q.SubWindow}
	for i, m := range q.Touchpoints {
		spec.Touchpoints = append(spec.Touchpoints, analysis.Touchpoint{Bit: len(ms), Lookback: q.Lookbacks[i]})
		ms = append(ms, m)
	}
	if q.Subsequent != nil {
		spec.Subsequent = len(ms)
		ms = append(ms, *q.Subsequent)
	}
	cols := []string{q.Channel}
	valueCol := func(p string) analysis.ValueCol {
		if p == "" {
			return analysis.ValueCol{Col: -1}
		}
		cols = append(cols, p)
		return analysis.ValueCol{Col: len(cols) - 1, Float: testutil.EventProps[p] == event.TypeFloat}
	}
	spec.Value = valueCol(q.Value)
	spec.SubsequentValue = valueCol(q.SubValue)
	var names []string
	for _, m := range ms {
		names = append(names, m.Event)
	}
	ts, src := trailSpec(q.Breakdown, names, cols...)
	for i := range ts.Matchers {
		ts.Matchers[i].Where = ms[i].Where
	}
	spec.Breakdown = src
	if q.Interval != 0 {
		loc := q.Loc
		if loc == nil {
			loc = time.UTC
		}
		spec.Bounds = timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)
	}
	trails, dicts := testutil.BuildTrailsWith(d, ts)
	return &attrCase{trails: trails, spec: spec, dicts: dicts, q: q}
}

// channel renders a channel key.
func (c *attrCase) channel(k analysis.Key) string {
	if k == analysis.Unattributed {
		return "(unattributed)"
	}
	return keyLabel(k, &testutil.Breakdown{Prop: c.q.Channel}, c.dicts)
}

// attrRows is an attribution result in comparable form, keyed
// "value|channel".
type attrRows struct {
	Rows   map[string]testutil.AttributionCell
	Bucket map[string][]testutil.AttributionCell
	Tot    testutil.AttributionTotals
	N      int64
	IDs    []string
}

func (c *attrCase) result(r analysis.AttributionResult, label func(analysis.Key) string) attrRows {
	out := attrRows{Rows: map[string]testutil.AttributionCell{}, Bucket: map[string][]testutil.AttributionCell{},
		Tot: testutil.AttributionTotals{Conversions: r.Conversions, Users: r.Users, Value: r.Value, SubEvents: r.SubEvents, SubValue: r.SubValue}}
	cell := func(x analysis.AttributionCell) testutil.AttributionCell {
		return testutil.AttributionCell{Conversions: x.Conversions, Value: x.Value, SubEvents: x.SubEvents, SubValue: x.SubValue,
			Users: make([]string, x.Users)} // users compared by number
	}
	for _, row := range r.Rows {
		k := label(row.Key) + "|" + c.channel(row.Channel)
		out.Rows[k] = cell(row.Total)
		for _, b := range row.Buckets {
			out.Bucket[k] = append(out.Bucket[k], cell(b))
		}
	}
	if r.List != nil {
		out.N, out.IDs = r.List.Count(), r.List.Page(0, analysis.MaxListKeep)
	}
	return out
}

func naiveAttrRows(rows []testutil.AttributionRow, tot testutil.AttributionTotals) attrRows {
	out := attrRows{Rows: map[string]testutil.AttributionCell{}, Bucket: map[string][]testutil.AttributionCell{}, Tot: tot}
	strip := func(x testutil.AttributionCell) testutil.AttributionCell {
		x.Users = make([]string, len(x.Users))
		return x
	}
	for _, r := range rows {
		k := r.Value + "|" + r.Channel
		out.Rows[k] = strip(r.Total)
		for _, b := range r.Buckets {
			out.Bucket[k] = append(out.Bucket[k], strip(b))
		}
	}
	return out
}

// closeAttr reports whether a and b agree to 1e-9 relative (floats) and
// exactly otherwise: the kernel sums each user's shares in float64 before
// the exact sum over users, the naive reference sums every share exactly,
// so sums may differ in the last bits.
func closeAttr(a, b attrRows) bool {
	near := func(x, y float64) bool { return x == y || math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)) }
	cellNear := func(x, y testutil.AttributionCell) bool {
		return len(x.Users) == len(y.Users) && near(x.Conversions, y.Conversions) && near(x.Value, y.Value) &&
			near(x.SubEvents, y.SubEvents) && near(x.SubValue, y.SubValue)
	}
	if len(a.Rows) != len(b.Rows) || a.Tot != b.Tot || a.N != b.N || !slices.Equal(a.IDs, b.IDs) {
		return false
	}
	for k, x := range a.Rows {
		y, ok := b.Rows[k]
		if !ok || !cellNear(x, y) || len(a.Bucket[k]) != len(b.Bucket[k]) {
			return false
		}
		for i := range a.Bucket[k] {
			if !cellNear(a.Bucket[k][i], b.Bucket[k][i]) {
				return false
			}
		}
	}
	return true
}

func runAttr(t *testing.T, evs []testutil.Ev, q testutil.AttributionQuery) attrRows {
	t.Helper()
	c := newAttrCase(testutil.Data{Events: evs}, q)
	acc, err := analysis.NewAttribution(c.spec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.trails {
		acc.Add(&c.trails[i].Trail)
	}
	label := func(analysis.Key) string { return "" }
	got := c.result(acc.Result(), label)
	if want := naiveAttrRows(testutil.NaiveAttribution(testutil.Data{Events: evs}, q)); !closeAttr(got, want) {
		t.Fatalf("kernel %+v\nnaive  %+v", got, want)
	}
	return got
}

// shares renders a result's conversions per channel ("channel=share").
func shares(r attrRows) []string {
	var out []string
	for k, c := range r.Rows {
		out = append(out, fmt.Sprintf("%s=%.6g", k[1:], c.Conversions))
	}
	sort.Strings(out)
	return out
}

// TestAttributionSpec pins docs/analytics.md §10's words.
func TestAttributionSpec(t *testing.T) {
	const h = int64(3600e6)
	t0 := at("2021-05-10T12:00:00Z")
	ev := func(ts int64, name, ch string) testutil.Ev {
		e := testutil.Ev{User: "u1", Time: ts, Name: name}
		if ch != "" {
			e.Props = map[string]event.Value{"s": event.String(ch)}
		}
		return e
	}
	q := testutil.AttributionQuery{Conversion: testutil.Matcher{Event: "c"},
		Touchpoints: []testutil.Matcher{{Event: "a"}, {Event: "b"}}, Lookbacks: []int64{7 * 24 * h, 24 * h},
		Channel: "s", From: at("2021-05-01T00:00:00Z"), To: at("2021-06-01T00:00:00Z"), HalfLife: 24 * h}
	check := func(name string, evs []testutil.Ev, q testutil.AttributionQuery, want ...string) {
		t.Helper()
		if got := shares(runAttr(t, evs, q)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	// Lookback boundaries: exactly 7 days before counts, 1 µs more not.
	check("lookback boundary", []testutil.Ev{ev(t0-7*24*h, "a", "x"), ev(t0, "c", "")}, q, "x=1")
	check("lookback past", []testutil.Ev{ev(t0-7*24*h-1, "a", "x"), ev(t0, "c", "")}, q, "(unattributed)=1")
	// Priority: a click (a) beats a later impression (b); an impression
	// wins only when no click is eligible.
	check("priority", []testutil.Ev{ev(t0-3*h, "a", "x"), ev(t0-h, "b", "y"), ev(t0, "c", "")}, q, "x=1")
	check("priority fallback", []testutil.Ev{ev(t0-8*24*h, "a", "x"), ev(t0-h, "b", "y"), ev(t0, "c", "")}, q, "y=1")
	// An event matching several touchpoint matchers belongs to the first,
	// whose lookback alone decides.
	qw := q
	qw.Touchpoints = []testutil.Matcher{{Event: "b", Where: []testutil.Filter{{Prop: "s", Op: "eq", Values: []event.Value{event.String("x")}}}}, {Event: "b"}}
	qw.Lookbacks = []int64{h, 7 * 24 * h}
	check("first matcher decides", []testutil.Ev{ev(t0-2*h, "b", "x"), ev(t0, "c", "")}, qw, "(unattributed)=1")
	check("second matcher", []testutil.Ev{ev(t0-2*h, "b", "z"), ev(t0, "c", "")}, qw, "z=1")
	// A touchpoint at the conversion's instant counts, whatever its
	// arrival order; a later one does not; a conversion event is never a
	// touchpoint.
	check("same instant", []testutil.Ev{ev(t0, "c", ""), ev(t0, "a", "x")}, q, "x=1")
	check("after", []testutil.Ev{ev(t0, "c", ""), ev(t0+1, "a", "x")}, q, "(unattributed)=1")
	qc := q
	qc.Conversion = testutil.Matcher{Event: "a|c"}
	check("conversion is no touchpoint", []testutil.Ev{ev(t0-h, "a", "x"), ev(t0, "c", "")}, qc, "(unattributed)=2")
	// Every model over a (x, 2 days before), b (y, 1 day), a (z, 0 days),
	// plus a b (y) outside b's lookback.
	three := []testutil.Ev{ev(t0-2*24*h-h, "b", "y"), ev(t0-2*24*h, "a", "x"), ev(t0-24*h, "b", "y"), ev(t0, "a", "z"), ev(t0, "c", "")}
	for _, m := range []struct {
		model analysis.AttributionModel
		want  []string
	}{
		{analysis.LastTouch, []string{"z=1"}},
		{analysis.FirstTouch, []string{"x=1"}},
		{analysis.Linear, []string{"x=0.333333", "y=0.333333", "z=0.333333"}},
		{analysis.PositionBased, []string{"x=0.4", "y=0.2", "z=0.4"}},
		{analysis.TimeDecay, []string{"x=0.142857", "y=0.285714", "z=0.571429"}}, // weights 1/4, 1/2, 1
	} {
		qm := q
		qm.Model = m.model
		check(m.model.String(), three, qm, m.want...)
	}
	// position_based with two touchpoints: ½ each; time_decay with equal
	// times: equal shares; shares of one channel add up.
	qm := q
	qm.Model = analysis.PositionBased
	check("position 2", []testutil.Ev{ev(t0-h, "a", "x"), ev(t0, "a", "y"), ev(t0, "c", "")}, qm, "x=0.5", "y=0.5")
	qm.Model = analysis.Linear
	check("one channel", []testutil.Ev{ev(t0-h, "a", "x"), ev(t0-h, "a", "x"), ev(t0, "a", "y"), ev(t0, "c", "")}, qm, "x=0.666667", "y=0.333333")
	// first: only the first conversion of all data, counted if in range.
	qf := q
	qf.First = true
	check("first", []testutil.Ev{ev(t0-h, "a", "x"), ev(t0, "c", ""), ev(t0+h, "a", "y"), ev(t0+2*h, "c", "")}, qf, "x=1")
	check("first before range", []testutil.Ev{ev(q.From-h, "c", ""), ev(t0, "a", "y"), ev(t0+h, "c", "")}, qf)
	// Subsequent events inherit the shares of the latest conversion
	// within the window (one before the range too), else unattributed;
	// value = share × value.
	qs := q
	qs.Model = analysis.Linear
	qs.Subsequent, qs.SubWindow, qs.SubValue = &testutil.Matcher{Event: "d"}, 10*24*h, "n"
	purchase := func(ts int64, n int64) testutil.Ev {
		return testutil.Ev{User: "u1", Time: ts, Name: "d", Props: map[string]event.Value{"n": event.Int(n)}}
	}
	r := runAttr(t, []testutil.Ev{
		ev(q.From-2*h, "a", "x"), ev(q.From-2*h, "a", "y"), ev(q.From-h, "c", ""), // a conversion before the range
		purchase(q.From+h, 10),         // inherits x ½, y ½
		purchase(q.From+10*24*h-h, 20), // 10 days after the conversion: the window's boundary
		purchase(q.From+10*24*h, 100),  // 1 h later: unattributed
	}, qs)
	if x, y, u := r.Rows["|x"], r.Rows["|y"], r.Rows["|(unattributed)"]; x.SubEvents != 1 || x.SubValue != 15 || y.SubValue != 15 || u.SubEvents != 1 || u.SubValue != 100 || x.Conversions != 0 {
		t.Errorf("subsequent: %+v", r.Rows)
	}
	if r.Tot.SubEvents != 3 || r.Tot.SubValue != 130 || r.Tot.Conversions != 0 {
		t.Errorf("subsequent totals: %+v", r.Tot)
	}
	// A subsequent event at the conversion's instant inherits it.
	r = runAttr(t, []testutil.Ev{ev(t0-h, "a", "x"), purchase(t0, 7), ev(t0, "c", "")}, qs)
	if x := r.Rows["|x"]; x.SubEvents != 1 || x.Conversions != 1 {
		t.Errorf("subsequent at the conversion's instant: %+v", r.Rows)
	}
}

// randomAttrQuery draws an attribution query for diff case d: every
// model, first or all conversions, 1-3 touchpoint matchers with random
// lookbacks and filters, values, subsequent events, buckets and a
// breakdown.
func randomAttrQuery(t *testing.T, d *diffCase) testutil.AttributionQuery {
	lookbacks := []int64{0, 1, 30 * 60e6, 3600e6, 6 * 3600e6, 86400e6, 3 * 86400e6}
	from, to := d.rangeIn()
	loc := d.loc(t)
	pick := func() string { return diffMatchers[d.r.IntN(len(diffMatchers))] }
	q := testutil.AttributionQuery{Conversion: testutil.Matcher{Event: pick()}, Channel: []string{"s", "n", "b"}[d.r.IntN(3)],
		Model: analysis.AttributionModel(d.r.IntN(5)), HalfLife: lookbacks[1+d.r.IntN(len(lookbacks)-1)], First: d.r.IntN(3) == 0,
		From: from, To: to}
	q.Loc = loc
	for range 1 + d.r.IntN(3) {
		m := testutil.Matcher{Event: pick()}
		if d.r.IntN(3) == 0 {
			m.Where = []testutil.Filter{{Prop: "b", Op: "eq", Values: []event.Value{event.Bool(d.r.IntN(2) == 0)}}}
		}
		q.Touchpoints = append(q.Touchpoints, m)
		q.Lookbacks = append(q.Lookbacks, lookbacks[d.r.IntN(len(lookbacks))])
	}
	if d.r.IntN(2) == 0 {
		q.Value = []string{"n", "f"}[d.r.IntN(2)]
	}
	if d.r.IntN(2) == 0 {
		q.Subsequent = &testutil.Matcher{Event: pick()}
		q.SubWindow = lookbacks[d.r.IntN(len(lookbacks))]
		if d.r.IntN(2) == 0 {
			q.SubValue = []string{"n", "f"}[d.r.IntN(2)]
		}
	}
	if d.r.IntN(2) == 0 {
		q.Interval, q.WeekStart = timebucket.Interval(1+d.r.IntN(4)), timebucket.WeekStart(d.r.IntN(2))
	}
	q.Breakdown = d.breakdown()
	return q
}

// TestDiffAttribution compares the kernel with NaiveAttribution on random
// data: every model, first or all conversions, 1-3 touchpoint matchers
// with random lookbacks and filters, values, subsequent events, buckets,
// breakdowns (and a second pass grouping values into "(other)"), lists;
// trails fed whole and in chunks of every size over 1-3 accumulators.
// It also checks the totals: Σ over channels of conversions = the number
// of conversions (1e-9 relative), and that one conversion's shares sum to
// 1.
func TestDiffAttribution(t *testing.T) {
	converted := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		q := randomAttrQuery(t, d)
		c := newAttrCase(d.data, q)
		label := func(k analysis.Key) string { return keyLabel(k, q.Breakdown, c.dicts) }
		rows, tot := testutil.NaiveAttribution(d.data, q)
		want := naiveAttrRows(rows, tot)
		if len(rows) > 0 {
			row := rows[d.r.IntN(len(rows))]
			c.spec.List = &analysis.AttributionList{Channel: analysis.Unattributed, Keep: analysis.MaxListKeep}
			if row.Channel != "(unattributed)" {
				c.spec.List.Channel = keyOf(c.trails, analysis.KeySource{From: analysis.KeyEvent, Index: 0}, c.dicts, &testutil.Breakdown{Prop: q.Channel}, row.Channel)
			}
			if q.Breakdown != nil {
				c.spec.List.Key = keyOf(c.trails, c.spec.Breakdown, c.dicts, q.Breakdown, row.Value)
			}
			want.N, want.IDs = int64(len(row.Total.Users)), orEmpty(row.Total.Users)
		}
		acc := sameForEveryChunking(t, c.trails, d.plan, d.r, func() (*analysis.Attribution, error) { return analysis.NewAttribution(c.spec) },
			func(a *analysis.Attribution) attrRows { return c.result(a.Result(), label) })
		got := c.result(acc.Result(), label)
		if !closeAttr(got, want) {
			t.Fatalf("seed %d: attribution %+v\nkernel %+v\nnaive  %+v", seed, q, got, want)
		}
		// Σ over channels of conversions = the conversions counted.
		var sum float64
		for _, r := range got.Rows {
			sum += r.Conversions
		}
		if n := float64(got.Tot.Conversions); math.Abs(sum-n) > 1e-9*n {
			t.Fatalf("seed %d: Σ conversions over channels %v, want %v", seed, sum, n)
		}
		converted += int(got.Tot.Conversions)
		// One conversion's shares sum to 1: each user alone, first
		// conversion only.
		one := c.spec
		one.First, one.List, one.Subsequent = true, nil, -1
		for i := range c.trails {
			a, err := analysis.NewAttribution(one)
			if err != nil {
				t.Fatal(err)
			}
			a.Add(&c.trails[i].Trail)
			r := a.Result()
			var s float64
			for _, row := range r.Rows {
				s += row.Total.Conversions
			}
			if math.Abs(s-float64(r.Conversions)) > 1e-12 {
				t.Fatalf("seed %d user %s: shares of one conversion sum to %v", seed, c.trails[i].User, s)
			}
		}
		if q.Breakdown == nil {
			continue
		}
		// Second pass: the values not kept merge into "(other)".
		var labels []string
		for k := range got.Rows {
			labels = append(labels, k[:slices.Index([]byte(k), '|')])
		}
		kept, group, glabel := d.regroup(labels, label, c.trails, c.spec.Breakdown)
		gspec := c.spec
		gspec.List, gspec.Group = nil, group
		grouped := c.result(accumulate(t, c.trails, d.plan, feeder{r: d.r, maxLen: chunkLens[d.r.IntN(len(chunkLens))]}, func() (*analysis.Attribution, error) {
			return analysis.NewAttribution(gspec)
		}).Result(), glabel)
		rq := q
		rq.Breakdown = &testutil.Breakdown{Prop: "_g", User: q.Breakdown.User}
		data := relabel(d.data, q.Breakdown, kept)
		if q.Breakdown.User {
			data = relabelUsers(d.data, q.Breakdown, kept)
		}
		if w := naiveAttrRows(testutil.NaiveAttribution(data, rq)); !closeAttr(grouped, w) {
			t.Fatalf("seed %d: grouped: kernel %+v naive %+v", seed, grouped, w)
		}
	}
	if converted < diffSeeds {
		t.Errorf("only %d conversions over %d seeds", converted, diffSeeds)
	}
}

// TestAttributionAllocs checks that Add does not allocate once rows and
// sums exist.
func TestAttributionAllocs(t *testing.T) {
	d := newDiffCase(11)
	q := testutil.AttributionQuery{Conversion: testutil.Matcher{Event: "c"}, Touchpoints: []testutil.Matcher{{Event: "a"}, {Event: "b"}},
		Lookbacks: []int64{86400e6, 3600e6}, Channel: "s", Model: analysis.TimeDecay, HalfLife: 3600e6, Value: "f",
		Subsequent: &testutil.Matcher{Event: "d"}, SubWindow: 86400e6, SubValue: "n", Interval: timebucket.Day,
		From: at("2021-03-26T00:00:00Z"), To: at("2021-03-30T00:00:00Z")}
	c := newAttrCase(d.data, q)
	acc, err := analysis.NewAttribution(c.spec)
	if err != nil {
		t.Fatal(err)
	}
	noAllocs(t, len(c.trails), func(i int) { acc.Add(&c.trails[i].Trail) })
	before := acc.Result()
	acc.Add(&trail.Trail{Cols: make([]trail.Column, 3)}) // a user without events credits no one
	if after := acc.Result(); !reflect.DeepEqual(before, after) {
		t.Fatal("an empty trail changed the result")
	}
}
