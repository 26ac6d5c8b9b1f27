package query

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// runTrend plans and runs a trend (spec §4, §12): the series of the
// query's range, its formulas, and with compare the same for the
// compared period (a second plan over the shifted range), current first.
func (e *Engine) runTrend(ctx context.Context, p *plan) (*TrendResult, error) {
	q := p.q
	if len(q.Series) == 0 {
		return nil, invalid("series", "a trend needs at least one series")
	}
	formulas, err := parseFormulas(q)
	if err != nil {
		return nil, err
	}
	var prev *plan
	if q.Compare != "" {
		from, to, err := p.compareRange(q.Compare)
		if err != nil {
			return nil, err
		}
		cq := *q
		cq.Range = &Range{From: formatTime(from, p.loc), To: formatTime(to, p.loc)}
		cq.Compare, cq.Formulas, cq.Formula, cq.List = "", nil, "", nil
		if prev, err = e.newPlan(&cq, p.snap, 0); err != nil {
			return nil, err
		}
		prev.budget = p.budget // one query, one budget
	}
	res, owner, err := e.trendPeriod(ctx, p)
	if err != nil {
		return nil, err
	}
	res.Formulas = evalFormulas(formulas, res.Series, owner, p.q.Breakdown != nil)
	if prev == nil {
		return res, nil
	}
	pres, powner, err := e.trendPeriod(ctx, prev)
	if err != nil {
		return nil, err
	}
	pf := evalFormulas(formulas, pres.Series, powner, p.q.Breakdown != nil)
	for i := range res.Series {
		res.Series[i].Period = "current"
	}
	for i := range res.Formulas {
		res.Formulas[i].Period = "current"
	}
	for i := range pres.Series {
		pres.Series[i].Period = "previous"
	}
	for i := range pf {
		pf[i].Period = "previous"
	}
	res.Series = append(res.Series, pres.Series...)
	res.Formulas = append(res.Formulas, pf...)
	cr := prev.resolvedRange()
	res.CompareRange = &cr
	res.Stats = addStats(res.Stats, pres.Stats)
	return res, nil
}

// compareRange returns the compared period of spec §12: "previous" is the
// range's length immediately before from — the same number of calendar
// days in the zone when the range is made of dates (local midnights),
// otherwise the same duration; an offset ("-1w", "-28d", "-1y") shifts
// both ends back by it, calendar units along the calendar of the zone.
func (p *plan) compareRange(c string) (from, to int64, err error) {
	if c == "previous" {
		if !p.calendar {
			return p.from - (p.to - p.from), p.from, nil
		}
		f := time.UnixMicro(p.from).In(p.loc)
		return f.AddDate(0, 0, -civilDays(p.from, p.to, p.loc)).UnixMicro(), p.from, nil
	}
	d, err := ParseDurationSpec(c, true)
	if err != nil || d.N >= 0 || c[0] != '-' {
		return 0, 0, invalid("compare", "want \"previous\" or a negative offset such as \"-1w\", \"-28d\", \"-1mo\" or \"-1y\", found %q", c)
	}
	if from, err = d.Shift(p.from, p.loc); err == nil {
		to, err = d.Shift(p.to, p.loc)
	}
	if err != nil {
		return 0, 0, invalid("compare", "offset %q is too large", c)
	}
	return from, to, nil
}

// civilDays returns the number of calendar days in loc from the date of
// from to the date of to.
func civilDays(from, to int64, loc *time.Location) int {
	a, b := time.UnixMicro(from).In(loc), time.UnixMicro(to).In(loc)
	da := time.Date(a.Year(), a.Month(), a.Day(), 0, 0, 0, 0, time.UTC)
	db := time.Date(b.Year(), b.Month(), b.Day(), 0, 0, 0, 0, time.UTC)
	return int(db.Sub(da) / (24 * time.Hour))
}

// addStats adds the work of a second run to a result's stats.
func addStats(a, b Stats) Stats {
	a.PlanMS += b.PlanMS
	a.ScanMS += b.ScanMS
	a.MergeMS += b.MergeMS
	a.EventsScanned += b.EventsScanned
	a.SegmentsRead += b.SegmentsRead
	a.SegmentsSkipped += b.SegmentsSkipped
	a.BlocksRead += b.BlocksRead
	a.BlocksSkipped += b.BlocksSkipped
	a.BytesRead += b.BytesRead
	a.PeakMemoryBytes = max(a.PeakMemoryBytes, b.PeakMemoryBytes)
	return a
}

