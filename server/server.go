// Package server is Spur's HTTP face: the docs/analytics.md §9 JSON API, the embedded
// web UI, Prometheus metrics, and a separate debug listener serving
// net/http/pprof.
//
// Main listener (loopback by default), each route with the key scope it
// needs (auth.go: every /api/ request and /metrics carry
// "Authorization: Bearer KEY"):
//
//	GET  /                          the web UI (embedded files of ui/; no key: it asks for one)
//	GET  /api/apps                  query: {"apps": [{name, tz, events, user_rows, segments, bytes, min_time, max_time}]}, the apps the key reads
//	GET  /api/apps/{app}/schema     query: storage.Schema: event names with counts, properties with types and top values (?top=N, default 20)
//	POST /api/apps/{app}/query      query: body a docs/analytics.md §9 query; answer: the §9 result (?trace=1 adds "trace", the timing tree; ?output=csv tidy CSV)
//	POST /api/apps/{app}/events     ingest: live events (events.go; docs/ingest.md §1), any origin
//	POST /api/apps/{app}/import     ingest: body a CSV, NDJSON or Parquet file (gzip allowed), applied atomically
//	     /api/apps/{app}/insights, dashboards, cohorts   query: saved documents: list, create, read, update (409 when stale), delete (insights.go)
//	GET  /api/apps/{app}/insights/{id}/result             query: a saved insight's answer, cached by query and catalog version
//	GET  /api/apps/{app}/users[/{id}[/events]]            query: users' current properties and one user's trail (users.go)
//	GET  /api/apps/{app}/persons/{id}[/events]            query: the same by any distinct id of a person (users.go)
//	POST /api/apps/{app}/persons/merge                    admin: body {"ids": [T, O]}: merge(T, O) (persons.go)
//	GET  /api/apps/{app}/warnings?kind=identity           query: the refused merges, newest first (persons.go)
//	GET  /api/key                   any key: the key's own record
//	     /api/keys[/{id}]           admin: list, create, revoke keys (auth.go)
//	GET  /metrics                   admin: Prometheus metrics (also on the debug listener, without a key)
//	GET  /healthz                   no key: {"status": "ok"}
//
// Errors have the docs/analytics.md §9 shape {"error": {"code", "message", "field"}}
// (field: the JSON path of the offending query field, e.g.
// "series[0].where[1].value") and these statuses:
//
//	400 invalid_query    malformed JSON, unknown field, bad value, bad import parameter
//	400 invalid_input    an events body that cannot be parsed as a whole (events.go)
//	401 unauthenticated  a missing, malformed or unknown key (field "authorization")
//	403 forbidden        Host not served (field "host"), a browser's cross-site request (field "origin"), a key without the scope or app (field "authorization")
//	404 not_found        unknown app, API path or saved document
//	409 conflict         an update or delete naming a stale document version
//	405 invalid_query    wrong method for an API path (Allow names the right one)
//	408 limit_exceeded   request body not received within Config.BodyTimeout (field "body"; connection closed)
//	413 limit_exceeded   request body over the limit as sent, or an import over its decompressed limit (field "body"; nothing stored)
//	422 invalid_input    import aborted by bad rows (nothing applied; "errors" lists them with file, line, field) or unreadable input (a truncated gzip names the compressed byte offset)
//	422 limit_exceeded   a query over a limit other than time
//	504 limit_exceeded   query time limit exceeded (Config.QueryTimeout)
//	503 unavailable      no query memory free within the wait (Config.MemoryTotal), or the server is shutting down; Retry-After: 5
//	                     (the events endpoint: the store cannot take more now; Retry-After: 1)
//	500 corruption       a segment failed its checksums
//	500 internal         anything else
//
// Results may carry "warnings": [{code, message, field}] (docs/analytics.md §9): an event
// name or a string filter value that occurs nowhere in the app.
//
// # Limits and request checks
//
// Defaults of a production Go server, each a Config field and a `spur
// serve` flag:
//
//	headers        10 s (ReadHeaderTimeout, --read-header-timeout)
//	body           60 s from the handler's start to the body's last byte,
//	               imports included (BodyTimeout, --body-timeout); a client
//	               that trickles is answered 408 and disconnected, so it
//	               holds no goroutine past the limit
//	idle           2 min between keep-alive requests (IdleTimeout, --idle-timeout)
//	connections    1,024 open on the main listener (MaxConnections,
//	               --max-connections); more wait in the kernel's accept queue
//	query body     1 MiB (MaxBodyBytes, --max-body-bytes)
//	events body    20 MiB as sent (MaxEventsBytes, --max-events-bytes),
//	               200 MiB decompressed (MaxEventsDecompressedBytes,
//	               --max-events-decompressed-bytes); 256 MiB for the
//	               events requests in flight together (EventsMemory,
//	               --events-memory); timestamps at most 24 h ahead
//	               (MaxFuture, --max-future)
//	import body    1 GiB as sent (MaxImportBytes, --max-import-bytes) and
//	               200 MiB decompressed (MaxImportDecompressedBytes,
//	               --max-import-decompressed-bytes, docs/ingest.md §1's figure):
//	               a 7 MB gzip that inflates to 3 GB is refused with 413
//	               after 200 MiB, nothing stored
//	property value 64 KiB per string value of an imported row
//	               (MaxPropertyBytes, --max-property-bytes)
//
// There is no write timeout: a query is bounded by its own time limit.
//
// Every request's Host must be one the server serves (AllowedHosts,
// --allowed-hosts; default: the listen hosts, localhost, 127.0.0.1, ::1,
// any port), against DNS rebinding (docs/ingest.md §4); others get 403
// forbidden. Every endpoint refuses a browser's cross-site request with
// 403 forbidden: an Origin header that is not this server's host:port, or
// Sec-Fetch-Site: cross-site (a top-level GET navigation excepted, so a
// link to the UI from elsewhere opens it). Clients that send neither
// header (curl, scripts) are not affected. The events endpoint and the
// SDK capture paths under /ingest/ (the anyOrigin policy: browser SDKs
// call them cross-origin with an ingest key)
// allows every origin and answers CORS preflights instead. The
// debug listener applies the same two checks, and always answers the
// loopback names too.
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// QueryRunner runs one parsed query. Run must return promptly once ctx is
// done. The result is a docs/analytics.md §9 result owned by the caller,
// as *query.Engine.Run returns it (its JSON encoding is the answer; the
// CSV output and the metrics read it); it is non-nil when the error is
// nil. Errors should be *query.Error.
type QueryRunner interface {
	Run(ctx context.Context, q *query.Query) (query.Result, error)
}

