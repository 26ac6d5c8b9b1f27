package storage

import (
	"context"
	"math"
	"runtime/trace"
	"sync"
	"time"
)

// Tracer records one request's timing tree (the server's ?trace=1 answer):
// a Span per stage started with StartStage under a context carrying the
// tracer. It is safe for concurrent use: parallel stages (one per scanned
// shard) add their spans from their own goroutines. The idea follows
// VictoriaMetrics' lib/querytracer: the tree travels in the context and a
// stage costs nothing when no tracer is attached.
type Tracer struct {
	mu   sync.Mutex
	t0   time.Time
	root Span
}

// Span is one timed stage. StartMS is the offset of its start from the
// tracer's start and MS its duration, both in milliseconds (rounded to the
// microsecond). ID distinguishes parallel instances of one stage (the shard
// of a "scan shard" span); nil when the stage has none. Children are in
// start order.
type Span struct {
	Name     string  `json:"name"`
	ID       *int    `json:"id,omitempty"`
	StartMS  float64 `json:"start_ms"`
	MS       float64 `json:"ms"`
	Children []*Span `json:"children,omitempty"`
}

type spanKey struct{}

// spanCtx is the context value: the tracer and the span new stages nest in.
type spanCtx struct {
	tr   *Tracer
	span *Span
}

// NewTracer starts a tracer whose root span is called name; its clock
// starts now.
func NewTracer(name string) *Tracer {
	return &Tracer{t0: time.Now(), root: Span{Name: name}}
}

// Context returns ctx carrying t, so that stages started under it nest in
// the root span.
func (t *Tracer) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, spanKey{}, &spanCtx{tr: t, span: &t.root})
}

// Finish ends the root span and returns the tree. The tree is owned by the
// caller; stages must not be started or ended under t afterwards.
func (t *Tracer) Finish() *Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.root.MS = msSince(t.t0, time.Now())
	return &t.root
}

func msSince(t0, t time.Time) float64 {
	return math.Round(float64(t.Sub(t0).Nanoseconds())/1e3) / 1e3
}

// Stage is a running stage: a runtime/trace region and, when the context
// carries a Tracer, a Span. End it on the goroutine that started it.
type Stage struct {
	region *trace.Region
	tr     *Tracer
	span   *Span
	start  time.Time
}

// StartStage starts a stage called name: a runtime/trace region of that
// name (so `go tool trace` shows it inside the context's task) and, when
// ctx carries a Tracer, a child span of ctx's current span. id ≥ 0 is
// recorded as the span's ID (e.g. the shard number); pass -1 for none. The
// returned context nests later stages in this one. Without a tracer it
// allocates nothing beyond the region.
func StartStage(ctx context.Context, name string, id int) (context.Context, Stage) {
	st := Stage{region: trace.StartRegion(ctx, name)}
	sc, _ := ctx.Value(spanKey{}).(*spanCtx)
	if sc == nil {
		return ctx, st
	}
	st.tr, st.start = sc.tr, time.Now()
	st.span = &Span{Name: name, StartMS: msSince(sc.tr.t0, st.start)}
	if id >= 0 {
		v := id // a copy, so that id itself does not escape on the untraced path
		st.span.ID = &v
	}
	sc.tr.mu.Lock()
	sc.span.Children = append(sc.span.Children, st.span)
	sc.tr.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, &spanCtx{tr: sc.tr, span: st.span}), st
}

// End ends the stage's region and records its span's duration.
func (s Stage) End() {
	s.region.End()
	if s.span == nil {
		return
	}
	d := msSince(s.start, time.Now())
	s.tr.mu.Lock()
	s.span.MS = d
	s.tr.mu.Unlock()
}
