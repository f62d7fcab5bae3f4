package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// votesAuth: an executor, four approvers of group sre, one outside it, a viewer.
const votesAuth = `ci-bot executor exec-token-0123456789
alice  approver alice-token-0123456789 groups=sre
bob    approver bob-token-0123456789   groups=sre
carol  approver carol-token-0123456789 groups=sre
dave   approver dave-token-0123456789  groups=sre
erin   approver erin-token-0123456789
vic    viewer   vic-token-0123456789
`

// votesPolicy: gate "approve" of "demo" needs 2 of group sre.
const votesPolicy = `rules:
  - runbook: demo
    gate: approve
    approvals: 2
    approvers: ["group:sre"]
`

// startVotesServe runs rbook serve with auth and policy text on db ("" for a new one).
func startVotesServe(t *testing.T, authText, policyText, db string) *serveProc {
	t.Helper()
	dir := t.TempDir()
	auth, policy := filepath.Join(dir, "auth"), filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(auth, []byte(authText), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--auth-file", auth, "--gate-policy", policy}
	if db != "" {
		return startServeDB(t, db, args...)
	}
	return startServe(t, args...)
}

func asWho(p *serveProc, who string) clients {
	return newClients(p.URL, withBearer(who+"-token-0123456789"))
}

func getApproval(t *testing.T, c clients, id string) *rbookv1.Approval {
	t.Helper()
	res, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetApproval()
}

// An approver who approved a 2-of-N gate and then rejects it
// rejects it (one vote per identity, the reject replaces the approve); it was E_INTERNAL.
func TestApproveThenRejectBySameIdentity(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec, alice := asWho(p, "exec"), asWho(p, "alice")
	startRun(t, exec, "R-ar")
	a, _ := gate(t, exec, "R-ar", time.Hour)
	if _, err := approveByID(alice, a.GetApprovalId(), "ok", ""); err != nil {
		t.Fatal(err)
	}
	res, err := alice.apps.Reject(context.Background(), &rbookv1.RejectRequest{ApprovalId: a.GetApprovalId(), Reason: "changed my mind"})
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || res.GetApproval().GetApprover() != "alice" ||
		len(res.GetApproval().GetVotes()) != 1 || res.GetApproval().GetVotes()[0].GetReason() != "changed my mind" {
		t.Fatalf("alice approves then rejects: %v, %v; want REJECTED by alice", res, err)
	}
}

// Four approvers, each from two connections, vote at once on
// a 3-of-4 gate: exactly one answer is APPROVED, the others PENDING or already decided, three
// votes are stored and the approver list is the votes in their stored order (it was not).
func TestConcurrentMofNVotesDecideOnce(t *testing.T) {
	p := startVotesServe(t, votesAuth, strings.Replace(votesPolicy, "approvals: 2", "approvals: 3", 1), "")
	exec := asWho(p, "exec")
	names := []string{"alice", "bob", "carol", "dave"}
	for round := range 4 {
		run := fmt.Sprintf("R-mn-%d", round)
		startRun(t, exec, run)
		a, _ := gate(t, exec, run, time.Hour)
		var wg sync.WaitGroup
		start := make(chan struct{})
		res := make([]*rbookv1.Approval, len(names)*2)
		errs := make([]error, len(names)*2)
		for i := range res {
			c := asWho(p, names[i%len(names)])
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i], errs[i] = approveByID(c, a.GetApprovalId(), "", "")
			}()
		}
		close(start)
		wg.Wait()
		approved := 0
		for i := range res {
			if errs[i] != nil {
				if rbookCode(errs[i]) != "E_APPROVAL_ALREADY_DECIDED" {
					t.Fatalf("voter %d: %v", i, errs[i])
				}
				continue
			}
			if res[i].GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
				approved++
			}
		}
		final := getApproval(t, exec, a.GetApprovalId())
		var voters []string
		for _, v := range final.GetVotes() {
			voters = append(voters, v.GetApprover())
		}
		if approved != 1 || final.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || len(voters) != 3 ||
			final.GetApprover() != strings.Join(voters, ", ") {
			t.Fatalf("round %d: %d APPROVED answers; final %s by %q, votes %v", round, approved, final.GetStatus(), final.GetApprover(), voters)
		}
	}
}