// parseFormulas compiles the query's formulas (then its formula).
func parseFormulas(q *Query) ([]*formula, error) {
	srcs := q.Formulas
	fields := make([]string, len(srcs))
	for i := range srcs {
		fields[i] = fieldIdx("formulas", i)
	}
	if q.Formula != "" {
		srcs = append(slices.Clone(srcs), q.Formula)
		fields = append(fields, "formula")
	}
	var out []*formula
	for i, src := range srcs {
		f, err := parseFormula(src, len(q.Series))
		if err != nil {
			return nil, invalid(fields[i], "formula %q: %v", src, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// evalFormulas evaluates formulas per breakdown value and bucket on the
// series rows of one period (owner[i] is row i's series; spec §12): a
// value absent from a series
// counts 0 there; "(other)" pairs with "(other)"; the total applies the
// formula to the series' totals. Values are the union of the series'
// values, in the order the series list them, "(other)" last.
func evalFormulas(fs []*formula, rows []TrendSeries, owner []int, breakdown bool) []TrendFormula {
	if len(fs) == 0 {
		return nil
	}
	nseries := 0
	for _, o := range owner {
		nseries = max(nseries, o+1)
	}
	type key struct {
		series int
		value  string
	}
	byKey := map[key]*TrendSeries{}
	var values []string
	seen := map[string]bool{}
	other := false
	for i := range rows {
		r := &rows[i]
		v := ""
		if r.BreakdownValue != nil {
			v = *r.BreakdownValue
		}
		byKey[key{owner[i], v}] = r
		if v == otherLabel {
			other = true
		} else if !seen[v] {
			seen[v] = true
			values = append(values, v)
		}
	}
	if other {
		values = append(values, otherLabel)
	}
	nb := len(rows[0].Buckets)
	var out []TrendFormula
	vals := make([]float64, nseries)
	for _, f := range fs {
		for _, v := range values {
			tf := TrendFormula{Formula: f.src, Label: f.src, Buckets: make([]TrendFormulaBucket, nb)}
			if breakdown {
				tf.BreakdownValue = ptr(v)
			}
			at := func(b int) []float64 {
				for s := range vals {
					vals[s] = 0
					if r := byKey[key{s, v}]; r != nil {
						if b < 0 {
							vals[s] = r.Total
						} else {
							vals[s] = r.Buckets[b].Value
						}
					}
				}
				return vals
			}
			for b := range nb {
				tf.Buckets[b].Start = rows[0].Buckets[b].Start
				if x, ok := f.eval(at(b)); ok {
					tf.Buckets[b].Value = ptr(x)
				}
			}
			if x, ok := f.eval(at(-1)); ok {
				tf.Total = ptr(x)
			}
			out = append(out, tf)
		}
	}
	return out
}

// trendPeriod computes a trend's series over the plan's range (spec §4),
// and for each row the index of its series:
// per series, breakdown value and calendar bucket the series' math, plus
// range totals. With a breakdown limit, the "(other)" row of count and
// property maths is the merge of the other values; for the maths that
// count users it is recomputed by a second scan that groups the other
// values into one key, so users stay distinct.
func (e *Engine) trendPeriod(ctx context.Context, p *plan) (*TrendResult, []int, error) {
	q := p.q
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
			return nil, nil, invalid(f+".math", "%v", err)
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
				return nil, nil, err
			}
		}
		ts := analysis.TrendSeries{Math: m, Bit: bit}
		switch {
		case m.NeedsProperty() && s.Property == "":
			return nil, nil, invalid(f+".property", "math %s needs a numeric event property", m)
		case m.NeedsProperty():
			t, ok := p.propType(s.Property, false)
			if !ok {
				return nil, nil, p.unknownProp(f+".property", s.Property, false)
			}
			if t != event.TypeInt && t != event.TypeFloat {
				return nil, nil, invalid(f+".property", "math %s needs an int or float property; %q is %s", m, s.Property, t)
			}
			ts.Col, ts.Float = p.addCol(s.Property, false), t == event.TypeFloat
		case s.Property != "":
			return nil, nil, invalid(f+".property", "math %s takes no property", m)
		}
		look = max(look, m.Window())
		spec.Series = append(spec.Series, ts)
	}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, nil, err
	}
	if bd != nil {
		spec.Breakdown = bd.src
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, nil, err
	}
	if _, _, spec.Bounds, err = p.calendarBounds(ctx, "day"); err != nil {
		return nil, nil, err
	}
	// A users series only asks in which buckets, and whether in
	// [From, To), a user has a row of it (Trend.Add): the rows of its
	// matcher alone may be thinned — unless the breakdown reads each
	// row's own value.
	if bd == nil || bd.src.From != analysis.KeyEvent {
		for _, s := range spec.Series {
			if s.Math == analysis.MathUsers {
				p.thin = e.thinning(s.Bit, spec.Bounds, p.from, p.to)
				break
			}
		}
	}
	var tl *trendList
	if q.List != nil {
		if tl, err = p.parseTrendList(&spec); err != nil {
			return nil, nil, err
		}
	}
	accs := make([]*analysis.Trend, e.cfg.Workers)
	for i := range accs {
		if accs[i], err = analysis.NewTrend(spec); err != nil {
			return nil, nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
	}
	vs := newVisitors(p, len(accs), func(i int) accumulator { return accs[i] })
	if err := e.scan(ctx, p, p.from-look, p.to, vs, false); err != nil {
		return nil, nil, err
	}
	merge := timer()
	acc, err := mergeAll(ctx, accs)
	if err != nil {
		return nil, nil, err
	}
	res := &TrendResult{Kind: "trend", Range: p.resolvedRange(), TZ: p.loc.String()}
	starts := p.bucketStarts(spec.Bounds)
	var owner []int
	if bd == nil {
		kr := acc.Result(nil)
		if err := p.chargeResult(len(q.Series), len(starts)); err != nil {
			return nil, nil, err
		}
		for i := range q.Series {
			res.Series = append(res.Series, p.trendSeries(i, spec, starts, kr.Series[i].Rows[0], nil))
			owner = append(owner, i)
		}
		p.stats.MergeMS = merge()
		res, err := e.trendDone(ctx, p, res, tl, nil, nil)
		return res, owner, err
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
		if ranks[i], err = p.rank(ctx, bd, keys, totals); err != nil {
			return nil, nil, err
		}
		if ranks[i].other && !spec.Series[i].Math.Mergeable() {
			recompute = append(recompute, i)
		}
	}
	grouped := acc.Result(func(s int, k analysis.Key) analysis.Key { return ranks[s].group(k) })
	rows := make([]map[analysis.Key]analysis.TrendRow, len(q.Series))
	nrows := 0
	for i, sr := range grouped.Series {
		rows[i] = map[analysis.Key]analysis.TrendRow{}
		for _, row := range sr.Rows {
			rows[i][row.Key] = row
		}
		nrows += len(ranks[i].order) + b2i(ranks[i].other)
	}
	if err := p.chargeResult(nrows, len(starts)); err != nil {
		return nil, nil, err
	}
	p.stats.MergeMS = merge()
	if len(recompute) > 0 {
		others, err := e.recomputeOther(ctx, p, spec, look, recompute, ranks)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range recompute {
			rows[i][otherKey] = others[j]
		}
	}
	merge = timer()
	for i := range q.Series {
		for _, k := range ranks[i].order {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			res.Series = append(res.Series, p.trendSeries(i, spec, starts, rows[i][k], bd))
			owner = append(owner, i)
		}
		if ranks[i].other {
			row, ok := rows[i][otherKey]
			if !ok { // the other values' events all fell out of the recomputation's groups
				row = analysis.TrendRow{Key: otherKey, Buckets: make([]float64, len(spec.Bounds)-1)}
			}
			row.Key = otherKey
			res.Series = append(res.Series, p.trendSeries(i, spec, starts, row, bd))
			owner = append(owner, i)
		}
	}
	p.stats.MergeMS += merge()
	var r *ranked
	if tl != nil {
		r = &ranks[q.List.Series]
	}
	res, err = e.trendDone(ctx, p, res, tl, bd, r)
	return res, owner, err
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

// trendSet is one worker's trends of a scan that feeds several, an
// accumulator: every trail goes to each, and their memory is summed.
type trendSet []*analysis.Trend

func (ts trendSet) Add(t *trail.Trail) {
	for _, a := range ts {
		a.Add(t)
	}
}

func (ts trendSet) Bytes() int64 {
	var n int64
	for _, a := range ts {
		n += a.Bytes()
	}
	return n
}

// recomputeOther runs a second scan computing the "(other)" row of the
// given series exactly: one single-series accumulator per series, whose
// Group maps the series' kept values to nothing and the rest to otherKey.
func (e *Engine) recomputeOther(ctx context.Context, p *plan, spec analysis.TrendSpec, look int64, series []int, ranks []ranked) ([]analysis.TrendRow, error) {
	accs := make([]trendSet, e.cfg.Workers)
	for w := range accs {
		for _, i := range series {
			r := &ranks[i]
			one := spec
			one.Series = []analysis.TrendSeries{spec.Series[i]}
			one.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
			a, err := analysis.NewTrend(one)
			if err != nil {
				return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
			}
			accs[w] = append(accs[w], a)
		}
	}
	vs := newVisitors(p, len(accs), func(w int) accumulator { return accs[w] })
	if err := e.scan(ctx, p, p.from-look, p.to, vs, false); err != nil {
		return nil, err
	}
	out := make([]analysis.TrendRow, len(series))
	for j := range series {
		col := make([]*analysis.Trend, len(accs))
		for w := range accs {
			col[w] = accs[w][j]
		}
		acc, err := mergeAll(ctx, col)
		if err != nil {
			return nil, err
		}
		for _, row := range acc.Result(nil).Series[0].Rows {
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

// trendSeries renders one row of query series i; starts are the buckets'
// labels (bucketStarts).
func (p *plan) trendSeries(i int, spec analysis.TrendSpec, starts []string, row analysis.TrendRow, bd *breakdown) TrendSeries {
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
		sr.Buckets[b] = TrendBucket{Start: starts[b], Value: v,
			Incomplete: p.incomplete(spec.Bounds[b+1])}
	}
	return sr
}

// maxBuckets bounds the number of interval buckets of a trend or cohorts
// of a retention query (about 27 years of days, or 1.1 years of hours).
const maxBuckets = 10_000

// calendarBounds parses the query's interval (default def) and week
// start and returns them and the boundaries of the range's buckets,
// checked against maxBuckets before they are made (buckets).
func (p *plan) calendarBounds(ctx context.Context, def string) (timebucket.Interval, timebucket.WeekStart, []int64, error) {
	name := p.q.Interval
	if name == "" {
		name = def
	}
	iv, err := timebucket.ParseInterval(name)
	if err != nil {
		return 0, 0, nil, invalid("interval", "%v", err)
	}
	ws, err := timebucket.ParseWeekStart(p.q.WeekStart)
	if err != nil {
		return 0, 0, nil, invalid("week_start", "%v", err)
	}
	b, err := p.buckets(ctx, iv, ws, "interval", "buckets")
	return iv, ws, b, err
}

// buckets returns the calendar buckets of the query range
// (timebucket.BoundsMax), at most maxBuckets of them; more is an
// invalid_query naming field, found without building them. what names the
// buckets in the message ("buckets", "cohorts").
func (p *plan) buckets(ctx context.Context, iv timebucket.Interval, ws timebucket.WeekStart, field, what string) ([]int64, error) {
	b, err := timebucket.BoundsMax(ctx, p.from, p.to, iv, p.loc, ws, maxBuckets)
	var tm *timebucket.TooManyError
	if errors.As(err, &tm) {
		return nil, invalid(field, "about %d %s %s from %s to %s; at most %d: narrow the range or use a longer %s",
			tm.Count, iv, what, formatTime(p.from, p.loc), formatTime(p.to, p.loc), maxBuckets, field)
	}
	return b, err
}

// bucketStarts returns the result labels of the buckets starting at
// bounds[:len(bounds)-1], shared by every row of a result.
func (p *plan) bucketStarts(bounds []int64) []string {
	starts := make([]string, len(bounds)-1)
	for i := range starts {
		starts[i] = formatTime(bounds[i], p.loc)
	}
	return starts
}

// resultCellBytes is what one bucket (or retention cell) of a result
// costs, bytes: its Go value and its JSON encoding, label shared.
const resultCellBytes = 96

// chargeResult charges to the budget the result of rows × cells buckets
// before it is rendered: a breakdown of 10,000 values over 10,000 buckets
// fails with limit_exceeded rather than render 10⁸ buckets.
func (p *plan) chargeResult(rows, cells int) error {
	return p.budget.charge(int64(rows) * int64(cells) * resultCellBytes)
}

// mergeAll merges accs[1:] into accs[0] and returns it, checking ctx
// between merges (each is linear in an accumulator's state).
func mergeAll[T interface{ Merge(T) error }](ctx context.Context, accs []T) (T, error) {
	for _, a := range accs[1:] {
		if err := ctx.Err(); err != nil {
			return accs[0], err
		}
		if err := accs[0].Merge(a); err != nil {
			return accs[0], &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
	}
	return accs[0], ctx.Err()
}

// sameFilters reports whether a and b are the same filters in the same
// order (values compared as written).
func sameFilters(a, b []Filter) bool {
	return slices.EqualFunc(a, b, func(x, y Filter) bool {
		return x.Property == y.Property && x.Op == y.Op && x.Source == y.Source && bytes.Equal(x.Value, y.Value)
	})
}
