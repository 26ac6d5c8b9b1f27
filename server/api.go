package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
)

// codeCancelled is the spur_queries_total code of a query whose client went
// away, and codeOK that of a successful one.
const (
	codeCancelled = "cancelled"
	codeOK        = "ok"
)

// CodeInvalidInput is the error code of an import whose input is bad: rows
// that fail validation (nothing applied) or a body that cannot be read as
// the given format (docs/analytics.md §9 invalid_input).
const CodeInvalidInput = query.CodeInvalidInput

// apiError is the body of every error answer: {"error": apiError}.
type apiError struct {
	Status  int             `json:"-"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Field   string          `json:"field,omitempty"`
	Errors  []rowError      `json:"errors,omitempty"` // import: the bad rows, positioned
	Report  *importResponse `json:"report,omitempty"` // import: what was read before aborting
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	writeBytes(w, status, b)
}

func writeBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte{'\n'})
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, struct {
		Error *apiError `json:"error"`
	}{e})
}

// queryStatus maps a query error to its HTTP status (see the package doc).
func queryStatus(e *query.Error) int {
	switch e.Code {
	case query.CodeInvalidQuery:
		return http.StatusBadRequest
	case query.CodeNotFound:
		return http.StatusNotFound
	case query.CodeLimitExceeded:
		if errors.Is(e, context.DeadlineExceeded) {
			return http.StatusGatewayTimeout
		}
		return http.StatusUnprocessableEntity
	case query.CodeInvalidInput:
		return http.StatusUnprocessableEntity
	case query.CodeUnauthenticated:
		return http.StatusUnauthorized
	case query.CodeForbidden:
		return http.StatusForbidden
	case query.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// queryAPIError is the answer of a query error outside a query run (a
// saved insight, a deletion's filters).
func queryAPIError(e *query.Error) *apiError {
	return &apiError{Status: queryStatus(e), Code: e.Code, Field: e.Field, Message: e.Message}
}

func notFoundApp(app string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound, Field: "app",
		Message: fmt.Sprintf("app %s not found", event.Quote(app))}
}

// bodyLimitError turns a request body error caused by a limit into an
// answer, or returns nil: 413 limit_exceeded for a body over limit as sent
// (or, for an import, over Config.MaxImportDecompressedBytes once
// decompressed), 408 limit_exceeded for a body not received within
// Config.BodyTimeout (its connection is closed).
func bodyLimitError(w http.ResponseWriter, err error, limit int64) *apiError {
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: query.CodeLimitExceeded, Field: "body",
			Message: fmt.Sprintf("request body is larger than the limit of %d bytes; nothing was stored", limit)}
	case errors.Is(err, ingest.ErrTooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: query.CodeLimitExceeded, Field: "body",
			Message: err.Error() + "; nothing was stored"}
	case errors.Is(err, errBodyTimeout):
		w.Header().Set("Connection", "close")
		return &apiError{Status: http.StatusRequestTimeout, Code: query.CodeLimitExceeded, Field: "body",
			Message: err.Error() + "; nothing was stored"}
	}
	return nil
}

// bodyError turns a query request body read error into an answer: a limit
// (bodyLimitError), else 400 invalid_query.
func bodyError(w http.ResponseWriter, err error, limit int64) *apiError {
	if e := bodyLimitError(w, err, limit); e != nil {
		return e
	}
	return &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "body",
		Message: "read request body: " + err.Error()}
}

// appSummary is one entry of GET /api/apps: events, users rows and the
// time range as stored, live events included (rows: an event stored
// twice counts twice until compaction merges the copies, and events a
// pending deletion hides count until it is done), the pending deletion
// requests, segments and bytes as published on disk. Times are UTC
// microseconds.
type appSummary struct {
	Name      string `json:"name"`
	TZ        string `json:"tz"`
	Events    int64  `json:"events"`
	UserRows  int64  `json:"user_rows"`
	Segments  int    `json:"segments"`
	Bytes     int64  `json:"bytes"`
	MinTime   int64  `json:"min_time"`
	MaxTime   int64  `json:"max_time"`
	Retention string `json:"retention"` // the events' retention (storage.FormatRetention: "400d", "none")
	// PendingDeletions counts the deletion requests whose bytes are not
	// gone yet (GET /api/apps/{app}/deletions lists them).
	PendingDeletions int `json:"pending_deletions"`
}

func (s *Server) handleApps(w http.ResponseWriter, r *http.Request) {
	names, err := s.store.Apps()
	if err != nil {
		s.internal(w, r, err)
		return
	}
	key, _ := s.requestKey(r)
	out := []appSummary{}
	for _, n := range names {
		if !readable(key, n) {
			continue
		}
		app, err := s.store.App(n)
		if err != nil {
			s.internal(w, r, err)
			return
		}
		// Rows and times as a query sees them (live events included);
		// segments and bytes as stored (published).
		v, err := app.Acquire()
		if err != nil {
			s.internal(w, r, err)
			return
		}
		m := app.Current()
		as := appSummary{Name: n, TZ: m.TZ, Retention: storage.FormatRetention(m.Retention), Events: v.Rows(storage.KindEvents), UserRows: v.Rows(storage.KindUsers),
			Segments: len(m.Segments)}
		for _, ref := range m.Segments {
			as.Bytes += ref.Bytes
		}
		as.MinTime, as.MaxTime, _ = v.TimeRange(storage.KindEvents)
		for _, d := range v.Deletions {
			if d.Pending() {
				as.PendingDeletions++
			}
		}
		v.Release()
		out = append(out, as)
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": out})
}

// internal answers a failure of the store or the server: 500 corruption
// for a segment that failed its checksums, else 500 internal.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	code := query.CodeInternal
	if errors.Is(err, segment.ErrCorruption) {
		code = query.CodeCorruption
	}
	writeError(w, &apiError{Status: http.StatusInternalServerError, Code: code, Message: err.Error()})
}

func (s *Server) handleSchema(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("app")
	topN := s.cfg.SchemaTopN
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			writeError(w, &apiError{Status: http.StatusBadRequest, Code: query.CodeInvalidQuery, Field: "top",
				Message: fmt.Sprintf("top: want an integer in [1, 10000], found %q", v)})
			return
		}
		topN = n
	}
	if !storage.ValidAppName(name) {
		writeError(w, notFoundApp(name))
		return
	}
	app, err := s.store.App(name)
	if errors.Is(err, storage.ErrNotFound) {
		writeError(w, notFoundApp(name))
		return
	} else if err != nil {
		s.internal(w, r, err)
		return
	}
	snap, err := app.Acquire()
	if err != nil {
		s.internal(w, r, err)
		return
	}
	defer snap.Release()
	gen := snap.DataVersion() // live requests change the schema's counts and types too
	s.schemaMu.Lock()
	c, ok := s.schemas[name]
	s.schemaMu.Unlock()
	if !ok || c.generation != gen || c.topN != topN {
		sc, err := snap.Schema(r.Context(), topN)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			s.internal(w, r, err)
			return
		}
		c = cachedSchema{generation: gen, topN: topN, schema: sc}
		s.schemaMu.Lock()
		s.schemas[name] = c
		s.schemaMu.Unlock()
	}
	writeJSON(w, http.StatusOK, c.schema)
}

// truthy reports whether a query parameter asks for a flag: 1, true, yes.
func truthy(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b || v == "yes"
}

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	appName := r.PathValue("app")
	ctx := r.Context()
	var tr *storage.Tracer
	if truthy(r.URL.Query().Get("trace")) {
		tr = storage.NewTracer("request")
		ctx = tr.Context(ctx)
	}
	ctx, task := trace.NewTask(ctx, "spur.request")
	defer task.End()
	s.met.inFlight.Inc()
	defer s.met.inFlight.Dec()

	_, st := storage.StartStage(ctx, "read body", -1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	st.End()
	if err != nil {
		e := bodyError(w, err, s.cfg.MaxBodyBytes)
		s.met.observe("", e.Code, 0, nil)
		writeError(w, e)
		return
	}
	_, st = storage.StartStage(ctx, "parse", -1)
	q, err := query.Parse(body)
	st.End()
	if err == nil && q.App != "" && q.App != appName {
		err = &query.Error{Code: query.CodeInvalidQuery, Field: "app",
			Message: fmt.Sprintf("the query's app %s differs from the URL's %s", event.Quote(q.App), event.Quote(appName))}
	}
	if err == nil && !storage.ValidAppName(appName) {
		err = &query.Error{Code: query.CodeNotFound, Field: "app", Message: fmt.Sprintf("app %s not found", event.Quote(appName))}
	}
	if err != nil {
		s.queryFailed(w, "", err, 0, body)
		return
	}
	q.App = appName
	csv, err := csvOutput(r)
	if err != nil {
		s.queryFailed(w, q.Kind, err, 0, body)
		return
	}

	res, d, err := s.execute(ctx, q)
	if r.Context().Err() != nil && !errors.Is(context.Cause(r.Context()), errShuttingDown) {
		s.met.observe(q.Kind, codeCancelled, d, nil)
		s.log.Info("query cancelled: client went away", "app", appName, "kind", q.Kind, "elapsed", d)
		return
	}
	if err != nil {
		s.queryFailed(w, q.Kind, err, d, body)
		return
	}
	stats := query.StatsOf(res)
	s.met.observe(q.Kind, codeOK, d, stats)
	if s.cfg.SlowQuery >= 0 && d >= s.cfg.SlowQuery {
		s.log.Warn("slow query", "app", appName, "kind", q.Kind, "elapsed", d, "query", compact(body), statsAttr(stats))
	} else {
		s.log.Debug("query", "app", appName, "kind", q.Kind, "elapsed", d, statsAttr(stats))
	}

	if csv {
		s.writeCSV(w, r, res)
		return
	}
	_, st = storage.StartStage(ctx, "encode", -1)
	out, err := json.Marshal(res)
	st.End()
	if err != nil {
		s.internal(w, r, fmt.Errorf("encode %s result: %w", q.Kind, err))
		return
	}
	if tr != nil {
		out, err = withTrace(out, tr.Finish())
		if err != nil {
			s.internal(w, r, err)
			return
		}
	}
	writeBytes(w, http.StatusOK, out)
}

// withTrace adds "trace": tree to the JSON object res.
func withTrace(res []byte, tree *storage.Span) ([]byte, error) {
	tb, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("encode trace: %w", err)
	}
	res = bytes.TrimRight(res, " \n")
	if len(res) < 2 || res[len(res)-1] != '}' {
		return nil, fmt.Errorf("encode trace: result is not a JSON object")
	}
	out := append(res[:len(res)-1:len(res)-1], `,"trace":`...)
	out = append(out, tb...)
	return append(out, '}'), nil
}

// queryFailed answers a failed query: err is classified as a *query.Error
// (a deadline becomes limit_exceeded), counted and logged.
func (s *Server) queryFailed(w http.ResponseWriter, kind string, err error, d time.Duration, body []byte) {
	var qe *query.Error
	switch {
	case errors.As(err, &qe):
	case errors.Is(err, context.DeadlineExceeded):
		qe = &query.Error{Code: query.CodeLimitExceeded, Message: "query time limit exceeded", Err: err}
	default:
		qe = &query.Error{Code: query.CodeInternal, Message: err.Error(), Err: err}
	}
	status := queryStatus(qe)
	s.met.observe(kind, qe.Code, d, nil)
	lvl := slog.LevelDebug
	switch {
	case status >= 500 && status != http.StatusGatewayTimeout:
		lvl = slog.LevelError
	case status == http.StatusGatewayTimeout:
		lvl = slog.LevelWarn
	}
	s.log.Log(context.Background(), lvl, "query failed", "kind", kind, "code", qe.Code, "field", qe.Field,
		"message", qe.Message, "elapsed", d, "query", compact(body))
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5") // seconds: about a query's run, half the wait for memory
	}
	writeError(w, &apiError{Status: status, Code: qe.Code, Message: qe.Message, Field: qe.Field})
}

func statsAttr(st *query.Stats) slog.Attr {
	if st == nil {
		return slog.Group("stats")
	}
	return slog.Group("stats", "wall_ms", st.WallMS, "plan_ms", st.PlanMS, "scan_ms", st.ScanMS,
		"merge_ms", st.MergeMS, "events_scanned", st.EventsScanned, "segments_read", st.SegmentsRead,
		"segments_skipped", st.SegmentsSkipped, "blocks_read", st.BlocksRead, "blocks_skipped", st.BlocksSkipped,
		"bytes_read", st.BytesRead, "peak_memory_bytes", st.PeakMemoryBytes, "workers", st.Workers)
}

// compact returns the query JSON on one line for logs (the raw text when it
// is not valid JSON), at most 4 KiB.
func compact(body []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, body) != nil {
		b.Reset()
		b.Write(body)
	}
	if b.Len() > 4096 {
		return b.String()[:4096] + "…"
	}
	return b.String()
}
