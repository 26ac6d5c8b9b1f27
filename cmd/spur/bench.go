package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/internal/cputime"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// BenchReport is what `spur bench --out FILE` writes (bench/peers reads it).
type BenchReport struct {
	App         string        `json:"app"`
	Events      int64         `json:"events"`
	Users       int64         `json:"users"`
	BytesOnDisk int64         `json:"bytes_on_disk"`
	Import      *BenchImport  `json:"import,omitempty"`
	Queries     []BenchResult `json:"queries"`
	GoMaxProcs  int           `json:"gomaxprocs"`
}

// BenchImport is the import measurement of a bench run that built its app.
type BenchImport struct {
	EventsPerS float64 `json:"events_per_s"`
	Seconds    float64 `json:"seconds"`
	Source     string  `json:"source"` // "generator" or "parquet"
	// CompactSeconds is the automatic compaction after the import (0 when
	// every shard was one run already).
	CompactSeconds float64 `json:"compact_seconds"`
}

// BenchResult is one query's measurement: wall times of the timed runs
// (after one warm-up) in milliseconds, the peak RSS of the process that ran
// them, and the last run's result.
type BenchResult struct {
	Name      string    `json:"name"`
	File      string    `json:"file"`
	Supported bool      `json:"supported"`
	Error     string    `json:"error,omitempty"`
	MedianMS  float64   `json:"median_ms"`
	RunsMS    []float64 `json:"runs_ms"`
	// RunsCPUMS is the process's user+system CPU time of each timed run in
	// milliseconds (bench-query only; empty where getrusage is missing):
	// unlike wall time it does not grow when other processes take a core,
	// and CPU/wall shows how busy the scan kept the cores.
	RunsCPUMS     []float64       `json:"runs_cpu_ms,omitempty"`
	PeakRSSBytes  int64           `json:"peak_rss_bytes"`
	EventsScanned int64           `json:"events_scanned"`
	EventsPerS    float64         `json:"events_per_s"`
	Result        json.RawMessage `json:"result,omitempty"`
}

type benchConfig struct {
	app, queries, parquet, out string
	events, seed               int64
	runs                       int
}

