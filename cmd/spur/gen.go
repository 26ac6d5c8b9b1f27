package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage"
)

// importGenUsers imports the generator's users file (platform, channel,
// country, signup_time per user) into app, so that user-property filters
// and breakdowns work on generated apps.
func importGenUsers(ctx context.Context, st *storage.Store, app string, cfg gen.Config) error {
	us, err := gen.NewUserStream(cfg)
	if err != nil {
		return err
	}
	_, err = st.Import(ctx, app, []storage.Source{gen.UserSource{S: us}}, storage.ImportOptions{Kind: storage.KindUsers})
	return err
}

// importGen generates cfg's events straight into app (no intermediate
// file), calls report with that import's report, then imports the users
// file (importGenUsers). compactAfter is storage.ImportOptions.CompactAfter:
// the caller compacts the app afterwards.
func importGen(ctx context.Context, st *storage.Store, app string, cfg gen.Config, compactAfter bool, report func(*storage.ImportReport)) error {
	gn, err := gen.New(cfg)
	if err != nil {
		return err
	}
	rep, err := st.Import(ctx, app, []storage.Source{gen.Source{G: gn}}, storage.ImportOptions{CompactAfter: compactAfter})
	if err != nil {
		return err
	}
	report(rep)
	return importGenUsers(ctx, st, app, cfg)
}

func newGenCmd(g *globals) *cobra.Command {
	var cfg gen.Config
	var out, app string
	var noCompact bool
	cmd := &cobra.Command{
		Use:   "gen --events N [--seed S] [--persons RATE [--persons-resolved]] (--out FILE.parquet | --app NAME)",
		Short: "Generate a deterministic synthetic product-analytics dataset (Parquet file, or straight into an app)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (out == "") == (app == "") {
				return fmt.Errorf("give exactly one of --out FILE or --app NAME")
			}
			start := time.Now()
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				bw := bufio.NewWriterSize(f, 1<<20)
				var written int64
				if err := gen.WriteParquet(bw, cfg, func(n int64) { written = n }); err != nil {
					f.Close()
					return err
				}
				if err := bw.Flush(); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				fi, _ := os.Stat(out)
				el := time.Since(start)
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d events to %s in %s (%.0f events/s, %d bytes)\n",
					written, out, el.Round(time.Millisecond), float64(written)/el.Seconds(), fi.Size())
				return nil
			}
			if _, err := gen.NewUserStream(cfg); err != nil { // a bad flag fails before the store opens (no pass over the users)
				return err
			}
			st, err := openStore(g, writeStore, "spur gen")
			if err != nil {
				return err
			}
			defer st.Close()
			if err := importGen(cmd.Context(), st, app, cfg, !noCompact, func(rep *storage.ImportReport) {
				printReport(cmd.ErrOrStderr(), rep, true)
			}); err != nil {
				return err
			}
			if !noCompact {
				autoCompact(cmd, st, app)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Events, "events", 1_000_000, "number of events")
	f.Int64Var(&cfg.Seed, "seed", 1, "random seed (same seed, same data)")
	f.Int64Var(&cfg.Users, "users", 0, "number of users (0 = about events/24)")
	f.IntVar(&cfg.Days, "days", gen.DefaultDays, "time span in days")
	f.Float64Var(&cfg.Persons, "persons", 0, "share of users (0..1) that browse anonymously before signup and may log in on a second device: their events carry anonymous ids joined by $identify events (0 = the data of before persons, byte for byte)")
	f.BoolVar(&cfg.ResolvePersons, "persons-resolved", false, "with --persons: the same events, every one under its person's user id (the reference for the cost of persons)")
	f.StringVar(&out, "out", "", "write a Parquet file")
	f.StringVar(&app, "app", "", "import straight into this app (no intermediate file)")
	f.BoolVar(&noCompact, "no-compact", false, "with --app: do not compact the app afterwards (by default every shard with more than one run of events or of user properties is compacted, so queries read one run per shard)")
	return cmd
}
