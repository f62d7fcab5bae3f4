package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const previewGatePolicy = `rules:
  - runbook: prod*
    gate: confirm-*
    approvals: 2
    approvers: ["group:sre", alice]
`

// PreviewGates answers what the server's own gate policy and auto-pass policy would decide at
// each gate of a plan (rbook plan; docs/plan.md, "Policies"): the requirement RequestApproval
// would capture, the verdict it would store, shadow mode passing nothing. It records nothing.
func TestPreviewGatesSaysWhatThePoliciesWouldDecide(t *testing.T) {
	gates, err := approval.ParseGatePolicy([]byte(previewGatePolicy), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	trust, err := approval.ParsePolicyRules([]byte("rules:\n  - name: trust-echo\n    when: \"commands.all(c, c.startsWith('echo '))\"\n    action: auto-approve\n    reason: echo only\n"), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := approval.CompilePolicy(append(trust, approval.DefaultPolicyRules()...))
	if err != nil {
		t.Fatal(err)
	}
	req := &rbookv1.PreviewGatesRequest{Name: "prod-eu", Gates: []*rbookv1.GatePreviewRequest{
		{StepName: "confirm-rollout"},
		{StepName: "echo-gate", Policy: &rbookv1.PolicyContext{NodeJson: `{"id":"echo-gate"}`, Commands: []string{"echo hi"}}},
		{StepName: "curl-gate", Policy: &rbookv1.PolicyContext{NodeJson: `{"id":"curl-gate"}`, Commands: []string{"echo hi", "curl https://example.com"}}},
	}}
	type verdict struct {
		rule      string
		m         int32
		approvers int
		auto      bool
		autoRule  string
		shadow    bool
	}
	for _, c := range []struct {
		name   string
		shadow bool
		want   []verdict
	}{
		{"enforced", false, []verdict{{"gates.yaml rule 1 (line 2)", 2, 2, false, "", false},
			{approval.DefaultRuleName, 1, 0, true, "trust-echo", false}, {approval.DefaultRuleName, 1, 0, false, "default-outbound-http", false}}},
		{"shadow", true, []verdict{{"gates.yaml rule 1 (line 2)", 2, 2, false, "", false},
			{approval.DefaultRuleName, 1, 0, false, "trust-echo", true}, {approval.DefaultRuleName, 1, 0, false, "default-outbound-http", true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newClients(serveWith(t, server.Options{GatePolicy: gates, PlaybookPolicy: pol, PolicyShadow: c.shadow}))
			resp, err := cl.apps.PreviewGates(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetGates()) != len(c.want) {
				t.Fatalf("%d gates, want %d", len(resp.GetGates()), len(c.want))
			}
			for i, g := range resp.GetGates() {
				got := verdict{g.GetPolicyRule(), g.GetApprovalsRequired(), len(g.GetAllowedApprovers()), g.GetPolicy().GetAutoPassed(), g.GetPolicy().GetRule(), g.GetPolicy().GetShadow()}
				if got != c.want[i] || g.GetStepName() != req.Gates[i].StepName {
					t.Errorf("gate %s: got %+v, want %+v", g.GetStepName(), got, c.want[i])
				}
			}
			if resp.GetGates()[0].GetPolicy() != nil {
				t.Error("a confirm step got an auto-pass verdict")
			}
			list, err := cl.apps.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{})
			if err != nil || len(list.GetApprovals()) != 0 {
				t.Errorf("PreviewGates opened approvals: %v %v", list.GetApprovals(), err)
			}
			_, err = cl.apps.PreviewGates(context.Background(), &rbookv1.PreviewGatesRequest{Gates: req.Gates})
			wantCode(t, err, connect.CodeInvalidArgument, server.CodeInvalidArgument)
		})
	}
}
