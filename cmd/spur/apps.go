package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/spurdb/spur/server"
	"github.com/spurdb/spur/storage"
)

// newAppsCmd is `spur apps delete` and `spur apps set`: an app's
// lifecycle and settings (docs/storage.md §7).
func newAppsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apps delete|set",
		Short: "Delete an app whole, or change its settings (retention)",
	}
	cmd.AddCommand(newAppsSetCmd(g))
	var rm remote
	var yes bool
	del := &cobra.Command{
		Use:   "delete APP --yes [--url URL --key ADMINKEY]",
		Short: "Delete an app whole: its events, users, persons, saved objects and keys",
		Long: `Delete removes the app whole (docs/storage.md §7): its directory is gone and its
ingest and query keys are revoked when the command returns; there is no undo
(a backup, spur backup, is the way back). Events sent to the name afterwards
start a new app.

Without --url it works on the --data store (which no spur serve may hold); with
--url through a running server (an admin --key).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !yes {
				return fmt.Errorf("deleting app %q cannot be undone: add --yes", name)
			}
			var d server.AppDeleted
			if rm.url != "" {
				if err := rm.open(); err != nil {
					return err
				}
				if err := rm.requestJSON(cmd.Context(), "DELETE", "api/apps/"+url.PathEscape(name), nil, &d); err != nil {
					return fmt.Errorf("delete app %q through %s: %w", name, rm.url, err)
				}
			} else {
				st, err := openStore(g, serveStore, "spur apps delete")
				if err != nil {
					if errors.Is(err, storage.ErrLocked) {
						return fmt.Errorf("%w\nwhile spur serve runs, delete through it: spur apps delete %s --yes --url http://HOST:PORT (with an admin --key or $%s)", err, name, keyEnv)
					}
					return err
				}
				defer st.Close()
				ks, err := server.OpenKeys(st)
				if err != nil {
					return err
				}
				out, err := server.DeleteApp(cmd.Context(), st, ks, name)
				if err != nil {
					return fmt.Errorf("delete app %q: %w", name, err)
				}
				d = *out
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted app %s: %d files, %d bytes, %d keys revoked\n", name, d.Files, d.Bytes, d.KeysRevoked)
			return nil
		},
	}
	del.Flags().BoolVar(&yes, "yes", false, "confirm: the app cannot be restored but from a backup")
	rm.flags(del.Flags(), "delete through a running spur serve at this base URL (with an admin --key) instead of the --data store")
	cmd.AddCommand(del)
	return cmd
}

// newAppsSetCmd is `spur apps set APP --retention 400d|none`.
func newAppsSetCmd(g *globals) *cobra.Command {
	var rm remote
	var retention string
	set := &cobra.Command{
		Use:   "set APP --retention 400d|36h|none [--url URL --key ADMINKEY]",
		Short: "Change an app's settings: its events' retention",
		Long: `Set changes an app's settings (docs/storage.md §7).

--retention keeps only the events of the last 400d (days) or 36h (hours), from
the clock; none keeps everything. From the answer on, queries see only events
newer than that, live ingestion rejects older ones (field "timestamp") and
imports skip them with a count. Their bytes go at compaction: events segments
wholly past the retention are dropped by spur compact and by a running server
within a minute; spur compact also rewrites the segments that hold some
expired events (a server's compactions leave them out when they rewrite those
segments for their own reasons). Until
then, --retention none shows them again. User properties and merges of persons
are kept. Analyses that look for a first event (first-time retention,
lifecycle's "new", attribution's first touch) see only the retained events.

Without --url it works on the --data store (which no spur serve may hold); with
--url through a running server (an admin --key).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !cmd.Flags().Changed("retention") {
				return fmt.Errorf("nothing to set for app %q: give --retention 400d (or none)", name)
			}
			d, err := storage.ParseRetention(retention)
			if err != nil {
				return err
			}
			var ans server.AppSettings
			if rm.url != "" {
				if err := rm.open(); err != nil {
					return err
				}
				body := map[string]string{"retention": storage.FormatRetention(d)}
				if err := rm.requestJSON(cmd.Context(), "PATCH", "api/apps/"+url.PathEscape(name), body, &ans); err != nil {
					return fmt.Errorf("set app %q through %s: %w", name, rm.url, err)
				}
			} else {
				st, err := openStore(g, writeStore, "spur apps set")
				if err != nil {
					return err
				}
				defer st.Close()
				c, err := st.SetRetention(cmd.Context(), name, d)
				if err != nil {
					if errors.Is(err, storage.ErrLocked) {
						return fmt.Errorf("%w\nwhile spur serve runs, set it through it: spur apps set %s --retention %s --url http://HOST:PORT (with an admin --key or $%s)", err, name, retention, keyEnv)
					}
					return fmt.Errorf("set app %q: %w", name, err)
				}
				ans = server.AppSettingsOf(c)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "app %s: retention %s\n", name, ans.Retention)
			return nil
		},
	}
	set.Flags().StringVar(&retention, "retention", "", "keep the events of the last 400d (days) or 36h (hours); none keeps everything")
	rm.flags(set.Flags(), "set through a running spur serve at this base URL (with an admin --key) instead of the --data store")
	return set
}
