// Command spur is Spur's single binary: import events, run queries, inspect
// the store, generate synthetic data and run the demo on bundled real data.
//
// Flags live here only; every subcommand fills a Config struct and calls
// the library packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	_ "time/tzdata" // IANA zones even on machines without /usr/share/zoneinfo

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

// globals are the flags shared by every subcommand.
type globals struct {
	dataDir  string
	logLevel string
	shards   int
	cpuProf  string
	memProf  string
	stopProf func()
	// writeMemory bounds an import's, flush's or compaction's memory
	// (storage.Config.WriteMemory, docs/storage.md §5), bytes.
	writeMemory byteSize
	// exit ends the process (os.Exit in main; nil in tests, which run
	// commands in-process): an interrupted query that does not stop in
	// time is ended with it.
	exit func(code int)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // after the first signal a second one ends the process at once
	root, g := newRoot(os.Stdout, os.Stderr)
	g.exit = os.Exit
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// exitError carries a specific exit status.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

// newRoot returns the root command and its shared flags.
func newRoot(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:   "spur",
		Short: "Spur: user-behaviour analytics over raw per-user event trails",
		Long: `Spur keeps each user's events together as a time-ordered trail in compressed
columnar segments and answers trends, funnels and retention over raw events.`,
		SilenceUsage:  true,
		SilenceErrors: false,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})))
			if g.cpuProf != "" {
				f, err := os.Create(g.cpuProf)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				g.stopProf = func() { pprof.StopCPUProfile(); f.Close() }
			}
			return nil
		},
		PersistentPostRunE: func(cmd *cobra.Command, args []string) error {
			if g.stopProf != nil {
				g.stopProf()
			}
			if g.memProf != "" {
				f, err := os.Create(g.memProf)
				if err != nil {
					return fmt.Errorf("--memprofile: %w", err)
				}
				defer f.Close()
				return pprof.Lookup("allocs").WriteTo(f, 0)
			}
			return nil
		},
	}
	root.Version = versionString()
	root.SetVersionTemplate("spur {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.dataDir, "data", "./spur-data", "store directory (embedded store)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.PersistentFlags().IntVar(&g.shards, "shards", storage.DefaultShards, "shards per new app (a power of two)")
	g.writeMemory = byteSize(storage.DefaultWriteMemory)
	root.PersistentFlags().Var(&g.writeMemory, "write-memory", "memory of an import, flush or compaction (e.g. 512MiB): larger inputs are written in more runs, merged by compaction; the process's peak stays within about 100 MiB of it")
	root.PersistentFlags().StringVar(&g.cpuProf, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof)")
	root.PersistentFlags().StringVar(&g.memProf, "memprofile", "", "write an allocation profile of the command to this file (go tool pprof -sample_index=alloc_space)")
	root.AddCommand(newImportCmd(g), newQueryCmd(g), newInspectCmd(g), newDemoCmd(g), newGenCmd(g), newServeCmd(g), newBenchCmd(g), newBenchQueryCmd(g), newCohortCmd(g), newCompactCmd(g), newVerifyCmd(g), newRecoverCmd(g), newExportCmd(g), newKeysCmd(g), newLoadgenCmd(g), newPersonsCmd(g), newBackupCmd(g), newRestoreCmd(g), newAppsCmd(g), newEventsCmd(g), newVersionCmd())
	return root, g
}
