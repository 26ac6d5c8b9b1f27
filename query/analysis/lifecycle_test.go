package analysis_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// lifecycleSpec returns the kernel spec of q over trails built with
// matchers [q.Event, $any] (bit 0 active, bit 1 seen).
func lifecycleSpec(q testutil.LifecycleQuery) analysis.LifecycleSpec {
	loc := q.Loc
	if loc == nil {
		loc = time.UTC
	}
	b := timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)
	b = append([]int64{timebucket.Floor(b[0]-1, q.Interval, loc, q.WeekStart)}, b...)
	return analysis.LifecycleSpec{Bounds: b, From: q.From, To: q.To, Active: 0, Seen: 1}
}

// lifeRows is a lifecycle result in comparable form: per label, per
// bucket, the four counts; and the listed users.
type lifeRows struct {
	Rows  map[string][][4]int64
	Users int64
	IDs   []string
}

func lifeResult(r analysis.LifecycleResult, label func(analysis.Key) string) lifeRows {
	out := lifeRows{Rows: map[string][][4]int64{}}
	for _, g := range r.Groups {
		nonzero := false
		for _, b := range g.Counts {
			nonzero = nonzero || b != [4]int64{}
		}
		if nonzero {
			out.Rows[label(g.Key)] = g.Counts
		}
	}
	if r.List != nil {
		out.Users, out.IDs = r.List.Count(), r.List.Page(0, analysis.MaxListKeep)
	}
	return out
}

func naiveLifeRows(rows []testutil.LifecycleRow) map[string][][4]int64 {
	out := map[string][][4]int64{}
	for _, r := range rows {
		var cs [][4]int64
		nonzero := false
		for _, b := range r.Buckets {
			var c [4]int64
			for s := range c {
				c[s] = int64(len(b.Status[s]))
			}
			nonzero = nonzero || c != [4]int64{}
			cs = append(cs, c)
		}
		if nonzero {
			out[r.Value] = cs
		}
	}
	return out
}

// lifecycleOf runs a lifecycle without breakdown over hand-made events
// and returns its counts, checked against the naive reference.
func lifecycleOf(t *testing.T, evs []testutil.Ev, q testutil.LifecycleQuery) [][4]int64 {
	t.Helper()
	acc, err := analysis.NewLifecycle(lifecycleSpec(q))
	if err != nil {
		t.Fatal(err)
	}
	for _, ut := range testutil.BuildTrails(evs, []string{q.Event, testutil.Any}) {
		acc.Add(&ut.Trail)
	}
	got := acc.Result().Groups[0].Counts
	if want := naiveLifeRows(testutil.NaiveLifecycle(testutil.Data{Events: evs}, q))[""]; !reflect.DeepEqual(got, want) && want != nil {
		t.Fatalf("kernel %v, naive %v", got, want)
	}
	return got
}

