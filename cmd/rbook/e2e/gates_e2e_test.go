package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Bearer tokens of gatesAuthFile.
const (
	gatesExecToken    = "exec-token-0123456789"
	gatesStarterToken = "cibot-appr-token-0123456789" // ci-bot, the run's starter, as approver
	gatesAliceToken   = "alice-token-0123456789"
	gatesBobToken     = "bob-token-0123456789"
)

// gatesServe starts rbook serve with an auth file (groups, a GitHub link) and a gate policy:
// the demo's confirm gate needs two approvers of group sre or ci-bot, and the run's starter
// may not approve.
func gatesServe(t *testing.T, dir string) string {
	t.Helper()
	auth := filepath.Join(dir, "auth.txt")
	policy := filepath.Join(dir, "gates.yaml")
	os.WriteFile(auth, []byte("ci-bot executor "+gatesExecToken+"\nci-bot approver "+gatesStarterToken+
		"\nalice approver "+gatesAliceToken+" groups=sre github=alice-gh\nbob approver "+gatesBobToken+" groups=sre,dba\n"), 0o600)
	os.WriteFile(policy, []byte("rules:\n  - runbook: demo\n    gate: confirm-*\n    approvals: 2\n    approvers: [\"group:sre\", ci-bot]\n"), 0o600)
	return serveCP(t, dir, "--auth-file", auth, "--gate-policy", policy)
}

// runAs runs rbook to completion with RBOOK_TOKEN=token.
func runAs(t *testing.T, dir, token string, args ...string) (string, int) {
	t.Helper()
	return rbookIn(t, dir, []string{"RBOOK_TOKEN=" + token, "RBOOK_CONTROL_PLANE="}, args...)
}

var approvalIDLine = regexp.MustCompile(`\b(a-[a-z2-7]{26})\b`)

// approvalIDFrom waits for the run to name its open approval and returns the id.
func approvalIDFrom(t *testing.T, p *proc) string {
	t.Helper()
	p.waitFor(t, "Approval a-")
	m := approvalIDLine.FindAllStringSubmatch(p.output(), -1)
	if m == nil {
		t.Fatalf("no approval id in:\n%s", p.output())
	}
	return m[len(m)-1][1]
}

// End to end: a run waits at a 2-of-N gate; `rbook approve APPROVAL_ID` by
// alice leaves it waiting (1 of 2), the run's starter is refused (E_SELF_APPROVAL), bob's
// approval opens it and the run completes; GetApproval shows both votes and the decision names
// both approvers.
func TestTwoApproversOpenTheGateByID(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := gatesServe(t, dir)
	t.Setenv("RBOOK_TOKEN", gatesExecToken)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)

	out, code := runAs(t, dir, gatesAliceToken, "approve", id, "--control-plane", url, "--reason", "canary is green")
	if want := "approval " + id + ": 1 of 2 approvals (alice); waiting for 1 more"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("alice: exit %d\n%s\nwant %q", code, out, want)
	}
	out, code = runAs(t, dir, gatesAliceToken, "approve", id, "--control-plane", url)
	if code != 0 || !strings.Contains(out, "1 of 2 approvals (alice)") {
		t.Fatalf("alice again: exit %d\n%s (want it counted once)", code, out)
	}
	out, code = runAs(t, dir, gatesStarterToken, "approve", id, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_SELF_APPROVAL") || !strings.Contains(out, "ci-bot started run") {
		t.Fatalf("the run's starter: exit %d\n%s", code, out)
	}
	out, code = runAs(t, dir, gatesBobToken, "approve", id, "--control-plane", url, "--approver", "mallory")
	if code != 2 || !strings.Contains(out, "--approver is only for a control plane without auth") {
		t.Fatalf("--approver with a token: exit %d\n%s", code, out)
	}
	out, code = runAs(t, dir, gatesBobToken, "approve", id, "--control-plane", url, "--reason", "ship it")
	if code != 0 || !strings.Contains(out, "approved by alice, bob.") {
		t.Fatalf("bob: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}

	c := cpclient.New(url, gatesBobToken)
	got, err := c.Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	a := got.GetApproval()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || a.GetApprover() != "alice, bob" || a.GetApprovalsRequired() != 2 ||
		len(a.GetVotes()) != 2 || a.GetVotes()[0].GetApprover() != "alice" || a.GetVotes()[0].GetReason() != "canary is green" ||
		a.GetVotes()[1].GetApprover() != "bob" || !a.GetVotes()[1].GetVerified() || a.GetReason() != "ship it" {
		t.Fatalf("GetApproval = %v; want APPROVED by alice, bob with both votes", a)
	}
	resp, err := c.Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: readState(t, dir).RunID})
	if err != nil {
		t.Fatal(err)
	}
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	decided := decidedMessage(resp)
	if !strings.Contains(decided, "alice, bob") {
		t.Errorf("gate_decided message %q does not name both approvers", decided)
	}
	out, code = runAs(t, dir, gatesBobToken, "approvals", "--control-plane", url)
	if code != 0 || !regexp.MustCompile(id+`.*approved.*alice, bob\s+2/2`).MatchString(out) {
		t.Errorf("rbook approvals: exit %d\n%s\nwant the tally 2/2", code, out)
	}
}

// End to end: a gate nobody decides is closed by its deadline as REJECTED
// "timed out after 2s" (decided_by_source "deadline"), and the executor records the confirm
// step TIMED_OUT, its on_fail (rollback) applying, as docs/spec/runbooks.md ("confirm") says.
func TestTimedOutGateIsRejectedAndTheStepTimedOut(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	yaml := filepath.Join(dir, "runbooks", "demo.yaml")
	body := readFile(t, yaml)
	short := strings.Replace(body, "    on_fail: rollback\n    max_timeout_seconds: 300\n", "    on_fail: rollback\n    max_timeout_seconds: 2\n", 1)
	if short == body {
		t.Fatal("the demo's confirm gate timeout was not found")
	}
	os.WriteFile(yaml, []byte(short), 0o644)
	url := gatesServe(t, dir)
	t.Setenv("RBOOK_TOKEN", gatesExecToken)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)
	if code := p.wait(t); code != 1 {
		t.Fatalf("run exit %d, want 1 (the gate timed out and rolled back)\n%s", code, p.output())
	}
	if s := readState(t, dir); !strings.Contains(s.steps(), "confirm-rollout=TIMED_OUT") || !strings.Contains(s.steps(), "rollback-app-config=PASS") {
		t.Fatalf("steps %q: want the gate TIMED_OUT and the rollback run", s.steps())
	}
	got, err := cpclient.New(url, gatesAliceToken).Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	// The reason is the deadline minus requested_at, rounded up to whole seconds: the deadline
	// is kept to the second, so the 2 s gate reads 2s unless it opened within the last
	// milliseconds of a second (then 1s).
	a := got.GetApproval()
	open := a.GetDeadline().AsTime().Sub(a.GetRequestedAt().AsTime())
	want := "timed out after 2s"
	if open <= time.Second {
		want = "timed out after 1s"
	}
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || a.GetReason() != want ||
		a.GetDecidedBySource() != "deadline" || a.GetApprover() != "system" {
		t.Fatalf("the timed-out gate: %v; want REJECTED, %q, by the deadline", a, want)
	}
	out, code := runAs(t, dir, gatesAliceToken, "approve", id, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "timed out") {
		t.Fatalf("approve after the deadline: exit %d\n%s", code, out)
	}
}
