package planview

import (
	"context"
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// PolicyGate is the auto-pass policy pol as an approval node's policy gate evaluates it: rbook
// playbook run decides with it and rbook plan shows what it would decide, so both read a
// policy alike (docs/plan.md, "Policies").
func PolicyGate(pol *approval.Policy) func(*engine.PolicyContext) engine.PolicyDecision {
	return func(p *engine.PolicyContext) engine.PolicyDecision {
		v := pol.Evaluate(approval.PolicyInput{Node: p.Node, Bindings: p.Bindings, Playbook: p.Playbook, Commands: p.Commands, Tools: p.Tools})
		return engine.PolicyDecision{AutoPassed: v.AutoPassed, Rule: v.Rule, Action: v.Action, Reason: v.Reason}
	}
}

// LocalPolicies are the Options' policies read here: the gate policy file gatePolicy ("" =
// one approval by anyone but the run's starter) and the auto-pass rules of playbookPolicy
// followed by the built-in ones ("" = the built-in ones), as rbook serve --gate-policy and
// --playbook-policy read them, with the words that say where they came from. Errors name the
// flag, then the file and line.
func LocalPolicies(gatePolicy, playbookPolicy string) (Options, error) {
	var gp *approval.GatePolicy
	if gatePolicy != "" {
		var err error
		if gp, err = approval.LoadGatePolicy(gatePolicy); err != nil {
			return Options{}, fmt.Errorf("--gate-policy: %w", err)
		}
	}
	pol, err := approval.LoadPlaybookPolicy(playbookPolicy)
	if err != nil {
		return Options{}, fmt.Errorf("--playbook-policy: %w", err)
	}
	o := Options{AutoPass: PolicyGate(pol), GatePolicy: "none given: " + approval.DefaultRuleName, AutoPassPolicy: "the built-in rules"}
	o.Gates = func(name, gate string) Requirement {
		r := gp.For(name, gate)
		if r.Rule == approval.DefaultRuleName {
			r.Rule = "the default rule"
		}
		return Requirement{Rule: r.Rule, Approvals: r.ApprovalsRequired, Approvers: r.AllowedApprovers, StarterMayApprove: r.StarterMayApprove}
	}
	if gatePolicy != "" {
		o.GatePolicy = gatePolicy
	}
	if playbookPolicy != "" {
		o.AutoPassPolicy = playbookPolicy + ", then the built-in rules"
	}
	return o, nil
}

// AskControlPlane asks the control plane cp (reached through connect, whose func releases the
// client) what its policies would decide at plan's gates (ApprovalService.PreviewGates), and
// sets o to answer from its reply. When it cannot be asked (unreachable, refused, an older
// control plane), o keeps its policies and says so: the plan is still shown, so the Action's
// plan input never stops a run the control plane would run.
func AskControlPlane(ctx context.Context, o *Options, plan *runbook.Plan, inputs map[string]any, cp string, connect func() (*cpclient.Client, func(), error)) {
	req, err := PreviewRequest(plan, inputs)
	var resp *rbookv1.PreviewGatesResponse
	if err == nil {
		var c *cpclient.Client
		var done func()
		if c, done, err = connect(); err == nil {
			defer done()
			resp, err = c.Approvals.PreviewGates(ctx, req)
		}
	}
	if err != nil {
		note := fmt.Sprintf(" (the control plane %s decides with its own policy when the gate opens, and could not be asked: %s; shown: this one)",
			cp, strings.ReplaceAll(err.Error(), "\n", " "))
		o.GatePolicy += note
		o.AutoPassPolicy += note
		return
	}
	FromPreview(o, resp)
	o.GatePolicy = "the control plane " + cp + " (its --gate-policy)"
	o.AutoPassPolicy = "the control plane " + cp + " (its --playbook-policy)"
}
