package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

func openStore(g *globals) (*storage.Store, error) {
	return storage.Open(storage.Config{Dir: g.dataDir, Shards: g.shards})
}

func newQueryCmd(g *globals) *cobra.Command {
	var app string
	var table bool
	var output string
	var workers int
	cmd := &cobra.Command{
		Use:   "query [--app NAME] QUERY.json|-",
		Short: "Run a spec §9 JSON query and print the result as JSON, a table or CSV",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			form, err := resolveOutput(output, table)
			if err != nil {
				return err
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
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			eng := query.New(st, query.Config{Workers: workers})
			return runQuery(cmd, eng, data, app, form)
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to query (overrides the query's \"app\")")
	cmd.Flags().BoolVar(&table, "table", false, "print a readable table (short for --output table)")
	cmd.Flags().StringVar(&output, "output", outputJSON, "output form: json, table, or csv (one tidy row per series × bucket, funnel step, retention cell or listed user)")
	cmd.Flags().IntVar(&workers, "workers", 0, "scan goroutines (0 = GOMAXPROCS)")
	return cmd
}

// runQuery parses, runs and prints one query in the output form. On
// failure it prints the §9 error JSON to stdout (for the json form) and
// returns an error, so the process exits non-zero with the message on
// stderr.
func runQuery(cmd *cobra.Command, eng *query.Engine, data []byte, app, form string) error {
	out := cmd.OutOrStdout()
	q, err := query.Parse(data)
	if err == nil {
		if app != "" {
			q.App = app
		}
		var res any
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
