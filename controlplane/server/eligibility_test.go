package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// eligibilityAuth: dave is the executor that starts the run and also an approver; carol only
// views; erin approves but is not in the gate's approver list.
const eligibilityAuth = `
dave  executor dave-executor-token-0001
dave  approver dave-approver-token-0001
alice approver alice-approver-token-001
bob   approver bob-approver-token-00001
erin  approver erin-approver-token-0001
carol viewer   carol-viewer-token-00001
`

// eligibilityPolicy: the "approve" gate needs two of alice, bob and dave.
const eligibilityPolicy = `rules:
  - gate: approve
    approvals: 2
    approvers: [alice, bob, dave]
`

// openAuthGate starts run id as dave (executor) and opens its "approve" gate.
func openAuthGate(t *testing.T, url, id string) *rbookv1.Approval {
	t.Helper()
	exec := newClients(url, withBearer("dave-executor-token-0001"))
	ctx := context.Background()
	if _, err := exec.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: id, Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5}); err != nil {
		t.Fatal(err)
	}
	res, err := exec.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id,
		StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetApproval()
}

// Approval.caller answers, for each caller, what Approve would do: the starter is refused by
// four-eyes, a caller outside the approver list and a viewer are refused, a caller whose vote
// is counted is told so, an allowed approver may decide, and a decided gate can no longer be
// decided — each in a sentence a person reads. Every refusal carries the code Approve by the
// same caller fails with, so the page and the API cannot disagree.
func TestApprovalCallerEligibilityMatchesWhatApproveDoes(t *testing.T) {
	auth, err := server.ParseAuth(strings.NewReader(eligibilityAuth), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := approval.ParseGatePolicy([]byte(eligibilityPolicy), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := serveWith(t, server.Options{Auth: auth, GatePolicy: pol})
	ctx := context.Background()
	as := func(token string) clients { return newClients(url, withBearer(token)) }
	pending := openAuthGate(t, url, "r-pending")
	decided := openAuthGate(t, url, "r-decided")
	alice := as("alice-approver-token-001")
	if _, err := alice.apps.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: pending.GetApprovalId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.apps.Reject(ctx, &rbookv1.RejectRequest{ApprovalId: decided.GetApprovalId(), Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, gate, identity, code, reason string
		may                                       bool
	}{
		{"the run's starter", "dave-approver-token-0001", pending.GetApprovalId(), "dave", "E_SELF_APPROVAL",
			"You started this run; another person must approve it (four-eyes).", false},
		{"not in the approver list", "erin-approver-token-0001", pending.GetApprovalId(), "erin", "E_PERMISSION_DENIED",
			"Only alice, bob, dave may decide this gate; you are not one of them: ask one of them to decide it.", false},
		{"a viewer", "carol-viewer-token-00001", pending.GetApprovalId(), "carol", "E_PERMISSION_DENIED",
			"You can see this gate but not decide it: your role is viewer, and deciding needs the approver role.", false},
		{"already voted", "alice-approver-token-001", pending.GetApprovalId(), "alice", "E_ALREADY_VOTED",
			"You already approved this gate; it waits for 1 more approval from someone else.", false},
		{"a decided gate", "bob-approver-token-00001", decided.GetApprovalId(), "bob", "E_APPROVAL_ALREADY_DECIDED",
			"This gate was already rejected by alice.", false},
		{"an allowed approver", "bob-approver-token-00001", pending.GetApprovalId(), "bob", "",
			"You may approve or reject this gate; your approval would be 2 of the 2 it needs.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := as(tc.token)
			res, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: tc.gate})
			if err != nil {
				t.Fatal(err)
			}
			got := res.GetApproval().GetCaller()
			if got.GetMayDecide() != tc.may || got.GetCode() != tc.code || got.GetReason() != tc.reason || got.GetIdentity() != tc.identity {
				t.Fatalf("caller = {may_decide %v, code %q, reason %q, identity %q}\nwant  {may_decide %v, code %q, reason %q, identity %q}",
					got.GetMayDecide(), got.GetCode(), got.GetReason(), got.GetIdentity(), tc.may, tc.code, tc.reason, tc.identity)
			}
			list, err := c.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: res.GetApproval().GetRunId()})
			if err != nil || len(list.GetApprovals()) != 1 || list.GetApprovals()[0].GetCaller().GetCode() != tc.code {
				t.Fatalf("ListApprovals caller = %v, %v; want code %q", list.GetApprovals(), err, tc.code)
			}
			if tc.may || tc.code == "E_ALREADY_VOTED" {
				return // Approve would count the vote (again: a repeat changes nothing)
			}
			_, err = c.apps.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: tc.gate})
			if rbookCode(err) != tc.code {
				t.Fatalf("Approve by the same caller: %v, want code %s", err, tc.code)
			}
		})
	}
	// WatchApproval carries the watcher's answer; Approve's response the voter's new one.
	bob := as("bob-approver-token-00001")
	_, first := watchApproval(t, bob, pending.GetApprovalId())
	if !first.GetCaller().GetMayDecide() {
		t.Fatalf("WatchApproval caller for bob = %v, want may_decide", first.GetCaller())
	}
	res, err := bob.apps.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: pending.GetApprovalId()})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.GetApproval().GetCaller(); c.GetMayDecide() || c.GetReason() != "This gate was already approved by alice, bob." {
		t.Fatalf("Approve response caller = %v, want the decided gate's answer", c)
	}
}

