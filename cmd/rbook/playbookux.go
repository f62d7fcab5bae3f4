package main

// Playbook words for what rbook shows: the -o json result's playbook fields and the help of
// the playbook commands. A runbook run keeps every string it had; only playbook runs get
// these.

import (
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// playbookCPHelp is cpHelp for the playbook commands: the embedded control plane is the one
// of an 'rbook playbook run' in progress.
const playbookCPHelp = `Which control plane: --control-plane URL, else $RBOOK_CONTROL_PLANE, else the embedded
one of an 'rbook playbook run' in progress in this folder (its address is in
.rbook/controlplane.url). With auth on (rbook serve --auth-file), the bearer token comes from
$RBOOK_TOKEN. The embedded control plane lives as long as that run's process: once the run
has ended (or is killed), approve, reject and cancel serve this folder's
.rbook/controlplane.db themselves, on loopback, for the command alone (stderr says so); with
'rbook serve' the control plane stays up. A decided token gets E_APPROVAL_ALREADY_DECIDED.
On the embedded control plane an approval id ("a-…") works without auth from this folder
(its .rbook/local-approver-key, 0600, shows you own the run).`

// playbookHistoryHelp is historyHelp for rbook playbook status.
const playbookHistoryHelp = `Which control plane: --control-plane URL, else $RBOOK_CONTROL_PLANE, else the embedded
one of an 'rbook playbook run' in progress in this folder (its address is in
.rbook/controlplane.url). With auth on (rbook serve --auth-file), the bearer token comes from
$RBOOK_TOKEN. When none of those is running, the history of this folder's embedded runs is
read from .rbook/controlplane.db, read-only (stderr says so). It reads only the control
plane, never the run's state file: a run with --control-plane off is not there (read its
state file, report or 'rbook playbook run -o json' instead).`

// playbookNodeResult is one node of a playbook run's -o json result: its id, type, status in
// the words of rbook playbook status (NodeState): "pending" (not started), "waiting" (its gate
// is open), or its last execution's PASS, FAIL, TIMED_OUT, SKIPPED; and how many times it
// started (iteration_counts).
type playbookNodeResult struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Status     string `json:"status"`
	Iterations int    `json:"iterations"`
}

// playbookResultFields fills the playbook fields of rbook playbook run -o json: name (the
// playbook's name), status in playbook_runs' words (running, paused, succeeded, failed,
// cancelled) and nodes in plan order. kind ("playbook"), bindings and
// iteration_counts come with the state file. A runbook run gets none of them.
func playbookResultFields(res *runResult, plan *runbook.Plan, st *state.State) {
	if plan == nil || plan.Kind != runbook.KindPlaybook || st == nil {
		return
	}
	res.Name = plan.Name
	res.Status = runWord(st)
	waiting := ""
	if st.AwaitingConfirmation != nil && !st.RunStatus.Final() {
		waiting = st.AwaitingConfirmation.StepName
	}
	nodes, _ := report.PlaybookGraph(plan, st.EvidencePack, st.IterationCounts, waiting)
	res.Nodes = make([]playbookNodeResult, 0, len(nodes))
	for _, n := range nodes {
		status := string(n.Status)
		switch n.Status {
		case report.NotRun:
			status = "pending"
		case engine.StatusAwaitingConfirmation:
			status = "waiting"
		}
		res.Nodes = append(res.Nodes, playbookNodeResult{ID: n.ID, Type: n.Type, Status: status, Iterations: n.Iterations})
	}
}

// decideReasonExample is the --reason of the approve and reject examples: a reason that fits
// the verb.
func decideReasonExample(approve bool) string {
	if approve {
		return "build and tests are green"
	}
	return "wrong version: 2026.4.90 is already on npm"
}