func newBenchCmd(g *globals) *cobra.Command {
	c := &benchConfig{}
	cmd := &cobra.Command{
		Use:   "bench [--app NAME] [--events N | --parquet FILE] [--queries DIR] [--runs N] [--out FILE]",
		Short: "Benchmark the bench/queries on a (generated) app: medians, peak RSS, events/s as a markdown table",
		Long: `bench builds the app if it does not exist (from --parquet FILE, or straight from the
generator with --events and --seed), then runs every *.json query of --queries in a
fresh child process: one warm-up run and --runs timed runs, reporting the median wall
time, the child's peak RSS and events scanned per second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, g, c) },
	}
	f := cmd.Flags()
	f.StringVar(&c.app, "app", "bench", "app to benchmark (built if missing)")
	f.Int64Var(&c.events, "events", 10_000_000, "events to generate when the app is missing")
	f.Int64Var(&c.seed, "seed", 1, "generator seed")
	f.StringVar(&c.parquet, "parquet", "", "build the app by importing this Parquet file instead of generating")
	f.StringVar(&c.queries, "queries", "bench/queries", "directory of docs/analytics.md §9 query files")
	f.IntVar(&c.runs, "runs", 5, "timed runs per query (after one warm-up)")
	f.StringVar(&c.out, "out", "", "also write the full report as JSON to this file")
	return cmd
}

func runBench(cmd *cobra.Command, g *globals, c *benchConfig) error {
	out := cmd.OutOrStdout()
	rep := &BenchReport{App: c.app}
	st, err := openStore(g, writeStore, "spur bench")
	if err != nil {
		return err
	}
	if _, err := st.App(c.app); errors.Is(err, storage.ErrNotFound) {
		imp, err := benchImport(cmd, st, c)
		if err != nil {
			st.Close()
			return err
		}
		rep.Import = imp
	} else if err != nil {
		st.Close()
		return err
	}
	a, err := st.App(c.app)
	if err != nil {
		st.Close()
		return err
	}
	v, err := a.Acquire()
	var in *storage.Inspection
	if err == nil {
		in, err = v.Inspect(cmd.Context())
		v.Release()
	}
	st.Close() // the children open the store themselves
	if err != nil {
		return err
	}
	rep.Events, rep.Users, rep.BytesOnDisk = in.Events, in.Users, in.Bytes
	files, err := filepath.Glob(filepath.Join(c.queries, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no query files in %s", c.queries)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, file := range files {
		br := BenchResult{Name: strings.TrimSuffix(filepath.Base(file), ".json"), File: file}
		child := exec.CommandContext(cmd.Context(), self, "--data", g.dataDir, "bench-query", "--app", c.app,
			"--runs", fmt.Sprint(c.runs), file)
		var stdout, stderr bytes.Buffer
		child.Stdout, child.Stderr = &stdout, &stderr
		err := child.Run()

		if err != nil {
			br.Error = strings.TrimPrefix(strings.TrimSpace(stderr.String()), "Error: ")
			if br.Error == "" {
				br.Error = err.Error()
			}
		} else {
			var cr BenchResult
			if err := json.Unmarshal(stdout.Bytes(), &cr); err != nil {
				return fmt.Errorf("bench-query %s: %w", file, err)
			}
			br.RunsMS, br.EventsScanned, br.Result, br.PeakRSSBytes = cr.RunsMS, cr.EventsScanned, cr.Result, cr.PeakRSSBytes
		}
		br.Supported = br.Error == ""
		if br.Supported && len(br.RunsMS) > 0 {
			s := slices.Clone(br.RunsMS)
			slices.Sort(s)
			br.MedianMS = s[len(s)/2]
			if len(s)%2 == 0 {
				br.MedianMS = (s[len(s)/2-1] + s[len(s)/2]) / 2
			}
			br.EventsPerS = float64(br.EventsScanned) / (br.MedianMS / 1000)
		}
		rep.Queries = append(rep.Queries, br)
	}
	rep.GoMaxProcs = storage.DefaultWorkers()
	writeBenchTable(out, rep)
	if c.out != "" {
		b, _ := json.MarshalIndent(rep, "", " ")
		if err := os.WriteFile(c.out, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchImport(cmd *cobra.Command, st *storage.Store, c *benchConfig) (*BenchImport, error) {
	start := time.Now()
	var src storage.Source
	imp := &BenchImport{Source: "generator"}
	if c.parquet != "" {
		r, err := ingest.Open(c.parquet, ingest.Options{})
		if err != nil {
			return nil, err
		}
		defer r.Close()
		src, imp.Source = r, "parquet"
	} else {
		gn, err := gen.New(gen.Config{Events: c.events, Seed: c.seed})
		if err != nil {
			return nil, err
		}
		src = gen.Source{G: gn}
	}
	rep, err := st.Import(cmd.Context(), c.app, []storage.Source{src}, storage.ImportOptions{CompactAfter: true}) // autoCompact below
	if err != nil {
		return nil, err
	}
	if c.parquet == "" {
		if err := importGenUsers(cmd.Context(), st, c.app, gen.Config{Events: c.events, Seed: c.seed}); err != nil {
			return nil, err
		}
	}
	imp.Seconds = time.Since(start).Seconds()
	imp.EventsPerS = float64(rep.Applied) / imp.Seconds
	fmt.Fprintf(cmd.ErrOrStderr(), "built app %q: %d events from the %s in %.1f s (%.0f events/s)\n",
		c.app, rep.Applied, imp.Source, imp.Seconds, imp.EventsPerS)
	// Query the layout an import leaves, as `spur import` does: compacted
	// where a shard has more than one run (timed apart from the import rate).
	start = time.Now()
	autoCompact(cmd, st, c.app)
	imp.CompactSeconds = time.Since(start).Seconds()
	return imp, nil
}

func writeBenchTable(w io.Writer, rep *BenchReport) {
	fmt.Fprintf(w, "app %s: %d events, %d users, %.2f bytes/event on disk, GOMAXPROCS %d\n", rep.App, rep.Events, rep.Users,
		float64(rep.BytesOnDisk)/max(float64(rep.Events), 1), rep.GoMaxProcs)
	if rep.Import != nil {
		fmt.Fprintf(w, "import from the %s: %.0f events/s (%.1f s)\n", rep.Import.Source, rep.Import.EventsPerS, rep.Import.Seconds)
	}
	fmt.Fprintln(w, "\n| query | median | min | runs | events/s scanned | peak RSS |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, q := range rep.Queries {
		if !q.Supported {
			fmt.Fprintf(w, "| %s | not supported: %s | | | | |\n", q.Name, firstLine(q.Error))
			continue
		}
		fmt.Fprintf(w, "| %s | %.1f ms | %.1f ms | %d | %.0f M | %.0f MiB |\n", q.Name, q.MedianMS, slices.Min(q.RunsMS),
			len(q.RunsMS), q.EventsPerS/1e6, float64(q.PeakRSSBytes)/(1<<20))
	}
}

// peakRSS returns this process's peak resident set size in bytes (VmHWM
// of /proc/self/status), or 0 where that is not available. Unlike the
// rusage of a child, it does not include the parent's memory at fork.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// newBenchQueryCmd is the hidden child of `spur bench`: it runs one query
// once to warm up and then --runs times, and prints a BenchResult JSON.
func newBenchQueryCmd(g *globals) *cobra.Command {
	var app string
	var runs int
	cmd := &cobra.Command{
		Use:    "bench-query --app NAME --runs N QUERY.json",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			q, err := query.Parse(data)
			if err != nil {
				return err
			}
			q.App = app
			st, err := openStore(g, readStore, "spur bench")
			if err != nil {
				return err
			}
			defer st.Close()
			eng := query.New(st, query.Config{})
			var br BenchResult
			var res query.Result
			for i := 0; i <= runs; i++ {
				t0, c0 := time.Now(), cputime.Process()
				if res, err = eng.Run(context.WithoutCancel(cmd.Context()), q); err != nil {
					return err
				}
				if i > 0 {
					br.RunsMS = append(br.RunsMS, float64(time.Since(t0).Microseconds())/1000)
					if c0 > 0 {
						br.RunsCPUMS = append(br.RunsCPUMS, float64((cputime.Process()-c0).Microseconds())/1000)
					}
				}
			}
			br.EventsScanned = query.StatsOf(res).EventsScanned
			br.PeakRSSBytes = peakRSS()
			if br.Result, err = json.Marshal(res); err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(br)
		},
	}
	cmd.Flags().StringVar(&app, "app", "bench", "app")
	cmd.Flags().IntVar(&runs, "runs", 5, "timed runs after one warm-up")
	return cmd
}
