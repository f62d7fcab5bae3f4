package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestPinnedApprovalNodeWaitsForAPersonOnTheControlPlane: RequestApproval for a playbook
// approval node whose policy context says policy: require-human opens pending, with the pin
// as the recorded decision, although the server's --playbook-policy approves everything and
// the node guards only `echo`; the same node without the pin is auto-passed.
func TestPinnedApprovalNodeWaitsForAPersonOnTheControlPlane(t *testing.T) {
	p := startServe(t, "--playbook-policy", filepath.Join("testdata", "trust-all.policy.yaml"))
	c := newClients(p.URL)
	open := func(runID, nodeJSON string) *rbookv1.Approval {
		startPlaybookRun(t, c, runID, `{}`)
		res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, runID),
			RunId: runID, StepName: "go-live", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
			PlanDigest: digest("plan"), Policy: &rbookv1.PolicyContext{NodeJson: nodeJSON, Commands: []string{"echo deploying 1.2.3"}}})
		if err != nil {
			t.Fatalf("RequestApproval %s: %v", runID, err)
		}
		return res.GetApproval()
	}
	a := open("pb-pinned", `{"id":"go-live","type":"approval","policy":"require-human"}`)
	pd := a.GetPolicy()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetAutoPassed() || pd.GetAutoPassed() ||
		pd.GetRule() != approval.NodePolicyRule || pd.GetAction() != approval.ActionRequireHuman {
		t.Fatalf("pinned node: approval %v, policy %v", a.GetStatus(), pd)
	}
	status, auto, _, _, _, _ := approvalRow(t, p.DB, a.GetApprovalId())
	if status != "pending" || auto != 0 {
		t.Fatalf("pinned node's row: %s auto_passed=%d", status, auto)
	}
	if free := open("pb-free", `{"id":"go-live","type":"approval"}`); !free.GetAutoPassed() || free.GetPolicy().GetRule() != "trust-all" {
		t.Fatalf("unpinned node: %v", free)
	}
}
