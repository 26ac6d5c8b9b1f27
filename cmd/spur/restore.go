package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

// newRestoreCmd is `spur restore --from DIR --data NEW` (docs/storage.md
// §8): a new store made of a complete backup, checked as spur verify does.
func newRestoreCmd(g *globals) *cobra.Command {
	var from string
	var copyFiles, asJSON bool
	cmd := &cobra.Command{
		Use:   "restore --from DIR --data NEW [--copy]",
		Short: "Make a new store of a backup directory and verify it",
		Long: `restore makes a new store in --data (which must not exist or be empty) of the
backup in --from (written by spur backup): it refuses a backup that was interrupted
(BACKUP-IN-PROGRESS), hard-links (or with --copy copies) every segment file and
writes every catalog, settings file, id graph and document, then checks every byte
of every file as spur verify does. It prints what it restored and exits non-zero
if anything is wrong. Start spur serve --data NEW on the result.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from DIR is required")
			}
			if !cmd.Flags().Changed("data") && !cmd.Root().PersistentFlags().Changed("data") {
				return errors.New("--data NEW is required: the directory of the new store")
			}
			start := time.Now()
			rep, err := storage.Restore(cmd.Context(), from, g.dataDir, storage.RestoreOptions{Copy: copyFiles, Logger: slog.Default()})
			if rep == nil || rep.Copy == nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(rep); jerr != nil {
					return jerr
				}
				return err
			}
			b := rep.Backup
			fmt.Fprintf(out, "restored the backup of %s taken %s into %s in %.2f s: %d apps, %d segment files (%s): %d linked, %d copied; %d documents\n",
				b.Source, b.Finished.Format(time.RFC3339), g.dataDir, time.Since(start).Seconds(), len(rep.Copy.Apps),
				rep.Copy.FilesLinked+rep.Copy.FilesCopied, mib(rep.Copy.Bytes), rep.Copy.FilesLinked, rep.Copy.FilesCopied, rep.Copy.Documents)
			for _, a := range rep.Copy.Apps {
				fmt.Fprintf(out, "app %s: catalog generation %d, %d events and %d user property rows in %d segments, %d live log records replayed (up to record %d), %d documents\n",
					a.App, a.Generation, a.Events, a.UserRows, a.Segments, a.LogRecords, a.LogSeq, a.Documents)
			}
			for _, v := range rep.Verify {
				for _, f := range v.Findings {
					fmt.Fprintf(out, "app %s: %v\n", v.App, f)
				}
				fmt.Fprintf(out, "verify app %s: %d segment files, %d rows, %d bytes checked, %d findings\n",
					v.App, v.Segments, v.Rows, v.Bytes, len(v.Findings))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "backup directory written by spur backup (required)")
	cmd.Flags().BoolVar(&copyFiles, "copy", false, "copy segment files even on the backup's filesystem (default: hard-link them there)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
