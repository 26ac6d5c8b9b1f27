package query

import (
	"bytes"
	"context"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// runTrend plans and runs a trend (spec §4): per series, breakdown value
// and calendar bucket the series' math, plus range totals. With a
// breakdown limit, the "(other)" row of count and property maths is the
// merge of the other values; for the maths that count users it is
// recomputed by a second scan that groups the other values into one key,
// so users stay distinct.
func (e *Engine) runTrend(ctx context.Context, p *plan) (*TrendResult, error) {
	q := p.q
	ivName := q.Interval
	if ivName == "" {
		ivName = "day"
	}
	iv, err := timebucket.ParseInterval(ivName)
	if err != nil {
		return nil, invalid("interval", "%v", err)
	}
	ws, err := timebucket.ParseWeekStart(q.WeekStart)
	if err != nil {
		return nil, invalid("week_start", "%v", err)
	}
	if len(q.Series) == 0 {
		return nil, invalid("series", "a trend needs at least one series")
	}
	spec := analysis.TrendSpec{From: p.from, To: p.to}
	var look int64
	for i, s := range q.Series {
		f := fieldIdx("series", i)
		mathName := s.Math
		if mathName == "" {
			mathName = "count"
		}
		m, err := analysis.ParseTrendMath(mathName)
		if err != nil {
			return nil, invalid(f+".math", "%v", err)
		}
		// Quantiles of one property over one matcher share its bit, and so
		// one list of values per cell (median and p90 of a price keep the
		// prices once).
		bit := -1
		if m.Quantile() {
			for j, o := range q.Series[:i] {
				if spec.Series[j].Math.Quantile() && o.Event == s.Event && o.Property == s.Property && sameFilters(o.Where, s.Where) {
					bit = spec.Series[j].Bit
					break
				}
			}
		}
		if bit < 0 {
			if bit, err = p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, f, true); err != nil {
				return nil, err
			}
		}
		ts := analysis.TrendSeries{Math: m, Bit: bit}
		switch {
		case m.NeedsProperty() && s.Property == "":
			return nil, invalid(f+".property", "math %s needs a numeric event property", m)
		case m.NeedsProperty():
			t, ok := p.propType(s.Property, false)
			if !ok {
				return nil, p.unknownProp(f+".property", s.Property, false)
			}
			if t != event.TypeInt && t != event.TypeFloat {
				return nil, invalid(f+".property", "math %s needs an int or float property; %q is %s", m, s.Property, t)
			}
			ts.Col, ts.Float = p.addCol(s.Property, false), t == event.TypeFloat
		case s.Property != "":
			return nil, invalid(f+".property", "math %s takes no property", m)
		}
		look = max(look, m.Window())
		spec.Series = append(spec.Series, ts)
	}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	if bd != nil {
		spec.Breakdown = bd.src
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	spec.Bounds = timebucket.Bounds(p.from, p.to, iv, p.loc, ws)
	if len(spec.Bounds) > maxBuckets+1 {
		return nil, invalid("interval", "%d %s buckets in the range; at most %d", len(spec.Bounds)-1, iv, maxBuckets)
	}
	// A users series only asks in which buckets, and whether in
	// [From, To), a user has a row of it (Trend.Add): the rows of its
	// matcher alone may be thinned — unless the breakdown reads each
	// row's own value.
	if bd == nil || bd.src.From != analysis.KeyEvent {
		for _, s := range spec.Series {
			if s.Math == analysis.MathUsers {
				p.thin = thinning(s.Bit, spec.Bounds, p.from, p.to)
				break
			}
		}
	}
	var tl *trendList
	if q.List != nil {
		if tl, err = p.parseTrendList(&spec); err != nil {
			return nil, err
		}
	}
	accs := make([]*analysis.Trend, e.cfg.Workers)
	for i := range accs {
		if accs[i], err = analysis.NewTrend(spec); err != nil {
			return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
	}
	vs := newVisitors(p, len(accs), func(i int) (func(*trail.Trail), func() int64) {
		a := accs[i]
		return func(t *trail.Trail) { a.Add(t) }, a.Bytes
	})
	if err := e.scan(ctx, p, p.from-look, p.to, vs, false); err != nil {
		return nil, err
	}
	merge := timer()
	for _, a := range accs[1:] {
		accs[0].Merge(a)
	}
	acc := accs[0]
	res := &TrendResult{Kind: "trend", Range: p.resolvedRange(), TZ: p.loc.String()}
	if bd == nil {
		kr := acc.Result(nil)
		for i := range q.Series {
			res.Series = append(res.Series, p.trendSeries(i, spec, kr.Series[i].Rows[0], nil))
		}
		p.stats.MergeMS = merge()
		return e.trendDone(ctx, p, res, tl, nil, nil)
	}
	// Rank each series' values by range total and keep the first limit.
	first := acc.Result(nil)
	ranks := make([]ranked, len(q.Series))
	var recompute []int // series whose "(other)" needs a second pass
	for i, sr := range first.Series {
		keys := make([]analysis.Key, len(sr.Rows))
		totals := make([]float64, len(sr.Rows))
		for r, row := range sr.Rows {
			keys[r], totals[r] = row.Key, row.Total
		}
		ranks[i] = p.rank(bd, keys, totals)
		if ranks[i].other && !spec.Series[i].Math.Mergeable() {
			recompute = append(recompute, i)
		}
	}
	grouped := acc.Result(func(s int, k analysis.Key) analysis.Key { return ranks[s].group(k) })
	rows := make([]map[analysis.Key]analysis.TrendRow, len(q.Series))
	for i, sr := range grouped.Series {
		rows[i] = map[analysis.Key]analysis.TrendRow{}
		for _, row := range sr.Rows {
			rows[i][row.Key] = row
		}
	}
	p.stats.MergeMS = merge()
	if len(recompute) > 0 {
		others, err := e.recomputeOther(ctx, p, spec, look, recompute, ranks)
		if err != nil {
			return nil, err
		}
		for j, i := range recompute {
			rows[i][otherKey] = others[j]
		}
	}
	merge = timer()
	for i := range q.Series {
		for _, k := range ranks[i].order {
			res.Series = append(res.Series, p.trendSeries(i, spec, rows[i][k], bd))
		}
		if ranks[i].other {
			row, ok := rows[i][otherKey]
			if !ok { // the other values' events all fell out of the recomputation's groups
				row = analysis.TrendRow{Key: otherKey, Buckets: make([]float64, len(spec.Bounds)-1)}
			}
			row.Key = otherKey
			res.Series = append(res.Series, p.trendSeries(i, spec, row, bd))
		}
	}
	p.stats.MergeMS += merge()
	var r *ranked
	if tl != nil {
		r = &ranks[q.List.Series]
	}
	return e.trendDone(ctx, p, res, tl, bd, r)
}

// trendDone adds the users of the query's list to res, when it has one
// (tl not nil; bd and r the breakdown and the listed series' ranking),
// and sets its stats.
func (e *Engine) trendDone(ctx context.Context, p *plan, res *TrendResult, tl *trendList, bd *breakdown, r *ranked) (*TrendResult, error) {
	if tl != nil {
		var err error
		if res.List, err = e.listTrend(ctx, p, tl, bd, r); err != nil {
			return nil, err
		}
	}
	res.Stats = p.stats
	return res, nil
}

// recomputeOther runs a second scan computing the "(other)" row of the
// given series exactly: one single-series accumulator per series, whose
// Group maps the series' kept values to nothing and the rest to otherKey.
func (e *Engine) recomputeOther(ctx context.Context, p *plan, spec analysis.TrendSpec, look int64, series []int, ranks []ranked) ([]analysis.TrendRow, error) {
	accs := make([][]*analysis.Trend, e.cfg.Workers)
	for w := range accs {
		for _, i := range series {
			r := &ranks[i]
			one := spec
			one.Series = []analysis.TrendSeries{spec.Series[i]}
			one.Group = func(k analysis.Key) (analysis.Key, bool) { return otherKey, !r.kept[k] }
			a, err := analysis.NewTrend(one)
			if err != nil {
				return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
			}
			accs[w] = append(accs[w], a)
		}
	}
	vs := newVisitors(p, len(accs), func(w int) (func(*trail.Trail), func() int64) {
		as := accs[w]
		return func(t *trail.Trail) {
				for _, a := range as {
					a.Add(t)
				}
			}, func() int64 {
				var n int64
				for _, a := range as {
					n += a.Bytes()
				}
				return n
			}
	})
	if err := e.scan(ctx, p, p.from-look, p.to, vs, false); err != nil {
		return nil, err
	}
	out := make([]analysis.TrendRow, len(series))
	for j := range series {
		for _, w := range accs[1:] {
			accs[0][j].Merge(w[j])
		}
		for _, row := range accs[0][j].Result(nil).Series[0].Rows {
			if row.Key == otherKey {
				out[j] = row
			}
		}
		if out[j].Buckets == nil {
			out[j] = analysis.TrendRow{Key: otherKey, Buckets: make([]float64, len(spec.Bounds)-1)}
		}
	}
	return out, nil
}

// trendSeries renders one row of query series i.
func (p *plan) trendSeries(i int, spec analysis.TrendSpec, row analysis.TrendRow, bd *breakdown) TrendSeries {
	s := p.q.Series[i]
	mathName := s.Math
	if mathName == "" {
		mathName = "count"
	}
	sr := TrendSeries{Series: i, Label: s.Label, Event: s.Event, Math: mathName, Property: s.Property, Total: row.Total}
	if sr.Label == "" {
		sr.Label = s.Event
	}
	if bd != nil {
		sr.BreakdownValue = ptr(p.label(bd, row.Key))
	}
	sr.Buckets = make([]TrendBucket, len(row.Buckets))
	for b, v := range row.Buckets {
		sr.Buckets[b] = TrendBucket{Start: formatTime(spec.Bounds[b], p.loc), Value: v,
			Incomplete: p.incomplete(spec.Bounds[b+1])}
	}
	return sr
}

// maxBuckets bounds the number of interval buckets of a trend or cohorts
// of a retention query (about 11 years of days, or 1.1 years of hours).
const maxBuckets = 10_000

// sameFilters reports whether a and b are the same filters in the same
// order (values compared as written).
func sameFilters(a, b []Filter) bool {
	return slices.EqualFunc(a, b, func(x, y Filter) bool {
		return x.Property == y.Property && x.Op == y.Op && x.Source == y.Source && bytes.Equal(x.Value, y.Value)
	})
}
