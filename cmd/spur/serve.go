package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/server"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/wal"
)

// serveConfig is what `spur serve` passes to the server package.
type serveConfig struct {
	listen          string
	debugListen     string
	limits          queryLimits
	maxBodyBytes    int64
	maxImportBytes  int64
	maxConcurrent   int
	slowQuery       time.Duration
	shutdownTimeout time.Duration
	workers         int
	http            serveHTTPLimits
	auth            string
	events          serveEvents
	live            serveLive
}

// serveLive are the live layer's limits (storage.LiveOptions, docs/ingest.md §2).
type serveLive struct {
	memory     byteSize
	flushBytes byteSize
	flushAge   time.Duration
	logFile    byteSize
	eraseIn    time.Duration
}

func (l *serveLive) flags(f *pflag.FlagSet) {
	l.memory, l.flushBytes, l.logFile = byteSize(storage.DefaultIngestMemory), byteSize(storage.DefaultFlushBytes), byteSize(wal.DefaultSegmentSize)
	f.Var(&l.memory, "ingest-memory", "memory of acknowledged events not yet flushed into segment files (e.g. 512MiB): past it events requests get 503 with Retry-After until a flush frees it")
	f.Var(&l.flushBytes, "flush-bytes", "an app's live events are flushed into segment files once they take this much memory")
	f.DurationVar(&l.flushAge, "flush-age", storage.DefaultFlushAge, "... or once the oldest of them was acknowledged this long ago")
	f.Var(&l.logFile, "log-file-size", "write-ahead log files rotate at this size")
	f.DurationVar(&l.eraseIn, "erase-within", storage.DefaultEraseWithin, "a person's erasure (DELETE /api/apps/{app}/persons/{id}) removes its bytes from every file within this; `spur compact --erase` does it at once")
}

// options returns the store's live options, with the events endpoint's
// future limit and the metrics' hooks.
func (l *serveLive) options(maxFuture time.Duration, obs *server.LiveObserver) *storage.LiveOptions {
	return &storage.LiveOptions{Memory: int64(l.memory), FlushBytes: int64(l.flushBytes), FlushAge: l.flushAge,
		LogFileSize: int64(l.logFile), MaxFuture: maxFuture, OnFlush: obs.OnFlush, OnCompact: obs.OnCompact, EraseWithin: l.eraseIn}
}

// serveEvents are the events endpoint's limits (server.Config's fields of
// the same names).
type serveEvents struct {
	maxBytes        int64
	maxDecompressed int64
	maxFuture       time.Duration
	memory          int64
	maxClockSkew    time.Duration
}

func (e *serveEvents) flags(f *pflag.FlagSet) {
	f.Int64Var(&e.maxBytes, "max-events-bytes", server.DefaultMaxEventsBytes, "largest events request body as sent, bytes (413 past it, nothing stored)")
	f.Int64Var(&e.maxDecompressed, "max-events-decompressed-bytes", server.DefaultMaxEventsDecompressedBytes, "largest decompressed size of a gzip events body, bytes (413 past it, nothing stored); negative: no limit")
	f.DurationVar(&e.maxFuture, "max-future", server.DefaultMaxFuture, "events timestamped more than this after the server's clock are rejected; negative: no limit")
	f.DurationVar(&e.maxClockSkew, "max-clock-skew", server.DefaultMaxClockSkew, "an SDK batch whose sent-at time is further than this from the server's clock has its timestamps shifted by the difference, whole seconds (docs/sdks.md)")
	f.Int64Var(&e.memory, "events-memory", server.DefaultEventsMemory, "memory for the events requests being received at once, bytes (503 Retry-After past it; 413 for a request needing more alone)")
}

func (e *serveEvents) apply(cfg *server.Config) {
	cfg.MaxEventsBytes, cfg.MaxEventsDecompressedBytes, cfg.MaxFuture, cfg.EventsMemory = e.maxBytes, e.maxDecompressed, e.maxFuture, e.memory
	cfg.MaxClockSkew = e.maxClockSkew
}

// serveHTTPLimits are the HTTP limits and request checks of `spur serve`
// (server.Config's fields of the same names).
type serveHTTPLimits struct {
	readHeaderTimeout    time.Duration
	bodyTimeout          time.Duration
	idleTimeout          time.Duration
	maxConnections       int
	maxImportInflated    int64
	maxPropertyBytes     int
	allowedHosts         []string
	allowedHostsExplicit bool
}

// apply sets the HTTP limit fields of cfg; listen are the listen addresses
// that the default allowed hosts derive from.
func (h *serveHTTPLimits) apply(cfg *server.Config, listen ...string) {
	cfg.ReadHeaderTimeout, cfg.BodyTimeout, cfg.IdleTimeout = h.readHeaderTimeout, h.bodyTimeout, h.idleTimeout
	cfg.MaxConnections, cfg.MaxImportDecompressedBytes, cfg.MaxPropertyBytes = h.maxConnections, h.maxImportInflated, h.maxPropertyBytes
	cfg.AllowedHosts = server.DefaultAllowedHosts(listen...)
	if h.allowedHostsExplicit {
		cfg.AllowedHosts = h.allowedHosts
	}
}

