package main

import "github.com/spf13/cobra"

// newAdminCmd is `rbook admin`: the operator's commands for a control plane it runs
// (docs/deploy.md).
func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate a control plane: its health",
		Long: `Commands for the operator of a control plane (rbook serve): see docs/deploy.md.

Exit codes: each subcommand's --help lists its own (2 for a usage error).`,
		Example: `  rbook admin health                   # 127.0.0.1:7070, as a container's health check does`,
	}
	cmd.AddCommand(newAdminHealthCmd())
	return cmd
}
