package query

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/timebucket"
)

// TestFunnelModesAgainstNaive is the end-to-end differential test of docs/analytics.md
// §11: random funnels of every order, with exclusions, in every view, with
// global filters (which decide the events a strict funnel sees), cohort
// filters, breakdowns of every attribution with limits (a merged
// "(other)" row of a per-row attribution is walked as one row) and lists
// of every kind, through the JSON query path, against the naive
// reference, over random imports into 1–8 shards and 1–3 workers.
func TestFunnelModesAgainstNaive(t *testing.T) { runSeeds(t, 150, 30, funnelModesSeed) }

func funnelModesSeed(t *testing.T, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 77))
	data, eng := diffStore(t, r, seed)
	g, tz := drawGen(r, nil)
	for range 3 {
		funnelModesQuery(t, r, g, data, eng, tz)
	}
}

func funnelModesQuery(t *testing.T, r *rand.Rand, g *diffGen, data testutil.Data, eng *Engine, tz string) {
	n := 2 + r.IntN(3)
	windows := []string{"30m", "1h", "90m", "1d", "2d"}
	win := windows[r.IntN(len(windows))]
	w, _ := ParseDuration(win)
	fq := testutil.FunnelQuery{Window: w, From: g.from, To: g.to, Order: []string{"ordered", "strict", "unordered"}[r.IntN(3)],
		View: []string{"steps", "trends", "time_to_convert"}[r.IntN(3)]}
	var steps []map[string]any
	var matchers []testutil.Matcher
	for range n {
		mj, m := g.matcher()
		fq.Steps, fq.Where = append(fq.Steps, m.Event), append(fq.Where, m.Where)
		steps = append(steps, mj)
		matchers = append(matchers, m)
	}
	q := map[string]any{"kind": "funnel", "app": "d", "range": map[string]string{"from": fmtInstant(g.from), "to": fmtInstant(g.to)},
		"tz": tz, "steps": steps, "window": win, "order": fq.Order, "view": fq.View}
	var excls []map[string]any
	for range r.IntN(3) {
		xj, x := g.matcher()
		ex := testutil.Exclusion{Event: x.Event, Where: x.Where, From: 1, To: n}
		if fq.Order != "unordered" {
			ex.From = 1 + r.IntN(n-1)
			ex.To = ex.From + 1 + r.IntN(n-ex.From)
		}
		clash := false
		for k := ex.From; k <= ex.To; k++ {
			clash = clash || reflect.DeepEqual(matchers[k-1], x)
		}
		if clash {
			continue // an invalid_query, tested elsewhere
		}
		xj["from_step"], xj["to_step"] = ex.From, ex.To
		excls = append(excls, xj)
		fq.Exclusions = append(fq.Exclusions, ex)
	}
	if len(excls) > 0 {
		q["exclusions"] = excls
	}
	from, to := 1, n
	if fq.View != "steps" && r.IntN(2) == 0 {
		from = 1 + r.IntN(n-1)
		to = from + 1 + r.IntN(n-from)
		fq.FromStep, fq.ToStep = from, to
		q["from_step"], q["to_step"] = from, to
	}
	bins := 0
	switch fq.View {
	case "trends":
		iv := []timebucket.Interval{timebucket.Hour, timebucket.Day, timebucket.Week}[r.IntN(3)]
		fq.Bounds = timebucket.Bounds(g.from, g.to, iv, g.loc, timebucket.Monday)
		q["interval"] = iv.String()
	case "time_to_convert":
		if r.IntN(2) == 0 {
			bins = 1 + r.IntN(8)
			q["bins"] = bins
		}
	}
	g.common(q, &fq.Common, true)
	if b := fq.Breakdown; b != nil && !b.User && r.IntN(3) > 0 {
		attrs := []string{"entry", "first_touch", "last_touch", "all_steps", "step"}
		fq.Attribution = attrs[r.IntN(len(attrs))]
		bj := q["breakdown"].(map[string]any)
		bj["attribution"] = fq.Attribution
		if fq.Attribution == "step" {
			fq.AttrStep = 1
			if fq.Order != "unordered" {
				fq.AttrStep = 1 + r.IntN(n)
			}
			bj["attribution"] = map[string]any{"step": fq.AttrStep}
		}
	}
	rows, outs := testutil.NaiveFunnelRows(data, fq)
	plainQ := fq
	if fq.Attribution == "all_steps" || fq.Attribution == "step" {
		plainQ.Breakdown, plainQ.Attribution = nil, ""
	}
	plain := testutil.NaiveFunnelOutcomes(data, plainQ)
	// The users behind one number.
	var list map[string]any
	var off, lim int
	var want func(os []testutil.NaiveOutcome) bool // selects a user's outcomes
	if r.IntN(2) == 0 {
		list = map[string]any{}
		switch fq.View {
		case "steps":
			k, dropped := 1+r.IntN(n), r.IntN(2) == 0
			list["step"], list["dropped"] = k, dropped
			want = func(os []testutil.NaiveOutcome) bool {
				return len(os) > 0 && (os[0].Step == k || (!dropped && os[0].Step > k))
			}
		case "trends":
			b := r.IntN(len(fq.Bounds) - 1)
			status := []string{"entered", "converted"}[r.IntN(2)]
			list["bucket"], list["status"] = fmtInstant(max(fq.Bounds[b], g.from)), status
			want = func(os []testutil.NaiveOutcome) bool {
				for _, o := range os {
					if o.Bucket == b && o.Step >= from && (status == "entered" || o.Step >= to) {
						return true
					}
				}
				return false
			}
		case "time_to_convert":
			list["bin"] = r.IntN(max(bins, 1))
		}
		off, lim = g.page(list)
		if rows != nil && r.IntN(2) == 0 {
			list["breakdown_value"] = rows[r.IntN(len(rows))]
		}
		q["list"] = list
	}
	res := g.run(t, eng, q).(*FunnelResult)
	check := func(what string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("funnel %s: %s\ngot  %+v\nwant %+v", js(q), what, got, want)
		}
	}
	// Tables per row, "" = all users.
	tables := map[string]map[string][]testutil.NaiveOutcome{"": {}}
	for u, os := range plain {
		if len(os) > 0 { // a user without outcomes has no entry
			tables[""][u] = append(tables[""][u], os...)
		}
	}
	for u, os := range outs {
		for _, o := range os {
			if fq.Breakdown == nil {
				break
			}
			if tables["r:"+o.Row] == nil {
				tables["r:"+o.Row] = map[string][]testutil.NaiveOutcome{}
			}
			tables["r:"+o.Row][u] = append(tables["r:"+o.Row][u], o)
		}
	}
	var gotRows []string
	for _, b := range res.Breakdown {
		gotRows = append(gotRows, b.Value)
	}
	if rows == nil {
		rows = []string{}
	}
	if gotRows == nil {
		gotRows = []string{}
	}
	check("breakdown values", gotRows, rows)
	durs := func(outs map[string][]testutil.NaiveOutcome) map[string]int64 {
		return testutil.FunnelDurations(outs, from, to, "", true)
	}
	var extra []int64
	for row, tb := range tables {
		if row != "" {
			for _, d := range durs(tb) {
				extra = append(extra, d)
			}
		}
	}
	viewOf := func(row string) ([]FunnelStep, []FunnelTrendBucket, *FunnelTimes) {
		if row == "" {
			return res.Steps, res.Buckets, res.FunnelTimes
		}
		i := slices.Index(rows, row[2:])
		return res.Breakdown[i].Steps, res.Breakdown[i].Buckets, res.Breakdown[i].FunnelTimes
	}
	for row, tb := range tables {
		gs, gb, gt := viewOf(row)
		switch fq.View {
		case "steps":
			paths := map[string]testutil.NaivePath{}
			for u, os := range tb {
				paths[u] = testutil.NaivePath{Step: os[0].Step, Times: os[0].Times, First: os[0].First}
			}
			for k, s := range testutil.FunnelTable(paths, n) {
				gk := gs[k]
				same := gk.Users == s.Users && gk.Conversion == s.Conversion && gk.ConversionFromPrevious == s.ConversionFromPrevious &&
					(gk.AvgSeconds != nil) == s.HasTime && (!s.HasTime || (*gk.AvgSeconds == s.AvgSeconds && *gk.MedianSeconds == s.MedianSeconds))
				if !same {
					t.Fatalf("funnel %s: row %q step %d: got %+v want %+v", js(q), row, k+1, gk, s)
				}
			}
		case "trends":
			relabelled := map[string][]testutil.NaiveOutcome{}
			for u, os := range tb {
				for _, o := range os {
					o.Row = ""
					relabelled[u] = append(relabelled[u], o)
				}
			}
			tr := testutil.FunnelTrends(relabelled, len(fq.Bounds)-1, from, to)[""]
			for b := range len(fq.Bounds) - 1 {
				var e, c int
				if tr.Entered != nil {
					e, c = len(tr.Entered[b]), len(tr.Converted[b])
				}
				if gb[b].Entered != int64(e) || gb[b].Converted != int64(c) || gb[b].Start != formatTime(fq.Bounds[b], g.loc) {
					t.Fatalf("funnel %s: row %q bucket %d: got %+v want entered %d converted %d", js(q), row, b, gb[b], e, c)
				}
			}
		case "time_to_convert":
			h := testutil.NaiveHistogram(durs(tables[""]), extra, bins, durs(tb))
			if gt.Users != int64(len(durs(tb))) || len(gt.Histogram) != len(h.Bins) {
				t.Fatalf("funnel %s: row %q: got %+v want %d users, %d bins", js(q), row, gt, len(durs(tb)), len(h.Bins))
			}
			for i, bin := range gt.Histogram {
				if bin.Users != int64(len(h.Bins[i])) || bin.FromSeconds != h.Lo+int64(i)*h.Width || bin.ToSeconds != h.Lo+int64(i+1)*h.Width {
					t.Fatalf("funnel %s: row %q bin %d: got %+v want %d users from %d width %d", js(q), row, i, bin, len(h.Bins[i]), h.Lo, h.Width)
				}
			}
		}
	}
	if list == nil {
		return
	}
	tb := tables[""]
	if bv, ok := list["breakdown_value"]; ok {
		tb = tables["r:"+bv.(string)]
	}
	if fq.View == "time_to_convert" {
		k := list["bin"].(int)
		if k >= len(res.Histogram) {
			return // an invalid bin, refused (checked below by the error test)
		}
		h := testutil.NaiveHistogram(durs(tables[""]), extra, len(res.Histogram), durs(tb))
		sel := map[string]bool{}
		for _, u := range h.Bins[k] {
			sel[u] = true
		}
		want = func(os []testutil.NaiveOutcome) bool { return len(os) > 0 && sel[userOf(tb, os)] }
	}
	var users []string
	for u, os := range tb {
		if want(os) {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	check("list count", res.List.Users, int64(len(users)))
	check("list page", res.List.UserIDs, pageOf(users, off, lim))
}

// userOf returns the user whose outcomes os are in tb.
func userOf(tb map[string][]testutil.NaiveOutcome, os []testutil.NaiveOutcome) string {
	for u, o := range tb {
		if len(o) > 0 && &o[0] == &os[0] {
			return u
		}
	}
	return ""
}
