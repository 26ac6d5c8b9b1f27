package server

import (
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// metrics are the server's Prometheus metrics, registered on one registry
// per Server (no package-level state, so two servers can run in one
// process).
type metrics struct {
	queryDuration *prometheus.HistogramVec // by kind
	queries       *prometheus.CounterVec   // by kind, code
	inFlight      prometheus.Gauge
	eventsScanned *prometheus.CounterVec // by kind
	bytesRead     *prometheus.CounterVec // by kind
	imports       *prometheus.CounterVec // by result
	importRows    *prometheus.CounterVec // by result

	ingestRequests *prometheus.CounterVec // by code
	ingestEvents   *prometheus.CounterVec // by result
	ingestAck      prometheus.Histogram
	ingestBytes    prometheus.Counter
	authFailures   *prometheus.CounterVec // by status

	captureRequests *prometheus.CounterVec // by protocol, status
	captureDropped  prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, st *storage.Store, log *slog.Logger, events *memGate, live *LiveObserver) *metrics {
	m := &metrics{
		queryDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spur_query_duration_seconds",
			Help:    "Run time of answered queries (successful or failed, not cancelled), seconds, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18), // 0.5 ms .. 65 s
		}, []string{"kind"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_queries_total",
			Help: "Queries answered, by kind and outcome code (ok, cancelled or a docs/analytics.md §9 error code).",
		}, []string{"kind", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spur_queries_in_flight",
			Help: "Queries running now.",
		}),
		eventsScanned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_query_events_scanned_total",
			Help: "Events decoded by successful queries, by kind.",
		}, []string{"kind"}),
		bytesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_query_bytes_read_total",
			Help: "Stored (compressed) segment bytes read by successful queries, by kind.",
		}, []string{"kind"}),
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_imports_total",
			Help: "HTTP imports by result: ok, aborted (bad rows, nothing applied), error.",
		}, []string{"result"}),
		importRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_import_rows_total",
			Help: "Rows read by HTTP imports, by result: applied, rejected (bad rows), duplicate (insert_id).",
		}, []string{"result"}),
		ingestRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_ingest_requests_total",
			Help: "Events endpoint requests answered, by outcome code (ok, cancelled or a docs/analytics.md §9 error code).",
		}, []string{"code"}),
		ingestEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_ingest_events_total",
			Help: "Events received by the events endpoint in answered requests, by result: accepted (durable and visible when answered) or rejected (listed in the answer).",
		}, []string{"result"}),
		ingestAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spur_ingest_ack_seconds",
			Help:    "Time from an events request's start to its 200 answer (events durable and visible), seconds.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 17), // 0.25 ms .. 16 s
		}),
		ingestBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spur_ingest_body_bytes_total",
			Help: "Decompressed bytes of the events request bodies parsed.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_auth_failures_total",
			Help: "Requests refused for their key, by status: 401 (missing or unknown key), 403 (scope or app).",
		}, []string{"status"}),
		captureRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spur_capture_requests_total",
			Help: "SDK capture requests (/ingest/...) answered, by protocol (posthog, segment, amplitude, mixpanel) and HTTP status.",
		}, []string{"protocol", "status"}),
		captureDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spur_capture_dropped_values_total",
			Help: "Property values the SDK capture paths dropped from stored events (a value of another type than the app's, an operation not applied), listed at /api/apps/{app}/warnings?kind=property.",
		}),
	}
	eventsMem := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "spur_ingest_request_memory_bytes",
		Help: "Memory reserved by the events requests being parsed and stored (bounded by --events-memory), bytes.",
	}, func() float64 { return float64(events.used.Load()) })
	reg.MustRegister(m.queryDuration, m.queries, m.inFlight, m.eventsScanned, m.bytesRead,
		m.imports, m.importRows, m.ingestRequests, m.ingestEvents, m.ingestAck, m.ingestBytes, m.authFailures, m.captureRequests, m.captureDropped, eventsMem,
		&storeCollector{st: st, log: log},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if live != nil {
		reg.MustRegister(live.flush, live.flushRows, live.compact, live.compactRows)
	}
	return m
}

// observe records a finished query: code is "ok", "cancelled" or an error
// code, d the run time measured by the server (0 when the query was
// rejected before it ran), stats nil unless it succeeded. Cancelled and
// never-run queries are counted but not timed.
func (m *metrics) observe(kind, code string, d time.Duration, stats *query.Stats) {
	kind = kindLabel(kind)
	m.queries.WithLabelValues(kind, code).Inc()
	if code != codeCancelled && d > 0 {
		m.queryDuration.WithLabelValues(kind).Observe(d.Seconds())
	}
	if stats == nil {
		return
	}
	m.eventsScanned.WithLabelValues(kind).Add(float64(stats.EventsScanned))
	m.bytesRead.WithLabelValues(kind).Add(float64(stats.BytesRead))
}

// kindLabel bounds the label's values: anything but a known kind is "other".
func kindLabel(kind string) string {
	if slices.Contains(query.Kinds(), kind) {
		return kind
	}
	return "other"
}

// storeCollector reports per-app segment, row and byte counts from each
// app's current catalog at scrape time (no segment is read).
type storeCollector struct {
	st  *storage.Store
	log *slog.Logger
}

var (
	segmentsDesc = prometheus.NewDesc("spur_app_segments", "Published segments per app and kind (events, users).", []string{"app", "kind"}, nil)
	rowsDesc     = prometheus.NewDesc("spur_app_rows", "Rows in published segments per app and kind.", []string{"app", "kind"}, nil)
	bytesDesc    = prometheus.NewDesc("spur_app_bytes", "Bytes of published segment files per app and kind.", []string{"app", "kind"}, nil)
	// identityRefusedDesc counts the refused merges of each app's id
	// graph (docs/identity.md §2), as of the app's current version.
	identityRefusedDesc = prometheus.NewDesc("spur_identity_refused_total",
		"Identity operations (identify, alias) whose merge docs/identity.md §2 refused, per app: listed at GET /api/apps/APP/warnings?kind=identity.", []string{"app"}, nil)
)

