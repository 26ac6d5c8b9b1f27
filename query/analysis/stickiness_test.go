package analysis_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// stickRows is a stickiness result in comparable form: per series, per
// breakdown label, the exact counts; and the listed users.
type stickRows struct {
	Rows  []map[string][]int64
	Users int64
	IDs   []string
}

func stickResult(r analysis.StickinessResult, ns int, label func(analysis.Key) string) stickRows {
	out := stickRows{Rows: make([]map[string][]int64, ns)}
	for i := range out.Rows {
		out.Rows[i] = map[string][]int64{}
	}
	for _, row := range r.Rows {
		var sum int64
		for _, c := range row.Counts {
			sum += c
		}
		if sum != row.Users {
			panic("stickiness row users is not the sum of its counts")
		}
		out.Rows[row.Series][label(row.Key)] = row.Counts
	}
	if r.List != nil {
		out.Users, out.IDs = r.List.Count(), r.List.Page(0, analysis.MaxListKeep)
	}
	return out
}

// stickinessOf runs a stickiness over hand-made events: one series per
// matcher, in zone tz, and returns series 0's counts.
func stickinessOf(t *testing.T, evs []testutil.Ev, matchers []string, from, to int64, iv timebucket.Interval, tz string, ws timebucket.WeekStart, minEvents int) []int64 {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	spec := analysis.StickinessSpec{Bounds: timebucket.Bounds(from, to, iv, loc, ws), From: from, To: to, MinEvents: minEvents}
	for i := range matchers {
		spec.Series = append(spec.Series, i)
	}
	acc, err := analysis.NewStickiness(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, ut := range testutil.BuildTrails(evs, matchers) {
		acc.Add(&ut.Trail)
	}
	res := acc.Result()
	q := testutil.StickinessQuery{Events: matchers, Interval: iv, WeekStart: ws, From: from, To: to, MinEvents: minEvents}
	q.Loc = loc
	want := testutil.NaiveStickiness(testutil.Data{Events: evs}, q)
	if !slices.Equal(res.Rows[0].Counts, want[0][0].Counts) {
		t.Fatalf("kernel %v, naive %v", res.Rows[0].Counts, want[0][0].Counts)
	}
	return res.Rows[0].Counts
}

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro()
}

