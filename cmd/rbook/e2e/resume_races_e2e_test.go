package e2e

// `rbook resume` against a control plane that goes away and against a racing resume.

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Two `rbook resume` of one approved paused run, at once, in two empty folders: exactly one
// takes the lease and completes the run; the other exits non-zero without writing a step;
// every step finished once on the control plane. A resume naming the run under another
// runbook, or of a run that already ended, is refused and changes nothing.
func TestConcurrentResumesOneLease(t *testing.T) {
	skipShort(t)
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

// Pause mode with the control plane going away right after the gate opened (every call after
// RequestApproval answers 503): every transition reached it before the gate opened, so the
// job may end paused (exit 0, paused=true) but says its lease was not released; a resume
// before the lease expires is refused and changes nothing; after it expires, with the gate
// approved, `rbook resume` in an empty folder completes the run with every step once.
func TestPauseWhenTheControlPlaneGoesDownBeforeTheDrain(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	px := newFaultProxy(t, url)
	var down atomic.Bool
	px.setRule(func(c call) fault {
		if down.Load() {
			return status503
		}
		if c.Method == "RequestApproval" {
			down.Store(true)
		}
		return pass
	})
	dirA := workdir(t)
	env, outputs := runnerEnv(t, dirA, "1")
	out, code := rbookIn(t, dirA, env, "run", "demo", "--control-plane", px.url, "--gate-mode", "pause", "--github-environment", "production",
		"--control-plane-timeout", "5s", "--control-plane-lease", "5s")
	outs := parseOutputs(t, readFile(t, outputs))
	if code != 0 || outs["paused"] != "true" || !strings.Contains(out, "was not released") {
		t.Fatalf("pause with the control plane gone after the gate opened: exit %d, outputs %v; want 0, paused=true and the lease warning\n%s", code, outs, out)
	}
	px.setRule(nil)
	runID, id := outs["run-id"], outs["approval-id"]
	before := getRunAs(t, url, runID)
	if last := before.GetTransitions()[len(before.GetTransitions())-1]; last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED {
		t.Fatalf("the control plane's last transition is %v, want GATE_OPENED: the job claimed a pause it had not delivered", last.GetKind())
	}
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "back"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	if exp := before.GetRun().GetLease().GetExpiresAt().AsTime(); time.Now().Before(exp) {
		dirE := workdir(t)
		envE, _ := runnerEnv(t, dirE, "2")
		out, code = rbookIn(t, dirE, envE, "resume", "demo", "--run-id", runID, "--control-plane", url)
		if time.Now().Before(exp) && (code != 2 || !strings.Contains(out, "E_LEASE_HELD")) {
			t.Fatalf("resume while the paused job's lease lives: exit %d, want 2 with E_LEASE_HELD\n%s", code, out)
		}
		if got := getRunAs(t, url, runID).GetRun(); got.GetLastSeq() != before.GetRun().GetLastSeq() || got.GetLease().GetEpoch() != before.GetRun().GetLease().GetEpoch() {
			t.Fatalf("a refused resume changed the run: %v", got)
		}
		for time.Now().Before(exp.Add(100 * time.Millisecond)) { // the lease's own clock: nothing to wait on but time
			time.Sleep(50 * time.Millisecond)
		}
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	out, code = rbookIn(t, dirB, envB, "resume", "demo", "--run-id", runID, "--control-plane", url)
	resp := getRunAs(t, url, runID)
	if code != 0 || resp.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Fatalf("resume after the lease expired: exit %d, run %v\n%s", code, resp.GetRun().GetStatus(), out)
	}
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}
