package query

import (
	"context"
	"time"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/trail"
)

// defaultWindow is the funnel conversion window when none is given (14 days).
const defaultWindow = "14d"

// runFunnel plans and runs an ordered funnel (spec §5, PostHog's funnel
// UDF): per step the users, conversions and times, per breakdown value
// (the counted attempt's step-1 event's property, or the user's), and the
// users of one step when the query has a list.
func (e *Engine) runFunnel(ctx context.Context, p *plan) (*FunnelResult, error) {
	q := p.q
	if n := len(q.Steps); n < 2 || n > analysis.MaxFunnelSteps {
		return nil, invalid("steps", "a funnel needs 2 to %d steps, found %d", analysis.MaxFunnelSteps, n)
	}
	win := q.Window
	if win == "" {
		win = defaultWindow
	}
	w, err := ParseDuration(win)
	if err != nil {
		return nil, invalid("window", "want a duration such as \"90s\", \"30m\", \"12h\", \"7d\" or \"2w\", found %q", win)
	}
	if w > analysis.MaxFunnelWindow {
		return nil, invalid("window", "window %s is longer than 366 days", win)
	}
	for i, s := range q.Steps {
		if _, err := p.addMatcher(s, fieldIdx("steps", i), true); err != nil {
			return nil, err
		}
	}
	bd, err := p.parseBreakdown()
	if err != nil {
		return nil, err
	}
	var list *analysis.FunnelList
	if q.List != nil {
		if q.List.Step < 1 || q.List.Step > len(q.Steps) {
			return nil, invalid("list.step", "want a step from 1 to %d, found %d", len(q.Steps), q.List.Step)
		}
		if q.List.CohortStart != "" || q.List.Period != 0 {
			return nil, invalid("list", "a funnel list takes step and dropped, not cohort_start or period")
		}
		keep, err := listKeep(q.List)
		if err != nil {
			return nil, err
		}
		list = &analysis.FunnelList{Step: q.List.Step, Dropped: q.List.Dropped, Keep: keep}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	var src analysis.KeySource
	if bd != nil {
		src = bd.src
	}
	spec := analysis.FunnelSpec{Steps: len(q.Steps), Window: w, From: p.from, To: p.to}
	accs := make([]*analysis.Funnel, e.cfg.Workers)
	for i := range accs {
		if accs[i], err = analysis.NewFunnel(spec, src, list); err != nil {
			return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
	}
	vs := newVisitors(p, len(accs), func(i int) (func(*trail.Trail), func() int64) {
		a := accs[i]
		return func(t *trail.Trail) { a.Add(t) }, a.Bytes
	})
	// Later steps may fall up to W after the range (window inclusive).
	if err := e.scan(ctx, p, p.from, p.to+w+1, vs, false); err != nil {
		return nil, err
	}
	merge := timer()
	acc, err := mergeAll(ctx, accs)
	if err != nil {
		return nil, err
	}
	res := &FunnelResult{Kind: "funnel", Range: p.resolvedRange(), TZ: p.loc.String(), WindowSec: w / second}
	var kr analysis.FunnelResult
	var r ranked
	if bd == nil {
		kr = acc.Result(nil)
	} else {
		// Rank the values by users entering the funnel; merge the rest.
		first := acc.Result(nil)
		keys := make([]analysis.Key, len(first.Groups))
		totals := make([]float64, len(first.Groups))
		for i, g := range first.Groups {
			keys[i], totals[i] = g.Key, float64(g.Steps[0].Users)
		}
		if r, err = p.rank(ctx, bd, keys, totals); err != nil {
			return nil, err
		}
		kr = acc.Result(r.group)
		byKey := map[analysis.Key]analysis.FunnelGroup{}
		for _, g := range kr.Groups {
			byKey[g.Key] = g
		}
		order := r.order
		if r.other {
			order = append(order, otherKey)
		}
		for _, k := range order {
			res.Breakdown = append(res.Breakdown, FunnelBreakdown{Value: p.label(bd, k), Steps: funnelSteps(byKey[k].Steps, q.Steps)})
		}
	}
	res.Steps = funnelSteps(kr.Steps, q.Steps)
	if q.List != nil {
		l, err := p.pickList(bd, kr.List, len(kr.Groups), func(i int) (analysis.Key, *analysis.UserList) {
			return kr.Groups[i].Key, kr.Groups[i].List
		})
		if err != nil {
			return nil, err
		}
		res.List = listResult(q.List, l)
	}
	p.stats.MergeMS = merge()
	res.Stats = p.stats
	return res, nil
}

func funnelSteps(kr []analysis.FunnelStepResult, steps []Matcher) []FunnelStep {
	out := make([]FunnelStep, len(kr))
	for i, s := range kr {
		out[i] = FunnelStep{Step: s.Step, Event: steps[i].Event, Users: s.Users, Conversion: s.Conversion,
			ConversionFromPrevious: s.ConversionFromPrevious}
		if s.HasTime {
			out[i].AvgSeconds, out[i].MedianSeconds = ptr(s.AvgSeconds), ptr(s.MedianSeconds)
		}
	}
	return out
}

// timer returns a function that reports the milliseconds since timer was called.
func timer() func() float64 {
	t0 := time.Now()
	return func() float64 { return ms(time.Since(t0)) }
}