// TestStickinessSpec pins docs/analytics.md §13's words: calendar buckets in tz (a
// 23-hour day at a DST change), weeks starting Sunday, a range starting
// in the middle of a bucket (its events before From do not count, the
// bucket is still one of the N), min_events per bucket.
func TestStickinessSpec(t *testing.T) {
	ev := func(u, ts, name string) testutil.Ev { return testutil.Ev{User: u, Time: at(ts), Name: name} }
	// Europe/Berlin springs forward on 2021-03-28: the local day is 23 h.
	// u1's events are at local 23:30 on the 27th and 00:30 on the 28th
	// (one UTC day, two local days); u2's at local 00:30 and 23:30 on the
	// 28th (the 23-hour day: one local day, two UTC days).
	dst := []testutil.Ev{
		ev("u1", "2021-03-27T22:30:00Z", "a"), ev("u1", "2021-03-27T23:30:00Z", "a"),
		ev("u2", "2021-03-27T23:30:00Z", "a"), ev("u2", "2021-03-28T21:30:00Z", "a"),
	}
	from, to := at("2021-03-26T23:00:00Z"), at("2021-03-29T22:00:00Z") // Berlin 03-27 .. 03-30
	if got := stickinessOf(t, dst, []string{"a"}, from, to, timebucket.Day, "Europe/Berlin", timebucket.Monday, 1); !slices.Equal(got, []int64{1, 1, 0}) {
		t.Errorf("Berlin days across DST: %v, want [1 1 0] (u2 one day, u1 two)", got)
	}
	if got := stickinessOf(t, dst, []string{"a"}, at("2021-03-27T00:00:00Z"), at("2021-03-30T00:00:00Z"), timebucket.Day, "UTC", timebucket.Monday, 1); !slices.Equal(got, []int64{1, 1, 0}) {
		t.Errorf("UTC days: %v, want [1 1 0] (u1 one day, u2 two)", got)
	}
	// 2021-05-02 is a Sunday, 05-03 a Monday.
	week := []testutil.Ev{ev("u1", "2021-05-02T10:00:00Z", "a"), ev("u1", "2021-05-03T10:00:00Z", "a")}
	wf, wt := at("2021-04-25T00:00:00Z"), at("2021-05-16T00:00:00Z")
	if got := stickinessOf(t, week, []string{"a"}, wf, wt, timebucket.Week, "UTC", timebucket.Sunday, 1); !slices.Equal(got, []int64{1, 0, 0}) {
		t.Errorf("weeks from Sunday: %v, want [1 0 0]: Sunday and Monday are one week", got)
	}
	if got := stickinessOf(t, week, []string{"a"}, wf, wt, timebucket.Week, "UTC", timebucket.Monday, 1); !slices.Equal(got, []int64{0, 1, 0, 0}) {
		t.Errorf("weeks from Monday: %v, want [0 1 0 0]: two weeks of the four the range touches", got)
	}
	// A range from 12:00: u1's 10:00 event is outside it; u2 has events
	// on both days. N = 3 buckets (the 1st is touched from 12:00).
	mid := []testutil.Ev{
		ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-02T10:00:00Z", "a"),
		ev("u2", "2021-05-01T13:00:00Z", "a"), ev("u2", "2021-05-02T10:00:00Z", "a"),
	}
	if got := stickinessOf(t, mid, []string{"a"}, at("2021-05-01T12:00:00Z"), at("2021-05-03T12:00:00Z"), timebucket.Day, "UTC", timebucket.Monday, 1); !slices.Equal(got, []int64{1, 1, 0}) {
		t.Errorf("range from mid-day: %v, want [1 1 0]", got)
	}
	// min_events 2: u1 has 2 events on the 1st, 1 on the 2nd.
	minEv := []testutil.Ev{ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-01T11:00:00Z", "a"), ev("u1", "2021-05-02T10:00:00Z", "a")}
	if got := stickinessOf(t, minEv, []string{"a"}, at("2021-05-01T00:00:00Z"), at("2021-05-03T00:00:00Z"), timebucket.Day, "UTC", timebucket.Monday, 2); !slices.Equal(got, []int64{1, 0}) {
		t.Errorf("min events 2: %v, want [1 0]", got)
	}
}

// TestDiffStickiness compares the kernel with NaiveStickiness on random
// data: every interval, zone and week start, several series, min_events,
// breakdowns by event and user property, a second pass grouping the values
// not kept into "(other)", and lists; with trails fed whole and in chunks
// of every size, over 1-3 accumulators merged in random order.
func TestDiffStickiness(t *testing.T) {
	nonzero := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		loc := d.loc(t)
		q := testutil.StickinessQuery{Interval: timebucket.Interval(1 + d.r.IntN(4)), WeekStart: timebucket.WeekStart(d.r.IntN(2)),
			From: from, To: to, MinEvents: 1 + d.r.IntN(3)}
		q.Loc = loc
		q.Breakdown = d.breakdown()
		for range 1 + d.r.IntN(3) {
			q.Events = append(q.Events, diffMatchers[d.r.IntN(len(diffMatchers))])
		}
		tspec, src := trailSpec(q.Breakdown, q.Events)
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		label := func(k analysis.Key) string { return keyLabel(k, q.Breakdown, dicts) }
		spec := analysis.StickinessSpec{Bounds: timebucket.Bounds(from, to, q.Interval, loc, q.WeekStart), From: from, To: to,
			MinEvents: q.MinEvents, Breakdown: src}
		for i := range q.Events {
			spec.Series = append(spec.Series, i)
		}
		naive := testutil.NaiveStickiness(d.data, q)
		// A list of a random naive row and count.
		si := d.r.IntN(len(q.Events))
		var listRow *testutil.StickinessRow
		if len(naive[si]) > 0 {
			listRow = &naive[si][d.r.IntN(len(naive[si]))]
			n, atLeast := 1+d.r.IntN(len(spec.Bounds)-1), d.r.IntN(2) == 0
			spec.List = &analysis.StickinessList{Series: si, Intervals: n, AtLeast: atLeast, Keep: analysis.MaxListKeep}
			if q.Breakdown != nil {
				spec.List.Key = keyOf(trails, src, dicts, q.Breakdown, listRow.Value)
			}
		}
		acc := sameForEveryChunking(t, trails, d.plan, d.r, func() (*analysis.Stickiness, error) { return analysis.NewStickiness(spec) },
			func(a *analysis.Stickiness) stickRows { return stickResult(a.Result(), len(q.Events), label) })
		got := stickResult(acc.Result(), len(q.Events), label)
		for s := range q.Events {
			want := map[string][]int64{}
			for _, row := range naive[s] {
				want[row.Value] = row.Counts
				nonzero++
			}
			if !reflect.DeepEqual(got.Rows[s], want) {
				t.Fatalf("seed %d: series %d (%s) %+v min %d breakdown %+v\nkernel %v\nnaive  %v", seed, s, q.Events[s], q.Interval, q.MinEvents, q.Breakdown, got.Rows[s], want)
			}
		}
		if listRow != nil {
			l := spec.List
			want := testutil.StickinessUsers(*listRow, l.Intervals, l.AtLeast)
			if got.Users != int64(len(want)) || !slices.Equal(got.IDs, orEmpty(want)) {
				t.Fatalf("seed %d: list %+v: kernel %d %v naive %v", seed, l, got.Users, got.IDs, want)
			}
		}
		if q.Breakdown == nil {
			continue
		}
		// Second pass: the values not kept merge into "(other)".
		var labels []string
		for l := range got.Rows[0] {
			labels = append(labels, l)
		}
		kept, group, glabel := d.regroup(labels, label, trails, src)
		gspec := spec
		gspec.List, gspec.Group = nil, group
		rq := q
		rq.Breakdown = &testutil.Breakdown{Prop: "_g"}
		want := testutil.NaiveStickiness(relabel(d.data, q.Breakdown, kept), rq)
		grouped := stickResult(accumulate(t, trails, d.plan, feeder{r: d.r, maxLen: chunkLens[d.r.IntN(len(chunkLens))]}, func() (*analysis.Stickiness, error) {
			return analysis.NewStickiness(gspec)
		}).Result(), len(q.Events), glabel)
		for s := range q.Events {
			w := map[string][]int64{}
			for _, row := range want[s] {
				w[row.Value] = row.Counts
			}
			if !reflect.DeepEqual(grouped.Rows[s], w) {
				t.Fatalf("seed %d: grouped series %d: kernel %v naive %v", seed, s, grouped.Rows[s], w)
			}
		}
	}
	if nonzero < diffSeeds {
		t.Errorf("only %d rows over %d seeds", nonzero, diffSeeds)
	}
}

