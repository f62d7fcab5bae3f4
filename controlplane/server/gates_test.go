package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// gatesAuth is an auth file with groups and a GitHub link: ci-bot starts
// runs and is also an approver (the four-eyes case), alice and bob are in group sre, carol in
// no group.
const gatesAuth = `ci-bot executor exec-token-0123456789
ci-bot approver cibot-appr-token-0123456789
alice  approver alice-token-0123456789 groups=sre
bob    approver bob-token-0123456789   groups=sre,dba github=bob-gh
carol  approver carol-token-0123456789
`

// gatesPolicy: gate "approve" of runbook "demo" needs two of group sre (or carol... not).
const gatesPolicy = `rules:
  - runbook: demo
    gate: approve
    approvals: 2
    approvers: ["group:sre", ci-bot]
`

// startGates runs rbook serve with gatesAuth and gatesPolicy.
func startGates(t *testing.T) *serveProc {
	t.Helper()
	dir := t.TempDir()
	auth, policy := filepath.Join(dir, "auth"), filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(auth, []byte(gatesAuth), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte(gatesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServe(t, "--auth-file", auth, "--gate-policy", policy)
}

func approveByID(c clients, id, reason, claimed string) (*rbookv1.Approval, error) {
	res, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id, Reason: reason, Approver: claimed})
	return res.GetApproval(), err
}

// An authenticated approver decides by approval id; the recorded approver is
// the authenticated identity; the policy's 2-of-N, allowed approvers and four-eyes apply; a
// second approval by the same identity counts once; the tally shows in Get/List/Watch.
func TestApproveByIDWithPolicy(t *testing.T) {
	p := startGates(t)
	ctx := context.Background()
	exec := newClients(p.URL, withBearer("exec-token-0123456789"))
	alice := newClients(p.URL, withBearer("alice-token-0123456789"))
	bob := newClients(p.URL, withBearer("bob-token-0123456789"), connect.WithGRPC())
	carol := newClients(p.URL, withBearer("carol-token-0123456789"))
	starter := newClients(p.URL, withBearer("cibot-appr-token-0123456789"))

	startRun(t, exec, "R-gates")
	a, tok := gate(t, exec, "R-gates", time.Hour)
	id := a.GetApprovalId()
	if a.GetApprovalsRequired() != 2 || strings.Join(a.GetAllowedApprovers(), ",") != "group:sre,ci-bot" || a.GetStarterMayApprove() {
		t.Fatalf("opened gate %v: want the policy captured (2 of group:sre, ci-bot; starter may not approve)", a)
	}
	w, _ := watchApproval(t, exec, id)

	_, err := alice.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, ApprovalId: id})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	_, err = alice.apps.Reject(ctx, &rbookv1.RejectRequest{})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")

	_, err = approveByID(carol, id, "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	if !strings.Contains(err.Error(), "gates.yaml rule 1 (line 2)") || !strings.Contains(err.Error(), "carol") {
		t.Fatalf("refusal does not name the rule and the caller: %v", err)
	}
	_, err = carol.apps.Reject(ctx, &rbookv1.RejectRequest{ApprovalId: id})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	_, err = approveByID(starter, id, "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_SELF_APPROVAL")
	_, err = approveByID(exec, id, "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED") // the executor role cannot approve

	first, err := approveByID(alice, id, "looks right", "mallory")
	if err != nil || first.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(first.GetVotes()) != 1 ||
		first.GetVotes()[0].GetApprover() != "alice" || !first.GetVotes()[0].GetVerified() || first.GetVotes()[0].GetSource() != "rpc" ||
		first.GetVotes()[0].GetReason() != "looks right" || first.GetVotes()[0].GetAt() == nil {
		t.Fatalf("alice's approval = %v, %v; want PENDING with alice's verified vote (not mallory)", first, err)
	}
	again, err := approveByID(alice, id, "again", "")
	if err != nil || again.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(again.GetVotes()) != 1 {
		t.Fatalf("alice again = %v, %v; want no error and one vote", again, err)
	}
	if s, err := w.Receive(), w.Err(); !s || err != nil || len(w.Msg().GetApproval().GetVotes()) != 1 {
		t.Fatalf("WatchApproval did not show the tally: %v %v", w.Msg(), err)
	}
	done, err := approveByID(bob, id, "ship it", "")
	if err != nil || done.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || done.GetApprover() != "alice, bob" ||
		done.GetReason() != "ship it" || len(done.GetVotes()) != 2 || done.GetDecidedBySource() != "rpc" {
		t.Fatalf("bob's approval = %v, %v; want APPROVED by \"alice, bob\"", done, err)
	}
	if last := lastApproval(t, w); last.GetApprover() != "alice, bob" || len(last.GetVotes()) != 2 {
		t.Fatalf("watch ended with %v", last)
	}
	got, err := carol.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil || len(got.GetApproval().GetVotes()) != 2 || got.GetApproval().GetVotes()[1].GetApprover() != "bob" {
		t.Fatalf("GetApproval = %v, %v; want both votes", got, err)
	}
	list, err := carol.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: "R-gates"})
	if err != nil || len(list.GetApprovals()) != 1 || len(list.GetApprovals()[0].GetVotes()) != 2 {
		t.Fatalf("ListApprovals = %v, %v; want the votes", list, err)
	}
	_, err = approveByID(bob, id, "", "")
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")

	// A reject by an allowed approver rejects at once, even with approvals still missing.
	startRun(t, exec, "R-reject")
	r, _ := gate(t, exec, "R-reject", time.Hour)
	if _, err := approveByID(alice, r.GetApprovalId(), "", ""); err != nil {
		t.Fatal(err)
	}
	rej, err := bob.apps.Reject(ctx, &rbookv1.RejectRequest{ApprovalId: r.GetApprovalId(), Reason: "not today"})
	if err != nil || rej.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED ||
		rej.GetApproval().GetApprover() != "bob" || rej.GetApproval().GetReason() != "not today" || len(rej.GetApproval().GetVotes()) != 2 {
		t.Fatalf("bob's reject = %v, %v; want REJECTED by bob", rej, err)
	}
	if strings.Contains(p.Stderr.String(), "token-0123456789") {
		t.Fatal("a bearer token reached the log")
	}
}

