package main

import (
	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
)

func newMCPCmd() *cobra.Command {
	mcpCmd := &cobra.Command{
		Use:   "mcp",
		Short: "MCP servers that ship with rbook",
		Long: `MCP servers that ship with rbook, for check steps to query. Each runs over stdio, so an
mcpServers config starts it with "command": "rbook" (which means this executable).

Exit codes: 0 the server ended (its stdin closed), 2 usage or an unknown server.`,
		Example: `  rbook mcp demo-inventory             # usually started by runbooks/demo.mcp.json`,
	}
	mcpCmd.AddCommand(&cobra.Command{
		Use:   "demo-inventory",
		Short: "Serve the demo inventory over MCP on stdin/stdout (a fixed, fictional estate; no cloud is touched)",
		Long: `Serve validate_query and execute_query over MCP (stdio) against a small, fixed,
fictional inventory. runbooks/demo.mcp.json starts it so 'rbook run demo' works on any machine:

  {"mcpServers": {"demo-inventory": {"command": "rbook", "args": ["mcp", "demo-inventory"]}}}

Exit codes: 0 when its client closes stdin, 2 a protocol or I/O error, or usage.`,
		Example: `  rbook mcp demo-inventory < requests.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demoinventory.RunStdio(cmd.Context())
		},
	})
	return mcpCmd
}
