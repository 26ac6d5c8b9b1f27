package query

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// RetentionResult is the result of a retention query.
type RetentionResult struct {
	Kind    string            `json:"kind"` // "retention"
	Range   ResolvedRange     `json:"range"`
	TZ      string            `json:"tz"`
	Period  string            `json:"period"`
	Cohorts []RetentionCohort `json:"cohorts"`
	// Mean is, per period k, the user-weighted mean retention rate over the
	// cohorts whose cell k is complete (null when none is).
	Mean     []*float64  `json:"mean"`
	List     *ListResult `json:"list,omitempty"`     // the users of one cell, when asked
	Warnings []Warning   `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats    Stats       `json:"stats"`
}

// ResultKind returns "retention".
func (r *RetentionResult) ResultKind() string { return "retention" }

func (r *RetentionResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// RetentionCohort is one cohort row: Retained[k] users retained at period
// k (Retained[0] = Size), Rates[k] = Retained[k]/Size, Incomplete[k] when
// period k's bucket extends past the end of the data or past now.
type RetentionCohort struct {
	Start          string    `json:"start"`
	BreakdownValue *string   `json:"breakdown_value"`
	Size           int64     `json:"size"`
	Retained       []int64   `json:"retained"`
	Rates          []float64 `json:"rates"`
	Incomplete     []bool    `json:"incomplete"`
}

// defaultPeriods is N per period when the query gives none (docs/analytics.md §6; 24 for
// hours is our choice: one day).
var defaultPeriods = map[timebucket.Interval]int{
	timebucket.Hour: 24, timebucket.Day: 7, timebucket.Week: 4, timebucket.Month: 3,
}

// retention is a compiled retention table (docs/analytics.md §6), per breakdown value
// (the start event's property, or the user's) and with the users of one
// cell when the query has a list.
type retention struct {
	e            *Engine
	p            *plan
	spec         analysis.RetentionSpec
	iv           timebucket.Interval
	n            int     // periods
	cohortBounds []int64 // the cohorts' buckets
	bd           *breakdown
	from, to     int64 // the scan's range
	acc          *analysis.Retention
}

func init() { register(kind{name: "retention", order: 3, compile: compileRetention}) }

// compileRetention checks and compiles a retention query.
func compileRetention(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	r := &retention{e: e, p: p}
	ws, err := r.compilePeriods()
	if err != nil {
		return nil, err
	}
	if q.Start == nil {
		return nil, invalid("start", "retention needs a start matcher, e.g. {\"event\": \"signup\"}")
	}
	ret := Matcher{Event: AnyEvent}
	if q.Return != nil {
		ret = *q.Return
	}
	if _, err := p.addMatcher(*q.Start, "start", true); err != nil {
		return nil, err
	}
	retBit, err := p.addMatcher(ret, "return", true)
	if err != nil {
		return nil, err
	}
	if r.cohortBounds, err = p.buckets(ctx, r.iv, ws, "period", "cohorts"); err != nil {
		return nil, err
	}
	r.spec.Bounds = timebucket.Extend(r.cohortBounds, r.n, r.iv, p.loc, ws)
	if r.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if r.bd != nil {
		r.spec.Breakdown = r.bd.src
	}
	if q.List != nil {
		if r.spec.List, err = r.compileList(q.List); err != nil {
			return nil, err
		}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	r.scanRange()
	// Calendar periods only ask in which buckets a return event falls
	// (Retention.addCalendar), and a start event is never thinned (its
	// mask has the start bit): the returns alone may be thinned per
	// bucket. A list's retainedAt asks the same.
	if r.spec.Windows == analysis.WindowsCalendar {
		p.thin = e.thinning(retBit, r.spec.Bounds)
	}
	return r, nil
}

// compilePeriods reads the period, week start, number of periods, type,
// windows and criterion into the spec, and returns the week start.
func (r *retention) compilePeriods() (timebucket.WeekStart, error) {
	q := r.p.q
	periodName := q.Period
	if periodName == "" {
		periodName = "day"
	}
	var err error
	if r.iv, err = timebucket.ParseInterval(periodName); err != nil {
		return 0, invalid("period", "%v", err)
	}
	ws, err := timebucket.ParseWeekStart(q.WeekStart)
	if err != nil {
		return 0, invalid("week_start", "%v", err)
	}
	r.n = q.Periods
	if r.n == 0 {
		r.n = defaultPeriods[r.iv]
	}
	if r.n < 1 || r.n > analysis.MaxRetentionPeriods {
		return 0, invalid("periods", "want 1 to %d periods, found %d", analysis.MaxRetentionPeriods, r.n)
	}
	r.spec = analysis.RetentionSpec{Periods: r.n, From: r.p.from, To: r.p.to, Period: r.iv.Rolling()}
	if r.spec.Type, err = analysis.ParseRetentionType(q.Type); err != nil {
		return 0, invalid("type", "%v", err)
	}
	if r.spec.Windows, err = analysis.ParseRetentionWindows(q.Windows); err != nil {
		return 0, invalid("windows", "%v", err)
	}
	if r.spec.Criterion, err = analysis.ParseRetentionCriterion(q.Criterion); err != nil {
		return 0, invalid("criterion", "%v", err)
	}
	return ws, nil
}

// compileList checks a list's cell and returns the kernel's list.
func (r *retention) compileList(l *List) (*analysis.RetentionList, error) {
	p, cb := r.p, r.cohortBounds
	nc := len(cb) - 1
	if l.Step != 0 || l.Dropped || l.Series != 0 || l.Bucket != "" {
		return nil, invalid("list", "a retention list takes cohort_start and period, not step, dropped, series or bucket")
	}
	t, ok := parseInstant(l.CohortStart, p.loc)
	if !ok || t < cb[0] || t >= cb[nc] {
		return nil, invalid("list.cohort_start", "want the date or instant of a cohort in the range (%s to %s), found %q",
			formatTime(cb[0], p.loc), formatTime(cb[nc], p.loc), l.CohortStart)
	}
	if l.Period < 0 || l.Period >= r.n {
		return nil, invalid("list.period", "want a period from 0 to %d, found %d", r.n-1, l.Period)
	}
	keep, err := listKeep(l)
	if err != nil {
		return nil, err
	}
	c := 0
	for cb[c+1] <= t {
		c++
	}
	return &analysis.RetentionList{Cohort: c, Period: l.Period, Keep: keep}, nil
}

// scanRange sets the scan's range: first_time needs each user's earliest
// start in all stored data; returns count up to the end of the last
// period.
func (r *retention) scanRange() {
	spec := r.spec
	r.from, r.to = r.p.from, spec.Bounds[len(spec.Bounds)-1]
	if spec.Windows == analysis.WindowsRolling {
		r.to = r.p.to + int64(r.n)*spec.Period
	}
	if spec.Criterion == analysis.CriterionOnOrAfter {
		r.to = maxTime // any later return counts for every period up to its index
	}
	if spec.Type == analysis.TypeFirstTime {
		r.from = minTime
	}
}

// passes runs the one pass.
func (r *retention) passes(ctx context.Context) (err error) {
	r.acc, err = scanMerge(ctx, r.e, r.p, span{from: r.from, to: r.to},
		func(int) (*analysis.Retention, error) { return analysis.NewRetention(r.spec) }, mergeOf[*analysis.Retention])
	return err
}

// incompleteAt reports whether cell k of cohort bucket c is incomplete.
func (r *retention) incompleteAt(c, k int) bool {
	if r.spec.Windows == analysis.WindowsRolling {
		return r.p.incomplete(r.cohortBounds[c+1] + int64(k+1)*r.spec.Period)
	}
	return r.p.incomplete(r.spec.Bounds[c+k+1])
}

// finalize ranks the breakdown values, renders the cohorts, the mean row
// and the list.
func (r *retention) finalize(ctx context.Context) (Result, error) {
	p := r.p
	merge := timer()
	res := &RetentionResult{Kind: "retention", Range: p.resolvedRange(), TZ: p.loc.String(), Period: r.iv.String()}
	groups, err := r.groups(ctx)
	if err != nil {
		return nil, err
	}
	ncells := 0
	for _, g := range groups {
		ncells += len(g.Cohorts)
	}
	if err := p.chargeResult(ncells, r.n); err != nil {
		return nil, err
	}
	if res.Cohorts, err = r.cohorts(ctx, groups); err != nil {
		return nil, err
	}
	if res.Mean, res.List, err = r.overall(groups); err != nil {
		return nil, err
	}
	p.stats.MergeMS += merge()
	res.Stats = p.stats
	return res, nil
}

// groups returns the groups of the result: all users, or the breakdown's
// kept values in rank order, then "(other)".
func (r *retention) groups(ctx context.Context) ([]analysis.RetentionGroup, error) {
	if r.bd == nil {
		return r.acc.Result(nil).Groups, nil
	}
	first := r.acc.Result(nil)
	keys := make([]analysis.Key, len(first.Groups))
	totals := make([]float64, len(first.Groups))
	for i, g := range first.Groups {
		keys[i] = g.Key
		for _, c := range g.Cohorts {
			totals[i] += float64(c.Size)
		}
	}
	rk, err := r.p.rank(ctx, r.bd, keys, totals)
	if err != nil {
		return nil, err
	}
	byKey := map[analysis.Key]analysis.RetentionGroup{}
	for _, g := range r.acc.Result(rk.group).Groups {
		byKey[g.Key] = g
	}
	order := rk.order
	if rk.other {
		order = append(order, otherKey)
	}
	var groups []analysis.RetentionGroup
	for _, k := range order {
		groups = append(groups, byKey[k])
	}
	return groups, nil
}

// cohorts renders the groups' cohort rows.
func (r *retention) cohorts(ctx context.Context, groups []analysis.RetentionGroup) ([]RetentionCohort, error) {
	p, n := r.p, r.n
	starts := p.bucketStarts(r.cohortBounds)
	var out []RetentionCohort
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for c, kc := range g.Cohorts {
			rc := RetentionCohort{Start: starts[c], Size: kc.Size, Retained: kc.Retained,
				Rates: make([]float64, n), Incomplete: make([]bool, n)}
			if r.bd != nil {
				rc.BreakdownValue = ptr(p.label(r.bd, g.Key))
			}
			for k := range n {
				rc.Incomplete[k] = r.incompleteAt(c, k)
				if kc.Size > 0 {
					rc.Rates[k] = float64(kc.Retained[k]) / float64(kc.Size)
				}
			}
			out = append(out, rc)
		}
	}
	return out, nil
}

// overall returns the mean row and the list: the mean and the list
// without a breakdown value are over all users, whatever the breakdown.
func (r *retention) overall(groups []analysis.RetentionGroup) ([]*float64, *ListResult, error) {
	p, n, nc := r.p, r.n, len(r.cohortBounds)-1
	all := r.acc.Result(func(analysis.Key) analysis.Key { return analysis.Key{} })
	sizes := make([]int64, nc)
	retained := make([][]int64, nc)
	complete := make([][]bool, nc)
	anyComplete := make([]bool, n)
	overall := &analysis.UserList{}
	if len(all.Groups) > 0 {
		for c, kc := range all.Groups[0].Cohorts {
			sizes[c], retained[c] = kc.Size, kc.Retained
		}
		if all.Groups[0].List != nil {
			overall = all.Groups[0].List
		}
	}
	for c := range nc {
		if retained[c] == nil {
			retained[c] = make([]int64, n)
		}
		complete[c] = make([]bool, n)
		for k := range n {
			complete[c][k] = !r.incompleteAt(c, k)
			anyComplete[k] = anyComplete[k] || complete[c][k]
		}
	}
	var list *ListResult
	if p.q.List != nil {
		l, err := p.pickList(r.bd, overall, len(groups), func(i int) (analysis.Key, *analysis.UserList) {
			return groups[i].Key, groups[i].List
		})
		if err != nil {
			return nil, nil, err
		}
		list = listResult(p.q.List, l, p.snap.Persons())
	}
	var mean []*float64
	for k, m := range analysis.Mean(sizes, retained, complete) {
		if anyComplete[k] {
			mean = append(mean, ptr(m))
		} else {
			mean = append(mean, nil)
		}
	}
	return mean, list, nil
}

// writeTable prints one row per cohort (and breakdown value), then the
// mean per period.
func (r *RetentionResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "retention by %s, cohorts %s .. %s (%s); * = incomplete\n", r.Period, r.Range.From, r.Range.To, r.TZ)
	n := len(r.Mean)
	var hdr strings.Builder
	hdr.WriteString("cohort\tsize\t")
	for k := range n {
		fmt.Fprintf(&hdr, "%s %d\t", r.Period, k)
	}
	fmt.Fprintln(w, hdr.String())
	for _, c := range r.Cohorts {
		name := label(c.Start)
		if c.BreakdownValue != nil {
			name += " / " + *c.BreakdownValue
		}
		fmt.Fprintf(w, "%s\t%d\t", name, c.Size)
		for k := range c.Retained {
			mark := ""
			if c.Incomplete[k] {
				mark = "*"
			}
			fmt.Fprintf(w, "%s (%d)%s\t", pct(c.Rates[k]), c.Retained[k], mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "mean\t\t")
	for _, m := range r.Mean {
		if m == nil {
			fmt.Fprint(w, "-\t")
		} else {
			fmt.Fprintf(w, "%s\t", pct(*m))
		}
	}
	fmt.Fprintln(w)
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users of cohort %s retained at %s %d", label(l.CohortStart), r.Period, l.Period), l)
	}
}

// retentionCSV is the retention result's CSV columns (WriteCSV;
// docs/queries.md).
var retentionCSV = []string{"cohort_start", "breakdown_value", "size", "period", "retained", "rate", "incomplete"}

// writeCSV writes one row per cohort × breakdown value × period.
func (r *RetentionResult) writeCSV(cw *csv.Writer) {
	cw.Write(retentionCSV)
	for _, c := range r.Cohorts {
		for k, n := range c.Retained {
			cw.Write([]string{c.Start, strp(c.BreakdownValue), inum(c.Size), strconv.Itoa(k),
				inum(n), fnum(c.Rates[k]), strconv.FormatBool(c.Incomplete[k])})
		}
	}
}
