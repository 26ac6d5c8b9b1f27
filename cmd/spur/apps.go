package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/spurdb/spur/server"
	"github.com/spurdb/spur/storage"
)

// newAppsCmd is `spur apps delete`: an app's lifecycle (docs/storage.md §7).
func newAppsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apps delete",
		Short: "Delete an app whole",
	}
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
