// Package engine is rbook's run state machine: it walks a runbook.Plan in order, dispatches
// each step to the Executor for its type, applies on_fail (halt, rollback, continue), enforces
// per-step timeouts, and reports every Transition to its Recorders (seed runbook-executor,
// Steps 5–8; DESIGN "The seams"). It knows nothing of GitHub, MCP, SQLite or terminals.
package engine
