package main

// The checks a playbook run makes before anything is recorded, shared with 'rbook playbook
// validate' (action/preflight): the MCP configuration its agentic nodes use, and which
// approval nodes the auto-pass policy in force would pass without a person (here: the
// policy is the control plane's).

import (
	"fmt"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// autoPassWarnings says which approval nodes of plan (the playbook at file) the auto-pass
// policy pol would pass without a person when their gate opens with bindings (the inputs, when
// known): one diagnostic each, at the node, naming the rule and saying how to pin the node to
// a person. Node outputs are not known before the run, so an arg that names one stays as
// written, as the run's policy context has it when that output is missing; nodes pinned with
// policy: require-human are left out (no rule can pass them). 'rbook playbook validate' and
// the start of 'rbook playbook run' print them as warnings.
func autoPassWarnings(plan *runbook.Plan, file string, pol *approval.Policy, bindings map[string]any) []runbook.Diagnostic {
	var out []runbook.Diagnostic
	for i, s := range plan.Steps {
		if s.Type != runbook.TypeApproval || s.Node == nil || s.Node.Policy == runbook.NodePolicyRequireHuman {
			continue
		}
		prompt := s.Node.Prompt
		if r, err := runbook.Render(prompt, bindings); err == nil {
			prompt = r
		}
		pc := engine.PolicyContextOf(plan, s, prompt, bindings)
		v := pol.Evaluate(approval.PolicyInput{Node: pc.Node, Bindings: pc.Bindings, Playbook: pc.Playbook, Commands: pc.Commands, Tools: pc.Tools})
		if !v.AutoPassed {
			continue
		}
		out = append(out, runbook.Diagnostic{File: file, Line: s.Line, Column: s.Column, Field: fmt.Sprintf("nodes[%d]", i),
			Message: fmt.Sprintf("approval node '%s' would be auto-passed by rule '%s' (%s); add policy: require-human to it to ask a person", s.Name, v.Rule, v.Reason)})
	}
	return out
}
