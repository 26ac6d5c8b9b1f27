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
	// Timeout bounds each query's run time; 0 means no limit. A query that
	// runs out of time fails with code limit_exceeded.
	Timeout time.Duration
	// Now returns the current time for incomplete-bucket flags when the
	// query has no "now"; nil means time.Now.
	Now func() time.Time
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

// Stats is the spec §9 "stats" object of every result.
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
	PeakMemoryBytes int64   `json:"peak_memory_bytes"` // decode buffers + trail buffers + analysis state held at the end of the scan
	Workers         int     `json:"workers"`           // scan goroutines
}

// Run validates and runs q. q.App must be set. The result is one of
// *TrendResult, *FunnelResult, *RetentionResult. Every error is an *Error:
// invalid_query (with the offending field), not_found (unknown app),
// corruption (a segment failed its checksums; no answer is given),
// limit_exceeded (timeout) or internal.
func (e *Engine) Run(ctx context.Context, q *Query) (result any, err error) {
	start := time.Now()
	if e.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.Timeout)
		defer cancel()
	}
	ctx, task := trace.NewTask(ctx, "spur.query")
	defer task.End()
	pprof.Do(ctx, pprof.Labels("app", q.App, "kind", q.Kind), func(ctx context.Context) {
		result, err = e.run(ctx, q, start)
	})
	if err != nil {
		return nil, classify(err, ctx)
	}
	return result, nil
}

func classify(err error, ctx context.Context) *Error {
	var qe *Error
	switch {
	case errors.As(err, &qe):
		return qe
	case errors.Is(err, storage.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: err.Error(), Field: "app", Err: err}
	case errors.Is(err, segment.ErrCorruption):
		return &Error{Code: CodeCorruption, Message: err.Error(), Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeLimitExceeded, Message: "query time limit exceeded", Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeInternal, Message: "query cancelled", Err: err}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Err: err}
}

func (e *Engine) run(ctx context.Context, q *Query, start time.Time) (any, error) {
	if q.App == "" {
		return nil, invalid("app", "app is required")
	}
	app, err := e.store.App(q.App)
	if err != nil {
		return nil, err
	}
	snap := app.Snapshot()
	var p *plan
	_, stage := storage.StartStage(ctx, "plan", -1)
	p, err = e.newPlan(q, snap)
	stage.End()
	if err != nil {
		return nil, err
	}
	p.stats.PlanMS = ms(time.Since(start))
	var res any
	switch q.Kind {
	case "trend":
		res, err = e.runTrend(ctx, p)
	case "funnel":
		res, err = e.runFunnel(ctx, p)
	case "retention":
		res, err = e.runRetention(ctx, p)
	}
	if err != nil {
		return nil, err
	}
	if st := StatsOf(res); st != nil {
		st.WallMS = ms(time.Since(start))
	}
	return res, nil
}

// StatsOf returns a pointer to the stats of a result returned by Run, or
// nil for any other value.
func StatsOf(res any) *Stats {
	switch r := res.(type) {
	case *TrendResult:
		return &r.Stats
	case *FunnelResult:
		return &r.Stats
	case *RetentionResult:
		return &r.Stats
	}
	return nil
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// scan runs the plan's scan with one visitor per worker and records stats.
func (e *Engine) scan(ctx context.Context, p *plan, spec storage.ScanSpec, visitors []storage.Visitor, stateBytes func() int64) error {
	t0 := time.Now()
	spec.Masks = p.masks
	var st storage.ScanStats
	var err error
	sctx, stage := storage.StartStage(ctx, "scan", -1)
	st, err = p.snap.Scan(sctx, spec, visitors)
	stage.End()
	p.stats.ScanMS = ms(time.Since(t0))
	p.stats.EventsScanned = st.EventsScanned
	p.stats.SegmentsRead = st.SegmentsRead
	p.stats.SegmentsSkipped = st.SegmentsSkipped
	p.stats.BlocksRead = st.BlocksRead
	p.stats.BlocksSkipped = st.BlocksSkipped
	p.stats.BytesRead = st.BytesRead
	p.stats.PeakMemoryBytes = st.BufferBytes + stateBytes()
	p.stats.Workers = len(visitors)
	if err != nil {
		return fmt.Errorf("scan app %q: %w", p.q.App, err)
	}
	return nil
}
