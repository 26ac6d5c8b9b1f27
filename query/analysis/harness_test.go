package analysis_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shardPlan assigns users to accumulators and fixes a merge order, so that
// tests can check that results do not depend on sharding (docs/analytics.md §8). A nil
// plan is one accumulator.
type shardPlan struct {
	r      *rand.Rand
	shards int
}

func (p *shardPlan) split(n int) (assign []int, shards int, order []int) {
	shards = 1
	if p != nil {
		shards = p.shards
	}
	assign = make([]int, n)
	order = make([]int, shards)
	for i := range order {
		order[i] = i
	}
	if p != nil {
		for i := range assign {
			assign[i] = p.r.IntN(shards)
		}
		p.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return assign, shards, order
}

// chunkLens are the chunk lengths (about that many events each, package
// trail's rules) of the whole-versus-chunked differential tests.
var chunkLens = []int{1, 2, 3, 7, 40}

// feeder hands trails to a kernel whole (the zero feeder) or in random
// chunks of about maxLen events (testutil.Chunks), each lent as a copy
// that is spoiled after the call (testutil.Lend).
type feeder struct {
	r      *rand.Rand
	maxLen int
}

// chunked returns the feeder of chunks of about maxLen events, with its
// own random source for seed.
func chunked(seed int64, maxLen int) feeder {
	return feeder{r: rand.New(rand.NewPCG(uint64(seed), uint64(maxLen))), maxLen: maxLen}
}

// chunkFeeders returns a chunked feeder per length of chunkLens.
func chunkFeeders(seed int64) []feeder {
	fds := make([]feeder, len(chunkLens))
	for i, n := range chunkLens {
		fds[i] = chunked(seed, n)
	}
	return fds
}

// plan returns a shard plan like p (whole trails in one accumulator
// when p is nil) drawn from the feeder's random source, for chunked runs
// that leave the whole run's random draws alone.
func (f feeder) plan(p *shardPlan) *shardPlan {
	if p == nil {
		return nil
	}
	return &shardPlan{r: f.r, shards: p.shards}
}

func (f feeder) add(tr *trail.Trail, add func(*trail.Trail)) {
	if f.maxLen == 0 {
		add(tr)
		return
	}
	for _, c := range testutil.Chunks(tr, f.r, f.maxLen) {
		testutil.Lend(&c, add)
	}
}

// accumulate adds trails to accumulators made by mk, users spread over
// them by plan and fed by fd, merges them in plan's order and returns the
// merged one.
func accumulate[A interface {
	Add(*trail.Trail)
	Merge(A) error
}](t testing.TB, trails []testutil.UserTrail, plan *shardPlan, fd feeder, mk func() (A, error)) A {
	t.Helper()
	assign, shards, order := plan.split(len(trails))
	accs := make([]A, shards)
	for i := range accs {
		acc, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		accs[i] = acc
	}
	for i, ut := range trails {
		fd.add(&ut.Trail, accs[assign[i]].Add)
	}
	for _, s := range order[1:] {
		if err := accs[order[0]].Merge(accs[s]); err != nil {
			t.Fatal(err)
		}
	}
	return accs[order[0]]
}

func runTrend(t testing.TB, evs []testutil.Ev, q testutil.TrendQuery, plan *shardPlan, fd feeder) analysis.TrendResult {
	t.Helper()
	spec := analysis.TrendSpec{Bounds: q.Bounds, From: q.From, To: q.To}
	for i, m := range q.Math {
		spec.Series = append(spec.Series, analysis.TrendSeries{Math: m, Bit: i})
	}
	trails := testutil.BuildTrails(evs, q.Events)
	return accumulate(t, trails, plan, fd, func() (*analysis.Trend, error) { return analysis.NewTrend(spec) }).Result(nil)
}

func runFunnel(t testing.TB, evs []testutil.Ev, q testutil.FunnelQuery, plan *shardPlan) (analysis.FunnelResult, map[string]testutil.NaivePath) {
	t.Helper()
	spec := analysis.FunnelSpec{Steps: len(q.Steps), Window: q.Window, From: q.From, To: q.To}
	trails := testutil.BuildTrails(evs, q.Steps)
	assign, shards, order := plan.split(len(trails))
	accs := make([]*analysis.Funnel, shards)
	for i := range accs {
		acc, err := analysis.NewFunnel(spec, analysis.FunnelOptions{})
		if err != nil {
			t.Fatalf("NewFunnel: %v", err)
		}
		accs[i] = acc
	}
	paths := map[string]testutil.NaivePath{}
	var st analysis.FunnelScratch
	for i, ut := range trails {
		p := analysis.FunnelUser(&ut.Trail, &spec, &st)
		if p.Step > 0 {
			paths[ut.User] = testutil.NaivePath{Step: p.Step, Times: slices.Clone(p.Times[:p.Step]), First: ut.Index[p.Events[0]]}
		}
		if i%2 == 0 {
			accs[assign[i]].Add(&ut.Trail)
		} else {
			accs[assign[i]].AddPath(p, &ut.Trail)
		}
	}
	for _, s := range order[1:] {
		if err := accs[order[0]].Merge(accs[s]); err != nil {
			t.Fatal(err)
		}
	}
	return accs[order[0]].Result(nil), paths
}

// retentionSpec builds the kernel spec of q with the cohort boundaries
// extended by ext buckets (the query layer uses ext = Periods; the kernel
// needs at least Periods-1 for calendar windows).
func retentionSpec(q testutil.RetentionQuery, ext int) analysis.RetentionSpec {
	loc := q.Loc
	if loc == nil {
		loc = time.UTC
	}
	b := timebucket.Bounds(q.From, q.To, q.Interval, loc, q.WeekStart)
	b = timebucket.Extend(b, ext, q.Interval, loc, q.WeekStart)
	return analysis.RetentionSpec{
		Bounds: b, Periods: q.Periods, Type: q.Type, Windows: q.Windows, Criterion: q.Criterion,
		Period: q.Interval.Rolling(), From: q.From, To: q.To,
	}
}

func runRetention(t testing.TB, evs []testutil.Ev, q testutil.RetentionQuery, ext int, plan *shardPlan, fd feeder) []analysis.RetentionCohort {
	t.Helper()
	trails := testutil.BuildTrails(evs, []string{q.Start, q.Return})
	acc := accumulate(t, trails, plan, fd, func() (*analysis.Retention, error) { return analysis.NewRetention(retentionSpec(q, ext)) })
	return acc.Result(nil).Groups[0].Cohorts
}

// Rendering of results as the golden files show them.

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func fmtTime(us, base int64, hasBase bool, loc *time.Location) string {
	if hasBase {
		d := time.Duration(us-base) * time.Microsecond
		if d >= 0 {
			return "+" + d.String()
		}
		return d.String()
	}
	return time.UnixMicro(us).In(loc).Format(time.RFC3339Nano)
}

type renderCtx struct {
	base    int64
	hasBase bool
	loc     *time.Location
}

func (rc renderCtx) trend(q testutil.TrendQuery, rows [][]testutil.TrendRow) string {
	var b strings.Builder
	for s, sr := range rows {
		row := sr[0]
		fmt.Fprintf(&b, "series %s:%s total=%s\n", q.Events[s], q.Math[s], fmtFloat(row.Total))
		for i, v := range row.Buckets {
			fmt.Fprintf(&b, "  %s %s\n", time.UnixMicro(q.Bounds[i]).In(rc.loc).Format(time.RFC3339), fmtFloat(v))
		}
	}
	return b.String()
}

// trendRows converts a kernel result without breakdown to the naive form.
func trendRows(r analysis.TrendResult) [][]testutil.TrendRow {
	var out [][]testutil.TrendRow
	for _, s := range r.Series {
		out = append(out, []testutil.TrendRow{{Buckets: s.Rows[0].Buckets, Total: s.Rows[0].Total}})
	}
	return out
}

func (rc renderCtx) funnel(r analysis.FunnelResult, paths map[string]testutil.NaivePath) string {
	var b strings.Builder
	users := make([]string, 0, len(paths))
	for u, p := range paths {
		if p.Step > 0 {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	for _, u := range users {
		p := paths[u]
		ts := make([]string, len(p.Times))
		for i, v := range p.Times {
			ts[i] = fmtTime(v, rc.base, rc.hasBase, rc.loc)
		}
		fmt.Fprintf(&b, "user %s step=%d times=%s first=e%d\n", u, p.Step, strings.Join(ts, ","), p.First+1)
	}
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "step %d users=%d conversion=%s from_previous=%s", s.Step, s.Users, fmtFloat(s.Conversion), fmtFloat(s.ConversionFromPrevious))
		if s.HasTime {
			fmt.Fprintf(&b, " avg_s=%s median_s=%s", fmtFloat(s.AvgSeconds), fmtFloat(s.MedianSeconds))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (rc renderCtx) retention(cohorts []analysis.RetentionCohort) string {
	var b strings.Builder
	for _, c := range cohorts {
		parts := make([]string, len(c.Retained))
		for i, v := range c.Retained {
			parts[i] = strconv.FormatInt(v, 10)
		}
		fmt.Fprintf(&b, "cohort %s size=%d retained=%s\n", time.UnixMicro(c.Start).In(rc.loc).Format(time.RFC3339), c.Size, strings.Join(parts, ","))
	}
	return b.String()
}

// modeTables are a funnel's tables by row ("" = all users), as the
// kernel or the naive reference computes them.
type modeTables struct {
	steps   map[string][]analysis.FunnelStepResult
	buckets map[string][]analysis.FunnelBucket
	hists   map[string]*analysis.FunnelHist
}

func kernelTables(c *modeCase, res analysis.FunnelResult) modeTables {
	mt := modeTables{steps: map[string][]analysis.FunnelStepResult{"": res.Steps},
		buckets: map[string][]analysis.FunnelBucket{"": res.Buckets}, hists: map[string]*analysis.FunnelHist{"": res.Hist}}
	if c.q.Breakdown != nil {
		for _, g := range res.Groups {
			l := keyLabel(g.Key, c.q.Breakdown, c.dicts)
			mt.steps[l], mt.buckets[l], mt.hists[l] = g.Steps, g.Buckets, g.Hist
		}
	}
	return mt
}

// naiveTables computes the tables of q with the naive reference: the
// all-users tables from the outcomes with one row per user.
func naiveTables(data testutil.Data, q testutil.FunnelQuery, bins int) modeTables {
	mt := modeTables{steps: map[string][]analysis.FunnelStepResult{}, buckets: map[string][]analysis.FunnelBucket{},
		hists: map[string]*analysis.FunnelHist{}}
	plainQ := q
	plainQ.Breakdown, plainQ.Attribution = nil, ""
	plain := testutil.NaiveFunnelOutcomes(data, plainQ)
	rows := map[string]map[string][]testutil.NaiveOutcome{"": plain}
	if q.Breakdown != nil {
		for u, os := range testutil.NaiveFunnelOutcomes(data, q) {
			for _, o := range os {
				if rows[o.Row] == nil {
					rows[o.Row] = map[string][]testutil.NaiveOutcome{}
				}
				rows[o.Row][u] = append(rows[o.Row][u], o)
			}
		}
	}
	n := len(q.Steps)
	from, to := viewSteps(q)
	durs := func(outs map[string][]testutil.NaiveOutcome) map[string]int64 {
		return testutil.FunnelDurations(outs, from, to, "", true)
	}
	var extra []int64
	for _, outs := range rows {
		for _, d := range durs(outs) {
			extra = append(extra, d)
		}
	}
	for l, outs := range rows {
		switch q.View {
		case "", "steps":
			mt.steps[l] = testutil.FunnelTable(testutil.FunnelRowPaths(outs)[l], n)
		case "trends":
			nb := len(q.Bounds) - 1
			relabelled := map[string][]testutil.NaiveOutcome{}
			for u, os := range outs {
				for _, o := range os {
					o.Row = ""
					relabelled[u] = append(relabelled[u], o)
				}
			}
			r := testutil.FunnelTrends(relabelled, nb, from, to)[""]
			bs := make([]analysis.FunnelBucket, nb)
			for b := range bs {
				if r.Entered != nil {
					bs[b] = analysis.FunnelBucket{Entered: int64(len(r.Entered[b])), Converted: int64(len(r.Converted[b]))}
				}
			}
			mt.buckets[l] = bs
		case "time_to_convert":
			row := durs(outs)
			h := testutil.NaiveHistogram(durs(plain), extra, bins, row)
			kh := &analysis.FunnelHist{Lo: h.Lo, Width: h.Width, Users: int64(len(row))}
			for _, b := range h.Bins {
				kh.Bins = append(kh.Bins, int64(len(b)))
			}
			mt.hists[l] = kh
		}
	}
	return mt
}

// modes renders a funnel_modes case: per user and outcome the row,
// bucket, step (and outside the trends view the times and first event),
// then the tables.
func (rc renderCtx) modes(q testutil.FunnelQuery, outs map[string][]testutil.NaiveOutcome, mt modeTables) string {
	var b strings.Builder
	users := make([]string, 0, len(outs))
	for u := range outs {
		users = append(users, u)
	}
	slices.Sort(users)
	for _, u := range users {
		os := slices.Clone(outs[u])
		sortOutcomes(os, q.View)
		for _, o := range os {
			fmt.Fprintf(&b, "user %s", u)
			if q.Breakdown != nil {
				fmt.Fprintf(&b, " row=%s", o.Row)
			}
			if q.View == "trends" {
				fmt.Fprintf(&b, " bucket=%s step=%d\n", fmtTime(q.Bounds[o.Bucket], 0, false, rc.loc), o.Step)
				continue
			}
			ts := make([]string, len(o.Times))
			for i, v := range o.Times {
				ts[i] = fmtTime(v, rc.base, rc.hasBase, rc.loc)
			}
			fmt.Fprintf(&b, " step=%d times=%s first=e%d\n", o.Step, strings.Join(ts, ","), o.First+1)
		}
	}
	var rows []string
	for l := range mt.steps {
		rows = append(rows, l)
	}
	for l := range mt.buckets {
		rows = append(rows, l)
	}
	for l := range mt.hists {
		rows = append(rows, l)
	}
	slices.Sort(rows)
	rows = slices.Compact(rows)
	for _, l := range rows {
		name := "all users"
		if l != "" {
			name = "row " + l
		}
		switch q.View {
		case "", "steps":
			for _, s := range mt.steps[l] {
				fmt.Fprintf(&b, "%s: step %d users=%d conversion=%s from_previous=%s", name, s.Step, s.Users, fmtFloat(s.Conversion), fmtFloat(s.ConversionFromPrevious))
				if s.HasTime {
					fmt.Fprintf(&b, " avg_s=%s median_s=%s", fmtFloat(s.AvgSeconds), fmtFloat(s.MedianSeconds))
				}
				b.WriteString("\n")
			}
		case "trends":
			for i, bk := range mt.buckets[l] {
				fmt.Fprintf(&b, "%s: bucket %s entered=%d converted=%d\n", name, fmtTime(q.Bounds[i], 0, false, rc.loc), bk.Entered, bk.Converted)
			}
		case "time_to_convert":
			h := mt.hists[l]
			fmt.Fprintf(&b, "%s: users=%d", name, h.Users)
			for i, c := range h.Bins {
				fmt.Fprintf(&b, " [%d,%d)=%d", h.Lo+int64(i)*h.Width, h.Lo+int64(i+1)*h.Width, c)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
