package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/data"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/ingest"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// demoImport is one bundled file the demo imports.
type demoImport struct {
	app, file string
	opt       ingest.Options
	kind      storage.SegmentKind
}

var demoImports = []demoImport{
	{app: "cardano", file: "stackexchange-cardano/events.csv.gz",
		opt: ingest.Options{UserCol: "user_id", TimeCol: "event_time", EventCol: "event_type"}},
	{app: "cardano", file: "stackexchange-cardano/users.csv.gz", kind: storage.KindUsers,
		opt: ingest.Options{UserCol: "user_id", TimeCol: "last_access_time", Users: true}},
	{app: "otto", file: "otto-sample/train.jsonl", opt: ingest.Options{Format: "otto"}},
}

// demoGenApp is the demo's generated app: the generator's shop data with
// persons (10 % of the users browse anonymously before signup, and some
// log in on a second device; gen.Config.Persons), so that analyses by
// distinct id and by person can be compared on it.
const demoGenApp = "persons"

// demoGen is the data set of demoGenApp (spur gen --events 100000 --seed 1
// --persons 0.1).
var demoGen = gen.Config{Events: 100_000, Seed: 1, Persons: 0.1}

// demoQueries are the questions the demo answers, as docs/analytics.md §9 JSON.
var demoQueries = []struct{ title, json string }{
	{"Cardano Stack Exchange: weekly sign-ups",
		`{"kind": "trend", "app": "cardano", "range": {"from": "2021-04-26", "to": "2021-12-06"}, "tz": "UTC",
		  "interval": "week", "series": [{"event": "signup", "math": "count"}, {"event": "$any", "math": "users", "label": "active users"}]}`},
	{"Cardano Stack Exchange: sign-up → question → answer funnel (30-day window)",
		`{"kind": "funnel", "app": "cardano", "range": {"from": "2021-04-26", "to": "2021-12-06"}, "tz": "UTC",
		  "steps": [{"event": "signup"}, {"event": "question"}, {"event": "answer"}], "window": "30d"}`},
	{"Cardano Stack Exchange: weekly sign-up retention (return: any event)",
		`{"kind": "retention", "app": "cardano", "range": {"from": "2021-04-26", "to": "2021-06-28"}, "tz": "UTC",
		  "start": {"event": "signup"}, "return": {"event": "$any"}, "period": "week", "periods": 8}`},
	{"OTTO shop sample: clicks → carts → orders funnel (14-day window)",
		`{"kind": "funnel", "app": "otto", "range": {"from": "2022-07-31", "to": "2022-08-29"}, "tz": "Europe/Berlin",
		  "steps": [{"event": "clicks"}, {"event": "carts"}, {"event": "orders"}], "window": "14d"}`},
	{"Generated shop with persons (10 % of users anonymous until signup): install → purchase funnel (30-day window)",
		`{"kind": "funnel", "app": "persons", "range": {"from": "2024-01-01", "to": "2024-04-01"}, "tz": "UTC",
		  "steps": [{"event": "install"}, {"event": "purchase"}], "window": "30d"}`},
}

func newDemoCmd(g *globals) *cobra.Command {
	var keep string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Import the bundled real datasets and a generated app with persons into a fresh store and print a trend, funnels and a retention table",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := keep
			if dir == "" {
				tmp, err := os.MkdirTemp("", "spur-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			} else if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
				return fmt.Errorf("--keep %s: directory is not empty; the demo needs a fresh store", dir)
			}
			return runDemo(cmd, dir, g.shards)
		},
	}
	cmd.Flags().StringVar(&keep, "keep", "", "store directory to keep after the demo (must be empty or missing); default a temporary one")
	return cmd
}

func runDemo(cmd *cobra.Command, dir string, shards int) error {
	out := cmd.OutOrStdout()
	start := time.Now()
	st, err := storage.Open(storage.Config{Dir: dir, Shards: shards})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(out, "Spur demo: bundled real data (Cardano Stack Exchange, CC BY-SA 4.0; OTTO sample, CC BY 4.0) and generated data into %s\n\n", dir)
	for _, d := range demoImports {
		f, err := data.FS.Open(d.file)
		if err != nil {
			return err
		}
		opt := d.opt
		opt.ImportTime = time.Now().UnixMicro()
		r, err := ingest.NewReader(f, filepath.Base(d.file), opt)
		if err != nil {
			f.Close()
			return err
		}
		rep, err := st.Import(cmd.Context(), d.app, []storage.Source{r}, storage.ImportOptions{Kind: d.kind})
		r.Close()
		f.Close()
		if err != nil {
			return fmt.Errorf("import %s: %w", d.file, err)
		}
		printDemoImport(out, d.file, d.app, rep)
	}
	what := fmt.Sprintf("gen --events %d --seed %d --persons %v", demoGen.Events, demoGen.Seed, demoGen.Persons)
	if err := importGen(cmd.Context(), st, demoGenApp, demoGen, false, func(rep *storage.ImportReport) {
		printDemoImport(out, what, demoGenApp, rep)
	}); err != nil {
		return fmt.Errorf("demo: generate app %s (%s): %w", demoGenApp, what, err)
	}
	eng := query.New(st, query.Config{})
	for _, dq := range demoQueries {
		fmt.Fprintf(out, "\n== %s\n%s\n\n", dq.title, compactJSON(dq.json))
		q, err := query.Parse([]byte(dq.json))
		if err != nil {
			return err
		}
		res, err := eng.Run(cmd.Context(), q)
		if err != nil {
			return err
		}
		if err := query.WriteTable(out, res); err != nil {
			return err
		}
		fmt.Fprintf(out, "(%s)\n", statsLine(res))
	}
	fmt.Fprintf(out, "\ndemo finished in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// printDemoImport prints the line of one of the demo's imports.
func printDemoImport(w io.Writer, what, app string, rep *storage.ImportReport) {
	fmt.Fprintf(w, "imported %-38s → app %-8s %6d rows, %2d segments, %7d bytes, %s\n",
		what, app, rep.Applied, rep.Segments, rep.Bytes, rep.Elapsed.Round(time.Millisecond))
}

func statsLine(res query.Result) string {
	s := query.StatsOf(res)
	return fmt.Sprintf("%.1f ms, %d events scanned, %d segments read, %d skipped, %d bytes read",
		s.WallMS, s.EventsScanned, s.SegmentsRead, s.SegmentsSkipped, s.BytesRead)
}

func compactJSON(s string) string {
	out := make([]byte, 0, len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' || c == '\t' || c == ' ' {
			if !space && len(out) > 0 {
				out = append(out, ' ')
			}
			space = true
			continue
		}
		space = false
		out = append(out, c)
	}
	return string(out)
}
