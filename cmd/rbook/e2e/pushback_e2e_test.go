//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// startPushBackRun starts testdata/push-back/ship.cantbook (build → test → review with
// rewind_targets [build], build's iteration_cap 2 → ship) against a fresh rbook serve and
// returns the control plane's URL, the run and its id.
func startPushBackRun(t *testing.T) (string, string, *proc, string) {
	t.Helper()
	dir := playbookWorkdir(t)
	src, err := os.ReadFile(filepath.Join("testdata", "push-back", "ship.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "ship.cantbook"), src)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "ship.cantbook", "--control-plane", url)
	nthApproveToken(t, p, 1)
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "push-back.playbook.state.json"))
	return dir, url, p, st.RunID
}

// nthApproveToken waits until the run printed its n-th "rbook playbook approve <token>" line
// (the n-th opening of a gate) and returns that token.
func nthApproveToken(t *testing.T, p *proc, n int) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if m := playbookApproveLine.FindAllStringSubmatch(p.output(), -1); len(m) >= n {
			return m[n-1][1]
		}
		select {
		case <-p.seen:
		case <-p.done:
			t.Fatalf("rbook exited %d before opening gate #%d:\n%s", p.code, n, p.output())
		case <-deadline:
			t.Fatalf("no gate #%d within 60s:\n%s", n, p.output())
		}
	}
}

// oldestFirst is run's approvals, oldest first (ListApprovals lists the newest first).
func oldestFirst(t *testing.T, url, run string) []*rbookv1.Approval {
	t.Helper()
	resp, err := cpclient.New(url, "").Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	out := resp.GetApprovals()
	slices.Reverse(out)
	return out
}

