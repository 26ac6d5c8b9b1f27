package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
)

// Config configures an Engine.
type Config struct {
	// Workers is the scan parallelism; 0 means GOMAXPROCS.
	Workers int
	// Timeout bounds each query's run time, including its wait for
	// memory; 0 (or negative) means no limit. A query that runs out of
	// time fails with code limit_exceeded. A query's "limits" may ask for
	// less (docs/analytics.md §9).
	Timeout time.Duration
	// Now returns the current time for incomplete-bucket flags when the
	// query has no "now"; nil means time.Now.
	Now func() time.Time
	// MemoryBudget bounds the big state of each query in bytes: duration
	// and value lists, per-user counts, listed user ids, breakdown tables
	// and dictionaries (docs/analytics.md §8). 0 means DefaultMemoryBudget (2 GiB). A
	// query that would exceed it fails with code limit_exceeded; its
	// memory is released and the engine stays usable. A query's "limits"
	// may ask for less (docs/analytics.md §9).
	MemoryBudget int64
	// NoThinning turns off the scan's thinning of rows no analysis needs
	// (storage.Thin): answers are the same either way; tests compare them.
	NoThinning bool
	// Admission, when not nil, bounds the budgets of the queries running
	// at once (docs/storage.md §5): each query reserves its budget there before
	// it starts. Share one Admission among the engines of a process.
	Admission *Admission

	// chunkTrails, set by tests, wraps a scan's visitor of worker i: the
	// driver of chunks_test.go that hands the visitor each trail of the
	// scan in chunks (package trail), as long trails will come. nil
	// otherwise.
	chunkTrails func(v storage.Visitor, i int) storage.Visitor
}

// Engine runs queries against a store. It is safe for concurrent use and
// holds no state between queries.
type Engine struct {
	store *storage.Store
	cfg   Config
}

// New returns an Engine over store.
func New(store *storage.Store, cfg Config) *Engine {
	if cfg.Workers <= 0 {
		cfg.Workers = storage.DefaultWorkers()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Engine{store: store, cfg: cfg}
}

// Stats is the docs/analytics.md §9 "stats" object of every result.
type Stats struct {
	WallMS          float64 `json:"wall_ms"`           // wall time of the whole query, milliseconds
	PlanMS          float64 `json:"plan_ms"`           // parse, validate and plan
	ScanMS          float64 `json:"scan_ms"`           // parallel scan and per-user analysis
	MergeMS         float64 `json:"merge_ms"`          // merge of per-worker partial results and result building
	EventsScanned   int64   `json:"events_scanned"`    // rows decoded from segments
	SegmentsRead    int64   `json:"segments_read"`     // segments with a block decoded
	SegmentsSkipped int64   `json:"segments_skipped"`  // segments skipped by time range or event index
	BlocksRead      int64   `json:"blocks_read"`       // blocks decoded
	BlocksSkipped   int64   `json:"blocks_skipped"`    // blocks skipped by time range or event index
	BytesRead       int64   `json:"bytes_read"`        // compressed bytes decoded
	PeakMemoryBytes int64   `json:"peak_memory_bytes"` // decode and trail buffers plus the peak of the budgeted analysis state
	Workers         int     `json:"workers"`           // scan goroutines
}

// Run validates and runs q. q.App must be set. The result (a Result) is
// one of *TrendResult, *FunnelResult, *RetentionResult, *CohortResult,
// *StickinessResult, *LifecycleResult, *PathsResult, *AttributionResult;
// it is nil exactly when err is not.
// Every error is an *Error: invalid_query (with the offending field), not_found
// (unknown app or saved cohort), corruption (a segment failed its
// checksums; no answer is given), limit_exceeded (time limit or memory
// budget), unavailable (no memory free in the Admission within its wait,
// or ctx cancelled: the message gives the cause, such as the signal) or
// internal. Run returns promptly once ctx is done: every loop of the
// query checks it (the scan per block, buckets, merges and rendering per
// batch).
func (e *Engine) Run(ctx context.Context, q *Query) (result Result, err error) {
	start := time.Now()
	lim, err := e.limits(q)
	if err != nil {
		return nil, err
	}
	if lim.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lim.timeout)
		defer cancel()
	}
	if a := e.cfg.Admission; a != nil {
		release, err := a.Acquire(ctx, lim.memory)
		if err != nil {
			return nil, classify(err, ctx)
		}
		defer release()
	}
	ctx, task := trace.NewTask(ctx, "spur.query")
	defer task.End()
	pprof.Do(ctx, pprof.Labels("app", q.App, "kind", q.Kind), func(ctx context.Context) {
		result, err = e.run(ctx, q, start, lim.memory)
	})
	if err != nil {
		return nil, classify(err, ctx)
	}
	return result, nil
}

