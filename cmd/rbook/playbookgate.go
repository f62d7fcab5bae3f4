package main

import (
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// embeddedPolicy is the auto-pass policy an embedded control plane decides playbook approval
// nodes with (rbook playbook run --policy, --policy-shadow); the zero value means the server's
// default rules.
type embeddedPolicy struct {
	policy *approval.Policy
	shadow bool
}

// playbookWarnings are the parser's warnings of a loaded playbook, one "file:line:col: field:
// message" each (an unquoted version: 1.0).
func playbookWarnings(plan *runbook.Plan) []string {
	if plan == nil || plan.Playbook == nil {
		return nil
	}
	var out []string
	for _, d := range plan.Playbook.Warnings {
		out = append(out, "warning: "+d.String())
	}
	return out
}
