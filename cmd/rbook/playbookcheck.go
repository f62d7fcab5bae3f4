package main

// The checks a playbook run makes before anything is recorded, shared with 'rbook playbook
// validate': the MCP configuration its agentic nodes use, and which approval nodes the
// auto-pass policy in force would pass without a person.

import (
	"fmt"
	"io"
	"slices"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// playbookChecks is what 'rbook playbook validate' checks each file with beyond the parser:
// --mcp-config, the templates' problems (checked once for every file) and the auto-pass
// policy in force.
type playbookChecks struct {
	mcpConfig string
	templates []runbook.Diagnostic
	policy    *approval.Policy
}

// file validates the playbook at p: it loads, its MCP config and the templates pass what
// 'rbook playbook run' checks before the first node, and the auto-pass policy's passes are
// warnings. With text, every issue and warning is printed on errw and one summary line on
// out. The result is OK when there is no issue.
func (c playbookChecks) file(p string, text bool, out, errw io.Writer) preflight.File {
	vf := preflight.File{File: p, Issues: []preflight.Issue{}, Warnings: []preflight.Issue{}}
	plan, err := runbook.LoadPlaybook(p)
	if err != nil {
		vf.Issues = preflight.IssuesOf(p, err)
		if text {
			n := printPlaybookParseError(errw, p, err)
			fmt.Fprintf(out, "%s: %s\n", p, yamlerr.Plural(n, "issue", "issues"))
		}
		return vf
	}
	vf.Name, vf.Nodes, vf.Hash = plan.Name, len(plan.Steps), plan.ContentHash
	_, ds := preflight.PlaybookMCPConfig(plan, p, c.mcpConfig)
	if ds = append(ds, c.templates...); len(ds) > 0 {
		runbook.SortDiagnostics(ds)
		for _, d := range ds {
			vf.Issues = append(vf.Issues, preflight.IssueOf(d))
			if text {
				fmt.Fprintln(errw, d.String())
			}
		}
		if text {
			fmt.Fprintf(out, "%s: %s\n", p, yamlerr.Plural(len(ds), "issue", "issues"))
		}
		return vf
	}
	vf.OK = true
	warnings := autoPassWarnings(plan, p, c.policy, nil)
	if plan.Playbook != nil {
		warnings = append(slices.Clone(plan.Playbook.Warnings), warnings...)
	}
	for _, d := range warnings {
		vf.Warnings = append(vf.Warnings, preflight.IssueOf(d))
		if text {
			fmt.Fprintln(errw, "warning: "+d.String())
		}
	}
	if text {
		fmt.Fprintf(out, "%s: ok (%d nodes, playbook %s, hash %s)\n", p, len(plan.Steps), plan.Name, plan.ContentHash)
	}
	return vf
}

// The playbook's MCP checks (action/preflight) under the names the run uses.
var (
	playbookMCPConfig = preflight.PlaybookMCPConfig
	hasAgentic        = preflight.HasAgentic
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