// engineRunner is the default QueryRunner: a *query.Engine (its Run and
// its other methods, CheckCohort's, promoted).
type engineRunner struct{ *query.Engine }

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Store is the embedded store served; required. The Server does not
	// close it.
	Store *storage.Store
	// Runner runs queries; nil means a query.Engine over Store with
	// Workers, QueryTimeout, MemoryBudget and MemoryTotal.
	Runner QueryRunner
	// Workers is the scan parallelism of the default Runner; 0 = GOMAXPROCS.
	Workers int
	// MemoryBudget is each query's memory budget in bytes for the default
	// Runner (query.Config.MemoryBudget); 0 means query.DefaultMemoryBudget;
	// a negative value means the default too.
	MemoryBudget int64
	// MemoryTotal bounds the budgets of the queries running at once, bytes
	// (query.Admission, docs/storage.md §5): a query that does not fit waits,
	// then fails with 503 unavailable. 0 means query.DefaultMemoryTotal()
	// (half the machine's memory), and so does a negative value. It must be
	// at least MemoryBudget.
	MemoryTotal int64
	// OnQueryMemory, if set, is called with the bytes the default Runner's
	// queries have reserved after each reservation and release
	// (query.Admission.SetOnChange).
	OnQueryMemory func(reserved int64)
	// QueryTimeout bounds a query's run time (including waiting for a
	// slot); a query over it fails with 504 limit_exceeded. 0 means
	// DefaultQueryTimeout; negative means no limit.
	QueryTimeout time.Duration
	// MaxBodyBytes bounds a query request body, bytes; 0 means
	// DefaultMaxBodyBytes, and so does a negative value.
	MaxBodyBytes int64
	// MaxImportBytes bounds an import request body (as sent, before gzip
	// decompression), bytes; 0 means DefaultMaxImportBytes, and so does a
	// negative value.
	MaxImportBytes int64
	// MaxConcurrentQueries bounds the queries running at once; more wait
	// for a slot (within their time limit). 0 means DefaultMaxConcurrent,
	// and so does a negative value.
	MaxConcurrentQueries int
	// SlowQuery is the run time from which a query is logged at Warn level
	// with its JSON and stats. 0 means DefaultSlowQuery; negative disables
	// the log.
	SlowQuery time.Duration
	// ShutdownTimeout bounds how long Serve waits, after its context is
	// done, for in-flight requests to finish: queries still running a
	// second before its end (half-way, under 2 s) are cancelled and
	// answered 503 unavailable, and connections still open at its end are
	// closed. 0 means DefaultShutdownTimeout, and so does a negative value.
	ShutdownTimeout time.Duration
	// SchemaTopN is the default number of top values per property in the
	// schema endpoint; 0 means DefaultSchemaTopN, and so does a negative
	// value.
	SchemaTopN int
	// Logger receives request, slow-query and error logs; nil means
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics; nil means a new registry.
	// It must not already hold Go or process collectors.
	Registry *prometheus.Registry

	// HTTP limits and request checks (see the package doc).

	// ReadHeaderTimeout bounds reading a request's headers; 0 means
	// DefaultReadHeaderTimeout, and so does a negative value.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the start of its
	// handler to its last byte: a body still arriving then is cut off
	// (408 limit_exceeded, connection closed, nothing stored). It applies
	// to imports too, which read their body as they go. 0 means
	// DefaultBodyTimeout; negative means no limit.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long between
	// requests; 0 means DefaultIdleTimeout, and so does a negative value.
	IdleTimeout time.Duration
	// MaxConnections bounds the main listener's open connections; further
	// ones wait in the kernel's accept queue until one closes. 0 means
	// DefaultMaxConnections; negative means no limit.
	MaxConnections int
	// MaxImportDecompressedBytes bounds the bytes a compressed import
	// body decompresses to (413 limit_exceeded past it, nothing stored);
	// 0 means DefaultMaxImportDecompressedBytes; negative means no limit.
	// It is smaller than MaxImportBytes because sent bytes cost the
	// sender its bandwidth and decompressed ones do not (a 7 MB gzip
	// inflates to 3 GB).
	MaxImportDecompressedBytes int64
	// MaxPropertyBytes bounds one string property value (and insert id)
	// of an imported row, bytes: a longer one is a bad row naming the
	// field and the limit. 0 means event.DefaultMaxPropertyBytes (64
	// KiB); negative means no limit.
	MaxPropertyBytes int
	// Auth is how requests are authenticated: AuthKeys (the zero value:
	// every /api/ request and /metrics carry a key, auth.go) or AuthNone,
	// which Serve allows only when every listener is on a loopback
	// address.
	Auth AuthMode
	// Keys is the key store checked under AuthKeys; nil means
	// OpenKeys(Store).
	Keys *Keys
	// LiveObserver, if set, is registered for the store's flush and
	// compaction histograms (its methods are the store's
	// LiveOptions.OnFlush and OnCompact).
	LiveObserver *LiveObserver
	// Ingester stores the events endpoint's events; nil means Store
	// (Store.Ingest: the write-ahead log and the live layer, which need
	// storage.Config.Live).
	Ingester Ingester
	// MaxEventsBytes bounds an events request body as sent, bytes; 0
	// means DefaultMaxEventsBytes (20 MiB, docs/ingest.md §1), and so does a
	// negative value.
	MaxEventsBytes int64
	// MaxEventsDecompressedBytes bounds what a gzip events body
	// decompresses to, bytes; 0 means DefaultMaxEventsDecompressedBytes
	// (200 MiB); negative means no limit.
	MaxEventsDecompressedBytes int64
	// MaxFuture is how far past the server's clock an event's timestamp
	// may be (later ones are rejected); 0 means DefaultMaxFuture (24 h);
	// negative means no limit.
	MaxFuture time.Duration
	// EventsMemory bounds the memory of the events requests being parsed
	// and stored at once, bytes (their bodies, events and strings): a
	// request that would pass it waits for none, it is answered 503 (413
	// when it alone needs more). 0 means DefaultEventsMemory (256 MiB), and
	// so does a negative value.
	EventsMemory int64
	// MaxClockSkew is how far an SDK's clock may be from the server's
	// before its batch's timestamps are corrected by the difference in
	// whole seconds (PostHog's sent_at, Segment's sentAt; docs/ingest.md
	// §6); 0 means DefaultMaxClockSkew (60 s).
	MaxClockSkew time.Duration
	// AllowedHosts lists the Host header values served (names or
	// addresses, any port; "*.example.com" for subdomains; "*" for all);
	// any other Host gets 403 forbidden, against DNS rebinding. nil means
	// DefaultAllowedHosts() (loopback names only); `spur serve` passes
	// DefaultAllowedHosts(--listen, --debug-listen) unless
	// --allowed-hosts is given.
	AllowedHosts []string
}

