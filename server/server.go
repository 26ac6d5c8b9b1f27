// Package server is Spur's HTTP face: the spec §9 JSON API, the embedded
// web UI, Prometheus metrics, and a separate debug listener serving
// net/http/pprof.
//
// Main listener (loopback by default; there is no authentication):
//
//	GET  /                          the web UI (embedded files of ui/)
//	GET  /api/apps                  {"apps": [{name, tz, events, user_rows, segments, bytes, min_time, max_time}]}
//	GET  /api/apps/{app}/schema     storage.Schema: event names with counts, properties with types and top values (?top=N, default 20)
//	POST /api/apps/{app}/query      body: a spec §9 query; answer: the §9 result (?trace=1 adds "trace", the timing tree; ?output=csv tidy CSV)
//	POST /api/apps/{app}/import     body: a CSV, NDJSON or Parquet file (gzip allowed), applied atomically
//	     /api/apps/{app}/insights, dashboards, cohorts   saved documents: list, create, read, update (409 when stale), delete (insights.go)
//	GET  /api/apps/{app}/insights/{id}/result             a saved insight's answer, cached by query and catalog version
//	GET  /api/apps/{app}/users[/{id}[/events]]            users' current properties and one user's trail (users.go)
//	GET  /metrics                   Prometheus metrics
//	GET  /healthz                   {"status": "ok"}
//
// Errors have the spec §9 shape {"error": {"code", "message", "field"}} and
// these statuses:
//
//	400 invalid_query    malformed JSON, unknown field, bad value, bad import parameter
//	404 not_found        unknown app, API path or saved document
//	409 conflict         an update or delete naming a stale document version
//	405 invalid_query    wrong method for an API path (Allow names the right one)
//	413 limit_exceeded   request body over the limit (field "body")
//	422 invalid_input    import aborted by bad rows (nothing applied; "errors" lists them with file, line, field) or unreadable input
//	422 limit_exceeded   a query over a limit other than time
//	504 limit_exceeded   query time limit exceeded (Config.QueryTimeout)
//	500 corruption       a segment failed its checksums
//	500 internal         anything else
//
// A query whose client disconnects is cancelled (its context is done) and
// gets no answer; it is counted as "cancelled" in spur_queries_total.
//
// Every query runs in a runtime/trace task "spur.request" with regions
// "read body", "parse", "run" (holding the engine's task "spur.query") and
// "encode", so `go tool trace` on a trace from the debug listener shows
// where a request spent its time.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// QueryRunner runs one parsed query; *query.Engine implements it. Run must
// return promptly once ctx is done. The result is a §9 result value
// (*query.TrendResult, *query.FunnelResult, *query.RetentionResult) owned
// by the caller; errors should be *query.Error.
type QueryRunner interface {
	Run(ctx context.Context, q *query.Query) (any, error)
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Store is the embedded store served; required. The Server does not
	// close it.
	Store *storage.Store
	// Runner runs queries; nil means query.New(Store, query.Config{Workers}).
	Runner QueryRunner
	// Workers is the scan parallelism of the default Runner; 0 = GOMAXPROCS.
	Workers int
	// QueryTimeout bounds a query's run time (including waiting for a
	// slot); a query over it fails with 504 limit_exceeded. 0 means 60 s;
	// negative means no limit.
	QueryTimeout time.Duration
	// MaxBodyBytes bounds a query request body, bytes; 0 means 1 MiB.
	MaxBodyBytes int64
	// MaxImportBytes bounds an import request body (as sent, before gzip
	// decompression), bytes; 0 means 1 GiB.
	MaxImportBytes int64
	// MaxConcurrentQueries bounds the queries running at once; more wait
	// for a slot (within their time limit). 0 means DefaultMaxConcurrent.
	MaxConcurrentQueries int
	// SlowQuery is the run time from which a query is logged at Warn level
	// with its JSON and stats. 0 means 1 s; negative disables the log.
	SlowQuery time.Duration
	// ShutdownTimeout bounds how long Serve waits, after its context is
	// done, for in-flight requests to finish before closing connections
	// (which cancels the requests' queries). 0 means 10 s.
	ShutdownTimeout time.Duration
	// SchemaTopN is the default number of top values per property in the
	// schema endpoint; 0 means 20.
	SchemaTopN int
	// Logger receives request, slow-query and error logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics; nil means a new registry.
	// It must not already hold Go or process collectors.
	Registry *prometheus.Registry
}

// DefaultMaxConcurrent is the MaxConcurrentQueries used when it is 0.
const DefaultMaxConcurrent = 16

