package main

import (
	"fmt"

	"github.com/rbookhq/rbook-action/internal/buildinfo"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print rbook's version, VCS revision and toolchain",
		Long: `Print the version of this rbook binary: the module version (a release tag, or a
pseudo-version such as v0.0.0-20260512103000-a1b2c3d4e5f6 for a build from a git checkout;
"(devel)" under 'go run'), the VCS revision it was built from and whether the tree had
uncommitted changes, and the Go toolchain. A build without VCS information ('go run',
'go build -buildvcs=false') says that its revision is unknown.

Exit codes: 0 always (2 for a usage error).`,
		Example: `  rbook version
  rbook --version                      # the first line only, shorter`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), buildinfo.Read(version).String())
			return nil
		},
	}
}