// A reviewer sends the playbook back to build with a comment (docs/push-back.md): a
// redo_from that is no rewind target is refused naming the field and decides nothing; the
// valid one re-runs build with the comment in its argv, and the gate opens again as a new
// approval, iteration 2, whose approval completes the run; the report shows the push-back.
func TestPushBackReRunsBuildWithTheCommentAndReopensTheGate(t *testing.T) {
	skipShort(t)
	dir, url, p, run := startPushBackRun(t)
	tok := nthApproveToken(t, p, 1)
	p.waitFor(t, "A reviewer may send the run back instead of rejecting it: rbook reject a-")
	if !strings.Contains(p.output(), "--redo-from build --reason") {
		t.Errorf("the waiting run does not say how to send it back:\n%s", p.output())
	}

	out, code := run2(t, dir, "reject", tok, "--redo-from", "ship", "--reason", "no", "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_INVALID_ARGUMENT") || !strings.Contains(out, `redo_from: "ship" is not a rewind target of gate "review"; the allowed targets are build`) {
		t.Fatalf("rbook reject --redo-from ship: exit %d\n%s\nwant a refusal naming redo_from and the allowed targets", code, out)
	}
	if aps := oldestFirst(t, url, run); len(aps) != 1 || aps[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(aps[0].GetVotes()) != 0 {
		t.Fatalf("after the refusal: %v; want one pending approval with no vote", aps)
	}

	out, code = run2(t, dir, "reject", tok, "--redo-from", "build", "--reason", "add the changelog entry", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Sent back to 'build' (iteration 1)") {
		t.Fatalf("rbook reject --redo-from build: exit %d\n%s", code, out)
	}
	tok2 := nthApproveToken(t, p, 2)
	aps := oldestFirst(t, url, run)
	if len(aps) != 2 || aps[0].GetRedoFrom() != "build" || aps[0].GetIteration() != 1 || aps[0].GetReason() != "add the changelog entry" ||
		aps[1].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || aps[1].GetIteration() != 2 ||
		aps[1].GetApprovalId() == aps[0].GetApprovalId() || !slices.Equal(aps[1].GetRewindTargets(), []string{"build"}) {
		t.Fatalf("approvals after the push-back: %v; want the rejected one (redo_from build, iteration 1) and a new pending one (iteration 2)", aps)
	}
	if out, code := run2(t, dir, "approve", tok2, "--control-plane", url); code != 0 {
		t.Fatalf("rbook approve (iteration 2): exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the approval\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "↩️ sent back to build (iteration 1) | ") || !strings.Contains(p.output(), " | add the changelog entry |") {
		t.Errorf("the report does not show the push-back:\n%s", p.output())
	}
	var builds [][]string
	var sentBack map[string]any
	for _, tr := range getRun(t, url, run).GetTransitions() {
		switch e := tr.GetEvidence(); e.GetStepName() {
		case "build":
			var argv []string
			if err := json.Unmarshal([]byte(e.GetInput()), &argv); err != nil {
				t.Fatalf("build's evidence input %q: %v", e.GetInput(), err)
			}
			builds = append(builds, argv)
		case "review":
			if sentBack == nil {
				if err := json.Unmarshal([]byte(e.GetOutput()), &sentBack); err != nil {
					t.Fatalf("review's evidence output %q: %v", e.GetOutput(), err)
				}
			}
		}
	}
	if len(builds) != 2 || !slices.Equal(builds[0], []string{"echo", "building", "feedback=", "from="}) ||
		!slices.Equal(builds[1], []string{"echo", "building", "feedback=add the changelog entry", "from=build"}) {
		t.Errorf("build's argv per run %q; want no feedback, then the comment and build", builds)
	}
	if sentBack["sent_back"] != true || sentBack["redo_from"] != "build" || sentBack["feedback"] != "add the changelog entry" ||
		sentBack["iteration"] != float64(1) || !strings.Contains(sentBack["by"].(string), "unverified:") {
		t.Errorf("review's first evidence output %v; want who, the comment, build and iteration 1", sentBack)
	}
}

// Sent back again and again, the run stops at build's iteration cap (2) with an error naming
// the node and the cap, instead of looping.
func TestPushBackLoopStopsAtTheIterationCapWithAClearError(t *testing.T) {
	skipShort(t)
	dir, url, p, _ := startPushBackRun(t)
	for n := 1; n <= 2; n++ {
		tok := nthApproveToken(t, p, n)
		if out, code := run2(t, dir, "reject", tok, "--redo-from", "build", "--reason", "still not right", "--control-plane", url); code != 0 {
			t.Fatalf("push-back #%d: exit %d\n%s", n, code, out)
		}
	}
	if code := p.wait(t); code == 0 {
		t.Fatalf("run exit 0 after a push-back past the cap\n%s", p.output())
	}
	if want := "approval 'review' sent the run back to 'build', but node 'build' reached its iteration cap of 2 runs"; !strings.Contains(p.output(), want) {
		t.Errorf("the run's output does not say %q:\n%s", want, p.output())
	}
}

// A run killed (kill -9) while its gate waits, then sent back on the control plane, finds the
// push-back when it is started again: it re-runs build with the comment and opens the gate's
// next iteration, whose approval completes the run.
func TestPushBackDecidedWhileTheRunWasDownIsCarriedOutOnResume(t *testing.T) {
	skipShort(t)
	dir, url, p, run := startPushBackRun(t)
	tok := nthApproveToken(t, p, 1)
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	if out, code := run2(t, dir, "reject", tok, "--redo-from", "build", "--reason", "rebuild please", "--control-plane", url); code != 0 {
		t.Fatalf("rbook reject --redo-from build while the run is down: exit %d\n%s", code, out)
	}
	p2 := start(t, dir, "playbook", "run", "ship.cantbook", "--control-plane", url)
	// The restarted run is handed the decided approval first (announced as it reopens), carries
	// out the push-back, and opens the next iteration: its second announcement.
	tok2 := nthApproveToken(t, p2, 2)
	aps := oldestFirst(t, url, run)
	if len(aps) != 2 || aps[0].GetRedoFrom() != "build" || aps[1].GetIteration() != 2 || aps[1].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("approvals after the resume: %v; want the push-back and a pending iteration 2\n%s", aps, p2.output())
	}
	if out, code := run2(t, dir, "approve", tok2, "--control-plane", url); code != 0 {
		t.Fatalf("rbook approve (iteration 2): exit %d\n%s", code, out)
	}
	if code := p2.wait(t); code != 0 {
		t.Fatalf("resumed run exit %d\n%s", code, p2.output())
	}
	var builds []string
	for _, tr := range getRun(t, url, run).GetTransitions() {
		if e := tr.GetEvidence(); e.GetStepName() == "build" {
			builds = append(builds, e.GetInput())
		}
	}
	if len(builds) != 2 || !strings.Contains(builds[1], "feedback=rebuild please") {
		t.Errorf("build's inputs %q; want a second run with the comment", builds)
	}
}
