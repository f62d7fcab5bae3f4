//go:build unix

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	pipeline "github.com/rbookhq/rbook-action/action/run"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// approvalsOf lists every approval of runID on the control plane at url, newest first.
func approvalsOf(t *testing.T, url, runID string) []*rbookv1.Approval {
	t.Helper()
	resp, err := cpclient.New(url, "").Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetApprovals()
}

// A run killed (kill -9) while its gate waits, as a job whose runner died:
// `rbook github post` delivers, records run_interrupted on the control plane, and the run's
// pending approval is withdrawn (CANCELLED, decided_by_source "interrupted"); its token is
// refused by `rbook approve` with the message that says why; post again is harmless; the
// resumed run opens the gate with a new approval and completes.
func TestGitHubPostWithdrawsTheApprovalsOfAKilledRun(t *testing.T) {
	skipShort(t)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	token := tokenFrom(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	s := readState(t, dir)
	pending := approvalsOf(t, url, s.RunID)
	if len(pending) != 1 || pending[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("before post: %v", pending)
	}
	id := pending[0].GetApprovalId()

	out, code := run(t, dir, "", "github", "post", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Withdrawn approval "+id+" (gate 'confirm-rollout' of run "+s.RunID+")\n") {
		t.Fatalf("rbook github post: exit %d\n%s", code, out)
	}
	if strings.Contains(out, token) {
		t.Fatalf("post printed the approval token:\n%s", out)
	}
	got, err := cpclient.New(url, "").Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.GetApproval(); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED || a.GetDecidedBySource() != "interrupted" {
		t.Fatalf("GetApproval after post: %v", a)
	}
	ts := getRun(t, url, s.RunID).GetTransitions()
	if last := ts[len(ts)-1]; last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED || last.GetStepName() != "confirm-rollout" ||
		last.GetMessage() != pipeline.PostInterruptedMessage {
		t.Fatalf("last transition on the control plane: %v", last)
	}
	if after := readState(t, dir); after.Interrupted == nil || after.Interrupted.Reason != pipeline.PostInterruptedMessage || len(after.Outbox) != 0 || after.Seq != int64(len(ts)) {
		t.Fatalf("state after post: interrupted %v, outbox %d, seq %d (control plane %d)", after.Interrupted, len(after.Outbox), after.Seq, len(ts))
	}

	out, code = run(t, dir, "", "approve", token, "--control-plane", url)
	want := "approval " + id + " was withdrawn: the job running run " + s.RunID + " was interrupted; resume the run to open the gate again"
	if code == 0 || !strings.Contains(out, want) {
		t.Fatalf("rbook approve of the withdrawn gate: exit %d, want %q:\n%s", code, want, out)
	}

	out, code = run(t, dir, "", "github", "post", "demo", "--control-plane", url)
	if code != 0 || strings.Contains(out, "Withdrawn approval") || !strings.Contains(out, "; 0 pending approval(s) withdrawn") {
		t.Fatalf("post again: exit %d\n%s", code, out)
	}
	if n := len(getRun(t, url, s.RunID).GetTransitions()); n != len(ts) {
		t.Fatalf("post again recorded %d more transitions", n-len(ts))
	}

	out, code = run(t, dir, "yes\n", "run", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "RESUMING run "+s.RunID) {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	all := approvalsOf(t, url, s.RunID)
	if len(all) != 2 || all[0].GetApprovalId() == id || all[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("after resume: %v", all)
	}
	out, code = run(t, dir, "", "github", "post", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "is COMPLETED; nothing to withdraw") {
		t.Fatalf("post after the final run: exit %d\n%s", code, out)
	}
}

// Post is harmless when the job never started a run (no state file) or
// never got a loadable runbook, and an unfinished run without a control plane is recorded
// interrupted in its state file.
func TestGitHubPostWithoutARun(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "", "github", "post", "demo")
	if code != 0 || !strings.Contains(out, "no run to finish: "+filepath.Join(".rbook", "demo.state.json")+" does not exist") {
		t.Fatalf("no state file: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json")); !os.IsNotExist(err) {
		t.Fatalf("post created a state file: %v", err)
	}
	out, code = run(t, dir, "", "github", "post", "nosuch")
	if code != 0 || !strings.Contains(out, "no run to finish: runbook nosuch could not be loaded") {
		t.Fatalf("no runbook: exit %d\n%s", code, out)
	}
	p := start(t, dir, "run", "demo", "--control-plane", "off")
	p.waitFor(t, "AWAITING_CONFIRMATION")
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	out, code = run(t, dir, "", "github", "post", "demo")
	if s := readState(t, dir); code != 0 || s.Interrupted == nil || s.Interrupted.Reason != pipeline.PostInterruptedMessage || s.RunStatus != "IN_PROGRESS" {
		t.Fatalf("off: exit %d, state %+v\n%s", code, s, out)
	}
}
