package main

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/server"
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
}

func newServeCmd(g *globals) *cobra.Command {
	c := &serveConfig{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API, the web UI and /metrics; pprof on a separate debug listener",
		Long: `Serve answers spec §9 queries over HTTP (POST /api/apps/{app}/query), imports
(POST /api/apps/{app}/import), lists apps and their schemas, serves the web UI
at / and Prometheus metrics at /metrics. A second listener (--debug-listen)
serves net/http/pprof under /debug/pprof/ (see docs/profiling.md).

There is no authentication: both listeners default to loopback addresses.
SIGTERM or Ctrl-C shuts down gracefully: new connections are refused and
in-flight requests get --shutdown-timeout to finish; queries still running a
second before its end are cancelled (503 unavailable). A second signal ends
the process at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.limits.check(); err != nil {
				return err
			}
			st, err := openStore(g, serveStore, "spur serve")
			if err != nil {
				return err
			}
			defer st.Close()
			srv, err := server.New(server.Config{
				Store: st, Workers: c.workers, QueryTimeout: c.limits.timeout, MemoryBudget: int64(c.limits.memory),
				MemoryTotal: int64(c.limits.total), MaxBodyBytes: c.maxBodyBytes,
				MaxImportBytes: c.maxImportBytes, MaxConcurrentQueries: c.maxConcurrent, SlowQuery: c.slowQuery,
				ShutdownTimeout: c.shutdownTimeout, Logger: slog.Default(),
			})
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
				fmt.Fprintf(out, "spur serve: pprof on http://%s/debug/pprof/\n", dln.Addr())
			}
			for _, l := range []net.Listener{ln, dln} {
				if l != nil && !isLoopback(l.Addr()) {
					slog.Warn("listening on a non-loopback address; the API has no authentication", "addr", l.Addr().String())
				}
			}
			return srv.Serve(cmd.Context(), ln, dln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.listen, "listen", "127.0.0.1:8080", "address of the API and UI (host:port; port 0 picks a free one)")
	f.StringVar(&c.debugListen, "debug-listen", "127.0.0.1:6060", "address of the pprof debug listener; empty disables it")
	c.limits.register(f, 60*time.Second, "time limit of one query (504 limit_exceeded past it); negative: none")
	f.Int64Var(&c.maxBodyBytes, "max-body-bytes", 1<<20, "largest query request body, bytes (413 past it)")
	f.Int64Var(&c.maxImportBytes, "max-import-bytes", 1<<30, "largest import request body as sent, bytes (413 past it)")
	f.IntVar(&c.maxConcurrent, "max-concurrent-queries", server.DefaultMaxConcurrent, "queries running at once; more wait for a slot")
	f.DurationVar(&c.slowQuery, "slow-query", time.Second, "log queries taking at least this long at warn level with their JSON and stats; negative: never")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may run after SIGTERM; queries still running a second before its end are cancelled")
	f.IntVar(&c.workers, "workers", 0, "scan goroutines per query (0 = GOMAXPROCS)")
	return cmd
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
