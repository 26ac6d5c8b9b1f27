package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func newRecoverCmd(g *globals) *cobra.Command {
	var app string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "recover --app NAME",
		Short: "Rebuild an app's catalog from its segment files, setting aside (never deleting) what it cannot keep",
		Long: `recover rebuilds the catalog of an app whose catalog is missing or damaged (the
store refuses to write such an app): it verifies every segment file completely,
keeps the intact ones, and moves to DIR/apps/APP/aside/ the damaged ones, those a
newer compaction output supersedes, and the damaged catalog. The app's settings
(shards, time zone, schema) come from its SETTINGS file, the catalog's
independently checksummed second copy. Then it opens the app's write-ahead log of
live events: a torn tail (a write never acknowledged) is cut; damage elsewhere,
which makes the app refuse events, is salvaged: the damaged log is set aside and
every intact record after the catalog's position goes into a new log, and each
lost byte range is printed with the records it cost. It prints what it kept and
set aside. Like any write, it is refused while spur serve or another writer
holds the app. See docs/storage.md for the procedure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(g, writeStore, "spur recover")
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := st.Recover(cmd.Context(), app)
			out := cmd.OutOrStdout()
			if rep != nil {
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(rep); err != nil {
						return err
					}
				} else {
					for _, a := range rep.SetAside {
						fmt.Fprintf(out, "set aside %s -> %s: %s\n", a.File, a.Moved, a.Reason)
					}
					for _, w := range rep.Warnings {
						fmt.Fprintf(out, "warning: %s\n", w)
					}
					if l := rep.Log; l != nil {
						fmt.Fprintf(out, "write-ahead log damaged (%s): set aside; %d intact records (seqs %d..%d) kept in a new log\n",
							l.Damage, l.Kept, l.FirstSeq, l.LastSeq)
						for _, r := range l.Lost {
							fmt.Fprintf(out, "lost: %s\n", r)
						}
					}
				}
			}
			if err != nil {
				return fmt.Errorf("recover app %s: %w", app, err)
			}
			if !asJSON {
				fmt.Fprintf(out, "app %s: catalog generation %d rebuilt with %d segments (%d rows); %d files set aside\n",
					app, rep.Generation, len(rep.Kept), rep.Rows, len(rep.SetAside))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to recover (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.MarkFlagRequired("app")
	return cmd
}