// An approve racing a reject, a RUN_INTERRUPTED
// (withdrawal) and a CancelRun: the approve succeeds exactly when the gate ends APPROVED.
func TestApproveRacesRejectAndInterruptAndCancel(t *testing.T) {
	p := startVotesServe(t, votesAuth, strings.Replace(votesPolicy, "approvals: 2", "approvals: 1", 1), "")
	exec, alice, bob := asWho(p, "exec"), asWho(p, "alice"), asWho(p, "bob")
	ctx := context.Background()
	for round := range 9 {
		run := fmt.Sprintf("R-rr-%d", round)
		startRun(t, exec, run)
		a, _ := gate(t, exec, run, time.Hour)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var appErr, otherErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, appErr = approveByID(alice, a.GetApprovalId(), "", "")
		}()
		go func() {
			defer wg.Done()
			<-start
			switch round % 3 {
			case 0:
				_, otherErr = bob.apps.Reject(ctx, &rbookv1.RejectRequest{ApprovalId: a.GetApprovalId()})
			case 1:
				tr := &rbookv1.Transition{RunId: run, Seq: 1, Time: timestamppb.Now(), Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED,
					RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING, StepIndex: 1, StepName: "approve", StepType: "confirm", Message: "SIGTERM"}
				_, otherErr = exec.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: tr, OwnerId: testOwner, Epoch: 1})
			case 2:
				_, otherErr = bob.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: run})
			}
		}()
		close(start)
		wg.Wait()
		final := getApproval(t, exec, a.GetApprovalId())
		approved := final.GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
		if (appErr == nil) != approved {
			t.Fatalf("round %d: approve err %v but the gate is %s (%s)", round, appErr, final.GetStatus(), final.GetDecidedBySource())
		}
		if round%3 == 0 && (otherErr == nil) == approved {
			t.Fatalf("round %d: reject err %v, gate %s", round, otherErr, final.GetStatus())
		}
		if round%3 != 0 && otherErr != nil {
			t.Fatalf("round %d: %v", round, otherErr)
		}
		if !approved && final.GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			t.Fatalf("round %d: the gate is still pending", round)
		}
	}
}

// An approve arriving at the deadline's instant: either it decided before the deadline, or
// the gate is rejected as timed out and the approve was refused; never both, never pending.
func TestApproveRacesDeadline(t *testing.T) {
	p := startVotesServe(t, votesAuth, strings.Replace(votesPolicy, "approvals: 2", "approvals: 1", 1), "")
	exec, alice := asWho(p, "exec"), asWho(p, "alice")
	startRun(t, exec, "R-dl")
	a, _ := gate(t, exec, "R-dl", 1100*time.Millisecond)
	deadline := a.GetDeadline().AsTime()
	for time.Until(deadline) > 3*time.Millisecond {
		time.Sleep(time.Millisecond) // up to the deadline's instant: this test is about that edge
	}
	_, lastErr := approveByID(alice, a.GetApprovalId(), "", "")
	final := getApproval(t, exec, a.GetApprovalId())
	switch final.GetStatus() {
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		if lastErr != nil || !final.GetApprovedAt().AsTime().Before(deadline) {
			t.Fatalf("approved %v at %v, deadline %v", lastErr, final.GetApprovedAt().AsTime(), deadline)
		}
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED:
		if lastErr == nil || final.GetDecidedBySource() != "deadline" || !strings.HasPrefix(final.GetReason(), "timed out after ") {
			t.Fatalf("rejected %v: %v", lastErr, final)
		}
	default:
		t.Fatalf("gate %v after racing the deadline", final)
	}
}

// One identity approving from Connect and gRPC at once counts once.
func TestSameIdentityTwoConnections(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec := asWho(p, "exec")
	for round := range 5 {
		run := fmt.Sprintf("R-twice-%d", round)
		startRun(t, exec, run)
		a, _ := gate(t, exec, run, time.Hour)
		c1, c2 := asWho(p, "alice"), newClients(p.URL, withBearer("alice-token-0123456789"), connect.WithGRPC())
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i, c := range []clients{c1, c2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = approveByID(c, a.GetApprovalId(), "", "")
			}()
		}
		close(start)
		wg.Wait()
		final := getApproval(t, exec, a.GetApprovalId())
		if errs[0] != nil || errs[1] != nil || final.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(final.GetVotes()) != 1 {
			t.Fatalf("round %d: %v %v; final %v", round, errs[0], errs[1], final)
		}
	}
}