// DefaultMaxConcurrent is the MaxConcurrentQueries used when it is 0.
const DefaultMaxConcurrent = 16

// Defaults of Config's fields, each the value its field takes when 0 and
// the default of its `spur serve` flag.
const (
	DefaultQueryTimeout      = 60 * time.Second // QueryTimeout, --query-timeout
	DefaultMaxBodyBytes      = 1 << 20          // MaxBodyBytes, --max-body-bytes, bytes
	DefaultMaxImportBytes    = 1 << 30          // MaxImportBytes, --max-import-bytes, bytes
	DefaultSlowQuery         = time.Second      // SlowQuery, --slow-query
	DefaultShutdownTimeout   = 10 * time.Second // ShutdownTimeout, --shutdown-timeout
	DefaultSchemaTopN        = 20               // SchemaTopN: top values per property
	DefaultReadHeaderTimeout = 10 * time.Second // ReadHeaderTimeout, --read-header-timeout
	DefaultBodyTimeout       = 60 * time.Second // BodyTimeout, --body-timeout
	DefaultIdleTimeout       = 2 * time.Minute  // IdleTimeout, --idle-timeout
)

// Default listen addresses of `spur serve` (--listen, --debug-listen),
// loopback only: the addresses of the listeners passed to Serve.
const (
	DefaultListen      = "127.0.0.1:8080" // the API, the UI and /metrics
	DefaultDebugListen = "127.0.0.1:6060" // pprof and /metrics
)

