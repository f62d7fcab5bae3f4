package steps

import (
	"context"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// PolicyGate is the gate of a playbook run without a control plane (--control-plane off):
// the auto-pass policy (docs/playbooks.md, "Auto-pass policy"; the rules of controlplane/approval) is evaluated
// here, before Next (the terminal) is asked. An auto-approve decides the approval node at once
// (source "policy"); anything else (require-human, no rule matched, a rule that failed to
// evaluate) asks Next, and the decision carries the policy's verdict for the evidence. In
// Shadow mode the verdict is recorded and Next always decides. A runbook's confirm step (no
// Policy) goes to Next.
type PolicyGate struct {
	// Evaluate is the policy's verdict for a request's context: AutoPassed, Rule, Action and
	// Reason set (Shadow is set here); nil means no policy (Next decides).
	Evaluate func(*engine.PolicyContext) engine.PolicyDecision
	Shadow   bool
	Next     engine.Gate
	// Human, when set, is told each request Next is asked to decide (a person is needed):
	// the view says the run is paused.
	Human func(engine.GateRequest)
}

// Await implements engine.Gate.
func (g *PolicyGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if req.Policy == nil || g.Evaluate == nil {
		g.tellHuman(req)
		return g.Next.Await(ctx, req)
	}
	v := g.Evaluate(req.Policy)
	pd := &engine.PolicyDecision{AutoPassed: v.AutoPassed && !g.Shadow, Rule: v.Rule, Action: v.Action, Reason: v.Reason, Shadow: g.Shadow}
	if name := gateinputs.NeedsPerson(req.Inputs); pd.AutoPassed && name != "" {
		// The policy cannot fill in the form: a person decides (docs/approver-inputs.md).
		pd.AutoPassed, pd.Reason = false, pd.Reason+"; not auto-passed: the input "+name+" is required and has no default, so a person must give it"
	}
	if pd.AutoPassed {
		values, _ := gateinputs.Validate(req.Inputs, nil) // the defaults; NeedsPerson is "": it cannot fail
		return engine.Decision{Verdict: engine.Approved, By: "policy", Reason: v.Reason, Source: "policy", Policy: pd, InputValues: values}, nil
	}
	g.tellHuman(req)
	d, err := g.Next.Await(ctx, req)
	d.Policy = pd
	return d, err
}

func (g *PolicyGate) tellHuman(req engine.GateRequest) {
	if g.Human != nil {
		g.Human(req)
	}
}
