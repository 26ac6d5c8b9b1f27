package query

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// TestNewKindsAgainstNaive is the end-to-end differential test of the
// stickiness, lifecycle, paths and attribution kinds: random trails
// imported into 1-8 shards, queries with random options — filters per
// matcher and global, breakdowns with limits, cohort filters, paged lists
// of every number — run through the JSON path and compared with the naive
// references, for 150 seeds.
func TestNewKindsAgainstNaive(t *testing.T) { runSeeds(t, 150, 30, kindsSeed) }

func kindsSeed(t *testing.T, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	data, eng := diffStore(t, r, seed)
	kindsCheck(t, r, data, eng, nil)
}

// kindsCheck draws from r a stickiness, a lifecycle, a paths and an
// attribution query (with lists) and checks each answer of eng against
// the naive reference over data; around, when not nil, runs each query
// instead of runJSON.
func kindsCheck(t *testing.T, r *rand.Rand, data testutil.Data, eng *Engine, around runner) {
	g, tz := drawGen(r, around)
	rng := map[string]string{"from": fmtInstant(g.from), "to": fmtInstant(g.to)}
	t.Run("stickiness", func(t *testing.T) { kindsStickiness(t, g, eng, data, rng, tz) })
	t.Run("lifecycle", func(t *testing.T) { kindsLifecycle(t, g, eng, data, rng, tz) })
	t.Run("paths", func(t *testing.T) { kindsPaths(t, g, eng, data, rng, tz) })
	t.Run("attribution", func(t *testing.T) { kindsAttribution(t, g, eng, data, rng, tz) })
}

// drawGen draws a time zone and a query range from r and returns a
// generator of queries over them (run through around, nil: runJSON) and
// the zone's name.
func drawGen(r *rand.Rand, around runner) (*diffGen, string) {
	tz := zones[r.IntN(len(zones))]
	loc, _ := time.LoadLocation(tz)
	span0 := time.Date(2021, 3, 25, 0, 0, 0, 0, time.UTC).UnixMicro()
	from := span0 + r.Int64N(6*24)*3600e6 + r.Int64N(3)*1e6
	to := from + 1 + r.Int64N(5*86400e6)
	return &diffGen{r: r, from: from, to: to, loc: loc, around: around}, tz
}

// interval draws an interval and week start (hours only over short
// ranges).
func (g *diffGen) interval() (timebucket.Interval, timebucket.WeekStart) {
	iv := timebucket.Interval(1 + g.r.IntN(4))
	if iv == timebucket.Hour && g.to-g.from > 2*86400e6 {
		iv = timebucket.Day
	}
	return iv, timebucket.WeekStart(g.r.IntN(2))
}

// listValue draws a breakdown_value for a list among values (nil: none).
func (g *diffGen) listValue(list map[string]any, values []string) *string {
	if len(values) == 0 || g.r.IntN(2) == 0 {
		return nil
	}
	v := values[g.r.IntN(len(values))]
	list["breakdown_value"] = v
	return &v
}