// Two distinct approvers voting at once on a 2-of-N gate: it ends APPROVED
// exactly once, with two votes.
func TestConcurrentApproversDecideOnce(t *testing.T) {
	p := startGates(t)
	exec := newClients(p.URL, withBearer("exec-token-0123456789"))
	voters := []clients{newClients(p.URL, withBearer("alice-token-0123456789")), newClients(p.URL, withBearer("bob-token-0123456789"))}
	for round := range 5 {
		run := "R-race-" + string(rune('a'+round))
		startRun(t, exec, run)
		a, _ := gate(t, exec, run, time.Hour)
		results := make([]*rbookv1.Approval, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range voters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = approveByID(voters[i], a.GetApprovalId(), "", "")
			}()
		}
		close(start)
		wg.Wait()
		approved, pending := 0, 0
		for i := range voters {
			if errs[i] != nil {
				t.Fatalf("round %d voter %d: %v", round, i, errs[i])
			}
			switch results[i].GetStatus() {
			case rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
				approved++
			case rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING:
				pending++
			}
		}
		final, err := exec.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
		if err != nil || approved != 1 || pending != 1 || final.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED ||
			len(final.GetApproval().GetVotes()) != 2 {
			t.Fatalf("round %d: approved %d, pending %d; final %v, %v", round, approved, pending, final, err)
		}
	}
}

// Without auth, deciding by approval id is refused (use the token, or an
// auth file), and a name the caller asserts is recorded as unverified.
func TestByIDNeedsAuthAndClaimsAreUnverified(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	ctx := context.Background()
	startRun(t, c, "R-noauth")
	a, tok := gate(t, c, "R-noauth", time.Hour)
	_, err := approveByID(c, a.GetApprovalId(), "", "alice")
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	if !strings.Contains(err.Error(), "token") || !strings.Contains(err.Error(), "--auth-file") {
		t.Fatalf("refusal does not say what to do instead: %v", err)
	}
	_, err = c.apps.Reject(ctx, &rbookv1.RejectRequest{ApprovalId: a.GetApprovalId()})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	res, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: "zed", Reason: "ok"})
	if err != nil || res.GetApproval().GetApprover() != "unverified:zed" || len(res.GetApproval().GetVotes()) != 1 ||
		res.GetApproval().GetVotes()[0].GetVerified() || res.GetApproval().GetVotes()[0].GetApprover() != "unverified:zed" {
		t.Fatalf("token approval with a claimed name = %v, %v; want approver unverified:zed, vote not verified", res, err)
	}
}

// A gate that timed out is refused by approval id with a "timed out" error.
func TestByIDAfterTheDeadlineSaysTimedOut(t *testing.T) {
	p := startGates(t)
	exec := newClients(p.URL, withBearer("exec-token-0123456789"))
	alice := newClients(p.URL, withBearer("alice-token-0123456789"))
	startRun(t, exec, "R-late")
	a, _ := gate(t, exec, "R-late", 1500*time.Millisecond)
	w, _ := watchApproval(t, exec, a.GetApprovalId())
	if last := lastApproval(t, w); last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || last.GetDecidedBySource() != "deadline" {
		t.Fatalf("gate at its deadline: %v", last)
	}
	_, err := approveByID(alice, a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("late approval by id: %v, want it to say the gate timed out", err)
	}
}

// Auth-file attributes after the token; old three-field lines stay valid;
// errors name file:line and never echo a token.
func TestAuthFileAttributes(t *testing.T) {
	a, err := server.ParseAuth(strings.NewReader("alice approver alice-token-0123456789 groups=sre,dba github=Alice-1\nbob approver bob-token-0123456789\n"), "auth")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := a.LookupCaller("alice-token-0123456789")
	if !ok || c.Identity != "alice" || strings.Join(c.Groups, ",") != "sre,dba" || c.GitHubLogin != "Alice-1" {
		t.Fatalf("alice = %+v", c)
	}
	if c, ok := a.LookupCaller("bob-token-0123456789"); !ok || c.Groups != nil || c.GitHubLogin != "" {
		t.Fatalf("bob = %+v", c)
	}
	for _, tc := range []struct{ line, want string }{
		{"alice approver alice-token-0123456789 team=x", "auth:2: alice: field 4 is not an attribute"},
		{"alice approver alice-token-0123456789 groups=a groups=b", "auth:2: alice: attribute groups= is given twice"},
		{"alice approver alice-token-0123456789 groups=a,,b", `auth:2: alice: groups=: "" is not a group name`},
		{"alice approver alice-token-0123456789 github=-bad", `auth:2: alice: github=: "-bad" is not a GitHub login`},
		{"alice approver groups=sre alice-token-0123456789", "auth:2: the token of \"alice\" is shorter"},
		{"alice approver alice-token-0123456789 other-secret-token-0123", "auth:2: alice: field 4 is not an attribute"},
	} {
		_, err := server.ParseAuth(strings.NewReader("# callers\n"+tc.line+"\n"), "auth")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.line, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "token-0123") {
			t.Errorf("%q: the error shows a token: %v", tc.line, err)
		}
	}
}