// keyOf returns the kernel key whose label is value, looking through the
// breakdown column or user values of trails.
func keyOf(trails []testutil.UserTrail, src analysis.KeySource, dicts testutil.Dicts, b *testutil.Breakdown, value string) analysis.Key {
	for _, ut := range trails {
		if src.From == analysis.KeyUser {
			if k := ut.Trail.User[src.Index]; keyLabel(k, b, dicts) == value {
				return k
			}
			continue
		}
		c := ut.Trail.Cols[src.Index]
		for i := range c.Set {
			if k := (analysis.Key{Bits: c.Bits[i], Set: c.Set[i]}); keyLabel(k, b, dicts) == value {
				return k
			}
		}
	}
	panic("no key renders as " + value)
}

// TestStickinessAllocs checks that Add does not allocate once the
// accumulator has seen the user's keys.
func TestStickinessAllocs(t *testing.T) {
	d := newDiffCase(3)
	trails, _ := testutil.BuildTrailsWith(d.data, testutil.TrailSpec{Matchers: toMatchers([]string{"a", "b|c", testutil.Any}), Cols: []string{"s"}})
	from, to := at("2021-03-26T00:00:00Z"), at("2021-03-30T00:00:00Z")
	spec := analysis.StickinessSpec{Bounds: timebucket.Bounds(from, to, timebucket.Hour, time.UTC, 0), From: from, To: to,
		Series: []int{0, 1, 2}, MinEvents: 2, Breakdown: analysis.KeySource{From: analysis.KeyEvent}}
	acc, err := analysis.NewStickiness(spec)
	if err != nil {
		t.Fatal(err)
	}
	noAllocs(t, len(trails), func(i int) { acc.Add(&trails[i].Trail) })
	before := acc.Result()
	acc.Add(&trail.Trail{Cols: make([]trail.Column, 1)}) // a user visited without events counts nowhere
	if after := acc.Result(); !reflect.DeepEqual(before, after) {
		t.Fatalf("an empty trail changed the result")
	}
}