// Viewer, executor and a non-member are refused by id; a
// 1-of-2 gate that times out keeps its vote visible; its token and id are refused after.
func TestNonApproverRolesRefusedAndExpiredGateKeepsVotes(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec, alice, vic, erin := asWho(p, "exec"), asWho(p, "alice"), asWho(p, "vic"), asWho(p, "erin")
	startRun(t, exec, "R-roles")
	a, tok := gate(t, exec, "R-roles", 1500*time.Millisecond)
	_, err := approveByID(vic, a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	_, err = approveByID(exec, a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	_, err = approveByID(erin, a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	if _, err := approveByID(alice, a.GetApprovalId(), "first", ""); err != nil {
		t.Fatal(err)
	}
	w, _ := watchApproval(t, exec, a.GetApprovalId())
	last := lastApproval(t, w)
	final := getApproval(t, exec, a.GetApprovalId())
	if last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || len(final.GetVotes()) != 1 || final.GetVotes()[0].GetApprover() != "alice" ||
		!strings.HasPrefix(final.GetReason(), "timed out after ") {
		t.Fatalf("a 1-of-2 gate at its deadline: %v", final)
	}
	_, err = alice.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_TOKEN_EXPIRED")
	_, err = approveByID(asWho(p, "bob"), a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
}

// Approving a withdrawn gate says it was withdrawn;
// the resumed run's new gate has the policy applied again and no votes.
func TestWithdrawnGateThenResumedRunGetsAFreshGate(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec, alice := asWho(p, "exec"), asWho(p, "alice")
	ctx := context.Background()
	startRun(t, exec, "R-wd")
	a, _ := gate(t, exec, "R-wd", time.Hour)
	tr := &rbookv1.Transition{RunId: "R-wd", Seq: 1, Time: timestamppb.Now(), Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED,
		RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING, StepIndex: 1, StepName: "approve", StepType: "confirm", Message: "SIGTERM"}
	if _, err := exec.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: tr, OwnerId: testOwner, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := approveByID(alice, a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	if !strings.Contains(err.Error(), "withdrawn") {
		t.Fatalf("approve of a withdrawn gate: %v", err)
	}
	startRun(t, exec, "R-wd")
	b, _ := gate(t, exec, "R-wd", time.Hour)
	if b.GetApprovalId() == a.GetApprovalId() || b.GetApprovalsRequired() != 2 || len(b.GetVotes()) != 0 {
		t.Fatalf("resumed gate %v", b)
	}
}

// A policy edit (serve restarted on the same database) does
// not change an open gate: the captured 2-of-sre holds.
func TestPolicyEditDoesNotChangeAnOpenGate(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec := asWho(p, "exec")
	startRun(t, exec, "R-edit")
	a, _ := gate(t, exec, "R-edit", time.Hour)
	if err := p.stop(t); err != nil {
		t.Logf("stop: %v", err)
	}
	q := startVotesServe(t, votesAuth, "rules:\n  - approvals: 1\n    starter_may_approve: true\n", p.DB)
	_, err := approveByID(asWho(q, "erin"), a.GetApprovalId(), "", "")
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	got, err := approveByID(asWho(q, "alice"), a.GetApprovalId(), "", "")
	if err != nil || got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("after the policy edit: %v, %v; want the captured 2-of-sre", got, err)
	}
}

// Approval ids of wrong shape are NotFound or InvalidArgument;
// an over-long reason and reasons with ESC, CR/LF, BEL or bidi controls are refused and
// record nothing (they reached terminals and the runner's log raw).
func TestMalformedApprovalIDsAndReasonsRecordNothing(t *testing.T) {
	p := startVotesServe(t, votesAuth, votesPolicy, "")
	exec, alice := asWho(p, "exec"), asWho(p, "alice")
	for _, id := range []string{"x", "a-", "../../etc/passwd", "a-" + strings.Repeat("z", 26) + "\x00", strings.Repeat("a", 257), "a-%", "'; DROP TABLE x; --"} {
		_, err := approveByID(alice, id, "", "")
		if c := connect.CodeOf(err); c != connect.CodeNotFound && c != connect.CodeInvalidArgument {
			t.Errorf("id %q: %v", id, err)
		}
	}
	startRun(t, exec, "R-in")
	a, _ := gate(t, exec, "R-in", time.Hour)
	_, err := approveByID(alice, a.GetApprovalId(), strings.Repeat("r", 1025), "")
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	for _, reason := range []string{"ok\x1b[2J\x1b[31mpwned", "line1\r\nRUN COMPLETED", "bell\a", "bidi\u202e"} {
		_, err = approveByID(alice, a.GetApprovalId(), reason, "")
		wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	}
	if got := getApproval(t, exec, a.GetApprovalId()); len(got.GetVotes()) != 0 {
		t.Fatalf("a refused vote was recorded: %v", got)
	}
}

// An auth-file identity may not pass for an asserted name
// (unverified:), a GitHub login or group of the gate policy, an OIDC job, or the control
// plane's own names.
func TestAuthFileReservedIdentities(t *testing.T) {
	for _, line := range []string{
		"unverified:bob approver bob-token-0123456789",
		"github:octocat approver bob-token-0123456789",
		"group:sre approver bob-token-0123456789",
		"oidc:org/repo@refs/heads/main executor bob-token-0123456789",
		"system approver bob-token-0123456789",
	} {
		if _, err := server.ParseAuth(strings.NewReader(line+"\n"), "auth"); err == nil || !strings.HasPrefix(err.Error(), "auth:1: ") {
			t.Errorf("%q: err = %v, want auth:1: refused", line, err)
		}
	}
}

// startServeDB is startServe on an existing database (the last --db wins).
func startServeDB(t *testing.T, db string, extra ...string) *serveProc {
	t.Helper()
	p := startServe(t, append(extra, "--db", db)...)
	p.DB = db
	return p
}

// Two approver identities linked to one GitHub login (GitHub
// logins are case-insensitive) would let one person count twice toward M-of-N: refused. The
// same login on the person's executor line, or on a second token of the same identity, is fine.
func TestAuthFileOneLoginOneApprover(t *testing.T) {
	_, err := server.ParseAuth(strings.NewReader("alice approver alice-token-0123456789 github=octocat\n"+
		"al2 approver al2-token-0123456789 github=OctoCat\n"), "auth")
	if err == nil || !strings.HasPrefix(err.Error(), "auth:2: al2: github=OctoCat is also the login of approver \"alice\" on line 1") {
		t.Fatalf("err = %v", err)
	}
	if _, err := server.ParseAuth(strings.NewReader("alice approver alice-token-0123456789 github=octocat\n"+
		"alice approver alice-token2-0123456789 github=octocat\nci-bot executor exec-token-0123456789 github=Octocat\n"), "auth"); err != nil {
		t.Fatal(err)
	}
}

// Without an auth file, whoever holds a 2-of-N gate's token
// could approve twice under two asserted names ("unverified:x", "unverified:y") and open it
// alone. An unverified approval does not count toward M > 1 (E_UNAUTHENTICATED, nothing
// recorded); an unverified reject still rejects.
func TestUnverifiedNamesDoNotCountTowardM(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "gates.yaml")
	if err := os.WriteFile(policy, []byte(votesPolicy[:strings.Index(votesPolicy, "    approvers")]), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--gate-policy", policy)
	c := newClients(p.URL)
	ctx := context.Background()
	startRun(t, c, "R-unv")
	a, tok := gate(t, c, "R-unv", time.Hour)
	for _, name := range []string{"x", "y"} {
		_, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: name})
		wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	}
	if got := getApproval(t, c, a.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("after two unverified approvals: %v", got)
	}
	res, err := c.apps.Reject(ctx, &rbookv1.RejectRequest{Token: tok, Approver: "x"})
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED {
		t.Fatalf("unverified reject: %v, %v", res, err)
	}
}
