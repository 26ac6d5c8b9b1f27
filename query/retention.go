package query

import (
	"context"
	"math"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/storage"
)

type retentionVisitor struct{ acc *analysis.Retention }

func (v retentionVisitor) Visit(_ storage.UserKey, t *analysis.Trail) { v.acc.Add(*t) }

// defaultPeriods is N per period when the query gives none (spec §6; 24 for
// hours is our choice: one day).
var defaultPeriods = map[timebucket.Interval]int{
	timebucket.Hour: 24, timebucket.Day: 7, timebucket.Week: 4, timebucket.Month: 3,
}

// runRetention plans and runs a retention table (spec §6).
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
	if _, err := p.addMatcher(*q.Start, "start"); err != nil {
		return nil, err
	}
	if _, err := p.addMatcher(ret, "return"); err != nil {
		return nil, err
	}
	cohortBounds := timebucket.Bounds(p.from, p.to, iv, p.loc, ws)
	nc := len(cohortBounds) - 1
	if nc > maxBuckets {
		return nil, invalid("period", "%d %s cohorts in the range; at most %d", nc, iv, maxBuckets)
	}
	spec.Bounds = timebucket.Extend(cohortBounds, n, iv, p.loc, ws)

	accs := make([]*analysis.Retention, e.cfg.Workers)
	vs := make([]storage.Visitor, len(accs))
	for i := range accs {
		if accs[i], err = analysis.NewRetention(spec); err != nil {
			return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
		vs[i] = retentionVisitor{accs[i]}
	}
	state := func() int64 { return int64(len(accs)) * int64(nc*(n+1)) * 8 }
	// first_time needs each user's earliest start in all stored data;
	// returns count up to the end of the last period.
	scan := storage.ScanSpec{From: p.from, To: spec.Bounds[len(spec.Bounds)-1]}
	if spec.Windows == analysis.WindowsRolling {
		scan.To = p.to + int64(n)*spec.Period
	}
	if spec.Criterion == analysis.CriterionOnOrAfter {
		scan.To = math.MaxInt64 // any later return counts for every period up to its index
	}
	if spec.Type == analysis.TypeFirstTime {
		scan.From = math.MinInt64
	}
	if err := e.scan(ctx, p, scan, vs, state); err != nil {
		return nil, err
	}
	merge := stageTimer(ctx, "merge")
	for _, a := range accs[1:] {
		accs[0].Merge(a)
	}
	kr := accs[0].Result()
	res := &RetentionResult{Kind: "retention", Range: p.resolvedRange(), TZ: p.loc.String(), Period: iv.String()}
	sizes := make([]int64, len(kr.Cohorts))
	retained := make([][]int64, len(kr.Cohorts))
	complete := make([][]bool, len(kr.Cohorts))
	anyComplete := make([]bool, n)
	for c, kc := range kr.Cohorts {
		rc := RetentionCohort{Start: formatTime(kc.Start, p.loc), Size: kc.Size, Retained: kc.Retained,
			Rates: make([]float64, n), Incomplete: make([]bool, n)}
		complete[c] = make([]bool, n)
		for k := range n {
			var end int64
			if spec.Windows == analysis.WindowsRolling {
				end = cohortBounds[c+1] + int64(k+1)*spec.Period
			} else {
				end = spec.Bounds[c+k+1]
			}
			rc.Incomplete[k] = p.incomplete(end)
			complete[c][k] = !rc.Incomplete[k]
			anyComplete[k] = anyComplete[k] || complete[c][k]
			if kc.Size > 0 {
				rc.Rates[k] = float64(kc.Retained[k]) / float64(kc.Size)
			}
		}
		sizes[c], retained[c] = kc.Size, kc.Retained
		res.Cohorts = append(res.Cohorts, rc)
	}
	for k, m := range analysis.Mean(sizes, retained, complete) {
		if anyComplete[k] {
			res.Mean = append(res.Mean, ptr(m))
		} else {
			res.Mean = append(res.Mean, nil)
		}
	}
	p.stats.MergeMS = merge()
	res.Stats = p.stats
	return res, nil
}
