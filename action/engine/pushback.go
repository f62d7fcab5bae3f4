package engine

import (
	"fmt"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// The keys a playbook approval node with rewind_targets adds to its output, read by later
// runs of the nodes it sends the run back to as {{ <node id>.feedback }} and so on
// (docs/push-back.md, "Bindings"). Before the gate decides they are "", "" and 0.
const (
	// PushBackFeedback is the reviewer's comment of the last push-back ("" after an approval).
	PushBackFeedback = "feedback"
	// PushBackRedoFrom is the node the last push-back sent the run back to ("" after an approval).
	PushBackRedoFrom = "redo_from"
	// PushBackIteration is the opening of the gate that decided (1 for the first).
	PushBackIteration = "iteration"
	// PushBackSentBack is true in the output of a decision that sent the run back.
	PushBackSentBack = "sent_back"
)

// pushBackValue adds the push-back keys to an approval node's output v for decision d; runs
// is the node's execution count, the iteration when the gate does not count them.
func pushBackValue(v map[string]any, d Decision, runs int) {
	iteration := d.Iteration
	if iteration <= 0 {
		iteration = runs
	}
	sentBack := d.Verdict == Rejected && d.RedoFrom != ""
	v[PushBackIteration], v[PushBackSentBack] = iteration, sentBack
	v[PushBackFeedback], v[PushBackRedoFrom] = "", ""
	if sentBack {
		v[PushBackFeedback], v[PushBackRedoFrom] = d.Reason, d.RedoFrom
	}
}

// redoFromOf is the node a FAIL entry of approval node step sent the run back to, "" when the
// entry is no push-back.
func redoFromOf(step runbook.Step, ev Evidence) string {
	if step.Type != runbook.TypeApproval || ev.Status != StatusFail || step.Node == nil || len(step.Node.RewindTargets) == 0 {
		return ""
	}
	b := bindingOf(ev.Output)
	if sent, _ := b[PushBackSentBack].(bool); !sent {
		return ""
	}
	t, _ := b[PushBackRedoFrom].(string)
	return t
}

// rewindSet is what a push-back from approval node i to node t runs again, in plan order: t,
// every node between them (a descendant of t that i depends on, directly or not), and i.
func (d *dag) rewindSet(t, i int) []int {
	var out []int
	for n := range d.steps {
		if n == t || n == i || (d.reaches(t, n) && d.reaches(n, i)) {
			out = append(out, n)
		}
	}
	return out
}

// sendBack carries out a push-back from approval node i to node target (docs/push-back.md):
// the nodes of rewindSet go back to pending, each paid from the run's execution budget, with
// a note on their next step_started; the approval node's output (its binding, already set)
// holds the comment. A node of the set at its iteration cap raises iteration_cap_exceeded on
// the approval node, naming that node and its cap, and a budget that cannot pay fails the
// run (execution_budget_exhausted), as every re-run does.
func (d *dag) sendBack(i int, target string, decided map[string]any) {
	id := d.steps[i].Name
	t, ok := d.idx[target]
	if !ok || !d.reaches(t, i) {
		d.fail(id, runbook.EventNodeFailed, fmt.Sprintf("approval '%s' was sent back to '%s', which is not one of its ancestors", id, target))
		return
	}
	set := d.rewindSet(t, i)
	for _, n := range set {
		if d.attempts[n] >= d.capOf(n) {
			d.handle(i, runbook.EventIterationCapExceeded, fmt.Sprintf("approval '%s' sent the run back to '%s', but node '%s' reached its iteration cap of %d runs; raise its iteration_cap (at most %d) or approve or reject without sending back",
				id, target, d.steps[n].Name, d.capOf(n), runbook.MaxIterationCap), decided)
			return
		}
	}
	for _, n := range set {
		if !d.payRerun(n) {
			return
		}
	}
	by, _ := decided["by"].(string)
	comment, _ := decided[PushBackFeedback].(string)
	why := fmt.Sprintf("sent back to '%s' by %s at approval '%s' (iteration %v)", target, by, id, decided[PushBackIteration])
	if comment != "" {
		why += ": " + shortText(comment)
	}
	for _, n := range set {
		d.state[n] = nsPending
		d.note[n] = why
	}
}
