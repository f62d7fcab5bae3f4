package planview

import (
	"fmt"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// PreviewRequest is the ApprovalService.PreviewGates request for plan's gates (docs/plan.md,
// "Policies"): each confirm step by name, each playbook approval node with the policy context
// Build evaluates (engine.PolicyContextOf with its prompt and commands rendered from inputs),
// in file order. Error: a policy context over the control plane's limits
// (cpclient.PolicyContextProto).
func PreviewRequest(plan *runbook.Plan, inputs map[string]any) (*rbookv1.PreviewGatesRequest, error) {
	shown := rendered(plan, inputs)
	req := &rbookv1.PreviewGatesRequest{Name: plan.Name}
	for _, st := range shown.Steps {
		if st.Type != runbook.TypeConfirm && st.Type != runbook.TypeApproval {
			continue
		}
		g := &rbookv1.GatePreviewRequest{StepName: st.Name}
		if st.Type == runbook.TypeApproval && st.Node != nil {
			pc, err := cpclient.PolicyContextProto(engine.PolicyContextOf(plan, st, st.Node.Prompt, inputs))
			if err != nil {
				return nil, fmt.Errorf("gate %s: %w", st.Name, err)
			}
			g.Policy = pc
		}
		req.Gates = append(req.Gates, g)
	}
	return req, nil
}

// FromPreview sets o's Gates and AutoPass to answer from a control plane's PreviewGates
// response: each gate's requirement and auto-pass verdict as that control plane would decide
// them. A gate the response lacks gets the default requirement and no auto-pass; a verdict
// in shadow mode passes nothing (a person decides).
func FromPreview(o *Options, resp *rbookv1.PreviewGatesResponse) {
	by := map[string]*rbookv1.GatePreview{}
	for _, g := range resp.GetGates() {
		by[g.GetStepName()] = g
	}
	o.Gates = func(_, gate string) Requirement {
		g, ok := by[gate]
		if !ok {
			return Requirement{Rule: "the default rule (the control plane did not say)", Approvals: 1}
		}
		return Requirement{Rule: g.GetPolicyRule(), Approvals: int(g.GetApprovalsRequired()), Approvers: g.GetAllowedApprovers(),
			StarterMayApprove: g.GetStarterMayApprove()}
	}
	o.AutoPass = func(pc *engine.PolicyContext) engine.PolicyDecision {
		id, _ := pc.Node["id"].(string)
		p := by[id].GetPolicy()
		if p == nil {
			return engine.PolicyDecision{Action: "require-human", Reason: "the control plane gave no auto-pass verdict: a person decides"}
		}
		d := engine.PolicyDecision{AutoPassed: p.GetAutoPassed(), Rule: p.GetRule(), Action: p.GetAction(), Reason: p.GetReason(), Shadow: p.GetShadow()}
		if d.Shadow {
			d.AutoPassed, d.Reason = false, d.Reason+" (the control plane's policy runs in shadow mode: a person decides)"
		}
		return d
	}
}
