package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// TrendResult is the result of a trend query.
type TrendResult struct {
	Kind   string        `json:"kind"` // "trend"
	Range  ResolvedRange `json:"range"`
	TZ     string        `json:"tz"`
	Series []TrendSeries `json:"series"`
	// Formulas (docs/analytics.md §12), per breakdown value (and period), in query
	// order.
	Formulas []TrendFormula `json:"formulas,omitempty"`
	// CompareRange is the compared period's range, with compare.
	CompareRange *ResolvedRange `json:"compare_range,omitempty"`
	List         *ListResult    `json:"list,omitempty"`     // the users of one point, when asked
	Warnings     []Warning      `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats        Stats          `json:"stats"`
}

// ResultKind returns "trend".
func (r *TrendResult) ResultKind() string { return "trend" }

func (r *TrendResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// TrendFormula is one formula's row: per bucket its value (null on a
// division by zero) and its total (the formula over the series' totals).
type TrendFormula struct {
	Formula        string               `json:"formula"`
	Label          string               `json:"label"`
	Period         string               `json:"period,omitempty"` // with compare: current | previous
	BreakdownValue *string              `json:"breakdown_value"`  // null without a breakdown
	Buckets        []TrendFormulaBucket `json:"buckets"`
	Total          *float64             `json:"total"`
}

// TrendFormulaBucket is one bucket of a formula; Start is the bucket's
// calendar start as the series show it.
type TrendFormulaBucket struct {
	Start string   `json:"start"`
	Value *float64 `json:"value"`
}

// TrendSeries is one series (× breakdown value) of a trend result.
type TrendSeries struct {
	Series         int           `json:"series"` // the index of the query series (0-based), as a list's "series" names it
	Label          string        `json:"label"`
	Event          string        `json:"event"`
	Math           string        `json:"math"`
	Property       string        `json:"property,omitempty"` // the property of sum … p99
	BreakdownValue *string       `json:"breakdown_value"`    // null without a breakdown; "(none)" for unset, "(other)" for the merged rest
	Buckets        []TrendBucket `json:"buckets"`
	// Total is the range total: for count and sum the sum of the buckets;
	// for users, wau and mau the distinct users counted in any bucket; for
	// the other maths the math over all the range's values or per-user
	// counts (not an aggregate of the buckets).
	Total float64 `json:"total"`
	// Period is, with compare, "current" or "previous" (the previous
	// period's buckets carry their own starts and align by position).
	Period string `json:"period,omitempty"`
}

// TrendBucket is one interval bucket of a trend series.
type TrendBucket struct {
	Start      string  `json:"start"` // calendar start, RFC 3339 in the query's zone
	Value      float64 `json:"value"`
	Incomplete bool    `json:"incomplete"` // the bucket extends past the end of the data or past now
}

// trend is a compiled trend (docs/analytics.md §4, §12): the series of the query's
// range, its formulas, and with compare the same for the compared period
// (a second plan over the shifted range, compiled, scanned and finalized
// after the first), current first.
type trend struct {
	e        *Engine
	formulas []*formula
	prev     *plan // the compared period's plan; nil without compare
	cur      *trendPeriod
}

func init() { register(kind{name: "trend", order: 1, compile: compileTrend}) }

// compileTrend checks and compiles a trend query.
func compileTrend(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	if len(q.Series) == 0 {
		return nil, invalid("series", "a trend needs at least one series")
	}
	t := &trend{e: e}
	var err error
	if t.formulas, err = parseFormulas(q); err != nil {
		return nil, err
	}
	if q.Compare != "" {
		from, to, err := p.compareRange(q.Compare)
		if err != nil {
			return nil, err
		}
		cq := *q
		cq.Range = &Range{From: formatTime(from, p.loc), To: formatTime(to, p.loc)}
		cq.Compare, cq.Formulas, cq.Formula, cq.List = "", nil, "", nil
		if t.prev, err = e.newPlan(&cq, p.snap, 0); err != nil {
			return nil, err
		}
		t.prev.budget = p.budget // one query, one budget
	}
	if t.cur, err = compileTrendPeriod(ctx, e, p); err != nil {
		return nil, err
	}
	return t, nil
}

// passes scans the query's range.
func (t *trend) passes(ctx context.Context) error { return t.cur.passes(ctx) }

// finalize renders the range's series and formulas, then runs the
// compared period and appends its.
func (t *trend) finalize(ctx context.Context) (Result, error) {
	res, owner, err := t.cur.finalize(ctx)
	if err != nil {
		return nil, err
	}
	breakdown := t.cur.p.q.Breakdown != nil
	res.Formulas = evalFormulas(t.formulas, res.Series, owner, breakdown)
	if t.prev == nil {
		return res, nil
	}
	pc, err := compileTrendPeriod(ctx, t.e, t.prev)
	if err != nil {
		return nil, err
	}
	if err := pc.passes(ctx); err != nil {
		return nil, err
	}
	pres, powner, err := pc.finalize(ctx)
	if err != nil {
		return nil, err
	}
	pf := evalFormulas(t.formulas, pres.Series, powner, breakdown)
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
	cr := t.prev.resolvedRange()
	res.CompareRange = &cr
	res.Stats = addStats(res.Stats, pres.Stats)
	return res, nil
}

// compareRange returns the compared period of docs/analytics.md §12: "previous" is the
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
// series rows of one period (owner[i] is row i's series; docs/analytics.md §12): a
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

// trendPeriod is a trend's series compiled over one plan's range (docs/analytics.md
// §4): per series, breakdown value and calendar bucket the series' math,
// plus range totals, and for each row the index of its series. With a
// breakdown limit, the "(other)" row of count and property maths is the
// merge of the other values; for the maths that count users it is
// recomputed by a second scan that groups the other values into one key,
// so users stay distinct.
type trendPeriod struct {
	e    *Engine
	p    *plan
	spec analysis.TrendSpec
	look int64 // how far before the range the series' windows reach
	bd   *breakdown
	tl   *trendList // the list; nil without one
	acc  *analysis.Trend
}

// compileTrendPeriod compiles the series of p's query.
func compileTrendPeriod(ctx context.Context, e *Engine, p *plan) (*trendPeriod, error) {
	q := p.q
	t := &trendPeriod{e: e, p: p, spec: analysis.TrendSpec{From: p.from, To: p.to}}
	for i, s := range q.Series {
		if err := t.compileSeries(i, s); err != nil {
			return nil, err
		}
	}
	var err error
	if t.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if t.bd != nil {
		t.spec.Breakdown = t.bd.src
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	if _, _, t.spec.Bounds, err = p.calendarBounds(ctx, "day"); err != nil {
		return nil, err
	}
	// A users series only asks in which buckets, and whether in
	// [From, To), a user has a row of it (Trend.Add): the rows of its
	// matcher alone may be thinned — unless the breakdown reads each
	// row's own value.
	if t.bd == nil || t.bd.src.From != analysis.KeyEvent {
		for _, s := range t.spec.Series {
			if s.Math == analysis.MathUsers {
				p.thin = e.thinning(s.Bit, t.spec.Bounds, p.from, p.to)
				break
			}
		}
	}
	if q.List != nil {
		if t.tl, err = p.parseTrendList(&t.spec); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// compileSeries compiles query series i into the spec: its math, its
// matcher and its property.
func (t *trendPeriod) compileSeries(i int, s Series) error {
	p, spec := t.p, &t.spec
	f := fieldIdx("series", i)
	mathName := s.Math
	if mathName == "" {
		mathName = "count"
	}
	m, err := analysis.ParseTrendMath(mathName)
	if err != nil {
		return invalid(f+".math", "%v", err)
	}
	// Quantiles of one property over one matcher share its bit, and so
	// one list of values per cell (median and p90 of a price keep the
	// prices once).
	bit := -1
	if m.Quantile() {
		for j, o := range p.q.Series[:i] {
			if spec.Series[j].Math.Quantile() && o.Event == s.Event && o.Property == s.Property && sameFilters(o.Where, s.Where) {
				bit = spec.Series[j].Bit
				break
			}
		}
	}
	if bit < 0 {
		if bit, err = p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, f, true); err != nil {
			return err
		}
	}
	ts := analysis.TrendSeries{Math: m, Bit: bit}
	switch {
	case m.NeedsProperty() && s.Property == "":
		return invalid(f+".property", "math %s needs a numeric event property", m)
	case m.NeedsProperty():
		typ, ok := p.propType(s.Property, false)
		if !ok {
			return p.unknownProp(f+".property", s.Property, false)
		}
		if typ != event.TypeInt && typ != event.TypeFloat {
			return invalid(f+".property", "math %s needs an int or float property; %q is %s", m, s.Property, typ)
		}
		ts.Col, ts.Float = p.addCol(s.Property, false), typ == event.TypeFloat
	case s.Property != "":
		return invalid(f+".property", "math %s takes no property", m)
	}
	t.look = max(t.look, m.Window())
	spec.Series = append(spec.Series, ts)
	return nil
}

// passes runs the main pass.
func (t *trendPeriod) passes(ctx context.Context) (err error) {
	t.acc, err = scanMerge(ctx, t.e, t.p, span{from: t.p.from - t.look, to: t.p.to},
		func(int) (*analysis.Trend, error) { return analysis.NewTrend(t.spec) }, mergeOf[*analysis.Trend])
	return err
}

// finalize renders the series rows (ranking the breakdown values and
// recomputing "(other)") and the list; owner[i] is row i's series.
func (t *trendPeriod) finalize(ctx context.Context) (*TrendResult, []int, error) {
	p, q := t.p, t.p.q
	merge := timer()
	res := &TrendResult{Kind: "trend", Range: p.resolvedRange(), TZ: p.loc.String()}
	starts := p.bucketStarts(t.spec.Bounds)
	var owner []int
	if t.bd == nil {
		kr := t.acc.Result(nil)
		if err := p.chargeResult(len(q.Series), len(starts)); err != nil {
			return nil, nil, err
		}
		for i := range q.Series {
			res.Series = append(res.Series, p.trendSeries(i, t.spec, starts, kr.Series[i].Rows[0], nil))
			owner = append(owner, i)
		}
		p.stats.MergeMS += merge()
		res, err := t.done(ctx, res, nil)
		return res, owner, err
	}
	ranks, recompute, err := t.rank(ctx)
	if err != nil {
		return nil, nil, err
	}
	rows, err := t.groupRows(ranks, len(starts))
	if err != nil {
		return nil, nil, err
	}
	p.stats.MergeMS += merge()
	if len(recompute) > 0 {
		others, err := t.e.recomputeOther(ctx, p, t.spec, t.look, recompute, ranks)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range recompute {
			rows[i][otherKey] = others[j]
		}
	}
	merge = timer()
	if res.Series, owner, err = t.renderRows(ctx, ranks, rows, starts); err != nil {
		return nil, nil, err
	}
	p.stats.MergeMS += merge()
	var r *ranked
	if t.tl != nil {
		r = &ranks[q.List.Series]
	}
	res, err = t.done(ctx, res, r)
	return res, owner, err
}

// rank ranks each series' values by range total and keeps the first
// limit; recompute lists the series whose "(other)" needs a second pass.
func (t *trendPeriod) rank(ctx context.Context) (ranks []ranked, recompute []int, err error) {
	first := t.acc.Result(nil)
	ranks = make([]ranked, len(t.p.q.Series))
	for i, sr := range first.Series {
		keys := make([]analysis.Key, len(sr.Rows))
		totals := make([]float64, len(sr.Rows))
		for r, row := range sr.Rows {
			keys[r], totals[r] = row.Key, row.Total
		}
		if ranks[i], err = t.p.rank(ctx, t.bd, keys, totals); err != nil {
			return nil, nil, err
		}
		if ranks[i].other && !t.spec.Series[i].Math.Mergeable() {
			recompute = append(recompute, i)
		}
	}
	return ranks, recompute, nil
}

// groupRows returns per series its rows under the ranking, by key, and
// charges the result's buckets (nbuckets a row) to the budget.
func (t *trendPeriod) groupRows(ranks []ranked, nbuckets int) ([]map[analysis.Key]analysis.TrendRow, error) {
	grouped := t.acc.Result(func(s int, k analysis.Key) analysis.Key { return ranks[s].group(k) })
	rows := make([]map[analysis.Key]analysis.TrendRow, len(t.p.q.Series))
	nrows := 0
	for i, sr := range grouped.Series {
		rows[i] = map[analysis.Key]analysis.TrendRow{}
		for _, row := range sr.Rows {
			rows[i][row.Key] = row
		}
		nrows += len(ranks[i].order) + b2i(ranks[i].other)
	}
	return rows, t.p.chargeResult(nrows, nbuckets)
}

// renderRows renders each series' kept rows in rank order, then its
// "(other)"; owner[i] is row i's series.
func (t *trendPeriod) renderRows(ctx context.Context, ranks []ranked, rows []map[analysis.Key]analysis.TrendRow, starts []string) ([]TrendSeries, []int, error) {
	p := t.p
	var out []TrendSeries
	var owner []int
	for i := range p.q.Series {
		for _, k := range ranks[i].order {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			out = append(out, p.trendSeries(i, t.spec, starts, rows[i][k], t.bd))
			owner = append(owner, i)
		}
		if ranks[i].other {
			row, ok := rows[i][otherKey]
			if !ok { // the other values' events all fell out of the recomputation's groups
				row = analysis.TrendRow{Key: otherKey, Buckets: make([]float64, len(t.spec.Bounds)-1)}
			}
			row.Key = otherKey
			out = append(out, p.trendSeries(i, t.spec, starts, row, t.bd))
			owner = append(owner, i)
		}
	}
	return out, owner, nil
}

// done adds the users of the query's list to res, when it has one (r the
// listed series' ranking under a breakdown), and sets its stats.
func (t *trendPeriod) done(ctx context.Context, res *TrendResult, r *ranked) (*TrendResult, error) {
	if t.tl != nil {
		var err error
		if res.List, err = t.e.listTrend(ctx, t.p, t.tl, t.bd, r); err != nil {
			return nil, err
		}
	}
	res.Stats = t.p.stats
	return res, nil
}

// trendSet is one worker's trends of a scan that feeds several, an
// accumulator: every trail goes to each, and their memory is summed. (It
// is not a multi[*analysis.Trend]: a generic method calls Add through its
// dictionary, and this pass feeds every trail of the range.)
type trendSet []*analysis.Trend

func (ts trendSet) Add(t *trail.Trail) {
	for _, a := range ts {
		a.Add(t)
	}
}

// merge merges o's accumulators into ts's, series by series (scanMerge's
// merge).
func (ts trendSet) merge(o trendSet) error {
	for j, a := range ts {
		if err := mergeOf(a, o[j]); err != nil {
			return err
		}
	}
	return nil
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
	set, err := scanMerge(ctx, e, p, span{from: p.from - look, to: p.to}, func(int) (trendSet, error) {
		var ts trendSet
		for _, i := range series {
			r := &ranks[i]
			one := spec
			one.Series = []analysis.TrendSeries{spec.Series[i]}
			one.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey, DropKept: true}
			a, err := analysis.NewTrend(one)
			if err != nil {
				return nil, err
			}
			ts = append(ts, a)
		}
		return ts, nil
	}, trendSet.merge)
	if err != nil {
		return nil, err
	}
	out := make([]analysis.TrendRow, len(series))
	for j, acc := range set {
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

// sameFilters reports whether a and b are the same filters in the same
// order (values compared as written).
func sameFilters(a, b []Filter) bool {
	return slices.EqualFunc(a, b, func(x, y Filter) bool {
		return x.Property == y.Property && x.Op == y.Op && x.Source == y.Source && bytes.Equal(x.Value, y.Value)
	})
}

// writeTable prints one row per bucket and one column per series (and
// breakdown value), then the totals.
func (r *TrendResult) writeTable(w io.Writer) {
	head := fmt.Sprintf("trend %s .. %s (%s)", r.Range.From, r.Range.To, r.TZ)
	if c := r.CompareRange; c != nil {
		head += fmt.Sprintf(", compared with %s .. %s (by position)", c.From, c.To)
	}
	fmt.Fprintln(w, head)
	type column struct {
		name    string
		values  []string
		total   string
		current bool
	}
	var cols []column
	for _, s := range r.Series {
		name := s.Label
		if s.BreakdownValue != nil {
			name += " / " + *s.BreakdownValue
		}
		m := s.Math
		if s.Property != "" {
			m += " " + s.Property
		}
		c := column{name: fmt.Sprintf("%s (%s)", name, m), total: num(s.Total), current: s.Period != "previous"}
		if !c.current {
			c.name += " previous"
		}
		for _, b := range s.Buckets {
			c.values = append(c.values, num(b.Value))
		}
		cols = append(cols, c)
	}
	orNull := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return num(*v)
	}
	for _, f := range r.Formulas {
		name := f.Label
		if f.BreakdownValue != nil {
			name += " / " + *f.BreakdownValue
		}
		c := column{name: name, total: orNull(f.Total), current: f.Period != "previous"}
		if !c.current {
			c.name += " previous"
		}
		for _, b := range f.Buckets {
			c.values = append(c.values, orNull(b.Value))
		}
		cols = append(cols, c)
	}
	var hdr strings.Builder
	hdr.WriteString("bucket\t")
	for _, c := range cols {
		fmt.Fprintf(&hdr, "%s\t", c.name)
	}
	fmt.Fprintln(w, hdr.String())
	if len(r.Series) == 0 {
		return
	}
	for b := range r.Series[0].Buckets {
		mark := ""
		if r.Series[0].Buckets[b].Incomplete {
			mark = "*"
		}
		fmt.Fprintf(w, "%s%s\t", label(r.Series[0].Buckets[b].Start), mark)
		for _, c := range cols {
			v := ""
			if b < len(c.values) {
				v = c.values[b]
			}
			fmt.Fprintf(w, "%s\t", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "total\t")
	for _, c := range cols {
		fmt.Fprintf(w, "%s\t", c.total)
	}
	fmt.Fprintln(w)
}

// trendCSV is the trend result's CSV columns (WriteCSV; docs/queries.md).
var trendCSV = []string{"series", "label", "event", "math", "property", "breakdown_value", "bucket", "value", "incomplete", "total", "period"}

// writeCSV writes one row per series × breakdown value × bucket, then per
// formula × breakdown value × bucket.
func (r *TrendResult) writeCSV(cw *csv.Writer) {
	cw.Write(trendCSV)
	for _, s := range r.Series {
		for _, b := range s.Buckets {
			cw.Write([]string{strconv.Itoa(s.Series), s.Label, s.Event, s.Math, s.Property, strp(s.BreakdownValue), b.Start,
				fnum(b.Value), strconv.FormatBool(b.Incomplete), fnum(s.Total), s.Period})
		}
	}
	for _, f := range r.Formulas {
		for _, b := range f.Buckets {
			cw.Write([]string{"", f.Label, "", "formula", "", strp(f.BreakdownValue), b.Start, fnump(b.Value), "", fnump(f.Total), f.Period})
		}
	}
}
