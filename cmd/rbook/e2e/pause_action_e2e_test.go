//go:build unix

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/cpview"
)

// actionJob runs one of the Action's entry points (main.js, post.js) as a runner step: node
// in dir with env; it returns the step's log and exit code.
func actionJob(t *testing.T, node, entry, dir string, env []string) (string, int) {
	t.Helper()
	cmd := exec.Command(node, entry)
	cmd.Dir, cmd.Env = dir, env
	return combinedExit(t, cmd)
}

// Through the Action as examples/workflows/rbook-pause.yml uses it:
// job 1 (node main.js, gate-mode pause, environment production) runs the demo against
// `rbook serve` with an auth file and ends at the gate with exit 0 and the outputs
// paused=true, approval-id and run-id (GitHub's file-command grammar); job 1's post step
// (post.js, post-if: always()) leaves the paused gate PENDING and records no interruption;
// alice approves by approval id; job 2 (node main.js, verb resume, run-id from job 1's
// output) on a fresh runner (its own RUNNER_TEMP, tool cache and file commands) in a
// workspace with the runbooks only completes the same run: the control plane holds one run
// with every step finished once and one run_finished.
func TestPauseAcrossTwoJobsThroughTheAction(t *testing.T) {
	skipShort(t)
	node := nodeBin(t)
	fr := newFakeRelease(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	workflowRun := []string{"GITHUB_REPOSITORY=octo/app", "GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=1", "GITHUB_ACTOR=octocat",
		"GITHUB_SHA=0123456789abcdef0123456789abcdef01234567"}
	inputs := []string{"INPUT_RUNBOOK=demo", "INPUT_DIR=runbooks", "INPUT_CONTROL-PLANE=" + url, "INPUT_CONTROL-PLANE-TOKEN=" + pauseExecToken}

	// Job 1: the run pauses at the gate.
	dirA := workdir(t)
	envA := append(fr.env(append(inputs, "INPUT_GATE-MODE=pause", "INPUT_ENVIRONMENT=production")...), workflowRun...)
	envA = append(envA, "GITHUB_WORKSPACE="+dirA)
	log, code := actionJob(t, node, fr.entry("main.js"), dirA, envA)
	if code != 0 {
		t.Fatalf("job 1 main.js (gate-mode pause): exit %d, want 0 (paused at the gate)\n%s", code, log)
	}
	outsA := parseOutputs(t, readFile(t, fr.path("github_output")))
	runID, id := outsA["run-id"], outsA["approval-id"]
	if outsA["paused"] != "true" || outsA["status"] != "IN_PROGRESS" || !cpview.IsApprovalID(id) || !strings.HasPrefix(runID, "RBOOK-") {
		t.Fatalf("job 1 outputs %v: want paused=true, status IN_PROGRESS, an approval-id and the run-id\n%s", outsA, log)
	}
	if !strings.Contains(log, "paused at gate 'confirm-rollout'") || strings.Contains(log, pauseExecToken) {
		t.Fatalf("job 1's log does not say it paused, or shows the executor token:\n%s", log)
	}
	c := cpclient.New(url, pauseAliceToken)
	ctx := context.Background()
	pending := func(when string) {
		t.Helper()
		got, err := c.Approvals.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: id})
		if err != nil {
			t.Fatal(err)
		}
		if a := got.GetApproval(); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetStepName() != "confirm-rollout" ||
			a.GetGithub().GetEnvironment() != "production" || a.GetGithub().GetRunId() != "4242" {
			t.Fatalf("%s: approval %v; want PENDING at confirm-rollout, bound to environment production of workflow run 4242", when, a)
		}
		resp := getRunAs(t, url, runID)
		if ts := resp.GetTransitions(); ts[len(ts)-1].GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED ||
			resp.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED {
			t.Fatalf("%s: run %s is %s, last transition %s; want PAUSED at gate_opened", when, runID, resp.GetRun().GetStatus(), ts[len(ts)-1].GetKind())
		}
	}
	pending("after job 1's main step")

	// Job 1's post step (post-if: always()) must leave the paused gate open.
	postLog, code := actionJob(t, node, fr.entry("post.js"), dirA, fr.postEnv(t, envA))
	if code != 0 {
		t.Fatalf("job 1 post.js: exit %d\n%s", code, postLog)
	}
	if !strings.Contains(postLog, "run "+runID+" is paused at gate 'confirm-rollout'") || strings.Contains(postLog, "Withdrawn approval") {
		t.Fatalf("job 1 post.js does not leave the paused run alone:\n%s", postLog)
	}
	pending("after job 1's post step")

	out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "canary green")
	if code != 0 {
		t.Fatalf("alice approves: exit %d\n%s", code, out)
	}

	// Job 2: another runner (its own temp, tool cache and file commands), a workspace with the
	// runbooks only (actions/checkout), verb resume with job 1's run-id output.
	runner2 := t.TempDir()
	dirB := workdir(t)
	if _, err := os.Stat(filepath.Join(dirB, ".rbook")); !os.IsNotExist(err) {
		t.Fatalf("job 2's workspace holds state: %v", err)
	}
	envB := append(fr.env(append(inputs, "INPUT_VERB=resume", "INPUT_RUN-ID="+runID, "INPUT_ENVIRONMENT=production")...), workflowRun...)
	envB = append(envB, "GITHUB_RUN_ATTEMPT=1", "GITHUB_WORKSPACE="+dirB, "RUNNER_TEMP="+runner2,
		"RUNNER_TOOL_CACHE="+filepath.Join(runner2, "toolcache"), "GITHUB_OUTPUT="+filepath.Join(runner2, "github_output"),
		"GITHUB_STATE="+filepath.Join(runner2, "github_state"), "GITHUB_STEP_SUMMARY="+filepath.Join(runner2, "summary.md"))
	log, code = actionJob(t, node, fr.entry("main.js"), dirB, envB)
	if code != 0 {
		t.Fatalf("job 2 main.js (verb resume): exit %d\n%s", code, log)
	}
	if !strings.Contains(log, "Gate 'confirm-rollout' of run "+runID+" was approved by alice") || !strings.Contains(log, "downloaded and verified (SHA-256 ") {
		t.Errorf("job 2's log does not say it installed rbook and found the gate approved:\n%s", log)
	}
	outsB := parseOutputs(t, readFile(t, filepath.Join(runner2, "github_output")))
	if outsB["run-id"] != runID || outsB["status"] != "COMPLETED" || outsB["approval-id"] != id || outsB["approved-by"] != "alice" || outsB["paused"] != "" {
		t.Fatalf("job 2 outputs %v: want run %s COMPLETED, approval %s approved by alice, not paused", outsB, runID, id)
	}
	if st := readState(t, dirB); st.RunID != runID || st.RunStatus != "COMPLETED" || st.steps() != demoPass {
		t.Fatalf("job 2's state: run %s %s %q; want %s COMPLETED %q", st.RunID, st.RunStatus, st.steps(), runID, demoPass)
	}

	resp := getRunAs(t, url, runID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	finished := map[int32]int{}
	for _, tr := range resp.GetTransitions() {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED {
			finished[tr.GetStepIndex()]++
		}
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED {
			t.Errorf("transition %d is run_interrupted (%q): nothing interrupted the paused run", tr.GetSeq(), tr.GetMessage())
		}
	}
	if steps := len(strings.Fields(demoPass)); len(finished) != steps {
		t.Errorf("steps finished on the control plane %v, want each of the %d steps", finished, steps)
	}
	for i, n := range finished {
		if n != 1 {
			t.Errorf("step %d finished %d times on the control plane, want once", i, n)
		}
	}
	all, err := c.Runs.ListRuns(ctx, &rbookv1.ListRunsRequest{Name: "demo"})
	if err != nil || len(all.GetRuns()) != 1 {
		t.Fatalf("ListRuns: %v, %d runs; want one", err, len(all.GetRuns()))
	}
}

