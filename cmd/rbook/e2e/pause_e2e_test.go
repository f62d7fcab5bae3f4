package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/internal/cpview"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"google.golang.org/protobuf/proto"
)

// Bearer tokens of pauseServe's auth file.
const (
	pauseExecToken  = "pause-exec-token-0123456789"
	pauseAliceToken = "pause-alice-token-0123456789"
)

// pauseServe starts rbook serve with an auth file: ci-bot executes, alice approves.
func pauseServe(t *testing.T, dir string) string {
	t.Helper()
	auth := filepath.Join(dir, "auth.txt")
	os.WriteFile(auth, []byte("ci-bot executor "+pauseExecToken+"\nalice approver "+pauseAliceToken+"\n"), 0o600)
	return serveCP(t, dir, "--auth-file", auth)
}

// runnerEnv is a simulated GitHub Actions runner for one job: its GITHUB_OUTPUT file and the
// variables the executor reports its workflow run from.
func runnerEnv(t *testing.T, dir, attempt string) (env []string, outputs string) {
	t.Helper()
	outputs = filepath.Join(dir, "github_output")
	summary := filepath.Join(dir, "github_summary")
	os.WriteFile(outputs, nil, 0o644)
	os.WriteFile(summary, nil, 0o644)
	return []string{"GITHUB_ACTIONS=true", "GITHUB_OUTPUT=" + outputs, "GITHUB_STEP_SUMMARY=" + summary, "GITHUB_WORKSPACE=" + dir,
		"GITHUB_REPOSITORY=octo/app", "GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=" + attempt, "GITHUB_ACTOR=octocat",
		"GITHUB_SHA=0123456789abcdef0123456789abcdef01234567", "RBOOK_TOKEN=" + pauseExecToken, "RBOOK_CONTROL_PLANE="}, outputs
}

