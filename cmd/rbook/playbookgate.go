package main

import (
	"context"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// localPolicyGate is the gate of a playbook run without a control plane (--control-plane
// off): the auto-pass policy (DESIGN D16; issue 9, item 6) is evaluated here, before the
// terminal is asked. An auto-approve decides the approval node at once (source "policy");
// anything else (require-human, no rule matched, a rule that failed to evaluate) asks next,
// and the decision carries the policy's verdict for the evidence. In shadow mode the verdict
// is recorded and next always decides. A runbook's confirm step (no Policy) goes to next.
type localPolicyGate struct {
	policy *approval.Policy
	shadow bool
	next   engine.Gate
}

// Await implements engine.Gate.
func (g *localPolicyGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if req.Policy == nil || g.policy == nil {
		return g.next.Await(ctx, req)
	}
	p := req.Policy
	v := g.policy.Evaluate(approval.PolicyInput{Node: p.Node, Bindings: p.Bindings, Playbook: p.Playbook, Commands: p.Commands, Tools: p.Tools})
	pd := &engine.PolicyDecision{AutoPassed: v.AutoPassed && !g.shadow, Rule: v.Rule, Action: v.Action, Reason: v.Reason, Shadow: g.shadow}
	if pd.AutoPassed {
		return engine.Decision{Verdict: engine.Approved, By: "policy", Reason: v.Reason, Source: "policy", Policy: pd}, nil
	}
	d, err := g.next.Await(ctx, req)
	d.Policy = pd
	return d, err
}

// embeddedPolicy is the auto-pass policy an embedded control plane decides playbook approval
// nodes with (rbook playbook run --policy, --policy-shadow); the zero value means the server's
// default rules.
type embeddedPolicy struct {
	policy *approval.Policy
	shadow bool
}

func timeNow() time.Time { return time.Now().UTC() }

func loadMCPConfig(path string) (*mcp.Config, error) { return mcp.LoadConfig(path) }

func newMCPPool(cfg *mcp.Config) *mcp.Pool { return mcp.NewPool(cfg) }

// playbookWarnings are the parser's warnings of a loaded playbook, one "file:line:col: field:
// message" each (an unquoted version: 1.0; case R01).
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
