package analysis_test

import (
	"flag"
	"fmt"
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

// modeCase is one random funnel of every docs/analytics.md §11 mode: the naive query and
// the kernel's spec and options over trails built for it.
type modeCase struct {
	q      testutil.FunnelQuery
	spec   analysis.FunnelSpec
	opt    analysis.FunnelOptions
	trails []testutil.UserTrail
	dicts  testutil.Dicts
}

var (
	modeOrders = []string{"ordered", "strict", "unordered"}
	modeViews  = []string{"steps", "trends", "time_to_convert"}
	modeAttrs  = []string{"entry", "first_touch", "last_touch", "all_steps", "step"}
)

// newModeCase draws a funnel for seed d of the given order and view.
func newModeCase(t *testing.T, d *diffCase, order, view string) *modeCase {
	from, to := d.rangeIn()
	n := 2 + d.r.IntN(3)
	q := testutil.FunnelQuery{Window: diffWindows[d.r.IntN(len(diffWindows))], From: from, To: to, Order: order, View: view}
	for range n {
		q.Steps = append(q.Steps, diffMatchers[d.r.IntN(len(diffMatchers))])
	}
	for range d.r.IntN(3) {
		x := testutil.Exclusion{Event: []string{"a", "b", "c", "d", "a|c"}[d.r.IntN(5)], From: 1, To: n}
		if order != "unordered" {
			x.From = 1 + d.r.IntN(n-1)
			x.To = x.From + 1 + d.r.IntN(n-x.From)
		}
		q.Exclusions = append(q.Exclusions, x)
	}
	bins := 0
	if view != "steps" {
		q.FromStep = 1 + d.r.IntN(n-1)
		q.ToStep = q.FromStep + 1 + d.r.IntN(n-q.FromStep)
		if d.r.IntN(3) == 0 {
			q.FromStep, q.ToStep = 0, 0 // the defaults: 1 and n
		}
	}
	if view == "trends" {
		iv := timebucket.Interval(1 + d.r.IntN(3))
		q.Bounds = timebucket.Bounds(from, to, iv, d.loc(t), timebucket.WeekStart(d.r.IntN(2)))
	}
	if view == "time_to_convert" && d.r.IntN(2) == 0 {
		bins = 1 + d.r.IntN(8)
	}
	q.Breakdown = d.breakdown()
	if q.Breakdown != nil && !q.Breakdown.User {
		q.Attribution = modeAttrs[d.r.IntN(len(modeAttrs))]
		if q.Attribution == "step" {
			q.AttrStep = 1
			if order != "unordered" {
				q.AttrStep = 1 + d.r.IntN(n)
			}
		}
	}
	return buildModeCase(t, d.data, q, bins)
}

// buildModeCase builds the kernel's spec, options and trails for q: mask
// bits for the steps, then the exclusions, then (strict order) every
// event.
func buildModeCase(t testing.TB, data testutil.Data, q testutil.FunnelQuery, bins int) *modeCase {
	n := len(q.Steps)
	spec := analysis.FunnelSpec{Steps: n, Window: q.Window, From: q.From, To: q.To}
	var err error
	if spec.Order, err = analysis.ParseFunnelOrder(q.Order); err != nil {
		t.Fatal(err)
	}
	matchers := toMatchers(q.Steps)
	for k := range matchers {
		if k < len(q.Where) {
			matchers[k].Where = q.Where[k]
		}
	}
	for _, x := range q.Exclusions {
		spec.Exclusions = append(spec.Exclusions, analysis.FunnelExclusion{Bit: len(matchers), From: x.From, To: x.To})
		matchers = append(matchers, testutil.Matcher{Event: x.Event, Where: x.Where})
	}
	if q.Order == "strict" {
		spec.Events = 1 << uint(len(matchers))
		matchers = append(matchers, testutil.Matcher{Event: testutil.Any})
	}
	opt := analysis.FunnelOptions{FromStep: q.FromStep, ToStep: q.ToStep, Bounds: q.Bounds, Bins: bins, AttrStep: q.AttrStep}
	if opt.View, err = analysis.ParseFunnelView(q.View); err != nil {
		t.Fatal(err)
	}
	if opt.Attribution, err = analysis.ParseFunnelAttribution(q.Attribution); err != nil {
		t.Fatal(err)
	}
	tspec, src := trailSpec(q.Breakdown, nil)
	tspec.Matchers = matchers
	opt.Key = src
	trails, dicts := testutil.BuildTrailsWith(data, tspec)
	return &modeCase{q: q, spec: spec, opt: opt, trails: trails, dicts: dicts}
}

// run runs the kernel over the case's trails split into chunks of about
// maxLen events (0: whole trails) over the diff case's shards, and
// returns the result and every user's outcomes as the naive reference
// renders them.
func (c *modeCase) run(t testing.TB, plan *shardPlan, maxLen int, list *analysis.FunnelList) (analysis.FunnelResult, map[string][]testutil.NaiveOutcome) {
	t.Helper()
	got := map[string][]testutil.NaiveOutcome{}
	var cur *testutil.UserTrail
	opt := c.opt
	opt.List = list
	opt.Observe = func(id []byte, outs []analysis.FunnelOutcome) {
		if string(id) != cur.User {
			t.Fatalf("outcome of %q while adding %q", id, cur.User)
		}
		for _, o := range outs {
			got[cur.User] = append(got[cur.User], testutil.NaiveOutcome{Row: keyLabel(o.Row, c.q.Breakdown, c.dicts),
				Bucket: o.Bucket, Step: o.Step, Times: o.Times, First: cur.Index[o.First]})
		}
	}
	assign, shards, order := plan.split(len(c.trails))
	accs := make([]*analysis.Funnel, shards)
	for i := range accs {
		var err error
		if accs[i], err = analysis.NewFunnel(c.spec, opt); err != nil {
			t.Fatalf("NewFunnel: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(uint64(maxLen), 5))
	for i := range c.trails {
		cur = &c.trails[i]
		chunks := []trail.Trail{cur.Trail}
		if maxLen > 0 {
			chunks = testutil.Chunks(&cur.Trail, r, maxLen)
		}
		for k := range chunks {
			accs[assign[i]].Add(&chunks[k])
		}
	}
	for _, s := range order[1:] {
		if err := accs[order[0]].Merge(accs[s]); err != nil {
			t.Fatal(err)
		}
	}
	return accs[order[0]].Result(nil), got
}

var modeSeeds = flag.Int("mode-seeds", diffSeeds, "seeds of TestDiffFunnelModes")

// TestDiffFunnelModes: every order × view × attribution against the naive
// reference, per user and in the tables and lists, with whole trails and
// with trails cut into chunks (of at most 1 event, or of a few).
func TestDiffFunnelModes(t *testing.T) {
	full := map[string]int{}
	for seed := range int64(*modeSeeds) {
		for oi, order := range modeOrders {
			for vi, view := range modeViews {
				d := newDiffCase(seed*9 + int64(oi*3+vi))
				c := newModeCase(t, d, order, view)
				want := testutil.NaiveFunnelOutcomes(d.data, c.q)
				for u, os := range want {
					if len(os) == 0 {
						delete(want, u)
					}
				}
				label := fmt.Sprintf("seed %d %s/%s attribution %q breakdown %+v", seed, order, view, c.q.Attribution, c.q.Breakdown)
				var first analysis.FunnelResult
				for ci, maxLen := range []int{0, 1, 1 + d.r.IntN(6)} {
					res, got := c.run(t, d.plan, maxLen, nil)
					for u := range got {
						sortOutcomes(got[u], view)
					}
					for u := range want {
						sortOutcomes(want[u], view)
					}
					if !reflect.DeepEqual(got, want) {
						for u := range want {
							if !reflect.DeepEqual(got[u], want[u]) {
								t.Errorf("%s chunks %d user %s:\nkernel %+v\nnaive  %+v", label, maxLen, u, got[u], want[u])
							}
						}
						for u := range got {
							if _, ok := want[u]; !ok {
								t.Errorf("%s chunks %d user %s: kernel %+v, naive none", label, maxLen, u, got[u])
							}
						}
						t.Fatalf("%s: outcomes differ (chunks %d)\n%+v\n%s", label, maxLen, c.q, dumpUser(d.evs))
					}
					if ci == 0 {
						first = res
						checkModeTables(t, label, d, c, res)
						for _, os := range want {
							for _, o := range os {
								if o.Step == len(c.q.Steps) {
									full[order+"/"+view]++
								}
							}
						}
					} else if !reflect.DeepEqual(stripLists(res), stripLists(first)) {
						t.Fatalf("%s: chunks %d change the result\n%+v\n%+v", label, maxLen, res, first)
					}
				}
				checkModeList(t, label, d, c, first)
			}
		}
	}
	for _, o := range modeOrders {
		for _, v := range modeViews {
			if full[o+"/"+v] < *modeSeeds/5 {
				t.Errorf("%s/%s: only %d full conversions over %d seeds", o, v, full[o+"/"+v], *modeSeeds)
			}
		}
	}
}

// sortOutcomes orders outcomes by row and bucket. In the trends view only
// the row, bucket and step are reported (the kernel keeps, of attempts
// that are alike for the view, the newest), so the times go.
func sortOutcomes(os []testutil.NaiveOutcome, view string) {
	if view == "trends" {
		for i := range os {
			os[i].Times, os[i].First = nil, 0
		}
	}
	slices.SortFunc(os, func(a, b testutil.NaiveOutcome) int {
		if c := strings.Compare(a.Row, b.Row); c != 0 {
			return c
		}
		return a.Bucket - b.Bucket
	})
}

func stripLists(r analysis.FunnelResult) analysis.FunnelResult {
	r.List = nil
	gs := slices.Clone(r.Groups)
	for i := range gs {
		gs[i].List = nil
	}
	r.Groups = gs
	return r
}

// naivePlain returns the outcomes of the query with one row per user (the
// all-users tables of per-row attributions).
func naivePlain(d *diffCase, q testutil.FunnelQuery) map[string][]testutil.NaiveOutcome {
	if q.Attribution == "all_steps" || q.Attribution == "step" {
		q.Attribution, q.Breakdown = "", nil
	}
	return testutil.NaiveFunnelOutcomes(d.data, q)
}

// viewSteps returns the view's from and to steps.
func viewSteps(q testutil.FunnelQuery) (int, int) {
	from, to := q.FromStep, q.ToStep
	if from == 0 {
		from, to = 1, len(q.Steps)
	}
	return from, to
}

// checkModeTables compares the kernel's tables with the naive reference's.
func checkModeTables(t *testing.T, label string, d *diffCase, c *modeCase, res analysis.FunnelResult) {
	t.Helper()
	q := c.q
	n := len(q.Steps)
	plain := naivePlain(d, q)
	rowsOut := testutil.NaiveFunnelOutcomes(d.data, q)
	from, to := viewSteps(q)
	byRow := map[string]analysis.FunnelGroup{}
	for _, g := range res.Groups {
		byRow[keyLabel(g.Key, q.Breakdown, c.dicts)] = g
	}
	switch q.View {
	case "steps":
		all := testutil.FunnelRowPaths(plain)[""]
		if q.Breakdown != nil && q.Attribution != "all_steps" && q.Attribution != "step" {
			all = map[string]testutil.NaivePath{}
			for _, ps := range testutil.FunnelRowPaths(plain) {
				for u, p := range ps {
					all[u] = p
				}
			}
		}
		if want := testutil.FunnelTable(all, n); !reflect.DeepEqual(res.Steps, want) {
			t.Fatalf("%s: all-users steps\nkernel %+v\nnaive  %+v", label, res.Steps, want)
		}
		rows := testutil.FunnelRowPaths(rowsOut)
		if q.Breakdown == nil {
			return
		}
		if len(rows) != len(res.Groups) {
			t.Fatalf("%s: %d kernel rows, %d naive", label, len(res.Groups), len(rows))
		}
		for l, ps := range rows {
			if want := testutil.FunnelTable(ps, n); !reflect.DeepEqual(byRow[l].Steps, want) {
				t.Fatalf("%s: row %q\nkernel %+v\nnaive  %+v", label, l, byRow[l].Steps, want)
			}
		}
	case "trends":
		nb := len(q.Bounds) - 1
		check := func(name string, got []analysis.FunnelBucket, want testutil.FunnelTrendRow) {
			for b := range nb {
				if got[b].Entered != int64(len(want.Entered[b])) || got[b].Converted != int64(len(want.Converted[b])) {
					t.Fatalf("%s: %s bucket %d: kernel %+v, naive entered %v converted %v", label, name, b, got[b], want.Entered[b], want.Converted[b])
				}
			}
		}
		var all testutil.FunnelTrendRow
		merged := map[string][]testutil.NaiveOutcome{}
		for u, os := range plain {
			for _, o := range os {
				o.Row = ""
				merged[u] = append(merged[u], o)
			}
		}
		all = testutil.FunnelTrends(merged, nb, from, to)[""]
		if all.Entered == nil {
			all = testutil.FunnelTrendRow{Entered: make([][]string, nb), Converted: make([][]string, nb)}
		}
		check("all users", res.Buckets, all)
		if q.Breakdown == nil {
			return
		}
		rows := testutil.FunnelTrends(rowsOut, nb, from, to)
		if len(rows) != len(res.Groups) {
			t.Fatalf("%s: %d kernel rows, %d naive", label, len(res.Groups), len(rows))
		}
		for l, r := range rows {
			check("row "+l, byRow[l].Buckets, r)
		}
	case "time_to_convert":
		durs := func(outs map[string][]testutil.NaiveOutcome, row string, anyRow bool) map[string]int64 {
			return testutil.FunnelDurations(outs, from, to, row, anyRow)
		}
		all := durs(plain, "", true)
		var extra []int64
		for _, os := range rowsOut {
			for _, o := range os {
				if o.Step >= to {
					extra = append(extra, o.Times[to-1]-o.Times[from-1])
				}
			}
		}
		checkHist := func(name string, got *analysis.FunnelHist, row map[string]int64) {
			want := testutil.NaiveHistogram(all, extra, c.opt.Bins, row)
			if got.Lo != want.Lo || got.Width != want.Width || len(got.Bins) != len(want.Bins) || got.Users != int64(len(row)) {
				t.Fatalf("%s: %s histogram: kernel lo %d width %d bins %v users %d, naive lo %d width %d %d bins, %d users",
					label, name, got.Lo, got.Width, got.Bins, got.Users, want.Lo, want.Width, len(want.Bins), len(row))
			}
			for i := range got.Bins {
				if got.Bins[i] != int64(len(want.Bins[i])) {
					t.Fatalf("%s: %s bin %d: kernel %d, naive %v", label, name, i, got.Bins[i], want.Bins[i])
				}
			}
		}
		checkHist("all users", res.Hist, all)
		if q.Breakdown == nil {
			return
		}
		rows := testutil.FunnelRowPaths(rowsOut)
		for l := range rows {
			g, ok := byRow[l]
			if !ok {
				t.Fatalf("%s: naive row %q missing", label, l)
			}
			checkHist("row "+l, g.Hist, durs(rowsOut, l, false))
		}
	}
}

// checkModeList lists the users behind one number of the view and
// compares them with the naive reference's.
func checkModeList(t *testing.T, label string, d *diffCase, c *modeCase, res analysis.FunnelResult) {
	t.Helper()
	q := c.q
	n := len(q.Steps)
	from, to := viewSteps(q)
	plain := naivePlain(d, q)
	var l analysis.FunnelList
	var want []string
	l.Keep = 1000
	switch q.View {
	case "steps":
		l.Step, l.Dropped = 1+d.r.IntN(n), d.r.IntN(2) == 0
		for u, os := range plain {
			if len(os) > 0 && (os[0].Step == l.Step || (!l.Dropped && os[0].Step > l.Step)) {
				want = append(want, u)
			}
		}
	case "trends":
		l.Bucket, l.Converted = d.r.IntN(len(q.Bounds)-1), d.r.IntN(2) == 0
		for u, os := range plain {
			for _, o := range os {
				if o.Bucket == l.Bucket && o.Step >= from && (!l.Converted || o.Step >= to) {
					want = append(want, u)
				}
			}
		}
	case "time_to_convert":
		h := res.Hist
		l.Bins, l.BinLo, l.BinWidth, l.Bin = len(h.Bins), h.Lo, h.Width, d.r.IntN(len(h.Bins))
		all := testutil.FunnelDurations(plain, from, to, "", true)
		want = testutil.NaiveHistogram(all, []int64{h.Lo * 1e6, (h.Lo + int64(len(h.Bins))*h.Width) * 1e6}, len(h.Bins), all).Bins[l.Bin]
	}
	slices.Sort(want)
	got, _ := c.run(t, d.plan, 1+d.r.IntN(4), &l)
	if got.List.Count() != int64(len(want)) || !slices.Equal(got.List.Page(0, 1000), orEmpty(want)) {
		t.Fatalf("%s: list %+v: kernel %d %v, naive %v", label, l, got.List.Count(), got.List.Page(0, 1000), want)
	}
	// The list's size is the number shown.
	var shown int64
	switch q.View {
	case "steps":
		shown = res.Steps[l.Step-1].Users
		if l.Dropped && l.Step < n {
			shown -= res.Steps[l.Step].Users
		}
	case "trends":
		shown = res.Buckets[l.Bucket].Entered
		if l.Converted {
			shown = res.Buckets[l.Bucket].Converted
		}
	case "time_to_convert":
		shown = res.Hist.Bins[l.Bin]
	}
	if got.List.Count() != shown {
		t.Fatalf("%s: list %+v has %d users, the result shows %d", label, l, got.List.Count(), shown)
	}
}