// The live layer's gauges (storage.LiveStats), per app with live events.
var (
	liveBytesDesc    = prometheus.NewDesc("spur_live_unflushed_bytes", "Memory of the live layer's events not yet in segment files (bounded by --ingest-memory), bytes.", []string{"app"}, nil)
	liveRowsDesc     = prometheus.NewDesc("spur_live_unflushed_events", "Events and user property writes acknowledged but not yet flushed into segment files.", []string{"app"}, nil)
	liveSegsDesc     = prometheus.NewDesc("spur_live_memory_segments", "In-memory segments of the live layer (sealed, not yet flushed).", []string{"app"}, nil)
	walBytesDesc     = prometheus.NewDesc("spur_wal_bytes", "Bytes of the write-ahead log's files.", []string{"app"}, nil)
	walFilesDesc     = prometheus.NewDesc("spur_wal_files", "Files of the write-ahead log.", []string{"app"}, nil)
	walAppliedDesc   = prometheus.NewDesc("spur_wal_applied_seq", "The last write-ahead-log record applied (visible to queries).", []string{"app"}, nil)
	walPublishedDesc = prometheus.NewDesc("spur_wal_published_seq", "The last write-ahead-log record held by published segment files.", []string{"app"}, nil)
)

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{segmentsDesc, rowsDesc, bytesDesc, identityRefusedDesc, liveBytesDesc, liveRowsDesc, liveSegsDesc,
		walBytesDesc, walFilesDesc, walAppliedDesc, walPublishedDesc} {
		ch <- d
	}
}

// collectLive reports the live layers.
func (c *storeCollector) collectLive(ch chan<- prometheus.Metric) {
	for _, ls := range c.st.LiveStats() {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, ls.App)
		}
		g(liveBytesDesc, float64(ls.UnflushedBytes))
		g(liveRowsDesc, float64(ls.UnflushedRows))
		g(liveSegsDesc, float64(ls.MemorySegments))
		g(walBytesDesc, float64(ls.LogBytes))
		g(walFilesDesc, float64(ls.LogFiles))
		g(walAppliedDesc, float64(ls.LastAppliedSeq))
		g(walPublishedDesc, float64(ls.PublishedLogSeq))
	}
}

// LiveObserver records the store's flushes and background compactions as
// histograms: give its OnFlush and OnCompact to storage.LiveOptions, and
// the observer to the server (Config.LiveObserver), which registers it.
type LiveObserver struct {
	flush       *prometheus.HistogramVec // by result
	flushRows   prometheus.Counter
	compact     prometheus.Histogram
	compactRows prometheus.Counter
}

// NewLiveObserver returns an observer with no observation.
func NewLiveObserver() *LiveObserver {
	return &LiveObserver{
		flush: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spur_flush_seconds",
			Help:    "Duration of the live layer's flushes into segment files, seconds, by result (ok, error: retried).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18), // 1 ms .. 131 s
		}, []string{"result"}),
		flushRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spur_flush_rows_total",
			Help: "Rows (events and user property writes) written into segment files by flushes.",
		}),
		compact: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spur_compaction_seconds",
			Help:    "Duration of the background (tiered) compactions that rewrote segments, seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20), // 1 ms .. 524 s
		}),
		compactRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spur_compaction_rows_total",
			Help: "Rows rewritten by background compactions (with the flushed rows: write amplification).",
		}),
	}
}

// OnFlush records a flush (storage.LiveOptions.OnFlush).
func (o *LiveObserver) OnFlush(d time.Duration, rows int64, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o.flush.WithLabelValues(result).Observe(d.Seconds())
	o.flushRows.Add(float64(rows))
}

// OnCompact records a background compaction (storage.LiveOptions.OnCompact).
func (o *LiveObserver) OnCompact(d time.Duration, rep *storage.CompactReport) {
	o.compact.Observe(d.Seconds())
	o.compactRows.Add(float64(rep.Rows))
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectLive(ch)
	names, err := c.st.Apps()
	if err != nil {
		c.log.Warn("metrics: list apps", "err", err)
		return
	}
	for _, name := range names {
		app, err := c.st.App(name)
		if err != nil {
			c.log.Warn("metrics: open app", "app", name, "err", err)
			continue
		}
		for _, kind := range []storage.SegmentKind{storage.KindEvents, storage.KindUsers} {
			var segs, rows, bytes float64
			for _, ref := range app.Current().Segments {
				if ref.Kind == kind {
					segs++
					rows += float64(ref.Rows)
					bytes += float64(ref.Bytes)
				}
			}
			ch <- prometheus.MustNewConstMetric(segmentsDesc, prometheus.GaugeValue, segs, name, kind.String())
			ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, rows, name, kind.String())
			ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, bytes, name, kind.String())
		}
		c.collectIdentity(ch, name, app)
	}
}

// collectIdentity reports app's refused identity operations, once it has
// an id graph (an app that never applied an identity operation has no
// sample).
func (c *storeCollector) collectIdentity(ch chan<- prometheus.Metric, name string, app *storage.App) {
	v, err := app.Acquire()
	if err != nil {
		c.log.Warn("metrics: read app", "app", name, "err", err)
		return
	}
	defer v.Release()
	if ps := v.Persons(); ps != nil {
		ch <- prometheus.MustNewConstMetric(identityRefusedDesc, prometheus.CounterValue, float64(ps.Refused()), name)
	}
}
