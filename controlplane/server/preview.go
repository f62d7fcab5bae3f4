package server

import (
	"context"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/runplan"
)

// PreviewGates says what this control plane's policies would decide at the gates of a plan
// not yet started (approval_service.proto; docs/plan.md, "Policies"): the gate policy's
// requirement, as RequestApproval captures it, and for a gate sent with a policy context the
// auto-pass verdict (decidePolicy: shadow mode passes nothing). It reads no row and records
// nothing. Errors: E_INVALID_ARGUMENT for no name or step name, more than runplan.MaxSteps
// gates, or a policy context over its limits (policyInputOf).
func (h approvalService) PreviewGates(_ context.Context, req *rbookv1.PreviewGatesRequest) (*rbookv1.PreviewGatesResponse, error) {
	if req.GetName() == "" || len(req.GetName()) > runplan.MaxNameBytes {
		return nil, invalidArg("name must be the runbook or playbook name, 1..%d bytes", runplan.MaxNameBytes)
	}
	if n := len(req.GetGates()); n > runplan.MaxSteps {
		return nil, invalidArg("gates holds %d gates, over the limit of %d", n, runplan.MaxSteps)
	}
	out := &rbookv1.PreviewGatesResponse{Gates: make([]*rbookv1.GatePreview, len(req.GetGates()))}
	for i, g := range req.GetGates() {
		if g.GetStepName() == "" || len(g.GetStepName()) > runplan.MaxNameBytes {
			return nil, invalidArg("gates[%d].step_name must be 1..%d bytes", i, runplan.MaxNameBytes)
		}
		need := h.s.opts.GatePolicy.For(req.GetName(), g.GetStepName())
		p := &rbookv1.GatePreview{StepName: g.GetStepName(), PolicyRule: need.Rule, ApprovalsRequired: int32(need.ApprovalsRequired),
			AllowedApprovers: need.AllowedApprovers, StarterMayApprove: need.StarterMayApprove}
		if pc := g.GetPolicy(); pc != nil {
			in, err := policyInputOf(pc)
			if err != nil {
				return nil, err // names the field (policy.commands[3])
			}
			d := h.s.decidePolicy(in)
			p.Policy = policyToProto(&d)
		}
		out.Gates[i] = p
	}
	return out, nil
}