// DefaultMaxConnections is the MaxConnections used when it is 0.
const DefaultMaxConnections = 1024

// DefaultMaxImportDecompressedBytes is the MaxImportDecompressedBytes used
// when it is 0: 200 MiB, the decompressed limit docs/ingest.md §1 sets for the
// events endpoint (DefaultMaxEventsDecompressedBytes).
const DefaultMaxImportDecompressedBytes = DefaultMaxEventsDecompressedBytes

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

	keys         *Keys
	ingester     Ingester
	eventsMem    memGate         // memory of the events requests in flight
	eventsPool   *sync.Pool      // *eventsWork
	captureWarns captureWarnings // the SDK capture paths' warnings (capture.go)
	routeList    []route         // the main listener's routes (tests check each one's access)
}

type cachedSchema struct {
	generation int64 // storage.Catalog.DataVersion
	topN       int
	schema     *storage.Schema
}

// New returns a Server for cfg. It fails when cfg.Store is nil.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is nil")
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxImportBytes <= 0 {
		cfg.MaxImportBytes = DefaultMaxImportBytes
	}
	if cfg.MaxConcurrentQueries <= 0 {
		cfg.MaxConcurrentQueries = DefaultMaxConcurrent
	}
	if cfg.SlowQuery == 0 {
		cfg.SlowQuery = DefaultSlowQuery
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.SchemaTopN <= 0 {
		cfg.SchemaTopN = DefaultSchemaTopN
	}
	if cfg.MemoryBudget <= 0 {
		cfg.MemoryBudget = query.DefaultMemoryBudget
	}
	if cfg.MemoryTotal <= 0 {
		cfg.MemoryTotal = query.DefaultMemoryTotal()
	}
	if cfg.MemoryBudget > cfg.MemoryTotal {
		return nil, fmt.Errorf("server: query memory budget %d bytes is more than the total of all queries, %d bytes", cfg.MemoryBudget, cfg.MemoryTotal)
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	decompressedLimit(&cfg.MaxImportDecompressedBytes, DefaultMaxImportDecompressedBytes)
	if cfg.AllowedHosts == nil {
		cfg.AllowedHosts = DefaultAllowedHosts()
	}
	if cfg.MaxEventsBytes <= 0 {
		cfg.MaxEventsBytes = DefaultMaxEventsBytes
	}
	decompressedLimit(&cfg.MaxEventsDecompressedBytes, DefaultMaxEventsDecompressedBytes)
	if cfg.MaxFuture == 0 {
		cfg.MaxFuture = DefaultMaxFuture
	}
	if cfg.EventsMemory <= 0 {
		cfg.EventsMemory = DefaultEventsMemory
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	if cfg.Keys == nil {
		k, err := OpenKeys(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		cfg.Keys = k
	}
	if cfg.Ingester == nil {
		cfg.Ingester = cfg.Store
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		store:   cfg.Store,
		runner:  cfg.Runner,
		reg:     cfg.Registry,
		slots:   make(chan struct{}, cfg.MaxConcurrentQueries),
		schemas: map[string]cachedSchema{},

		keys:       cfg.Keys,
		ingester:   cfg.Ingester,
		eventsMem:  memGate{limit: cfg.EventsMemory},
		eventsPool: newEventsPool(),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.runner == nil {
		adm := query.NewAdmission(cfg.MemoryTotal, 0)
		adm.SetOnChange(cfg.OnQueryMemory)
		s.runner = engineRunner{query.New(cfg.Store, query.Config{Workers: cfg.Workers, Timeout: max(cfg.QueryTimeout, 0),
			MemoryBudget: cfg.MemoryBudget, Admission: adm})}
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.met = newMetrics(s.reg, s.store, s.log, &s.eventsMem, cfg.LiveObserver)
	if c, ok := s.ingester.(prometheus.Collector); ok {
		// The store's own ingest metrics (log bytes, unflushed events,
		// flush and compaction durations), when it has them.
		if err := s.reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: register the ingester's metrics: %w", err)
		}
	}
	s.handler = s.wrap(s.routes(), newHostPolicy(cfg.AllowedHosts))
	// The debug listener also answers the loopback names, so that `go
	// tool pprof http://127.0.0.1:6060/…` works whatever --allowed-hosts.
	s.debug = s.wrap(guardRoute(sameOriginOnly, s.debugRoutes()), newHostPolicy(append(DefaultAllowedHosts(), cfg.AllowedHosts...)))
	return s, nil
}

// decompressedLimit applies a decompressed-size limit's convention: 0
// means def, negative no limit (ingest's 0).
func decompressedLimit(v *int64, def int64) {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		*v = 0
	}
}

// Keys returns the server's key store (`spur serve` creates the first
// admin key through it).
func (s *Server) Keys() *Keys { return s.keys }

// Handler returns the main listener's handler: API, UI, /metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// DebugHandler returns the debug listener's handler: net/http/pprof under
// /debug/pprof/ (index, cmdline, profile, symbol, trace and the named
// profiles heap, allocs, goroutine, block, mutex, threadcreate), and
// /metrics without a key (the listener is for operators: loopback by
// default).
func (s *Server) DebugHandler() http.Handler { return s.debug }

// route is one registered method and path with its policy and access.
type route struct {
	method, path string
	policy       crossSite
	acc          access
}

// router registers routes with their cross-site policy, and answers 405
// with Allow for the other methods of a path (finish).
type router struct {
	s      *Server
	mux    *http.ServeMux
	routes []route             // every handle call, in order
	paths  []string            // in registration order
	allow  map[string][]string // per path: its methods
	guard  map[string]crossSite
	// noFallback are paths that get no 405 answer of their own (finish):
	// one of a pattern with a method would conflict with a pattern of
	// another method that matches the same requests.
	noFallback map[string]bool
}

func (s *Server) newRouter() *router {
	return &router{s: s, mux: http.NewServeMux(), allow: map[string][]string{}, guard: map[string]crossSite{}, noFallback: map[string]bool{}}
}

// handle serves method on path with h under policy and acc: sameOriginOnly
// refuses browsers' cross-site requests (403), anyOrigin allows every
// origin and answers CORS preflights (OPTIONS) for the path, without a
// key; acc is the key the request needs (auth.go). All methods of a path
// share one policy; its preflight names the first method registered.
func (rt *router) handle(method, path string, policy crossSite, acc access, h http.HandlerFunc) {
	rt.mux.Handle(method+" "+path, guardRoute(policy, rt.s.authorize(acc, h)))
	rt.routes = append(rt.routes, route{method, path, policy, acc})
	if _, ok := rt.allow[path]; !ok {
		rt.paths = append(rt.paths, path)
		rt.guard[path] = policy
	}
	first := !slices.Contains(rt.allow[path], "OPTIONS")
	rt.allow[path] = append(rt.allow[path], method)
	if policy == anyOrigin && first {
		rt.mux.Handle("OPTIONS "+path, preflight(method))
		rt.allow[path] = append(rt.allow[path], "OPTIONS")
	}
}

// finish registers, per path, the 405 answer for the methods it does not
// serve, and returns the mux.
func (rt *router) finish() *http.ServeMux {
	for _, path := range rt.paths {
		if rt.noFallback[path] {
			continue
		}
		allow := strings.Join(slices.Sorted(slices.Values(rt.allow[path])), ", ")
		acc := open
		if strings.HasPrefix(path, "/api/") {
			acc = access{anyKey: true}
		}
		rt.mux.Handle(path, guardRoute(rt.guard[path], rt.s.authorize(acc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Code: query.CodeInvalidQuery,
				Message: fmt.Sprintf("method %s not allowed on %s: use %s", event.Quote(r.Method), r.URL.Path, allow)})
		}))))
	}
	return rt.mux
}

