package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// openRewindGate starts playbook run id and opens its approval node "review" with targets.
func openRewindGate(t *testing.T, c clients, id string, targets []string) (*rbookv1.Approval, string) {
	t.Helper()
	startPlaybookRun(t, c, id, `{}`)
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, id),
		RunId: id, StepName: "review", StepIndex: 2, Prompt: "Ship it?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), RewindTargets: targets})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return res.GetApproval(), res.GetToken()
}

// Reject with a redo_from the gate does not list is E_INVALID_ARGUMENT naming redo_from and
// the allowed targets, and the gate stays PENDING with no vote; one it lists rejects the gate
// with redo_from on the approval (docs/push-back.md).
func TestRejectWithAnInvalidRedoFromIsRefusedAndDecidesNothing(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	ctx := context.Background()
	a, token := openRewindGate(t, c, "R-pb", []string{"build", "test"})
	if !slices.Equal(a.GetRewindTargets(), []string{"build", "test"}) || a.GetIteration() != 1 {
		t.Fatalf("opened gate targets %v iteration %d; want [build test], 1", a.GetRewindTargets(), a.GetIteration())
	}
	_, err := c.apps.Reject(ctx, &rbookv1.RejectRequest{Token: token, Approver: "bob", Reason: "again", RedoFrom: "deploy"})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if msg := err.Error(); !strings.Contains(msg, "redo_from") || !strings.Contains(msg, "build, test") || !strings.Contains(msg, "nothing was decided") {
		t.Fatalf("refusal %q does not name redo_from, the allowed targets and that nothing was decided", msg)
	}
	g, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
	if err != nil || g.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(g.GetApproval().GetVotes()) != 0 {
		t.Fatalf("after the refusal: %v, %v; want PENDING with no vote", g.GetApproval(), err)
	}
	res, err := c.apps.Reject(ctx, &rbookv1.RejectRequest{Token: token, Approver: "bob", Reason: "add a test", RedoFrom: "build"})
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED ||
		res.GetApproval().GetRedoFrom() != "build" || res.GetApproval().GetReason() != "add a test" {
		t.Fatalf("Reject = %v, %v; want REJECTED with redo_from build and the reason", res.GetApproval(), err)
	}
}

// A runbook's confirm step has no rewind targets: RequestApproval refuses them on a runbook
// run, and a redo_from on its gate is refused.
func TestRunbookGatesRefusePushBack(t *testing.T) {
	c := newClients(serveWith(t, server.Options{}))
	ctx := context.Background()
	startRun(t, c, "R-rb")
	_, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, "R-rb"),
		RunId: "R-rb", StepName: "approve", StepIndex: 1, Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), RewindTargets: []string{"build"}})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	res, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, "R-rb"),
		RunId: "R-rb", StepName: "approve", StepIndex: 1, Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.apps.Reject(ctx, &rbookv1.RejectRequest{Token: res.GetToken(), Approver: "bob", RedoFrom: "build"})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if !strings.Contains(err.Error(), "declares no rewind targets") {
		t.Fatalf("refusal %q does not say the gate declares no rewind targets", err)
	}
}