// classify turns err into an *Error. A context error counts only when
// the query's own ctx is done: then a deadline is limit_exceeded and a
// cancellation unavailable, with its cause (context.Cause: a signal, a
// server shutting down) in the message.
func classify(err error, ctx context.Context) *Error {
	var qe *Error
	switch {
	case errors.As(err, &qe):
		return qe
	case errors.Is(err, storage.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: err.Error(), Field: "app", Err: err}
	case errors.Is(err, segment.ErrCorruption):
		return &Error{Code: CodeCorruption, Message: err.Error(), Err: err}
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeLimitExceeded, Message: "query time limit exceeded", Err: err}
	case errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled):
		msg := "query cancelled"
		if c := context.Cause(ctx); c != nil && c != context.Canceled { // a signal's cause Is Canceled too
			msg += ": " + c.Error()
		}
		return &Error{Code: CodeUnavailable, Message: msg, Err: err}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Err: err}
}

func (e *Engine) run(ctx context.Context, q *Query, start time.Time, memory int64) (Result, error) {
	if q.App == "" {
		return nil, invalid("app", "app is required")
	}
	app, err := e.store.App(q.App)
	if err != nil {
		return nil, err
	}
	snap, err := app.Acquire()
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	var p *plan
	_, stage := storage.StartStage(ctx, "plan", -1)
	p, err = e.newPlan(q, snap, memory)
	stage.End()
	if err != nil {
		return nil, err
	}
	p.stats.PlanMS = ms(time.Since(start))
	res, err := e.runKind(ctx, p)
	if err != nil {
		return nil, err
	}
	f := res.parts()
	*f.warnings = p.warnings()
	f.stats.WallMS = ms(time.Since(start))
	return res, nil
}

// StatsOf returns a pointer into res to its stats, or nil for a nil res.
func StatsOf(res Result) *Stats {
	if res == nil {
		return nil
	}
	return res.parts().stats
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// scan runs one scan of the plan over the events in [from, to), widened
// by the cohort's range (with allUsers: all stored data, visiting every
// user), feeding one visitor per worker, and adds to the plan's stats. The
// first scan of a query builds its dictionaries (plan.prepare). A budget
// breach stops the scan and returns limit_exceeded.
func (e *Engine) scan(ctx context.Context, p *plan, from, to int64, vs []*visitor, allUsers bool) error {
	t0 := time.Now()
	from, to = p.scanRange(from, to)
	if allUsers {
		from, to = minTime, maxTime
	}
	if !p.prepared {
		if err := p.prepare(from, to); err != nil {
			return err
		}
		p.prepared = true
	}
	// Only user lists (a cohort's, a funnel step's, a retention cell's)
	// read the users' ids.
	spec := storage.ScanSpec{From: from, To: to, Compile: p.compileSegment, Cols: len(p.cols),
		UserProps: len(p.ucols), AllUsers: allUsers, NoIDs: p.q.List == nil && p.q.Kind != "cohort", Thin: p.thin,
		Grow:        p.budget.charge, // the scan's buffers, one long trail's included, count in the budget
		DistinctIDs: p.q.Persons != nil && !*p.q.Persons}
	if len(p.ucols) > 0 {
		spec.CompileUsers = p.compileUsers
	}
	visitors := make([]storage.Visitor, len(vs))
	for i, v := range vs {
		visitors[i] = v.scanVisitor()
		if e.cfg.chunkTrails != nil {
			visitors[i] = e.cfg.chunkTrails(visitors[i], i)
		}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.budget.cancel = cancel
	sctx, stage := storage.StartStage(cctx, "scan", -1)
	st, err := p.snap.Scan(sctx, spec, visitors)
	stage.End()
	p.budget.cancel = nil
	p.stats.ScanMS += ms(time.Since(t0))
	p.stats.EventsScanned += st.EventsScanned
	p.stats.SegmentsRead += st.SegmentsRead
	p.stats.SegmentsSkipped += st.SegmentsSkipped
	p.stats.BlocksRead += st.BlocksRead
	p.stats.BlocksSkipped += st.BlocksSkipped
	p.stats.BytesRead += st.BytesRead
	p.stats.Workers = len(visitors)
	if errors.Is(context.Cause(cctx), errBudget) {
		return p.budget.exceeded()
	}
	if err != nil {
		return fmt.Errorf("scan app %q: %w", p.q.App, err)
	}
	for _, v := range vs {
		if err := v.flush(); err != nil {
			return err
		}
	}
	p.stats.PeakMemoryBytes = max(p.stats.PeakMemoryBytes, p.budget.peak.Load()) // the scan's buffers included (Grow)
	return nil
}