func (s *Server) routes() http.Handler {
	rt := s.newRouter()
	rt.handle("GET", "/api/apps", sameOriginOnly, access{scope: ScopeQuery}, s.handleApps)
	rt.handle("DELETE", "/api/apps/{app}", sameOriginOnly, access{scope: ScopeAdmin}, s.handleDeleteApp)
	rt.handle("PATCH", "/api/apps/{app}", sameOriginOnly, access{scope: ScopeAdmin}, s.handlePatchApp)
	rt.handle("GET", "/api/apps/{app}/schema", sameOriginOnly, needs(ScopeQuery), s.handleSchema)
	rt.handle("POST", "/api/apps/{app}/query", sameOriginOnly, needs(ScopeQuery), s.handleQuery)
	rt.handle("POST", "/api/apps/{app}/import", sameOriginOnly, needs(ScopeIngest), s.handleImport)
	rt.handle("POST", "/api/apps/{app}/events", anyOrigin, needs(ScopeIngest), s.handleEvents)
	rt.handle("GET", "/api/apps/{app}/export", sameOriginOnly, needs(ScopeQuery), s.handleExport)
	s.registerEndpoints(rt)
	s.registerCapture(rt)
	rt.handle("GET", "/api/key", sameOriginOnly, access{anyKey: true}, s.handleOwnKey)
	rt.handle("GET", "/api/keys", sameOriginOnly, access{scope: ScopeAdmin}, s.handleListKeys)
	rt.handle("POST", "/api/keys", sameOriginOnly, access{scope: ScopeAdmin}, s.handleCreateKey)
	rt.handle("DELETE", "/api/keys/{id}", sameOriginOnly, access{scope: ScopeAdmin}, s.handleRevokeKey)
	rt.handle("POST", "/api/backup", sameOriginOnly, access{scope: ScopeAdmin}, s.handleBackup)
	rt.handle("GET", "/healthz", sameOriginOnly, open, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	rt.handle("GET", "/metrics", sameOriginOnly, access{scope: ScopeAdmin}, s.metricsHandler().ServeHTTP)
	rt.mux.Handle("/api/", guardRoute(sameOriginOnly, s.authorize(access{anyKey: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Code: query.CodeNotFound,
			Message: fmt.Sprintf("no API endpoint %s %s", event.Quote(r.Method), r.URL.Path)})
	}))))
	rt.mux.Handle("/", guardRoute(sameOriginOnly, uiHandler()))
	s.routeList = rt.routes
	return rt.finish()
}