// Without auth the answer is the one Approve gives an unverified local person: with the
// embedded control plane's local approver key the caller may decide a one-approval gate by
// id; without it, it is told how to decide; a gate needing two approvals is refused, as
// asserted names do not count.
func TestApprovalCallerEligibilityWithoutAuthIsTheUnverifiedLocalPersons(t *testing.T) {
	const key = "local-approver-key-0123456789abcdef"
	pol, err := approval.ParseGatePolicy([]byte("rules:\n  - gate: two\n    approvals: 2\n"), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := serveWith(t, server.Options{LocalApprover: []byte(key), GatePolicy: pol})
	ctx := context.Background()
	c := newClients(url)
	startRun(t, c, "r-local")
	one, _ := gate(t, c, "r-local", time.Hour)
	res, err := c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: "r-local",
		StepName: "two", StepIndex: 2, Prompt: "Both?", Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	two := res.GetApproval()
	local := newClients(url, withBearer(key))
	for _, tc := range []struct {
		name   string
		c      clients
		gate   string
		may    bool
		code   string
		reason string
	}{
		{"local person, one approval", local, one.GetApprovalId(), true, "", "You may approve or reject this gate."},
		{"local person, two approvals", local, two.GetApprovalId(), false, "E_UNAUTHENTICATED",
			"This gate needs 2 approvals from people who signed in; sign in to approve it."},
		{"without the local key", c, one.GetApprovalId(), false, "E_UNAUTHENTICATED",
			"This control plane has no sign-in: decide this gate with the command the waiting run printed."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: tc.gate})
			if err != nil {
				t.Fatal(err)
			}
			got := res.GetApproval().GetCaller()
			if got.GetMayDecide() != tc.may || got.GetCode() != tc.code || got.GetReason() != tc.reason {
				t.Fatalf("caller = %v, want may_decide %v, code %q, reason %q", got, tc.may, tc.code, tc.reason)
			}
			if !tc.may {
				_, err := tc.c.apps.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: tc.gate, Approver: "me"})
				if rbookCode(err) != tc.code {
					t.Fatalf("Approve by the same caller: %v, want code %s", err, tc.code)
				}
			}
		})
	}
	if _, err := local.apps.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: one.GetApprovalId(), Approver: "me"}); err != nil {
		t.Fatalf("the local person's Approve after may_decide: %v", err)
	}
}
