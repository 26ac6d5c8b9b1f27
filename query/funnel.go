package query

import (
	"context"
	"time"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage"
)

type funnelVisitor struct{ acc *analysis.Funnel }

func (v funnelVisitor) Visit(_ storage.UserKey, t *analysis.Trail) { v.acc.Add(*t) }

// defaultWindow is the funnel conversion window when none is given (14 days).
const defaultWindow = "14d"

// runFunnel plans and runs an ordered funnel (spec §5, PostHog's funnel UDF).
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
		if _, err := p.addMatcher(s, fieldIdx("steps", i)); err != nil {
			return nil, err
		}
	}
	spec := analysis.FunnelSpec{Steps: len(q.Steps), Window: w, From: p.from, To: p.to}
	accs := make([]*analysis.Funnel, e.cfg.Workers)
	vs := make([]storage.Visitor, len(accs))
	for i := range accs {
		if accs[i], err = analysis.NewFunnel(spec); err != nil {
			return nil, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
		vs[i] = funnelVisitor{accs[i]}
	}
	state := func() int64 {
		// The per-user scratch plus the kept durations (exact medians).
		var n int64
		for _, a := range accs {
			n += int64(a.StateBytes())
		}
		return n
	}
	// Later steps may fall up to W after the range (window inclusive).
	scanTo := p.to + w + 1
	if err := e.scan(ctx, p, storage.ScanSpec{From: p.from, To: scanTo}, vs, state); err != nil {
		return nil, err
	}
	merge := stageTimer(ctx, "merge")
	for _, a := range accs[1:] {
		accs[0].Merge(a)
	}
	kr := accs[0].Result()
	res := &FunnelResult{Kind: "funnel", Range: p.resolvedRange(), TZ: p.loc.String(), WindowSec: w / second}
	res.Steps = funnelSteps(kr, q.Steps)
	p.stats.MergeMS = merge()
	res.Stats = p.stats
	return res, nil
}

func funnelSteps(kr analysis.FunnelResult, steps []Matcher) []FunnelStep {
	out := make([]FunnelStep, len(kr.Steps))
	for i, s := range kr.Steps {
		out[i] = FunnelStep{Step: s.Step, Event: steps[i].Event, Users: s.Users, Conversion: s.Conversion,
			ConversionFromPrevious: s.ConversionFromPrevious}
		if s.HasTime {
			out[i].AvgSeconds, out[i].MedianSeconds = ptr(s.AvgSeconds), ptr(s.MedianSeconds)
		}
	}
	return out
}

// stageTimer starts stage name (a runtime/trace region and, under ?trace=1,
// a span); the returned func ends it and returns its duration in ms.
func stageTimer(ctx context.Context, name string) func() float64 {
	t0 := time.Now()
	_, stage := storage.StartStage(ctx, name, -1)
	return func() float64 {
		stage.End()
		return ms(time.Since(t0))
	}
}