func (h *serveHTTPLimits) flags(f *pflag.FlagSet) {
	f.DurationVar(&h.readHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "time limit for reading a request's headers")
	f.DurationVar(&h.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time limit for receiving a request's body, imports included (408 limit_exceeded past it; a slow client's connection is closed); negative: none")
	f.DurationVar(&h.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close keep-alive connections idle this long")
	f.IntVar(&h.maxConnections, "max-connections", server.DefaultMaxConnections, "open connections of the API listener; more wait to be accepted; negative: no limit")
	f.Int64Var(&h.maxImportInflated, "max-import-decompressed-bytes", server.DefaultMaxImportDecompressedBytes, "largest decompressed size of a compressed import body, bytes (413 limit_exceeded past it, nothing stored); negative: no limit")
	f.IntVar(&h.maxPropertyBytes, "max-property-bytes", event.DefaultMaxPropertyBytes, "largest string property value (or insert id) of an imported row, bytes; a longer one is a bad row; negative: no limit")
	f.StringSliceVar(&h.allowedHosts, "allowed-hosts", nil, "Host header values served, comma-separated (any port; *.example.com for subdomains; * for all); others get 403 against DNS rebinding (default: the listen hosts, localhost, 127.0.0.1, ::1)")
}

func newServeCmd(g *globals) *cobra.Command {
	c := &serveConfig{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API, the web UI and /metrics; pprof on a separate debug listener",
		Long: `Serve answers docs/analytics.md §9 queries over HTTP (POST /api/apps/{app}/query), takes
live events (POST /api/apps/{app}/events) and imports (POST
/api/apps/{app}/import), lists apps and their schemas, serves the web UI at /
and Prometheus metrics at /metrics. A second listener (--debug-listen) serves
net/http/pprof under /debug/pprof/ and /metrics (see docs/profiling.md).

Every API request needs a key (Authorization: Bearer KEY; spur keys). When
the store has no admin key yet, serve creates one and prints a login URL
carrying it, once, to standard output; the web UI keeps it in the browser.
--auth none serves without keys, allowed only when every listener is on a
loopback address.

Requests whose Host is not served (--allowed-hosts) and browsers'
cross-site requests (an Origin that is not this server, or
Sec-Fetch-Site: cross-site) are refused with 403 on every endpoint but the
events endpoint, which any origin may call; curl and scripts, which send
neither, work. Limits: headers within --read-header-timeout, a body within
--body-timeout, --max-connections open connections, --max-body-bytes per
query, --max-import-bytes per import as sent and
--max-import-decompressed-bytes once decompressed, --max-events-bytes and
--max-events-decompressed-bytes per events request, --events-memory for the
events requests in flight, --max-future for event timestamps.

Events are durable (write-ahead log, fsync) and visible to queries when
acknowledged; the live layer holds them in memory (--ingest-memory) until a
flush writes them into segment files (--flush-bytes, --flush-age), and
tiered compaction merges those as they accumulate (docs/ingest.md).
SIGTERM or Ctrl-C shuts down gracefully: new connections are refused and
in-flight requests get --shutdown-timeout to finish; queries still running a
second before its end are cancelled (503 unavailable). A second signal ends
the process at once.`,

		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.limits.check(); err != nil {
				return err
			}
			obs := server.NewLiveObserver()
			cfg := storeConfig(g, serveStore, "spur serve")
			cfg.Live = c.live.options(c.events.maxFuture, obs)
			st, err := openStoreConfig(g, serveStore, cfg)
			if err != nil {
				return err
			}
			defer func() {
				// Flush the live layers, within the shutdown timeout: what is
				// not flushed stays in the logs, replayed at the next start.
				ctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
				defer cancel()
				if err := st.CloseContext(ctx); err != nil {
					slog.Error("close the store", "err", err)
				}
			}()
			var auth server.AuthMode
			switch c.auth {
			case "keys":
			case "none":
				auth = server.AuthNone
			default:
				return fmt.Errorf("--auth %q: want keys or none", c.auth)
			}
			scfg := server.Config{Auth: auth,
				Store: st, Workers: c.workers, QueryTimeout: c.limits.timeout, MemoryBudget: int64(c.limits.memory),
				MemoryTotal: int64(c.limits.total), MaxBodyBytes: c.maxBodyBytes,
				MaxImportBytes: c.maxImportBytes, MaxConcurrentQueries: c.maxConcurrent, SlowQuery: c.slowQuery,
				ShutdownTimeout: c.shutdownTimeout, Logger: slog.Default(), LiveObserver: obs,
			}
			c.http.allowedHostsExplicit = cmd.Flags().Changed("allowed-hosts")
			c.http.apply(&scfg, c.listen, c.debugListen)
			c.events.apply(&scfg)
			scfg.OnQueryMemory = serveMemoryLimit(int64(c.live.memory) + int64(g.writeMemory) + serveOverhead - serveOutsideHeap)
			srv, err := server.New(scfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", c.listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			var dln net.Listener
			if c.debugListen != "" {
				if dln, err = net.Listen("tcp", c.debugListen); err != nil {
					ln.Close()
					return fmt.Errorf("--debug-listen: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "spur serve: UI and API on http://%s/ (data %s)\n", ln.Addr(), g.dataDir)
			if dln != nil {
				fmt.Fprintf(out, "spur serve: pprof and metrics on http://%s/debug/pprof/\n", dln.Addr())
			}
			if auth == server.AuthNone {
				// Serve refuses a listener off loopback.
				fmt.Fprintln(out, "spur serve: NO AUTHENTICATION (--auth none): every request to these loopback listeners is served as with an admin key")
				slog.Warn("serving without authentication (--auth none)")
			} else if srv.Keys().Admins() == 0 {
				if err := printLoginURL(out, srv.Keys(), ln.Addr()); err != nil {
					ln.Close()
					if dln != nil {
						dln.Close()
					}
					return err
				}
			} else {
				fmt.Fprintf(out, "spur serve: every API request needs a key (Authorization: Bearer KEY); the web UI asks for one (spur keys list)\n")
			}
			return srv.Serve(cmd.Context(), ln, dln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.listen, "listen", server.DefaultListen, "address of the API and UI (host:port; port 0 picks a free one)")
	f.StringVar(&c.debugListen, "debug-listen", server.DefaultDebugListen, "address of the pprof debug listener; empty disables it")
	c.limits.register(f, server.DefaultQueryTimeout, "time limit of one query (504 limit_exceeded past it); negative: none")
	f.Int64Var(&c.maxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "largest query request body, bytes (413 past it)")
	f.Int64Var(&c.maxImportBytes, "max-import-bytes", server.DefaultMaxImportBytes, "largest import request body as sent, bytes (413 past it)")
	f.IntVar(&c.maxConcurrent, "max-concurrent-queries", server.DefaultMaxConcurrent, "queries running at once; more wait for a slot")
	f.DurationVar(&c.slowQuery, "slow-query", server.DefaultSlowQuery, "log queries taking at least this long at warn level with their JSON and stats; negative: never")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long in-flight requests may run after SIGTERM; queries still running a second before its end are cancelled")
	f.IntVar(&c.workers, "workers", 0, "scan goroutines per query (0 = GOMAXPROCS)")
	f.StringVar(&c.auth, "auth", "keys", "keys: every API request needs a key; none: no authentication (only when every listener is on a loopback address)")
	c.http.flags(f)
	c.events.flags(f)
	c.live.flags(f)
	return cmd
}

// printLoginURL creates the store's first admin key and prints, once, the
// web UI's login URL carrying it (Jupyter's pattern): in the URL's
// fragment, which browsers never send to a server, so the key reaches no
// request line or log; the UI keeps it and removes it from the address
// bar. The key goes to the terminal and nowhere else.
func printLoginURL(out io.Writer, keys *server.Keys, addr net.Addr) error {
	secret, k, err := keys.Create(server.ScopeAdmin, "", "created by spur serve (first start)")
	if err != nil {
		return fmt.Errorf("create the first admin key: %w", err)
	}
	host := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
	}
	fmt.Fprintf(out, "spur serve: created the first admin key (id %s). Open the web UI with it (shown this once; the UI keeps it):\n\n    http://%s/#key=%s\n\n", k.ID, host, secret)
	fmt.Fprintf(out, "spur serve: create more keys with `spur keys create --url http://%s --key KEY --scope ingest|query --app APP`\n", host)
	return nil
}

// serveOverhead is what spur serve's Go heap may hold beside its ingest,
// write and query budgets: the events requests being received
// (--events-memory, 256 MiB by default, rarely all taken), the runtime,
// connections, caches, readers' buffers and room for garbage, bytes.
const serveOverhead = 256 << 20

// serveOutsideHeap is the part of the process's resident memory the Go
// memory limit does not count — the binary's text and data, the OS
// threads' stacks — left out of the limit so that the resident set, not
// only the Go heap, stays within the budgets (bytes; 10M events at full
// rate peaked at 1,290 MiB resident against a 1,280 MiB limit before).
const serveOutsideHeap = 64 << 20

// serveMemoryLimit sets the Go heap's soft limit to base (the server's
// budgets but the queries') and returns the function that keeps it at base
// plus the bytes queries have reserved (query.Admission.SetOnChange), so
// that garbage is collected before the process grows past what its
// budgets allow, as debug.SetMemoryLimit does for the write commands:
// without it the collector lets the heap grow to twice the live bytes
// (2.37 GB at 250k events/s with 512 MiB of ingest memory).
func serveMemoryLimit(base int64) func(reserved int64) {
	debug.SetMemoryLimit(base)
	return func(reserved int64) { debug.SetMemoryLimit(base + reserved) }
}
