package query

import (
	"context"
	"strings"
)

// kind is one query kind: compile checks the query of a plan and
// compiles it (matchers, columns, the analysis kernels' specs); the
// compiled query's passes then scan (each pass through scanMerge), and
// finalize ranks, runs the passes that depend on the ranking (an
// "(other)" recomputed, a list under a breakdown value) and renders the
// Result. A new kind is one file — its compile function, its compiled
// type, its Result type with that interface's methods (table and CSV
// forms included) — plus one row of kinds and its request fields in Query
// (AnalysisQuery).
type kind struct {
	name    string
	compile func(ctx context.Context, e *Engine, p *plan) (compiled, error)
}

// compiled is a query compiled by its kind, run once: passes, then
// finalize.
type compiled interface {
	// passes runs the kind's main scan passes.
	passes(ctx context.Context) error
	// finalize ranks and renders the result, running the passes that need
	// the main passes' answer first.
	finalize(ctx context.Context) (Result, error)
}

// kinds are the query kinds, in the order error messages list them. (Set
// by init: the compile functions reach newPlan, which looks kinds up.)
var kinds []kind

func init() {
	kinds = []kind{
		{"trend", compileTrend},
		{"funnel", compileFunnel},
		{"retention", compileRetention},
		{"cohort", compileCohort},
		{"stickiness", compileStickiness},
		{"lifecycle", compileLifecycle},
		{"paths", compilePaths},
		{"attribution", compileAttribution},
	}
}

// kindNamed returns the kind of that name (false: none).
func kindNamed(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

// Kinds returns the names of the query kinds ("trend", "funnel", …), in a
// fixed order; the slice is the caller's.
func Kinds() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

// kindNameList lists the query kinds for error messages: "trend, funnel, …
// or attribution".
func kindNameList() string {
	names := Kinds()
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// runKind compiles q's plan by its kind and runs it.
func (e *Engine) runKind(ctx context.Context, p *plan) (Result, error) {
	k, _ := kindNamed(p.q.Kind) // newPlan checked the name
	c, err := k.compile(ctx, e, p)
	if err != nil {
		return nil, err
	}
	if err := c.passes(ctx); err != nil {
		return nil, err
	}
	return c.finalize(ctx)
}
