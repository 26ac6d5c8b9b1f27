package analysis_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// Differential tests: kernels against the naive reference implementations
// on seeded random data with many ties, with users spread over 1-3
// accumulators merged in random order. Results must be identical.

const diffSeeds = 250

var (
	diffMatchers = []string{"a", "b", "c", "d", "a", "b", testutil.Any, "a|b", "c|d", "b|c|d"}
	diffZones    = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}
	diffWindows  = []int64{0, 1, 30 * 60e6, 30*60e6 + 1, 30*60e6 - 1, 60 * 60e6, 90 * 60e6, 6 * 3600e6, 86400e6, 14 * 86400e6}
)

type diffCase struct {
	r    *rand.Rand
	evs  []testutil.Ev
	opts testutil.RandomOptions
	plan *shardPlan
}

func newDiffCase(seed int64) *diffCase {
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	opts := testutil.RandomOptions{Users: 3 + r.IntN(12), Events: 20 + r.IntN(250)}
	if r.IntN(4) == 0 {
		opts.Quantum = 1e6 // dense: many near-ties
	}
	return &diffCase{
		r: r, opts: opts,
		evs:  testutil.RandomEvents(seed, opts),
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

func TestDiffTrend(t *testing.T) {
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		iv := timebucket.Interval(1 + d.r.IntN(4))
		q := testutil.TrendQuery{Bounds: timebucket.Bounds(from, to, iv, d.loc(t), timebucket.WeekStart(d.r.IntN(2))), From: from, To: to}
		for range 1 + d.r.IntN(4) {
			q.Events = append(q.Events, diffMatchers[d.r.IntN(len(diffMatchers))])
			q.Math = append(q.Math, analysis.TrendMath(d.r.IntN(2)))
		}
		got := runTrend(t, d.evs, q, d.plan)
		want := testutil.NaiveTrend(d.evs, q)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: trend %+v\nkernel %+v\nnaive  %+v", seed, q, got, want)
		}
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
		want, wantPaths := testutil.NaiveFunnel(d.evs, q)
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
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: funnel %+v\nkernel %+v\nnaive  %+v", seed, q, got, want)
		}
		if got.Steps[len(got.Steps)-1].Users > 0 {
			converted++
		}
	}
	// The generator must exercise full conversions, not only step 1.
	if converted < diffSeeds/5 {
		t.Errorf("only %d of %d seeds had users completing the funnel", converted, diffSeeds)
	}
}

func dumpUser(evs []testutil.Ev) string {
	s := ""
	for i, e := range evs {
		s += fmt.Sprintf("%d %s %d %s\n", i, e.User, e.Time, e.Name)
	}
	return s
}

func TestDiffRetention(t *testing.T) {
	nonEmpty := 0
	for seed := range int64(diffSeeds) {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		base := testutil.RetentionQuery{
			Start:     diffMatchers[d.r.IntN(len(diffMatchers))],
			Return:    diffMatchers[d.r.IntN(len(diffMatchers))],
			Interval:  timebucket.Interval(1 + d.r.IntN(3)),
			Loc:       d.loc(t),
			WeekStart: timebucket.WeekStart(d.r.IntN(2)),
			Periods:   1 + d.r.IntN(8),
			From:      from, To: to,
		}
		for combo := range 8 {
			q := base
			q.Type = analysis.RetentionType(combo & 1)
			q.Windows = analysis.RetentionWindows(combo >> 1 & 1)
			q.Criterion = analysis.RetentionCriterion(combo >> 2 & 1)
			got := runRetention(t, d.evs, q, q.Periods-1+d.r.IntN(3), d.plan)
			want := testutil.NaiveRetention(d.evs, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: retention %v/%v/%v %+v\nkernel %+v\nnaive  %+v", seed, q.Type, q.Windows, q.Criterion, q, got, want)
			}
			for _, c := range got.Cohorts {
				if len(c.Retained) > 1 && c.Retained[1] > 0 {
					nonEmpty++
					break
				}
			}
		}
	}
	if nonEmpty < diffSeeds {
		t.Errorf("only %d of %d runs retained anyone at period 1", nonEmpty, 8*diffSeeds)
	}
}