// Server serves the API, the UI, /metrics and the debug endpoints. It is
// safe for concurrent use and holds no package-level state.
type Server struct {
	cfg    Config
	log    *slog.Logger
	store  *storage.Store
	runner QueryRunner
	reg    *prometheus.Registry
	met    *metrics
	slots  chan struct{} // query concurrency semaphore

	handler http.Handler
	debug   http.Handler
	active  sync.WaitGroup // handlers running (Serve waits for them)

	schemaMu sync.Mutex
	schemas  map[string]cachedSchema

	results resultCache // saved insights' answers (insights.go)
}

type cachedSchema struct {
	generation int64
	topN       int
	schema     *storage.Schema
}

// New returns a Server for cfg. It fails when cfg.Store is nil.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is nil")
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = 60 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxImportBytes <= 0 {
		cfg.MaxImportBytes = 1 << 30
	}
	if cfg.MaxConcurrentQueries <= 0 {
		cfg.MaxConcurrentQueries = DefaultMaxConcurrent
	}
	if cfg.SlowQuery == 0 {
		cfg.SlowQuery = time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.SchemaTopN <= 0 {
		cfg.SchemaTopN = 20
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		store:   cfg.Store,
		runner:  cfg.Runner,
		reg:     cfg.Registry,
		slots:   make(chan struct{}, cfg.MaxConcurrentQueries),
		schemas: map[string]cachedSchema{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.runner == nil {
		s.runner = query.New(cfg.Store, query.Config{Workers: cfg.Workers})
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.met = newMetrics(s.reg, s.store, s.log)
	s.handler = s.wrap(s.routes())
	s.debug = s.wrap(debugRoutes())
	return s, nil
}

// Handler returns the main listener's handler: API, UI, /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// DebugHandler returns the debug listener's handler: net/http/pprof under
// /debug/pprof/ (index, cmdline, profile, symbol, trace and the named
// profiles heap, allocs, goroutine, block, mutex, threadcreate).
func (s *Server) DebugHandler() http.Handler { return s.debug }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	route := func(method, path string, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, h)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", method)
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: query.CodeInvalidQuery,
				Message: fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, method)})
		})
	}
	route("GET", "/api/apps", s.handleApps)
	route("GET", "/api/apps/{app}/schema", s.handleSchema)
	route("POST", "/api/apps/{app}/query", s.handleQuery)
	route("POST", "/api/apps/{app}/import", s.handleImport)
	s.registerEndpoints(mux)
	route("GET", "/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	route("GET", "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}).ServeHTTP)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound,
			Message: fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path)})
	})
	mux.Handle("/", uiHandler())
	return mux
}

func debugRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/{$}", http.RedirectHandler("/debug/pprof/", http.StatusFound))
	return mux
}

// statusWriter records the status code for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (pprof's
// long profiles extend their write deadline through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrap counts the handler as active (Serve waits for it), turns a panic
// into a 500 internal error with a logged stack, and logs the request at
// Debug level.
func (s *Server) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer s.active.Done()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, &apiError{Status: http.StatusInternalServerError, Code: query.CodeInternal, Message: "internal error"})
				}
			}
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"elapsed", time.Since(start), "remote", r.RemoteAddr)
		}()
		h.ServeHTTP(sw, r)
	})
}

// Serve serves the main handler on ln and, when debugLn is not nil, the
// debug handler on debugLn, until ctx is done or a listener fails. Then it
// shuts both down gracefully: new connections are refused, in-flight
// requests get up to Config.ShutdownTimeout to finish, after which their
// connections are closed (cancelling their queries). It returns once every
// handler has returned, with nil after a shutdown caused by ctx, or the
// listener's error. Serve closes the listeners.
func (s *Server) Serve(ctx context.Context, ln, debugLn net.Listener) error {
	errLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	servers := []*http.Server{{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: errLog}}
	lns := []net.Listener{ln}
	if debugLn != nil {
		// No write timeout: /debug/pprof/profile and /trace stream for
		// as many seconds as asked.
		servers = append(servers, &http.Server{Handler: s.debug, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog})
		lns = append(lns, debugLn)
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(lns[i]) }()
	}
	var first error
	pending := len(servers)
	select {
	case <-ctx.Done():
	case first = <-errc:
		pending--
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			s.log.Warn("graceful shutdown timed out; closing connections", "err", err)
			srv.Close()
		}
	}
	for ; pending > 0; pending-- {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
		}
	}
	s.active.Wait()
	if errors.Is(first, http.ErrServerClosed) {
		first = nil
	}
	if first != nil {
		return fmt.Errorf("server: %w", first)
	}
	return nil
}
