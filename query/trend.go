package query

import (
	"context"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/storage"
)

type trendVisitor struct{ acc *analysis.Trend }

func (v trendVisitor) Visit(_ storage.UserKey, t *analysis.Trail) { v.acc.Add(*t) }

// runTrend plans and runs a trend (spec §4): per series and calendar
// bucket, matching events (count) or distinct users (users), plus range
// totals.
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
	for i, s := range q.Series {
		f := fieldIdx("series", i)
		if s.Property != "" {
			return nil, invalid(f+".property", "property maths are not implemented yet")
		}
		mathName := s.Math
		if mathName == "" {
			mathName = "count"
		}
		m, err := analysis.ParseTrendMath(mathName)
		if err != nil {
			return nil, invalid(f+".math", "%v", err)
		}
		if _, err := p.addMatcher(Matcher{Event: s.Event, Where: s.Where}, f); err != nil {
			return nil, err
		}
		spec.Series = append(spec.Series, analysis.TrendSeries{Math: m})
	}
	spec.Bounds = timebucket.Bounds(p.from, p.to, iv, p.loc, ws)
	if len(spec.Bounds) > maxBuckets+1 {
		return nil, invalid("interval", "%d %s buckets in the range; at most %d", len(spec.Bounds)-1, iv, maxBuckets)
	}
	accs := make([]*analysis.Trend, e.cfg.Workers)
	vs := make([]storage.Visitor, len(accs))
	for i := range accs {
		if accs[i], err = analysis.NewTrend(spec); err != nil {
			return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
		vs[i] = trendVisitor{accs[i]}
	}
	state := func() int64 {
		return int64(len(accs)) * int64(len(spec.Bounds)*len(spec.Series)) * 16
	}
	if err := e.scan(ctx, p, storage.ScanSpec{From: p.from, To: p.to}, vs, state); err != nil {
		return nil, err
	}
	merge := stageTimer(ctx, "merge")
	for _, a := range accs[1:] {
		accs[0].Merge(a)
	}
	kr := accs[0].Result()
	res := &TrendResult{Kind: "trend", Range: p.resolvedRange(), TZ: p.loc.String()}
	for i, s := range q.Series {
		sr := TrendSeries{Label: s.Label, Event: s.Event, Math: spec.Series[i].Math.String(), Total: float64(kr.Series[i].Total)}
		if sr.Label == "" {
			sr.Label = s.Event
		}
		sr.Buckets = make([]TrendBucket, len(kr.Series[i].Buckets))
		for b, v := range kr.Series[i].Buckets {
			sr.Buckets[b] = TrendBucket{Start: formatTime(spec.Bounds[b], p.loc), Value: float64(v),
				Incomplete: p.incomplete(spec.Bounds[b+1])}
		}
		res.Series = append(res.Series, sr)
	}
	p.stats.MergeMS = merge()
	res.Stats = p.stats
	return res, nil
}

// maxBuckets bounds the number of interval buckets of a trend or cohorts
// of a retention query (about 11 years of days, or 1.1 years of hours).
const maxBuckets = 10_000
