package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

// newBackupCmd is `spur backup --to DIR`: a consistent snapshot of the
// whole --data store (docs/storage.md §8), written by this process on a
// store no server holds, or by the running server with --url.
func newBackupCmd(g *globals) *cobra.Command {
	var to string
	var copyFiles, asJSON bool
	var rm remote
	cmd := &cobra.Command{
		Use:   "backup --to DIR [--copy] [--url URL --key ADMINKEY]",
		Short: "Write a consistent snapshot of the whole store into a directory (incremental)",
		Long: `backup writes a consistent snapshot of the whole store into DIR: every event
acknowledged before it started (the live layer's events still in the write-ahead
log are copied from it, and applied by restore), each app's catalog, settings, id
graph and segment files, saved cohorts, insights and
dashboards, and the store's keys — one version per app, taken while writes go on.
DIR is itself a store: ` + "`spur restore --from DIR --data NEW`" + ` makes a new store of it.

Segment files are never changed once written, so on the same filesystem they are
hard-linked (instant, no space; --copy copies them: a link does not survive the
loss of the disk); elsewhere they are copied and fsynced. DIR must be empty or hold
an earlier backup: a second backup places only the files DIR lacks and then
removes those the new snapshot does not reference. While a backup runs, DIR holds
BACKUP-IN-PROGRESS: a backup interrupted at any instant is reported incomplete
(spur verify, spur restore) until a backup into DIR completes.

Without --url it opens the --data store, which no spur serve may hold; with --url
the running server writes the snapshot into DIR on its own filesystem (an admin
--key; POST /api/backup).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to DIR is required")
			}
			abs, err := filepath.Abs(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			var rep storage.BackupReport
			if rm.url != "" {
				if err := rm.open(); err != nil {
					return err
				}
				body := map[string]any{"to": abs, "copy": copyFiles}
				if err := rm.requestJSON(cmd.Context(), "POST", "api/backup", body, &rep); err != nil {
					return fmt.Errorf("backup through %s into %s: %w", rm.url, abs, err)
				}
			} else {
				r, err := localBackup(cmd, g, abs, copyFiles)
				if err != nil {
					return err
				}
				rep = *r
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printBackup(cmd.OutOrStdout(), &rep)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "backup directory: empty, new, or holding an earlier backup (required)")
	cmd.Flags().BoolVar(&copyFiles, "copy", false, "copy segment files even on the store's filesystem (default: hard-link them there)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	rm.flags(cmd.Flags(), "ask the running spur serve at this base URL to write the backup (on its filesystem; an admin --key)")
	return cmd
}

// localBackup opens the --data store as its writer, replaying the
// write-ahead logs of live events as spur serve would (its Close flushes
// them), and backs it up into to.
func localBackup(cmd *cobra.Command, g *globals, to string, copyFiles bool) (*storage.BackupReport, error) {
	if _, err := os.Stat(filepath.Join(g.dataDir, "apps")); err != nil {
		return nil, fmt.Errorf("--data %s: no Spur store there: %w", g.dataDir, err)
	}
	cfg := storeConfig(g, serveStore, "spur backup")
	cfg.Live = &storage.LiveOptions{} // the logs' unflushed events are replayed and backed up too
	st, err := storage.Open(cfg)
	if err != nil {
		if errors.Is(err, storage.ErrLocked) && strings.Contains(err.Error(), "spur serve") {
			return nil, fmt.Errorf("%w: back up through it with --url and an admin --key", err)
		}
		return nil, err
	}
	rep, err := st.Backup(cmd.Context(), to, storage.BackupOptions{Copy: copyFiles, Holder: "spur backup"})
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the store: %w", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("backup into %s: %w", to, err)
	}
	return rep, nil
}

// printBackup writes a backup report for people: a summary line, then one
// line per app.
func printBackup(w io.Writer, rep *storage.BackupReport) {
	fmt.Fprintf(w, "backed up %d apps into %s in %.2f s: %d segment files, %s: %d linked, %d copied (%s), %d kept from the previous backup, %d files removed; %d live log records; %d documents\n",
		len(rep.Apps), rep.Dir, rep.DurationMS/1000, rep.FilesLinked+rep.FilesCopied+rep.FilesKept, mib(rep.Bytes),
		rep.FilesLinked, rep.FilesCopied, mib(rep.BytesCopied), rep.FilesKept, rep.FilesRemoved, rep.LogRecords, rep.Documents)
	for _, a := range rep.Apps {
		fmt.Fprintf(w, "app %s: catalog generation %d and %d live log records up to %d, %d events in segments, %d user property rows, %d segments, %s, %d documents\n",
			a.App, a.Generation, a.LogRecords, a.LogSeq, a.Events, a.UserRows, a.Segments, mib(a.Bytes), a.Documents)
	}
}

// mib renders a byte count in MiB with two decimals.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
