package main

import (
	"context"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
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
	// human, when set, is told each request next is asked to decide (a person is needed):
	// the view says the run is paused (view.humanNeeded).
	human func(engine.GateRequest)
}

// Await implements engine.Gate.
func (g *localPolicyGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if req.Policy == nil || g.policy == nil {
		g.tellHuman(req)
		return g.next.Await(ctx, req)
	}
	p := req.Policy
	v := g.policy.Evaluate(approval.PolicyInput{Node: p.Node, Bindings: p.Bindings, Playbook: p.Playbook, Commands: p.Commands, Tools: p.Tools})
	pd := &engine.PolicyDecision{AutoPassed: v.AutoPassed && !g.shadow, Rule: v.Rule, Action: v.Action, Reason: v.Reason, Shadow: g.shadow}
	if name := gateinputs.NeedsPerson(req.Inputs); pd.AutoPassed && name != "" {
		// The policy cannot fill in the form: a person decides (docs/approver-inputs.md).
		pd.AutoPassed, pd.Reason = false, pd.Reason+"; not auto-passed: the input "+name+" is required and has no default, so a person must give it"
	}
	if pd.AutoPassed {
		values, _ := gateinputs.Validate(req.Inputs, nil) // the defaults; NeedsPerson is "": it cannot fail
		return engine.Decision{Verdict: engine.Approved, By: "policy", Reason: v.Reason, Source: "policy", Policy: pd, InputValues: values}, nil
	}
	g.tellHuman(req)
	d, err := g.next.Await(ctx, req)
	d.Policy = pd
	return d, err
}

func (g *localPolicyGate) tellHuman(req engine.GateRequest) {
	if g.human != nil {
		g.human(req)
	}
}

// humanNoticeGate is a playbook's control-plane gate that says when an approval node waits for
// a person (issue 9, item 8): each Await runs on its own copy of cp whose Announce — called
// only when the gate opened pending, never for one the server's auto-pass policy approved at
// once — first calls human with that request. cp's other hooks (a runner's Opened, set on cp
// by ciOutput.gate before each Await) are copied with it.
type humanNoticeGate struct {
	cp    *cpclient.Gate
	human func(engine.GateRequest)
}

// Await implements engine.Gate.
func (g *humanNoticeGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	c := *g.cp
	announce := c.Announce
	c.Announce = func(a *rbookv1.Approval, token string) {
		if g.human != nil {
			g.human(req)
		}
		if announce != nil {
			announce(a, token)
		}
	}
	return c.Await(ctx, req)
}

// embeddedPolicy is the auto-pass policy an embedded control plane decides playbook approval
// nodes with (rbook playbook run --policy, --policy-shadow); the zero value means the server's
// default rules.
type embeddedPolicy struct {
	policy *approval.Policy
	shadow bool
}

func timeNow() time.Time { return time.Now().UTC() }

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