func kindsStickiness(t *testing.T, g *diffGen, eng *Engine, data testutil.Data, rng map[string]string, tz string) {
	r := g.r
	iv, ws := g.interval()
	sq := testutil.StickinessQuery{Interval: iv, WeekStart: ws, From: g.from, To: g.to, MinEvents: 1 + r.IntN(2)}
	var series []map[string]any
	for range 1 + r.IntN(3) {
		mj, m := g.matcher()
		sq.Events, sq.Where = append(sq.Events, m.Event), append(sq.Where, m.Where)
		series = append(series, mj)
	}
	cumulative := r.IntN(2) == 0
	q := map[string]any{"kind": "stickiness", "app": "d", "range": rng, "tz": tz, "interval": iv.String(),
		"week_start": ws.String(), "series": series, "min_events": sq.MinEvents, "cumulative": cumulative}
	g.common(q, &sq.Common, true)
	want := testutil.NaiveStickiness(data, sq)
	nb := len(timebucket.Bounds(g.from, g.to, iv, g.loc, ws)) - 1
	var list map[string]any
	var off, lim, si, n int
	var value *string
	if r.IntN(2) == 0 {
		si, n = r.IntN(len(series)), 1+r.IntN(nb)
		list = map[string]any{"series": si, "intervals": n}
		off, lim = g.page(list)
		if sq.Breakdown != nil {
			var values []string
			for _, row := range want[si] {
				values = append(values, row.Value)
			}
			value = g.listValue(list, values)
		}
		q["list"] = list
	}
	res := g.run(t, eng, q).(*StickinessResult)
	var flat []testutil.StickinessRow
	for _, rows := range want {
		flat = append(flat, rows...)
	}
	if len(res.Series) != len(flat) {
		t.Fatalf("stickiness %s: %d rows, want %d", js(q), len(res.Series), len(flat))
	}
	for i, w := range flat {
		got := res.Series[i]
		counts := slices.Clone(w.Counts)
		if cumulative {
			for k := len(counts) - 2; k >= 0; k-- {
				counts[k] += counts[k+1]
			}
		}
		if gv := deref(got.BreakdownValue); gv != w.Value || !slices.Equal(got.Counts, counts) || got.Users != w.Users || len(got.Counts) != nb {
			t.Fatalf("stickiness %s\nrow %d: got %q %v %d, want %q %v %d", js(q), i, gv, got.Counts, got.Users, w.Value, counts, w.Users)
		}
	}
	if list != nil {
		row := testutil.StickinessRow{}
		if sq.Breakdown == nil || value == nil {
			all := sq
			all.Breakdown = nil
			row = testutil.NaiveStickiness(data, all)[si][0]
		} else {
			for _, w := range want[si] {
				if w.Value == *value {
					row = w
				}
			}
		}
		users := testutil.StickinessUsers(row, n, cumulative)
		checkList(t, q, res.List, users, off, lim)
		if value != nil || sq.Breakdown == nil {
			// The list's size is the number shown (rows are in series
			// order).
			first := 0
			for s := range si {
				first += len(want[s])
			}
			for _, row := range res.Series[first : first+len(want[si])] {
				if value == nil || deref(row.BreakdownValue) == *value {
					if res.List.Users != row.Counts[n-1] {
						t.Fatalf("stickiness %s: list of %d users, the count shown is %d", js(q), res.List.Users, row.Counts[n-1])
					}
				}
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkList compares a list result with the expected sorted users.
func checkList(t *testing.T, q map[string]any, l *ListResult, users []string, off, lim int) {
	t.Helper()
	if l == nil {
		t.Fatalf("%s: no list in the result", js(q))
	}
	if l.Users != int64(len(users)) || !slices.Equal(l.UserIDs, pageOf(users, off, lim)) {
		t.Fatalf("%s: list %d %v, want %d %v", js(q), l.Users, l.UserIDs, len(users), pageOf(users, off, lim))
	}
}

func kindsLifecycle(t *testing.T, g *diffGen, eng *Engine, data testutil.Data, rng map[string]string, tz string) {
	r := g.r
	iv, ws := g.interval()
	mj, m := g.matcher()
	lq := testutil.LifecycleQuery{Event: m.Event, Where: m.Where, Interval: iv, WeekStart: ws, From: g.from, To: g.to}
	q := map[string]any{"kind": "lifecycle", "app": "d", "range": rng, "tz": tz, "interval": iv.String(), "week_start": ws.String(), "event": mj}
	if r.IntN(4) == 0 {
		q["event"] = m.Event // the short form
		if len(m.Where) > 0 {
			q["event"] = mj
		}
	}
	g.common(q, &lq.Common, false)
	if r.IntN(2) == 0 {
		b := &testutil.Breakdown{Prop: userPropNames[r.IntN(4)], User: true, Limit: r.IntN(4)}
		q["breakdown"] = map[string]any{"property": b.Prop, "source": "user", "limit": b.Limit}
		if b.Limit == 0 {
			b.Limit = DefaultBreakdownLimit
		}
		lq.Breakdown = b
	}
	want := testutil.NaiveLifecycle(data, lq)
	overall := lq
	overall.Breakdown = nil
	all := testutil.NaiveLifecycle(data, overall)[0]
	bounds := timebucket.Bounds(g.from, g.to, iv, g.loc, ws)
	var list map[string]any
	var off, lim, b, st int
	var value *string
	if r.IntN(2) == 0 {
		b, st = r.IntN(len(bounds)-1), r.IntN(4)
		at := bounds[b] + r.Int64N(bounds[b+1]-bounds[b])
		list = map[string]any{"bucket": fmtInstant(max(at, bounds[0])), "status": analysis.LifecycleStatus(st).String()}
		off, lim = g.page(list)
		if lq.Breakdown != nil {
			var values []string
			for _, row := range want {
				values = append(values, row.Value)
			}
			value = g.listValue(list, values)
		}
		q["list"] = list
	}
	res := g.run(t, eng, q).(*LifecycleResult)
	check := func(what string, got []LifecycleBucket, w testutil.LifecycleRow) {
		t.Helper()
		if len(got) != len(w.Buckets) {
			t.Fatalf("lifecycle %s %s: %d buckets, want %d", js(q), what, len(got), len(w.Buckets))
		}
		for i, wb := range w.Buckets {
			gb := got[i]
			wantB := LifecycleBucket{Start: formatTime(wb.Start, g.loc), New: int64(len(wb.Status[0])), Returning: int64(len(wb.Status[1])),
				Resurrecting: int64(len(wb.Status[2])), Dormant: -int64(len(wb.Status[3])), Incomplete: gb.Incomplete}
			if gb != wantB {
				t.Fatalf("lifecycle %s %s bucket %d: got %+v want %+v", js(q), what, i, gb, wantB)
			}
		}
	}
	check("overall", res.Buckets, all)
	if len(res.Breakdown) != len(want) && lq.Breakdown != nil {
		t.Fatalf("lifecycle %s: %d breakdown values, want %d", js(q), len(res.Breakdown), len(want))
	}
	for i, w := range want {
		if lq.Breakdown == nil {
			break
		}
		if res.Breakdown[i].Value != w.Value {
			t.Fatalf("lifecycle %s: value %d is %q, want %q", js(q), i, res.Breakdown[i].Value, w.Value)
		}
		check(w.Value, res.Breakdown[i].Buckets, w)
	}
	if list != nil {
		row := all
		if value != nil {
			for _, w := range want {
				if w.Value == *value {
					row = w
				}
			}
		}
		checkList(t, q, res.List, orEmptyList(row.Buckets[b].Status[st]), off, lim)
	}
}

func orEmptyList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func kindsPaths(t *testing.T, g *diffGen, eng *Engine, data testutil.Data, rng map[string]string, tz string) {
	r := g.r
	gaps := []string{"1s", "30m", "1h", "6h", "1d"}
	gapText := gaps[r.IntN(len(gaps))]
	gap, _ := ParseDuration(gapText)
	pq := testutil.PathsQuery{SessionGap: gap, Steps: 2 + r.IntN(6), From: g.from, To: g.to}
	q := map[string]any{"kind": "paths", "app": "d", "range": rng, "tz": tz, "session_gap": gapText, "steps": pq.Steps}
	switch r.IntN(3) {
	case 0:
		pq.Events = []string{"a", "b", "c"}[:1+r.IntN(3)]
		q["events"] = pq.Events
	case 1:
		q["events"] = AnyEvent
	}
	if r.IntN(2) == 0 {
		pq.ItemProp = "s"
		q["item_property"] = "s"
	}
	for _, x := range []string{"a", "x", "zz"} {
		if r.IntN(4) == 0 {
			pq.Exclude = append(pq.Exclude, x)
		}
	}
	if pq.Exclude != nil {
		q["exclude"] = pq.Exclude
	}
	if r.IntN(2) == 0 {
		mj, m := g.matcher()
		pq.Start, q["start"] = &m, mj
	}
	if r.IntN(2) == 0 {
		mj, m := g.matcher()
		pq.End, q["end"] = &m, mj
	}
	minSessions, maxEdges := int64(r.IntN(3)), 1+r.IntN([]int{4, 30}[r.IntN(2)])
	q["min_sessions"], q["max_edges"] = minSessions, maxEdges
	g.common(q, &pq.Common, false)
	all := testutil.NaivePaths(data, pq)
	want := testutil.PathsResultEdges(all, minSessions, maxEdges)
	var list map[string]any
	var off, lim int
	var users []string
	if r.IntN(2) == 0 && len(all) > 0 {
		e := all[r.IntN(len(all))]
		list = map[string]any{"source": e.Source, "target": e.Target}
		off, lim = g.page(list)
		users = e.Users
		q["list"] = list
	}
	res := g.run(t, eng, q).(*PathsResult)
	if len(res.Edges) != len(want) {
		t.Fatalf("paths %s: %d edges, want %d\ngot  %+v\nwant %+v", js(q), len(res.Edges), len(want), res.Edges, want)
	}
	for i, w := range want {
		e := res.Edges[i]
		avg := float64(w.Micros) / float64(w.Sessions) / 1e6
		if e.Source != w.Source || e.Target != w.Target || e.Sessions != w.Sessions || e.Users != int64(len(w.Users)) || e.AvgSeconds != avg {
			t.Fatalf("paths %s edge %d: got %+v want %+v (avg %v)", js(q), i, e, w, avg)
		}
	}
	if list != nil {
		checkList(t, q, res.List, users, off, lim)
	}
}

func kindsAttribution(t *testing.T, g *diffGen, eng *Engine, data testutil.Data, rng map[string]string, tz string) {
	r := g.r
	durs := []string{"0s", "1s", "30m", "1h", "6h", "1d", "3d"}
	dur := func() (string, int64) {
		s := durs[r.IntN(len(durs))]
		d, _ := ParseDuration(s)
		return s, d
	}
	cj, cm := g.matcher()
	aq := testutil.AttributionQuery{Conversion: cm, Channel: []string{"s", "n", "b"}[r.IntN(3)],
		Model: analysis.AttributionModel(r.IntN(5)), First: r.IntN(3) == 0, From: g.from, To: g.to}
	hlText := durs[1+r.IntN(len(durs)-1)]
	hl, _ := ParseDuration(hlText)
	aq.HalfLife = hl
	q := map[string]any{"kind": "attribution", "app": "d", "range": rng, "tz": tz, "conversion": cj, "channel": aq.Channel,
		"model": aq.Model.String(), "half_life": hlText}
	if aq.First {
		q["conversions"] = "first"
	}
	var tps []map[string]any
	for range 1 + r.IntN(3) {
		mj, m := g.matcher()
		ls, lb := dur()
		mj["lookback"] = ls
		tps = append(tps, mj)
		aq.Touchpoints, aq.Lookbacks = append(aq.Touchpoints, m), append(aq.Lookbacks, lb)
	}
	q["touchpoints"] = tps
	if r.IntN(2) == 0 {
		aq.Value = []string{"n", "f"}[r.IntN(2)]
		q["value"] = aq.Value
	}
	if r.IntN(2) == 0 {
		mj, m := g.matcher()
		ws, w := dur()
		mj["window"] = ws
		aq.Subsequent, aq.SubWindow = &m, w
		if r.IntN(2) == 0 {
			aq.SubValue = []string{"n", "f"}[r.IntN(2)]
			mj["value"] = aq.SubValue
		}
		q["subsequent"] = mj
	}
	if r.IntN(2) == 0 {
		aq.Interval, aq.WeekStart = g.interval()
		q["interval"], q["week_start"] = aq.Interval.String(), aq.WeekStart.String()
	}
	g.common(q, &aq.Common, true)
	rows, tot := testutil.NaiveAttribution(data, aq)
	var list map[string]any
	var off, lim int
	var users []string
	if r.IntN(2) == 0 && len(rows) > 0 {
		row := rows[r.IntN(len(rows))]
		list = map[string]any{"channel": row.Channel}
		off, lim = g.page(list)
		users = row.Total.Users
		if aq.Breakdown != nil {
			if r.IntN(2) == 0 {
				list["breakdown_value"] = row.Value
			} else {
				// over all users of the channel
				all := aq
				all.Breakdown = nil
				users = nil
				arows, _ := testutil.NaiveAttribution(data, all)
				for _, a := range arows {
					if a.Channel == row.Channel {
						users = a.Total.Users
					}
				}
			}
		}
		q["list"] = list
	}
	res := g.run(t, eng, q).(*AttributionResult)
	near := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	if res.Total.Conversions != tot.Conversions || res.Total.Users != tot.Users || !near(res.Total.Value, tot.Value) ||
		(aq.Subsequent != nil && (res.Total.Subsequent.Events != tot.SubEvents || !near(res.Total.Subsequent.Value, tot.SubValue))) {
		t.Fatalf("attribution %s: total %+v %+v, want %+v", js(q), res.Total, res.Total.Subsequent, tot)
	}
	if len(res.Channels) != len(rows) {
		t.Fatalf("attribution %s: %d channel rows, want %d\ngot  %+v\nwant %+v", js(q), len(res.Channels), len(rows), res.Channels, rows)
	}
	var sum float64
	for i, w := range rows {
		c := res.Channels[i]
		sum += c.Conversions
		ok := c.Channel == w.Channel && deref(c.BreakdownValue) == w.Value && near(c.Conversions, w.Total.Conversions) &&
			c.Users == int64(len(w.Total.Users)) && near(c.Value, w.Total.Value) && len(c.Buckets) == len(w.Buckets)
		if aq.Subsequent != nil {
			ok = ok && near(c.Subsequent.Events, w.Total.SubEvents) && near(c.Subsequent.Value, w.Total.SubValue)
		}
		for b, wb := range w.Buckets {
			ok = ok && near(c.Buckets[b].Conversions, wb.Conversions) && c.Buckets[b].Users == int64(len(wb.Users)) && near(c.Buckets[b].Value, wb.Value)
		}
		if !ok {
			t.Fatalf("attribution %s\nrow %d: got %+v\nwant %+v", js(q), i, c, w)
		}
	}
	if n := float64(res.Total.Conversions); math.Abs(sum-n) > 1e-9*n {
		t.Fatalf("attribution %s: Σ conversions over channels %v, want %v", js(q), sum, n)
	}
	if list != nil {
		checkList(t, q, res.List, orEmptyList(users), off, lim)
	}
}
