package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionString describes the binary from its build information: the
// module version ("(devel)" for a build from a work tree), the VCS
// commit with its time and whether the tree was modified, and the Go
// version. A build with -buildvcs=false (as CI builds) records no commit.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	commit := "commit unknown (built without VCS stamping)"
	if rev := set["vcs.revision"]; rev != "" {
		commit = "commit " + rev
		if t := set["vcs.time"]; t != "" {
			commit += " (" + t + ")"
		}
		if set["vcs.modified"] == "true" {
			commit += ", modified"
		}
	}
	return fmt.Sprintf("%s %s, %s, %s", bi.Main.Path, v, commit, bi.GoVersion)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version, VCS commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "spur", versionString())
			return nil
		},
	}
}
