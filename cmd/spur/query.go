package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// storeMode is how a command opens the store (docs/storage.md §4).
type storeMode int

const (
	// readStore: the command only reads an existing store (a mistyped
	// --data fails instead of creating an empty store).
	readStore storeMode = iota
	// writeStore: the command writes; each write takes its app's writer
	// role and is refused, naming the holder, while spur serve or another
	// writer holds it.
	writeStore
	// serveStore: spur serve, holding the store's writer role for its life.
	serveStore
)

// minWriteLimit is the least Go heap soft limit of a write command, bytes:
// below it the segment writers' blocks and zstd encoders alone (about
// 40 MiB) would keep the collector running.
const minWriteLimit = 128 << 20

// openStore opens the --data store for a command named holder ("spur
// import"), in the given mode.
func openStore(g *globals, mode storeMode, holder string) (*storage.Store, error) {
	return openStoreConfig(g, mode, storeConfig(g, mode, holder))
}

// storeConfig returns the store configuration of a command named holder
// in the given mode.
func storeConfig(g *globals, mode storeMode, holder string) storage.Config {
	return storage.Config{Dir: g.dataDir, Shards: g.shards, Holder: holder, WriteMemory: int64(g.writeMemory),
		ReadOnly: mode == readStore, Writer: mode == serveStore}
}

// openStoreConfig opens the store of cfg for a command in the given mode.
func openStoreConfig(g *globals, mode storeMode, cfg storage.Config) (*storage.Store, error) {
	if mode == writeStore {
		// The Go heap's soft limit, so that garbage is collected before the
		// process grows past the writes' bound (docs/storage.md §5).
		// The import's own data stays near half of its write memory
		// (210–235 MiB live of 512 MiB at 20–60M generated rows); the
		// rest is room for garbage, which the collector otherwise lets
		// grow to twice the live heap (a 1B-event gen peaked at 655 MiB
		// with the limit 64 MiB above the write memory, 603 MiB at 32).
		debug.SetMemoryLimit(max(int64(g.writeMemory), minWriteLimit))
	}
	st, err := storage.Open(cfg)
	if err != nil && mode == readStore && errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(g.dataDir)
		return nil, fmt.Errorf("--data %s: no Spur store there (no %s directory): give the directory of an existing store (`spur import` or `spur demo --keep DIR` creates one)",
			g.dataDir, filepath.Join(abs, "apps"))
	}
	return st, err
}

func newQueryCmd(g *globals) *cobra.Command {
	var app string
	var table bool
	var output string
	var workers int
	var lim queryLimits
	cmd := &cobra.Command{
		Use:   "query [--app NAME] QUERY.json|-",
		Short: "Run a docs/analytics.md §9 JSON query and print the result as JSON, a table or CSV",
		Long: `Query runs a docs/analytics.md §9 JSON query on the embedded store and prints the result.
On SIGINT or SIGTERM the query is cancelled and the command exits with status 1
within a second (a second signal ends it at once).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lim.check(); err != nil {
				return err
			}
			form, err := resolveOutput(output, table)
			if err != nil {
				return err
			}
			if g.exit != nil {
				defer exitAfterInterrupt(cmd.Context(), interruptGrace, cmd.ErrOrStderr(), g.exit)()
			}
			var data []byte
			if args[0] == "-" {
				data, err = readQueryInput(cmd.InOrStdin(), cmd.ErrOrStderr())
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return fmt.Errorf("read query: %w", err)
			}
			st, err := openStore(g, readStore, "spur query")
			if err != nil {
				return err
			}
			defer st.Close()
			return runQuery(cmd, query.New(st, lim.engineConfig(workers)), data, app, form)
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to query (overrides the query's \"app\")")
	cmd.Flags().BoolVar(&table, "table", false, "print a readable table (short for --output table)")
	cmd.Flags().StringVar(&output, "output", outputJSON, "output form: json, table, or csv (one tidy row per series × bucket, funnel step, retention cell or listed user)")
	cmd.Flags().IntVar(&workers, "workers", 0, "scan goroutines (0 = GOMAXPROCS)")
	lim.register(cmd.Flags(), 0, "time limit of the query (e.g. 30s, 5m): past it the query fails with limit_exceeded; 0: none")
	return cmd
}

// runQuery parses, runs and prints one query in the output form. On
// failure it prints the docs/analytics.md §9 error JSON to stdout (for the json form) and
// returns an error, so the process exits non-zero with the message on
// stderr.
func runQuery(cmd *cobra.Command, eng *query.Engine, data []byte, app, form string) error {
	out := cmd.OutOrStdout()
	q, err := query.Parse(data)
	if err == nil {
		if app != "" {
			q.App = app
		}
		var res query.Result
		res, err = eng.Run(cmd.Context(), q)
		if err == nil {
			return writeResult(out, res, form)
		}
	}
	var qe *query.Error
	if errors.As(err, &qe) && form == outputJSON {
		b, _ := json.Marshal(qe)
		fmt.Fprintln(out, string(b))
	}
	return err
}
