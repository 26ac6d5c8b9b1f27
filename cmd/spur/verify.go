package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spurdb/spur/storage"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var app string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [--app NAME]",
		Short: "Check every byte of every file of an app and cross-check the catalog with every segment",
		Long: `verify checks every file of the app (every app without --app), as ClickHouse's
CHECK TABLE does: the catalog and settings files (checksums, strict decoding), and
every segment completely — header, trailer, footer and chunk checksums (CRC-32C),
users sorted, time ranges, event counts and bitsets, dictionary codes — and
cross-checks each catalog entry against its segment's footer and size. It lists
every finding (catalog, settings, missing file, orphan file, mismatch, corruption;
for a backup directory, a backup that did not complete) with file and offset instead of stopping at the first, and exits non-zero if there
is any. Queries check the checksum of every chunk they read; verify checks all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(g, readStore, "spur verify")
			if err != nil {
				return err
			}
			defer st.Close()
			apps := []string{app}
			if app == "" {
				if apps, err = st.AppDirs(); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			bad := 0
			// A backup directory (spur backup) must not be an interrupted one.
			if _, err := storage.ReadBackup(nil, g.dataDir); errors.Is(err, storage.ErrIncompleteBackup) || errors.Is(err, storage.ErrCorruption) {
				bad++
				if asJSON {
					if err := json.NewEncoder(out).Encode(storage.Finding{Kind: "backup", File: g.dataDir, Offset: -1, Message: err.Error()}); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(out, "backup: %v\n", err)
				}
			}
			for _, name := range apps {
				rep, err := st.Verify(cmd.Context(), name)
				if err != nil {
					return fmt.Errorf("verify app %s: %w", name, err)
				}
				bad += len(rep.Findings)
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					if err := enc.Encode(rep); err != nil {
						return err
					}
					continue
				}
				for _, f := range rep.Findings {
					fmt.Fprintf(out, "app %s: %v\n", name, f)
				}
				fmt.Fprintf(out, "app %s: catalog generation %d, %d segment files, %d rows, %d bytes checked, %d findings\n",
					name, rep.Generation, rep.Segments, rep.Rows, rep.Bytes, len(rep.Findings))
			}
			if bad > 0 {
				return fmt.Errorf("%d findings", bad)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to verify (default: every app)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each app's report as JSON")
	return cmd
}
