// Package engine is rbook's run state machine. One scheduler (sched.go) runs a
// runbook.Plan's steps: a policy fills a ready queue, each started step executes in its own
// worker goroutine, and the scheduler goroutine alone emits Transitions to the Recorders, so
// Seq is strictly ordered (docs/decisions/playbooks-on-one-engine.md). Two policies share it: a runbook is
// a chain run one step at a time with the specification's on_fail table (halt, rollback, continue) and
// docs/decisions/rollback-compensation.md compensation (docs/spec/runbooks.md, "Step 5" to "Step 8"); a playbook (Plan.Kind ==
// runbook.KindPlaybook) is a DAG run up to Engine.Concurrency nodes at once, with bindings,
// edge conditions, contracts, error handlers, iteration caps and a global budget of node runs
// (dag.go; docs/decisions/playbooks-on-one-engine.md). The engine enforces per-step timeouts and knows nothing of
// GitHub, MCP, SQLite or terminals.
package engine