// `rbook github post` (the Action's post step) after a pause-mode job
// whose gate an approver decided before the post step ran leaves the run alone too (it says
// the approval is approved and records no interruption), so `rbook resume` in an empty folder
// still finds the run paused at the gate and completes it. The same post without the pause
// gate mode (a wait-mode job's post step) would record the interruption: the gate mode is
// what tells a paused run from one whose job died at the gate.
func TestGitHubPostLeavesAPausedRunAloneAfterAQuickApproval(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	dirA, runID, id := pauseAtGate(t, url)
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "quick"); code != 0 {
		t.Fatalf("alice approves: exit %d\n%s", code, out)
	}
	env, _ := runnerEnv(t, dirA, "1")
	out, code := rbookIn(t, dirA, append(env, "RBOOK_GATE_MODE=pause"), "github", "post", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "run "+runID+" is paused at gate 'confirm-rollout' (gate-mode pause); nothing withdrawn: approval "+id+" (approved)") {
		t.Fatalf("rbook github post after a quick approval: exit %d\n%s", code, out)
	}
	if ts := getRunAs(t, url, runID).GetTransitions(); ts[len(ts)-1].GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED {
		t.Fatalf("post changed the paused run: last transition %s", ts[len(ts)-1].GetKind())
	}
	if st := readState(t, dirA); st.Interrupted != nil {
		t.Fatalf("post recorded an interruption in folder A's state: %+v", st.Interrupted)
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	if out, code := rbookIn(t, dirB, envB, "resume", "demo", "--run-id", runID, "--control-plane", url); code != 0 {
		t.Fatalf("rbook resume after the post: exit %d\n%s", code, out)
	}
	checkTransitions(t, getRunAs(t, url, runID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}
