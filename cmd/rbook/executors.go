package main

import (
	"path/filepath"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
)

// executors wires one executor per step type. Check steps get an MCP session that is dialled
// on first use, so a run with no check left to do never starts a server. The config is
// <dir>/<runbook>.mcp.json unless mcpConfig names another file; it is checked
// first as 'rbook validate' checks it (runbookMCPConfig), and any problem is returned as an
// exitError that refuses the run before anything is recorded.
func executors(plan *runbook.Plan, name, dir, mcpConfig string) (map[runbook.StepType]engine.Executor, func(), error) {
	execs := pipeline.SimulatedExecutors()
	needsMCP := false
	for _, s := range plan.Steps {
		needsMCP = needsMCP || (s.Type == runbook.TypeCheck && s.Input != nil)
	}
	if !needsMCP {
		return execs, func() {}, nil
	}
	cfg, ds := runbookMCPConfig(plan.Path, mcpConfigPath(dir, name, mcpConfig), mcpConfig)
	if len(ds) > 0 {
		return nil, nil, setupRefused(ds, "rbook validate "+name)
	}
	lazy := mcp.NewLazySession(cfg)
	execs[runbook.TypeCheck] = &steps.Check{Session: lazy, Subscriptions: plan.Subscriptions}
	return execs, lazy.Close, nil
}

// mcpConfigPath is the MCP configuration a run of runbook name uses: the --mcp-config
// flag's file when set, else <dir>/<name>.mcp.json (docs/runbooks.md). `rbook validate` checks
// the same file.
func mcpConfigPath(dir, name, flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(dir, name+".mcp.json")
}
