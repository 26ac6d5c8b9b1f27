package query

import (
	"context"
	"fmt"
)

// span is the range of one scan pass: events in [from, to), widened by
// the cohort's range; allUsers scans all stored data and visits every
// user (a cohort's universe).
type span struct {
	from, to int64
	allUsers bool
}

// scanMerge is the one scan-and-merge path of every pass of every kind.
// It makes one accumulator per scan worker with mk(worker), runs one
// parallel scan of p over s feeding them (Engine.scan: the context
// checked per block, the accumulators' growth charged to the budget),
// then merges the workers' accumulators into worker 0's with merge,
// checking ctx between merges (the time counts in the stats' merge_ms),
// and returns that one. An error of mk is
// an internal error; an error of merge is returned wrapped.
//
// merge returns an error: an analysis accumulator's Merge fails on a
// partial state that does not match its own (mergeOf).
func scanMerge[A accumulator](ctx context.Context, e *Engine, p *plan, s span, mk func(worker int) (A, error),
	merge func(dst, src A) error) (A, error) {
	var zero A
	accs := make([]A, e.cfg.Workers)
	vs := make([]*visitor, len(accs))
	for i := range accs {
		a, err := mk(i)
		if err != nil {
			return zero, &Error{Code: CodeInternal, Message: err.Error(), Err: err}
		}
		accs[i] = a
		vs[i] = &visitor{adm: newAdmission(p), acc: a}
	}
	if err := e.scan(ctx, p, s.from, s.to, vs, s.allUsers); err != nil {
		return zero, err
	}
	t := timer()
	defer func() { p.stats.MergeMS += t() }()
	for i, a := range accs[1:] {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		if err := merge(accs[0], a); err != nil {
			return zero, fmt.Errorf("merge the partial state of scan worker %d: %w", i+1, err)
		}
	}
	return accs[0], ctx.Err()
}

// mergeOf is scanMerge's merge for an analysis accumulator: it merges
// src into dst (an error when their states do not match).
func mergeOf[A interface{ Merge(A) error }](dst, src A) error { return dst.Merge(src) }
