package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

func newInspectCmd(g *globals) *cobra.Command {
	var app string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect [--app NAME]",
		Short: "Print an app's segments, users, events and per-column storage (all apps without --app)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openExistingStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			apps, err := appsToVisit(cmd, g, st, app)
			if err != nil {
				return err
			}
			for _, name := range apps {
				a, err := st.App(name)
				if err != nil {
					return err
				}
				in, err := a.Snapshot().Inspect(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					if err := enc.Encode(in); err != nil {
						return err
					}
					continue
				}
				printInspection(cmd.OutOrStdout(), in)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to inspect (default: every app)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printInspection(w io.Writer, in *storage.Inspection) {
	ts := func(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339) }
	fmt.Fprintf(w, "app %s: %d events, %d users, %d user-property rows, %d segments, %d shards, generation %d\n",
		in.App, in.Events, in.Users, in.UserRows, len(in.Segments), in.Shards, in.Generation)
	if in.Events > 0 {
		fmt.Fprintf(w, "time range %s .. %s; %d bytes on disk (%.2f bytes/event); %d event names\n",
			ts(in.MinTime), ts(in.MaxTime), in.Bytes, float64(in.Bytes)/float64(in.Events), len(in.EventNames))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "column\tencodings\tcompressed bytes\traw bytes\tbytes/event\t")
	for _, c := range in.Columns {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3f\t\n", c.Name, joinShort(c.Encodings), c.CompressedBytes, c.RawBytes, c.BytesPerEvent)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "segment\tkind\tshard\trows\tusers\tbytes\tfrom\tto\t")
	for _, s := range in.Segments {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", s.File, s.Kind, s.Shard, s.Rows, s.Users, s.Bytes, ts(s.MinTime), ts(s.MaxTime))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func joinShort(s []string) string { return strings.Join(s, ",") }

// appsToVisit returns the app named by --app, or every app of the store
// when it is empty (saying so on stdout when there is none).
func appsToVisit(cmd *cobra.Command, g *globals, st *storage.Store, app string) ([]string, error) {
	if app != "" {
		return []string{app}, nil
	}
	apps, err := st.Apps()
	if err == nil && len(apps) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "no apps in %s\n", g.dataDir)
	}
	return apps, err
}
