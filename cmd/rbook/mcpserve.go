package main

import (
	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
	"github.com/rbookhq/rbook-action/action/mcp/demorelease"
)

func newMCPCmd() *cobra.Command {
	mcpCmd := &cobra.Command{
		Use:   "mcp",
		Short: "MCP servers that ship with rbook",
		Long: `MCP servers that ship with rbook, for check steps and playbook agentic nodes to call. Each
runs over stdio, so an mcpServers config starts it with "command": "rbook" (which means this
executable).

Exit codes: 0 the server ended (its stdin closed), 2 usage or an unknown server.`,
		Example: `  rbook mcp demo-inventory             # usually started by runbooks/demo.mcp.json
  rbook mcp demo-release               # usually started by runbooks/release.mcp.json`,
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
	mcpCmd.AddCommand(&cobra.Command{
		Use:   "demo-release",
		Short: "Serve the playbook demo tools over MCP on stdin/stdout (they publish nothing)",
		Long: `Serve release-publisher, summarize and flaky over MCP (stdio) for the playbook demos'
agentic nodes. They only pretend: release-publisher publishes nothing and contacts no registry
or network (its result says "demo: nothing was published"), summarize counts its arguments,
flaky fails its first call on purpose to show a retry. runbooks/release.mcp.json starts it:

  {"mcpServers": {"demo-release": {"command": "rbook", "args": ["mcp", "demo-release"]}}}

Exit codes: 0 when its client closes stdin, 2 a protocol or I/O error, or usage.`,
		Example: `  rbook mcp demo-release < requests.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return demorelease.RunStdio(cmd.Context())
		},
	})
	return mcpCmd
}
