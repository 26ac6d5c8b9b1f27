package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var app string
	cmd := &cobra.Command{
		Use:   "verify [--app NAME]",
		Short: "Check every segment completely: all checksums and every decoded value (all apps without --app)",
		Long: `verify reads and decodes every column of every segment of the app (every app
without --app) and checks it against the segment's footer: header, trailer,
footer and chunk checksums (CRC-32C), users sorted, time ranges, event counts and
bitsets, dictionary codes. Queries check the checksum of every chunk they read;
verify checks the whole store, like ClickHouse's CHECK TABLE. It prints one line
per corrupt segment (file and offset) and exits non-zero if there is any.`,
		Args: cobra.NoArgs,
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
			out := cmd.OutOrStdout()
			bad := 0
			for _, name := range apps {
				a, err := st.App(name)
				if err != nil {
					return err
				}
				rep, err := a.Verify(cmd.Context())
				if err != nil {
					return fmt.Errorf("verify app %s: %w", name, err)
				}
				for _, p := range rep.Problems {
					fmt.Fprintf(out, "app %s: CORRUPT %v\n", name, p)
				}
				bad += len(rep.Problems)
				fmt.Fprintf(out, "app %s: %d segments, %d rows, %d bytes checked, %d corrupt\n",
					name, rep.Segments, rep.Rows, rep.Bytes, len(rep.Problems))
			}
			if bad > 0 {
				return fmt.Errorf("%d corrupt segments", bad)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "app to verify (default: every app)")
	return cmd
}
