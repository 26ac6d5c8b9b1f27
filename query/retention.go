package query

import (
	"context"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// defaultPeriods is N per period when the query gives none (spec §6; 24 for
// hours is our choice: one day).
var defaultPeriods = map[timebucket.Interval]int{
	timebucket.Hour: 24, timebucket.Day: 7, timebucket.Week: 4, timebucket.Month: 3,
}

// runRetention plans and runs a retention table (spec §6), per breakdown
// value (the start event's property, or the user's) and with the users of
// one cell when the query has a list.
func (e *Engine) runRetention(ctx context.Context, p *plan) (*RetentionResult, error) {
	q := p.q
	periodName := q.Period
	if periodName == "" {
		periodName = "day"
	}
	iv, err := timebucket.ParseInterval(periodName)
	if err != nil {
		return nil, invalid("period", "%v", err)
	}
	ws, err := timebucket.ParseWeekStart(q.WeekStart)
	if err != nil {
		return nil, invalid("week_start", "%v", err)
	}
	n := q.Periods
	if n == 0 {
		n = defaultPeriods[iv]
	}
	if n < 1 || n > analysis.MaxRetentionPeriods {
		return nil, invalid("periods", "want 1 to %d periods, found %d", analysis.MaxRetentionPeriods, n)
	}
	spec := analysis.RetentionSpec{Periods: n, From: p.from, To: p.to, Period: iv.Rolling()}
	if spec.Type, err = analysis.ParseRetentionType(q.Type); err != nil {
		return nil, invalid("type", "%v", err)
	}
	if spec.Windows, err = analysis.ParseRetentionWindows(q.Windows); err != nil {
		return nil, invalid("windows", "%v", err)
	}
	if spec.Criterion, err = analysis.ParseRetentionCriterion(q.Criterion); err != nil {
		return nil, invalid("criterion", "%v", err)
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
	cohortBounds, err := p.buckets(ctx, iv, ws, "period", "cohorts")
	if err != nil {
		return nil, err
	}
	nc := len(cohortBounds) - 1
	spec.Bounds = timebucket.Extend(cohortBounds, n, iv, p.loc, ws)
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	if bd != nil {
		spec.Breakdown = bd.src
	}
	if l := q.List; l != nil {
		if l.Step != 0 || l.Dropped || l.Series != 0 || l.Bucket != "" {
			return nil, invalid("list", "a retention list takes cohort_start and period, not step, dropped, series or bucket")
		}
		t, ok := parseInstant(l.CohortStart, p.loc)
		if !ok || t < cohortBounds[0] || t >= cohortBounds[nc] {
			return nil, invalid("list.cohort_start", "want the date or instant of a cohort in the range (%s to %s), found %q",
				formatTime(cohortBounds[0], p.loc), formatTime(cohortBounds[nc], p.loc), l.CohortStart)
		}
		if l.Period < 0 || l.Period >= n {
			return nil, invalid("list.period", "want a period from 0 to %d, found %d", n-1, l.Period)
		}
		keep, err := listKeep(l)
		if err != nil {
			return nil, err
		}
		c := 0
		for cohortBounds[c+1] <= t {
			c++
		}
		spec.List = &analysis.RetentionList{Cohort: c, Period: l.Period, Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}

	// first_time needs each user's earliest start in all stored data;
	// returns count up to the end of the last period.
	scanFrom, scanTo := p.from, spec.Bounds[len(spec.Bounds)-1]
	if spec.Windows == analysis.WindowsRolling {
		scanTo = p.to + int64(n)*spec.Period
	}
	if spec.Criterion == analysis.CriterionOnOrAfter {
		scanTo = maxTime // any later return counts for every period up to its index
	}
	if spec.Type == analysis.TypeFirstTime {
		scanFrom = minTime
	}
	// Calendar periods only ask in which buckets a return event falls
	// (Retention.addCalendar), and a start event is never thinned (its
	// mask has the start bit): the returns alone may be thinned per
	// bucket. A list's retainedAt asks the same.
	if spec.Windows == analysis.WindowsCalendar {
		p.thin = e.thinning(retBit, spec.Bounds)
	}
	acc, err := scanMerge(ctx, e, p, span{from: scanFrom, to: scanTo},
		func(int) (*analysis.Retention, error) { return analysis.NewRetention(spec) }, mergeOf[*analysis.Retention])
	if err != nil {
		return nil, err
	}
	merge := timer()
	res := &RetentionResult{Kind: "retention", Range: p.resolvedRange(), TZ: p.loc.String(), Period: iv.String()}
	// incompleteAt reports whether cell k of cohort bucket c is incomplete.
	incompleteAt := func(c, k int) bool {
		if spec.Windows == analysis.WindowsRolling {
			return p.incomplete(cohortBounds[c+1] + int64(k+1)*spec.Period)
		}
		return p.incomplete(spec.Bounds[c+k+1])
	}
	var groups []analysis.RetentionGroup
	if bd == nil {
		groups = acc.Result(nil).Groups
	} else {
		first := acc.Result(nil)
		keys := make([]analysis.Key, len(first.Groups))
		totals := make([]float64, len(first.Groups))
		for i, g := range first.Groups {
			keys[i] = g.Key
			for _, c := range g.Cohorts {
				totals[i] += float64(c.Size)
			}
		}
		r, err := p.rank(ctx, bd, keys, totals)
		if err != nil {
			return nil, err
		}
		byKey := map[analysis.Key]analysis.RetentionGroup{}
		for _, g := range acc.Result(r.group).Groups {
			byKey[g.Key] = g
		}
		order := r.order
		if r.other {
			order = append(order, otherKey)
		}
		for _, k := range order {
			groups = append(groups, byKey[k])
		}
	}
	ncells := 0
	for _, g := range groups {
		ncells += len(g.Cohorts)
	}
	if err := p.chargeResult(ncells, n); err != nil {
		return nil, err
	}
	starts := p.bucketStarts(cohortBounds)
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for c, kc := range g.Cohorts {
			rc := RetentionCohort{Start: starts[c], Size: kc.Size, Retained: kc.Retained,
				Rates: make([]float64, n), Incomplete: make([]bool, n)}
			if bd != nil {
				rc.BreakdownValue = ptr(p.label(bd, g.Key))
			}
			for k := range n {
				rc.Incomplete[k] = incompleteAt(c, k)
				if kc.Size > 0 {
					rc.Rates[k] = float64(kc.Retained[k]) / float64(kc.Size)
				}
			}
			res.Cohorts = append(res.Cohorts, rc)
		}
	}
	// The mean row and the list without a breakdown value are over all
	// users, whatever the breakdown.
	all := acc.Result(func(analysis.Key) analysis.Key { return analysis.Key{} })
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
			complete[c][k] = !incompleteAt(c, k)
			anyComplete[k] = anyComplete[k] || complete[c][k]
		}
	}
	if q.List != nil {
		l, err := p.pickList(bd, overall, len(groups), func(i int) (analysis.Key, *analysis.UserList) {
			return groups[i].Key, groups[i].List
		})
		if err != nil {
			return nil, err
		}
		res.List = listResult(q.List, l)
	}
	for k, m := range analysis.Mean(sizes, retained, complete) {
		if anyComplete[k] {
			res.Mean = append(res.Mean, ptr(m))
		} else {
			res.Mean = append(res.Mean, nil)
		}
	}
	p.stats.MergeMS += merge()
	res.Stats = p.stats
	return res, nil
}