// TestLifecycleSpec pins docs/analytics.md §14's words. Counts per bucket are [new,
// returning, resurrecting, dormant].
func TestLifecycleSpec(t *testing.T) {
	ev := func(u, ts, name string) testutil.Ev { return testutil.Ev{User: u, Time: at(ts), Name: name} }
	day := func(from, to string, evs ...testutil.Ev) [][4]int64 {
		return lifecycleOf(t, evs, testutil.LifecycleQuery{Event: "a", Interval: timebucket.Day, From: at(from), To: at(to)})
	}
	// The first bucket: u1 was active the day before the range
	// (returning), u2 too but not in the range's first day (dormant), u3
	// is first seen on the first day (new), u4 was seen before but not
	// active the day before (resurrecting), u5 did "b" the day before and
	// "a" on the first day (neither new nor returning: resurrecting).
	got := day("2021-05-02T00:00:00Z", "2021-05-04T00:00:00Z",
		ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-02T10:00:00Z", "a"),
		ev("u2", "2021-05-01T10:00:00Z", "a"), ev("u2", "2021-05-03T10:00:00Z", "a"),
		ev("u3", "2021-05-02T10:00:00Z", "a"), ev("u3", "2021-05-03T10:00:00Z", "a"),
		ev("u4", "2021-04-20T10:00:00Z", "a"), ev("u4", "2021-05-02T10:00:00Z", "a"),
		ev("u5", "2021-05-01T10:00:00Z", "b"), ev("u5", "2021-05-02T10:00:00Z", "a"),
	)
	if want := [][4]int64{{1, 1, 2, 1}, {0, 1, 1, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("first bucket and dormant: %v, want %v", got, want)
	}
	// Dormant once, in the bucket after the last activity only; activity
	// after a gap is resurrecting.
	got = day("2021-05-01T00:00:00Z", "2021-05-06T00:00:00Z",
		ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-05T10:00:00Z", "a"))
	if want := [][4]int64{{1, 0, 0, 0}, {0, 0, 0, 1}, {}, {}, {0, 0, 1, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("gap: %v, want %v", got, want)
	}
	// Europe/Berlin, 2021-03-28 has 23 hours: 2021-03-27T23:30Z is the
	// 28th locally (returning after the 27th), though the 27th in UTC.
	berlin, _ := time.LoadLocation("Europe/Berlin")
	q := testutil.LifecycleQuery{Event: "a", Interval: timebucket.Day, From: at("2021-03-26T23:00:00Z"), To: at("2021-03-28T22:00:00Z")}
	q.Loc = berlin
	got = lifecycleOf(t, []testutil.Ev{ev("u1", "2021-03-27T10:00:00Z", "a"), ev("u1", "2021-03-27T23:30:00Z", "a")}, q)
	if want := [][4]int64{{1, 0, 0, 0}, {0, 1, 0, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("DST day: %v, want %v", got, want)
	}
	// Weeks from Sunday: 2021-05-02 is a Sunday. Active on Saturday 05-01
	// and Sunday 05-02: two weeks from Sunday (returning), one from
	// Monday.
	evs := []testutil.Ev{ev("u1", "2021-04-20T10:00:00Z", "b"), ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-02T10:00:00Z", "a")}
	q = testutil.LifecycleQuery{Event: "a", Interval: timebucket.Week, WeekStart: timebucket.Sunday, From: at("2021-04-25T00:00:00Z"), To: at("2021-05-09T00:00:00Z")}
	if got := lifecycleOf(t, evs, q); !reflect.DeepEqual(got, [][4]int64{{0, 0, 1, 0}, {0, 1, 0, 0}}) {
		t.Errorf("weeks from Sunday: %v", got)
	}
	q.WeekStart = timebucket.Monday
	q.From = at("2021-04-26T00:00:00Z")
	if got := lifecycleOf(t, evs, q); !reflect.DeepEqual(got, [][4]int64{{0, 0, 1, 0}, {0, 0, 0, 1}}) {
		t.Errorf("weeks from Monday: %v", got)
	}
	// A range from 12:00: u1's first event, at 10:00 on the 1st, is
	// before the range, so the 1st is not active for u1, and on the 2nd u1
	// is resurrecting (first seen on the 1st, inactive in its part of the
	// range). u2's first event is at 13:00 on the 1st: new there.
	got = day("2021-05-01T12:00:00Z", "2021-05-03T00:00:00Z",
		ev("u1", "2021-05-01T10:00:00Z", "a"), ev("u1", "2021-05-02T10:00:00Z", "a"),
		ev("u2", "2021-05-01T13:00:00Z", "a"))
	if want := [][4]int64{{1, 0, 0, 0}, {0, 0, 1, 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("range from mid-day: %v, want %v", got, want)
	}
}

// TestDiffLifecycle compares the kernel with NaiveLifecycle on random data:
// every interval, zone and week start, filters through the matcher
// choice, breakdowns by user property, a second pass grouping values
// into "(other)", and lists; trails fed whole and in chunks of every size
// over 1-3 accumulators.
func TestDiffLifecycle(t *testing.T) {
	nonzero := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		loc := d.loc(t)
		q := testutil.LifecycleQuery{Event: diffMatchers[d.r.IntN(len(diffMatchers))], Interval: timebucket.Interval(1 + d.r.IntN(4)),
			WeekStart: timebucket.WeekStart(d.r.IntN(2)), From: from, To: to}
		q.Loc = loc
		if b := d.breakdown(); b != nil && b.User {
			q.Breakdown = b
		}
		tspec, src := trailSpec(q.Breakdown, []string{q.Event, testutil.Any})
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		label := func(k analysis.Key) string { return keyLabel(k, q.Breakdown, dicts) }
		spec := lifecycleSpec(q)
		spec.Breakdown = src
		naive := testutil.NaiveLifecycle(d.data, q)
		var listUsers []string
		if len(naive) > 0 {
			row := naive[d.r.IntN(len(naive))]
			b, st := d.r.IntN(len(row.Buckets)), d.r.IntN(4)
			spec.List = &analysis.LifecycleList{Bucket: b, Status: analysis.LifecycleStatus(st), Keep: analysis.MaxListKeep}
			if q.Breakdown != nil {
				spec.List.Key = keyOf(trails, src, dicts, q.Breakdown, row.Value)
			}
			listUsers = orEmpty(row.Buckets[b].Status[st])
		}
		acc := sameForEveryChunking(t, trails, d.plan, d.r, func() (*analysis.Lifecycle, error) { return analysis.NewLifecycle(spec) },
			func(a *analysis.Lifecycle) lifeRows { return lifeResult(a.Result(), label) })
		got := lifeResult(acc.Result(), label)
		want := naiveLifeRows(naive)
		nonzero += len(want)
		if !reflect.DeepEqual(got.Rows, want) {
			t.Fatalf("seed %d: lifecycle of %s by %v from %d breakdown %+v\nkernel %v\nnaive  %v", seed, q.Event, q.Interval, from, q.Breakdown, got.Rows, want)
		}
		if spec.List != nil && (got.Users != int64(len(listUsers)) || !slices.Equal(got.IDs, listUsers)) {
			t.Fatalf("seed %d: list %+v: kernel %d %v naive %v", seed, spec.List, got.Users, got.IDs, listUsers)
		}
		if q.Breakdown == nil {
			continue
		}
		var labels []string
		for l := range got.Rows {
			labels = append(labels, l)
		}
		kept, group, glabel := d.regroup(labels, label, trails, src)
		gspec := spec
		gspec.List, gspec.Group = nil, group
		grouped := lifeResult(accumulate(t, trails, d.plan, feeder{r: d.r, maxLen: chunkLens[d.r.IntN(len(chunkLens))]}, func() (*analysis.Lifecycle, error) {
			return analysis.NewLifecycle(gspec)
		}).Result(), glabel)
		rq := q
		rq.Breakdown = &testutil.Breakdown{Prop: "_g", User: true}
		if w := naiveLifeRows(testutil.NaiveLifecycle(relabelUsers(d.data, q.Breakdown, kept), rq)); !reflect.DeepEqual(grouped.Rows, w) {
			t.Fatalf("seed %d: grouped: kernel %v naive %v", seed, grouped.Rows, w)
		}
	}
	if nonzero < diffSeeds/2 {
		t.Errorf("only %d rows over %d seeds", nonzero, diffSeeds)
	}
}

// relabelUsers returns the data with a user property "_g" written for
// every user: the user's breakdown value when kept, else "~other".
func relabelUsers(data testutil.Data, b *testutil.Breakdown, kept map[string]bool) testutil.Data {
	users := testutil.CurrentUsers(data.Users)
	out := testutil.Data{Events: data.Events, Users: slices.Clone(data.Users)}
	seen := map[string]bool{}
	for _, e := range data.Events {
		if seen[e.User] {
			continue
		}
		seen[e.User] = true
		l := testutil.Render(users[e.User][b.Prop], time.UTC)
		if !kept[l] {
			l = "~other"
		}
		out.Users = append(out.Users, testutil.UserWrite{User: e.User, Time: 1 << 62, Props: map[string]event.Value{"_g": event.String(l)}})
	}
	return out
}

// TestLifecycleAllocs checks that Add does not allocate.
func TestLifecycleAllocs(t *testing.T) {
	d := newDiffCase(5)
	trails := testutil.BuildTrails(d.evs, []string{"a|b", testutil.Any})
	from, to := at("2021-03-26T00:00:00Z"), at("2021-03-30T00:00:00Z")
	q := testutil.LifecycleQuery{Interval: timebucket.Hour, From: from, To: to}
	acc, err := analysis.NewLifecycle(lifecycleSpec(q))
	if err != nil {
		t.Fatal(err)
	}
	noAllocs(t, len(trails), func(i int) { acc.Add(&trails[i].Trail) })
	acc.Add(&trail.Trail{})
}
