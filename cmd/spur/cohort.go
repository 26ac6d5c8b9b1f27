package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/query"
	"github.com/spurdb/spur/storage"
)

// newCohortCmd is `spur cohort save|list|show|delete`: named cohort
// definitions saved per app (docs/analytics.md §7), evaluated whenever a query uses
// them.
func newCohortCmd(g *globals) *cobra.Command {
	var app string
	cmd := &cobra.Command{
		Use:   "cohort save|list|show|delete",
		Short: "Save, list, show (with its users now) and delete named cohorts of an app",
		Long: `A saved cohort is a condition tree (docs/analytics.md §7: performed, not_performed,
first_performed, user_property, and/or/not) stored by name in the app. Queries
use it as "cohort": "NAME" (or {"saved": "NAME"} inside a tree); it is
evaluated at query time, so it is never stale.`,
	}
	cmd.PersistentFlags().StringVar(&app, "app", "", "app of the cohorts (required)")
	cmd.MarkPersistentFlagRequired("app")

	var desc string
	save := &cobra.Command{
		Use:   "save --app APP NAME DEFINITION.json|-",
		Short: "Validate a cohort definition against the app and save it under NAME (replacing one of that name)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := readArg(cmd, args[1])
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := json.Compact(&b, def); err != nil {
				return fmt.Errorf("cohort definition %s: %w", args[1], err)
			}
			return withApp(g, writeStore, app, func(st *storage.Store, a *storage.App) error {
				if err := query.New(st, query.Config{}).CheckCohort(app, b.Bytes()); err != nil {
					return err
				}
				err := a.SaveCohort(storage.SavedCohort{Name: args[0], Definition: b.Bytes(), Description: desc,
					SavedAt: time.Now().UTC().Format(time.RFC3339)})
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "saved cohort %s in app %s\n", args[0], app)
				}
				return err
			})
		},
	}
	save.Flags().StringVar(&desc, "description", "", "free text describing the cohort")

	list := &cobra.Command{
		Use:   "list --app APP",
		Short: "List the app's saved cohorts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(g, readStore, app, func(_ *storage.Store, a *storage.App) error {
				cs, err := a.Cohorts()
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "name\tsaved at\tdescription\tdefinition")
				for _, c := range cs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.SavedAt, c.Description, c.Definition)
				}
				return tw.Flush()
			})
		},
	}

	var limit int
	var from, to, tz string
	show := &cobra.Command{
		Use:   "show --app APP NAME",
		Short: "Print a saved cohort's definition and evaluate it now: its number of users and the first ids",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(g, readStore, app, func(st *storage.Store, a *storage.App) error {
				c, err := a.Cohort(args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "cohort %s (saved %s)\n", c.Name, c.SavedAt)
				if c.Description != "" {
					fmt.Fprintln(out, c.Description)
				}
				fmt.Fprintf(out, "definition: %s\n", c.Definition)
				q := &query.Query{Kind: "cohort", App: app, TZ: tz, Cohort: c.Definition, List: &query.List{Limit: limit}}
				if from != "" || to != "" {
					q.Range = &query.Range{From: from, To: to}
				}
				res, err := query.New(st, query.Config{}).Run(cmd.Context(), q)
				if err != nil {
					return err
				}
				return query.WriteTable(out, res)
			})
		},
	}
	show.Flags().IntVar(&limit, "limit", 20, "user ids to print")
	show.Flags().StringVar(&from, "from", "", "range start for windows without dates (default: the app's first day)")
	show.Flags().StringVar(&to, "to", "", "range end, also the end of \"last_days\" windows (default: after the app's last day)")
	show.Flags().StringVar(&tz, "tz", "", "IANA time zone of dates (default: the app's)")

	del := &cobra.Command{
		Use:   "delete --app APP NAME",
		Short: "Delete a saved cohort",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(g, writeStore, app, func(_ *storage.Store, a *storage.App) error {
				err := a.DeleteCohort(args[0])
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "deleted cohort %s from app %s\n", args[0], app)
				}
				return err
			})
		},
	}
	cmd.AddCommand(save, list, show, del)
	return cmd
}

// withApp opens the store (in mode) and the app and runs f.
func withApp(g *globals, mode storeMode, app string, f func(*storage.Store, *storage.App) error) error {
	st, err := openStore(g, mode, "spur cohort")
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := st.App(app)
	if err != nil {
		return err
	}
	return f(st, a)
}

// readArg reads a file argument, or standard input for "-".
func readArg(cmd *cobra.Command, arg string) ([]byte, error) {
	if arg == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("read cohort definition: %w", err)
	}
	return b, nil
}