// rbookIn runs rbook in dir with extra environment and returns its output and exit code.
func rbookIn(t *testing.T, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(rbookBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return combinedExit(t, cmd)
}

// combinedExit runs cmd to completion and returns its combined output and exit code; a
// command that cannot start fails the test.
func combinedExit(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// pauseAtGate runs the demo in pause mode in a fresh folder A as a runner job and returns
// folder A, the run id and the approval id once the executor ended.
func pauseAtGate(t *testing.T, url string) (dirA, runID, approvalID string) {
	t.Helper()
	dirA = workdir(t)
	env, outputs := runnerEnv(t, dirA, "1")
	out, code := rbookIn(t, dirA, env, "run", "demo", "--control-plane", url, "--gate-mode", "pause", "--github-environment", "production")
	if code != 0 {
		t.Fatalf("pause-mode run: exit %d, want 0 (paused at the gate)\n%s", code, out)
	}
	outs := parseOutputs(t, readFile(t, outputs))
	if outs["paused"] != "true" || outs["status"] != "IN_PROGRESS" || !cpview.IsApprovalID(outs["approval-id"]) || outs["run-id"] == "" {
		t.Fatalf("outputs %v: want paused=true, status IN_PROGRESS, an approval-id and the run-id\n%s", outs, out)
	}
	if !strings.Contains(out, "paused at gate 'confirm-rollout'") || !strings.Contains(out, "rbook resume demo --run-id "+outs["run-id"]) {
		t.Fatalf("the paused run does not say how to continue:\n%s", out)
	}
	st := readState(t, dirA)
	if st.RunStatus != "IN_PROGRESS" || strings.Contains(st.steps(), "confirm-rollout") || !strings.Contains(st.steps(), "rollback-app-config=SKIPPED") {
		t.Fatalf("folder A's state after the pause: %s %q", st.RunStatus, st.steps())
	}
	return dirA, outs["run-id"], outs["approval-id"]
}

// End to end: an executor in pause mode (folder A, a simulated runner) stops
// at the demo's gate with exit 0 and the outputs paused=true and approval-id; alice approves
// by approval id; `rbook resume demo` in an empty folder B (no state file, another runner
// job) rebuilds the state, takes the run over at the next epoch and completes it. The control
// plane holds one run, every step finished once, the gate decided by alice; the state B
// rebuilt equals folder A's state file but for the executor instance's own fields; the paused
// executor can never write again (E_LEASE_LOST), and folder A's state file, asked with
// `rbook status`, takes the control plane's final record.
func TestPauseThenResumeInAnEmptyFolder(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	dirA, runID, id := pauseAtGate(t, url)
	c := cpclient.New(url, pauseAliceToken)
	ctx := context.Background()

	// The control plane holds every transition up to the gate and the gate's workflow run.
	got, err := c.Approvals.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	wantGH := &rbookv1.GitHubWorkflowRun{Repository: "octo/app", RunId: "4242", RunAttempt: "1", Actor: "octocat",
		Sha: "0123456789abcdef0123456789abcdef01234567", Environment: "production"}
	if a := got.GetApproval(); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetStepName() != "confirm-rollout" ||
		!proto.Equal(a.GetGithub(), wantGH) {
		t.Fatalf("the paused gate's approval: %v; want PENDING at confirm-rollout with github %v", a, wantGH)
	}
	paused := getRunAs(t, url, runID)
	if r := paused.GetRun(); r.GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED || r.GetLease().GetExpiresAt().AsTime().After(time.Now()) ||
		r.GetReportedWorkflowRun().GetRunId() != "4242" || r.GetReportedWorkflowRun().GetRepository() != "octo/app" {
		t.Fatalf("the paused run: %v; want PAUSED, its lease released, the reported workflow run 4242", r)
	}

	// The state a resume rebuilds equals folder A's file but for the executor's own fields.
	plan, err := runbook.Load(runbook.LoadOptions{Dir: filepath.Join(dirA, "runbooks"), Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	aPath := filepath.Join(dirA, ".rbook", "demo.state.json")
	aState, err := state.Read(aPath)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := pipeline.RebuildState(plan, aPath, paused.GetRun(), paused.GetTransitions(), aState.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt.OwnerID == aState.OwnerID || rebuilt.OwnerID == "" {
		t.Errorf("rebuilt owner id %q: want a fresh one (the paused executor's is %q)", rebuilt.OwnerID, aState.OwnerID)
	}
	if aState.LeaseEpoch != 1 || len(aState.Outbox) != 0 {
		t.Errorf("folder A: lease_epoch %d, outbox %d; want 1 and empty (drained before the pause)", aState.LeaseEpoch, len(aState.Outbox))
	}
	// Documented differences: owner_id (a new executor instance) and lease_epoch (StartRun sets it).
	rebuilt.OwnerID, rebuilt.LeaseEpoch = aState.OwnerID, aState.LeaseEpoch
	// Compared as the file would hold them (a State read from a file also remembers it was).
	if a, b := mustJSON(t, aState), mustJSON(t, rebuilt); a != b {
		t.Fatalf("rebuilt state differs from folder A's:\nA:\n%s\nrebuilt:\n%s", a, b)
	}
	if rebuilt.AwaitingConfirmation == nil || rebuilt.AwaitingConfirmation.StepName != "confirm-rollout" {
		t.Fatalf("rebuilt awaiting_confirmation %v", rebuilt.AwaitingConfirmation)
	}

	out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "canary green")
	if code != 0 {
		t.Fatalf("alice approves: exit %d\n%s", code, out)
	}

	dirB := workdir(t) // the runbooks only: no .rbook, no state file
	if _, err := os.Stat(filepath.Join(dirB, ".rbook")); !os.IsNotExist(err) {
		t.Fatalf("folder B is not empty of state: %v", err)
	}
	envB, outputsB := runnerEnv(t, dirB, "2")
	out, code = rbookIn(t, dirB, envB, "resume", "demo", "--control-plane", url)
	if code != 0 {
		t.Fatalf("rbook resume in folder B: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "Gate 'confirm-rollout' of run "+runID+" was approved by alice") || !strings.Contains(out, "Rebuilt the state file") {
		t.Errorf("resume output does not say what it found:\n%s", out)
	}
	if st := readState(t, dirB); st.RunID != runID || st.RunStatus != "COMPLETED" || st.steps() != demoPass {
		t.Fatalf("folder B: run %s %s %q; want %s COMPLETED %q", st.RunID, st.RunStatus, st.steps(), runID, demoPass)
	}
	if outs := parseOutputs(t, readFile(t, outputsB)); outs["status"] != "COMPLETED" || outs["approval-id"] != id || outs["approved-by"] != "alice" {
		t.Errorf("resume outputs %v", outs)
	}

	resp := getRunAs(t, url, runID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	finished := map[int32]int{}
	var decided string
	for _, tr := range resp.GetTransitions() {
		switch tr.GetKind() {
		case rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED:
			finished[tr.GetStepIndex()]++
		case rbookv1.TransitionKind_TRANSITION_KIND_GATE_DECIDED:
			decided = tr.GetMessage()
		}
	}
	for i := range int32(len(plan.Steps)) {
		if finished[i] != 1 {
			t.Errorf("step %d finished %d times on the control plane, want once (%v)", i, finished[i], finished)
		}
	}
	if !strings.Contains(decided, "approved by alice") || !strings.Contains(decided, "canary green") {
		t.Errorf("gate_decided %q: want approved by alice with the reason", decided)
	}
	if e := resp.GetRun().GetLease().GetEpoch(); e != 2 {
		t.Errorf("lease epoch after the resume %d, want 2 (the paused executor's 1, plus one)", e)
	}
	all, err := c.Runs.ListRuns(ctx, &rbookv1.ListRunsRequest{Name: "demo"})
	if err != nil || len(all.GetRuns()) != 1 {
		t.Fatalf("ListRuns: %v, %d runs; want one", err, len(all.GetRuns()))
	}

	// The paused executor can never write again: its epoch is fenced off...
	_, err = cpclient.New(url, pauseExecToken).Runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{
		OwnerId: aState.OwnerID, Epoch: aState.LeaseEpoch,
		Transition: &rbookv1.Transition{RunId: runID, Seq: resp.GetRun().GetLastSeq() + 1, Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED,
			Time: resp.GetRun().GetUpdatedAt(), StepIndex: -1, RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING},
	})
	if code := cpclient.Code(err); code != "E_LEASE_LOST" {
		t.Errorf("the paused executor's write: %v; want E_LEASE_LOST", err)
	}
	// ...and folder A's copy, left IN_PROGRESS, takes the control plane's final record:
	// `rbook status` there says COMPLETED and suggests no cancel.
	envA, _ := runnerEnv(t, dirA, "3")
	out, code = rbookIn(t, dirA, envA, "status", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "COMPLETED (final)") || strings.Contains(strings.ToLower(out), "cancel") {
		t.Errorf("status in folder A after the run finished in B: exit %d\n%s", code, out)
	}
	if st := readState(t, dirA); st.RunStatus != "COMPLETED" || st.steps() != demoPass {
		t.Errorf("folder A's state: %s %q; want COMPLETED %q", st.RunStatus, st.steps(), demoPass)
	}
}

// getRunAs is getRun with alice's token (pauseServe needs auth).
func getRunAs(t *testing.T, url, runID string) *rbookv1.GetRunResponse {
	t.Helper()
	resp, err := cpclient.New(url, pauseAliceToken).Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A resume while the gate is still pending says so, exits 2 and changes
// nothing (no transition, the lease untouched, no state file written).
func TestResumeWhilePendingChangesNothing(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	_, runID, id := pauseAtGate(t, url)
	before := getRunAs(t, url, runID)
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	out, code := rbookIn(t, dirB, envB, "resume", "demo", "--run-id", runID, "--control-plane", url)
	if code != 2 || !strings.Contains(out, "still pending (approval "+id+")") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("resume while pending: exit %d\n%s", code, out)
	}
	after := getRunAs(t, url, runID)
	if after.GetRun().GetLastSeq() != before.GetRun().GetLastSeq() || after.GetRun().GetLease().GetEpoch() != before.GetRun().GetLease().GetEpoch() {
		t.Fatalf("the control plane changed: seq %d -> %d, epoch %d -> %d", before.GetRun().GetLastSeq(), after.GetRun().GetLastSeq(),
			before.GetRun().GetLease().GetEpoch(), after.GetRun().GetLease().GetEpoch())
	}
	if _, err := os.Stat(filepath.Join(dirB, ".rbook", "demo.state.json")); !os.IsNotExist(err) {
		t.Fatalf("a state file was written in folder B: %v", err)
	}
}

// The reject twin leaves the run FAILED or the gate's on_fail applied, with the reviewer's
// comment recorded: after a rejection, resume says the
// gate was rejected and does not continue past it: the gate is recorded FAIL with the
// reason, its on_fail (rollback) runs, the run ends FAILED and resume exits 1.
func TestResumeAfterRejectAppliesOnFail(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	_, runID, id := pauseAtGate(t, url)
	out, code := runAs(t, cpDir, pauseAliceToken, "reject", id, "--control-plane", url, "--reason", "error budget spent")
	if code != 0 {
		t.Fatalf("alice rejects: exit %d\n%s", code, out)
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	out, code = rbookIn(t, dirB, envB, "resume", "demo", "--control-plane", url)
	if code != 1 || !strings.Contains(out, "was rejected by alice") || !strings.Contains(out, "error budget spent") {
		t.Fatalf("resume after reject: exit %d, want 1\n%s", code, out)
	}
	st := readState(t, dirB)
	if st.RunStatus != "FAILED" || !strings.Contains(st.steps(), "confirm-rollout=FAIL") || !strings.Contains(st.steps(), "rollback-app-config=PASS") {
		t.Fatalf("folder B after the rejection: %s %q", st.RunStatus, st.steps())
	}
	if strings.Contains(st.steps(), "app-running-after-rollout") {
		t.Fatalf("the run continued past the rejected gate: %q", st.steps())
	}
	resp := getRunAs(t, url, runID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_FAILED)
	var gate string
	for _, tr := range resp.GetTransitions() {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED && tr.GetStepName() == "confirm-rollout" {
			gate = tr.GetEvidence().GetOutput()
		}
	}
	if !strings.Contains(gate, "rejected by alice") || !strings.Contains(gate, "error budget spent") {
		t.Fatalf("the gate's evidence output %q: want the reviewer and the comment", gate)
	}
}

// Pause mode without a control plane that outlives the job is refused
// before anything runs.
func TestPauseNeedsAControlPlane(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	for _, args := range [][]string{
		{"run", "demo", "--gate-mode", "pause", "--control-plane", "off"},
		{"run", "demo", "--gate-mode", "pause"},
		{"run", "demo", "--gate-mode", "later"},
	} {
		out, code := rbookIn(t, dir, nil, args...)
		if code != 2 || !strings.Contains(out, "gate") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json")); !os.IsNotExist(err) {
			t.Fatalf("%v wrote a state file", args)
		}
	}
	out, _ := rbookIn(t, dir, []string{"RBOOK_GATE_MODE=pause"}, "run", "demo", "--control-plane", "off")
	if !strings.Contains(out, "--gate-mode pause needs a control plane, but --control-plane is off") {
		t.Errorf("RBOOK_GATE_MODE=pause with --control-plane off:\n%s", out)
	}
}

// `rbook resume` in the folder that still holds the paused run's state file
// resumes with that file (no rebuild), and a --run-id that is not that file's run is refused
// with what to do.
func TestResumeInThePausedFolderUsesItsStateFile(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	dirA, runID, id := pauseAtGate(t, url)
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	env, _ := runnerEnv(t, dirA, "2")
	out, code := rbookIn(t, dirA, env, "resume", "demo", "--run-id", runID+".2", "--control-plane", url)
	if code != 2 || !strings.Contains(out, "holds the unfinished run "+runID+", not "+runID+".2: move it away") {
		t.Fatalf("resume of another run id: exit %d\n%s", code, out)
	}
	out, code = rbookIn(t, dirA, env, "resume", "demo", "--control-plane", url)
	if code != 0 || strings.Contains(out, "Rebuilt the state file") || !strings.Contains(out, "RESUMING run "+runID) {
		t.Fatalf("resume in folder A: exit %d\n%s", code, out)
	}
	if st := readState(t, dirA); st.RunStatus != "COMPLETED" || st.steps() != demoPass {
		t.Fatalf("folder A: %s %q", st.RunStatus, st.steps())
	}
	resp := getRunAs(t, url, runID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if e := resp.GetRun().GetLease().GetEpoch(); e != 2 {
		t.Errorf("lease epoch %d, want 2", e)
	}
}

// mustJSON is v as indented JSON, as a state file holds it.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
