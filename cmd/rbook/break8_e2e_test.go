package main

// Break session on issue 8: `rbook resume` against hostile targets and racing resumes.

import (
	"strings"
	"sync"
	"testing"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Two `rbook resume` of one approved paused run, at once, in two empty folders: exactly one
// takes the lease and completes the run; the other exits non-zero without writing a step;
// every step finished once on the control plane. A resume naming the run under another
// runbook, or of a run that already ended, is refused and changes nothing.
func TestIssue8_Break_ConcurrentResumesOneLease(t *testing.T) {
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	_, runID, id := pauseAtGate(t, url)
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "go"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	dirX := workdir(t)
	envX, _ := runnerEnv(t, dirX, "2")
	out, code := rbookIn(t, dirX, envX, "resume", "ci-demo", "--run-id", runID, "--control-plane", url)
	if code != 2 || !strings.Contains(out, "is of runbook \"demo\", not \"ci-demo\"") {
		t.Fatalf("resume under another runbook: exit %d, want 2 naming both runbooks\n%s", code, out)
	}
	before := getRunAs(t, url, runID).GetRun().GetLastSeq()

	type result struct {
		out  string
		code int
	}
	res := make([]result, 2)
	var wg sync.WaitGroup
	for i := range res {
		dir := workdir(t)
		env, _ := runnerEnv(t, dir, "2")
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].out, res[i].code = rbookIn(t, dir, env, "resume", "demo", "--run-id", runID, "--control-plane", url)
		}()
	}
	wg.Wait()
	var ok int
	for _, r := range res {
		if r.code == 0 {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("racing resumes: exits %d and %d, want exactly one 0\nfirst:\n%s\nsecond:\n%s", res[0].code, res[1].code, res[0].out, res[1].out)
	}
	for _, r := range res {
		if r.code != 0 {
			t.Logf("the losing resume (exit %d):\n%s", r.code, r.out)
		}
	}
	resp := getRunAs(t, url, runID)
	if resp.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED || resp.GetRun().GetLastSeq() <= before {
		t.Fatalf("after the racing resumes: %v", resp.GetRun())
	}
	finished := map[int32]int{}
	for _, tr := range resp.GetTransitions() {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED {
			finished[tr.GetStepIndex()]++
		}
	}
	for i, n := range finished {
		if n != 1 {
			t.Fatalf("step %d finished %d times, want once (%v)", i, n, finished)
		}
	}
	// The run has ended: a further resume is refused and changes nothing.
	dirZ := workdir(t)
	envZ, _ := runnerEnv(t, dirZ, "3")
	out, code = rbookIn(t, dirZ, envZ, "resume", "demo", "--run-id", runID, "--control-plane", url)
	if code == 0 || !strings.Contains(out, "there is nothing to resume") {
		t.Fatalf("resume of an ended run: exit %d\n%s", code, out)
	}
	if after := getRunAs(t, url, runID).GetRun().GetLastSeq(); after != resp.GetRun().GetLastSeq() {
		t.Fatalf("resume of an ended run wrote: seq %d -> %d", resp.GetRun().GetLastSeq(), after)
	}
}