// metricsHandler serves the registry in the Prometheus text format.
func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	})
}

func (s *Server) debugRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("GET /metrics", s.metricsHandler())
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
// into a 500 internal error with a logged stack, logs the request at
// Debug level, refuses a Host hosts does not allow (checkHost) and puts the body
// under Config.BodyTimeout.
func (s *Server) wrap(h http.Handler, hosts hostPolicy) http.Handler {
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
		if !s.checkHost(sw, r, hosts) {
			return
		}
		s.limitBody(sw, r)
		h.ServeHTTP(sw, r)
	})
}

// errShuttingDown is the cancellation cause of the queries still running
// late in a shutdown.
var errShuttingDown = errors.New("server shutting down")

// Serve serves the main handler on ln and, when debugLn is not nil, the
// debug handler on debugLn, until ctx is done or a listener fails. Then it
// shuts both down gracefully: new connections are refused, in-flight
// requests get up to Config.ShutdownTimeout to finish; queries still
// running a second before its end (half-way, for a timeout under 2 s) are
// cancelled and answered 503 unavailable, and connections still open at
// its end are closed. It returns once every
// handler has returned, with nil after a shutdown caused by ctx, or the
// listener's error. Serve closes the listeners.
func (s *Server) Serve(ctx context.Context, ln, debugLn net.Listener) error {
	if s.cfg.Auth == AuthNone {
		for _, l := range []net.Listener{ln, debugLn} {
			if l != nil && !IsLoopback(l.Addr()) {
				ln.Close()
				if debugLn != nil {
					debugLn.Close()
				}
				return fmt.Errorf("server: no authentication (--auth none) on %s, which is not a loopback address: serve with keys", l.Addr())
			}
		}
	}
	errLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	// Every request's context descends from base, so that a shutdown can
	// cancel the queries still running. No write timeout: a query is
	// bounded by its own time limit, and /debug/pprof/profile and /trace
	// stream for as many seconds as asked.
	base, cancelRequests := context.WithCancelCause(context.Background())
	defer cancelRequests(nil)
	baseContext := func(net.Listener) context.Context { return base }
	servers := []*http.Server{{Handler: s.handler, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout: s.cfg.IdleTimeout, ErrorLog: errLog, BaseContext: baseContext}}
	if s.cfg.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
	}
	lns := []net.Listener{ln}
	if debugLn != nil {
		servers = append(servers, &http.Server{Handler: s.debug, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
			IdleTimeout: s.cfg.IdleTimeout, ErrorLog: errLog})
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
	// Requests get until lead before the deadline; then the queries still
	// running are cancelled, and a second Shutdown waits for their
	// answers. It polls the connections from 1 ms on, doubling, where the
	// first one polls every 500 ms by then, so the answers of cancelled
	// queries are seen within about their own time, not up to 500 ms
	// later (under load that made serve overrun its deadline).
	lead := min(max(s.cfg.ShutdownTimeout/10, time.Second), s.cfg.ShutdownTimeout/2)
	gctx, cancelGrace := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout-lead)
	defer cancelGrace()
	for _, srv := range servers {
		err := srv.Shutdown(gctx)
		if err != nil {
			cancelRequests(errShuttingDown)
			err = srv.Shutdown(sctx)
		}
		if err != nil {
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

// IsLoopback reports whether a is a TCP address on a loopback interface
// (127.0.0.0/8, ::1).
func IsLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
