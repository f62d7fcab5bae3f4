package main

import (
	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
)

func newMCPCmd() *cobra.Command {
	mcpCmd := &cobra.Command{
		Use:   "mcp",
		Short: "MCP servers that ship with rbook",
	}
	mcpCmd.AddCommand(&cobra.Command{
		Use:   "demo-inventory",
		Short: "Serve the demo inventory over MCP on stdin/stdout (a fixed, fictional estate; no cloud is touched)",
		Long: `Serve validate_query and execute_query over MCP (stdio) against a small, fixed,
fictional inventory. runbooks/demo.mcp.json starts it so 'rbook run demo' works on any machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demoinventory.RunStdio(cmd.Context())
		},
	})
	return mcpCmd
}
