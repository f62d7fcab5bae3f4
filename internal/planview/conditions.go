package planview

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// rollbackWhen says when rollback step st of runbook plan runs (docs/runbooks.md: a rollback
// step does not run in forward flow and is recorded SKIPPED; on_fail: rollback runs the first
// rollback step after the most recent deploy that passed; `rbook rollback` runs it too).
func rollbackWhen(plan *runbook.Plan, st runbook.Step) string {
	deploy := -1
	for i := st.Index - 1; i >= 0; i-- {
		t := plan.Steps[i].Type
		if t == runbook.TypeRollback {
			break // an earlier rollback step is the one that deploy's failures run
		}
		if t == runbook.TypeDeploy {
			deploy = i
			break
		}
	}
	if deploy < 0 {
		return "never in a run: it is not the first rollback step after a deploy, so no on_fail: rollback runs it (recorded SKIPPED)"
	}
	var triggers []string
	for _, s := range plan.Steps[deploy+1:] {
		if s.Type != runbook.TypeRollback && s.OnFail == runbook.OnFailRollback {
			triggers = append(triggers, s.Name)
		}
		if s.Type == runbook.TypeDeploy {
			break // from here on that deploy is the most recent one
		}
	}
	name := plan.Steps[deploy].Name
	if len(triggers) == 0 {
		return fmt.Sprintf("skipped in the run's order (recorded SKIPPED); runs only with rbook rollback, to undo deploy %s (no later step has on_fail: rollback)", name)
	}
	return fmt.Sprintf("skipped in the run's order (recorded SKIPPED); runs only to undo deploy %s when %s fails after it (on_fail: rollback), or with rbook rollback",
		name, strings.Join(triggers, " or "))
}

// nodeWhen is the when of every edge into playbook node id, each with its verdict when the
// inputs decide it (engine.WhenHolds on the inputs, as the run evaluates it); a condition on
// a node's output is decided only while the run executes. "" when no edge into id has one.
func nodeWhen(pb *runbook.Playbook, id string, inputs map[string]any) string {
	var out []string
	for _, e := range pb.Edges {
		if e.To != id || e.When == nil {
			continue
		}
		c := fmt.Sprintf("after %s, if %s %s", e.From, e.When.Binding, e.When.Op)
		if e.When.Value != nil {
			b, _ := json.Marshal(e.When.Value) // a YAML scalar or list
			c += " " + string(b)
		}
		head, _, _ := strings.Cut(e.When.Binding, ".")
		switch {
		case isNode(pb, head):
			c += " (decided while the run executes)"
		case engine.WhenHolds(e.When, inputs):
			c += " (true with these inputs: it runs)"
		default:
			c += " (false with these inputs: it is skipped)"
		}
		out = append(out, c)
	}
	return strings.Join(out, "; ")
}

// isNode reports whether a binding's head names a node (whose output exists only during the
// run) rather than an input; a node id shadows nothing, so inputs never start with one.
func isNode(pb *runbook.Playbook, head string) bool {
	for _, in := range pb.Inputs {
		if in.Name == head {
			return false
		}
	}
	return true
}

// nodeLimits are a playbook node's iteration cap and the error_handlers that act when it
// fails (docs/spec/playbooks.md, "Error handlers"), as "runs at most 2 times; on failure:
// retry (error_handlers, line 85)"; "" for a node with the default cap and no handler.
func nodeLimits(pb *runbook.Playbook, id string, n *runbook.Node) string {
	var t []string
	reruns := n.OnFailure != nil
	if n.OnFailure != nil {
		t = append(t, fmt.Sprintf("on failure: %s is re-run with the error, at most %d times (on_failure)", n.OnFailure.InjectInto, n.OnFailure.MaxIterations))
	}
	for _, h := range pb.ErrorHandlers {
		if h.On == id+runbook.EventFailedSuffix || h.On == runbook.EventNodeFailed {
			t = append(t, fmt.Sprintf("on failure: %s (error_handlers, line %d)", h.Action, h.Line))
			reruns = reruns || h.Action == runbook.HandlerRetry || h.Action == runbook.HandlerInjectHint
		}
	}
	if reruns || n.IterationCap != runbook.DefaultIterationCap {
		// the cap matters only when something re-runs the node (or the file changed it)
		t = append([]string{fmt.Sprintf("runs at most %d times (iteration_cap)", max(n.IterationCap, 1))}, t...)
	}
	return strings.Join(t, "; ")
}
