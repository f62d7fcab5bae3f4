//go:build unix

package e2e

// End-to-end tests of the executor's side of talking to
// a control plane that dies, stops answering, restarts, or sits behind a proxy that fails
// calls. Real processes throughout: the rbook binary, `rbook serve`, and the fault proxy of
// faultproxy_test.go between them. They synchronise on what the processes print and on the
// calls the proxy sees; the only clock readings bound how long an executor may take to give
// up, which is what a silent control plane is about.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pipeline "github.com/rbookhq/rbook-action/action/run"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const runFinished = rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED

// gateOpen is what the executor prints (stderr is not a terminal here) once a gate is open on
// the control plane.
const gateOpen = "is open on the control plane"

// finalUndelivered runs the demo to its end through px, which holds the run_finished
// transition back; once px has it the executor is killed with -9. The file recorder writes
// before the control-plane recorder sends, so the state file is COMPLETED while the control
// plane never heard the end: the state the issue saw in 9 of 280 kill -9 cycles.
func finalUndelivered(t *testing.T, dir string, px *faultProxy) stateFile {
	t.Helper()
	from := px.mark()
	px.setRule(func(c call) fault {
		if c.Kind == runFinished {
			return hang
		}
		return pass
	})
	p := start(t, dir, "run", "demo", "--control-plane", px.url)
	io.WriteString(p.stdin, "yes\n")
	px.waitCall("run_finished", from, func(c call) bool { return c.Kind == runFinished })
	p.cmd.Process.Kill()
	p.wait(t)
	s := readState(t, dir)
	if s.RunStatus != "COMPLETED" || len(s.Outbox) == 0 {
		t.Fatalf("after kill -9 with run_finished unacknowledged: %s with %d in the outbox\n%s", s.RunStatus, len(s.Outbox), p.output())
	}
	return s
}

func runStatus(t *testing.T, url, runID string) rbookv1.RunStatus {
	t.Helper()
	return getRun(t, url, runID).GetRun().GetStatus()
}

func prevFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".rbook", "demo.state.json.prev-*"))
	return m
}

// A final run's unsent transitions reach the control plane before
// anything else happens in its folder — through status, run and cancel — and a run that
// cannot deliver them does not start over them.
func TestFinalRunOutboxDeliveredFirst(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	px := newFaultProxy(t, cp.url())

	first := finalUndelivered(t, dir, px)
	if st := runStatus(t, cp.url(), first.RunID); st != rbookv1.RunStatus_RUN_STATUS_RUNNING {
		t.Fatalf("the control plane holds run %s as %s; the test needs it not to have heard the end", first.RunID, st)
	}

	// The control plane is unreachable: status says what is undelivered, run refuses to
	// start over it and leaves the state file where it is.
	px.setRule(func(call) fault { return status503 })
	out, code := run(t, dir, "", "status", "demo", "--control-plane-timeout", "1s")
	want := fmt.Sprintf("Undelivered: %d transition(s)", len(first.Outbox))
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, px.url) {
		t.Fatalf("status with the control plane down: exit %d, want %q\n%s", code, want, out)
	}
	out, code = run(t, dir, "yes\n", "run", "demo", "--control-plane", px.url, "--control-plane-timeout", "1s")
	if code != 2 || !strings.Contains(out, "Not starting a new run") || !strings.Contains(out, first.RunID) {
		t.Fatalf("run with the previous run undelivered: exit %d\n%s", code, out)
	}
	if s := readState(t, dir); s.RunID != first.RunID || len(s.Outbox) != len(first.Outbox) || len(prevFiles(t, dir)) != 0 {
		t.Fatalf("the refused run changed the state: %s with %d in the outbox, prev files %v", s.RunID, len(s.Outbox), prevFiles(t, dir))
	}

	// Back: status delivers, and the control plane's record equals the state file's.
	px.setRule(nil)
	out, code = run(t, dir, "", "status", "demo")
	if code != 0 || !strings.Contains(out, "Delivered ") || strings.Contains(out, "Undelivered:") {
		t.Fatalf("status with the control plane back: exit %d\n%s", code, out)
	}
	if s := readState(t, dir); len(s.Outbox) != 0 {
		t.Errorf("the outbox still holds %d after delivery", len(s.Outbox))
	}
	resp := getRun(t, cp.url(), first.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if n := int64(len(resp.GetTransitions())); n != first.Seq {
		t.Errorf("the control plane holds %d transitions, the state file %d", n, first.Seq)
	}

	// run delivers first, then starts the next run.
	second := finalUndelivered(t, dir, px)
	px.setRule(nil)
	out, code = run(t, dir, "yes\n", "run", "demo", "--control-plane", px.url)
	if code != 0 || !strings.Contains(out, "Delivered ") {
		t.Fatalf("run after an undelivered final run: exit %d\n%s", code, out)
	}
	checkTransitions(t, getRun(t, cp.url(), second.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	third := readState(t, dir)
	if third.RunID == second.RunID || third.RunStatus != "COMPLETED" {
		t.Fatalf("the new run: %s %s", third.RunID, third.RunStatus)
	}
	checkTransitions(t, getRun(t, cp.url(), third.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json.prev-"+second.RunID)); err != nil {
		t.Errorf("the delivered run's state was not kept: %v", err)
	}

	// cancel on a final run has nothing to cancel, but delivers first.
	fourth := finalUndelivered(t, dir, px)
	px.setRule(nil)
	out, code = run(t, dir, "", "cancel", "demo")
	if code != 2 || !strings.Contains(out, "nothing to cancel") || !strings.Contains(out, "Delivered ") {
		t.Fatalf("cancel on an undelivered final run: exit %d\n%s", code, out)
	}
	checkTransitions(t, getRun(t, cp.url(), fourth.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}

// Embedded mode: the embedded control plane's URL changes every run, so an
// outbox recorded against it is delivered to this folder's embedded control plane
// (.rbook/controlplane.db), which `rbook status` starts for the purpose; and `rbook cancel` of
// an interrupted run reports the cancel to the control plane too.
func TestEmbeddedOutboxAndCancel(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if s := readState(t, dir); code != 0 || !s.ControlPlaneEmbedded || s.ControlPlane == "" {
		t.Fatalf("an embedded run: exit %d, control_plane %q, control_plane_embedded %v\n%s", code, s.ControlPlane, s.ControlPlaneEmbedded, out)
	}

	// A run on this folder's embedded database, left final with an undelivered outbox and
	// marked as the embedded control plane's run (its old address answers no more).
	db := filepath.Join(dir, ".rbook", "controlplane.db")
	cp := startServeDB(t, db)
	px := newFaultProxy(t, cp.url())
	s := finalUndelivered(t, dir, px)
	cp.kill()
	path := filepath.Join(dir, ".rbook", "demo.state.json")
	var raw map[string]any
	json.Unmarshal([]byte(readFile(t, path)), &raw)
	raw["control_plane"], raw["control_plane_embedded"] = "http://127.0.0.1:1", true
	data, _ := json.Marshal(raw)
	os.WriteFile(path, data, 0o600)

	out, code = run(t, dir, "", "status", "demo")
	if code != 0 || !strings.Contains(out, "Delivered ") || strings.Contains(out, "Undelivered:") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	cp = startServeDB(t, db)
	checkTransitions(t, getRun(t, cp.url(), s.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)

	// rbook cancel of an interrupted run: the cancel reaches the control plane.
	p := start(t, dir, "run", "demo", "--control-plane", cp.url())
	p.waitFor(t, gateOpen)
	p.cmd.Process.Kill()
	p.wait(t)
	interrupted := readState(t, dir)
	out, code = run(t, dir, "yes\n", "cancel", "demo")
	if code != 3 || strings.Contains(out, "have not reached") {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	resp := getRun(t, cp.url(), interrupted.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_CANCELLED)
	if after := readState(t, dir); len(after.Outbox) != 0 || int64(len(resp.GetTransitions())) != after.Seq {
		t.Errorf("after cancel: %d in the outbox, control plane %d transitions, state seq %d", len(after.Outbox), len(resp.GetTransitions()), after.Seq)
	}
}

// A control plane that accepts connections but never answers (SIGSTOP)
// halts the run, resumable, within --control-plane-timeout plus a few seconds — at the gate
// (the watch stream's HTTP/2 pings find it) and at the start (each unary attempt is bounded)
// — and SIGTERM ends the executor within seconds while it is stopped.
func TestSilentControlPlaneHaltsTheRunResumable(t *testing.T) {
	skipShort(t)
	const timeout = 5 * time.Second
	// slack covers the ping interval and timeout, one attempt timeout and a back-off.
	const slack = cpclient.PingInterval + cpclient.PingTimeout + cpclient.DefaultAttemptTimeout + 5*time.Second
	dir := workdir(t)
	cp := startServe(t, dir)
	args := []string{"run", "demo", "--control-plane", cp.url(), "--control-plane-timeout", timeout.String()}

	// Stopped while the gate waits.
	p := start(t, dir, args...)
	p.waitFor(t, gateOpen)
	cp.signal(syscall.SIGSTOP)
	stopped := time.Now()
	code := p.wait(t)
	if took := time.Since(stopped); code != 2 || took > timeout+slack || !strings.Contains(p.output(), "halted") {
		t.Fatalf("stopped at the gate: exit %d after %s (want 2 within %s)\n%s", code, took.Round(time.Millisecond), timeout+slack, p.output())
	}
	t.Logf("stopped at the gate: halted after %s", time.Since(stopped).Round(time.Millisecond))
	s := readState(t, dir)
	if s.RunStatus != "IN_PROGRESS" || strings.Contains(s.steps(), "confirm-rollout") {
		t.Fatalf("after the halt: %s %q", s.RunStatus, s.steps())
	}

	// SIGTERM while it is stopped: the executor ends within seconds and records the
	// interruption locally.
	cp.signal(syscall.SIGCONT)
	p = start(t, dir, args...)
	p.waitFor(t, gateOpen)
	cp.signal(syscall.SIGSTOP)
	p.cmd.Process.Signal(syscall.SIGTERM)
	signalled := time.Now()
	code = p.wait(t)
	if took := time.Since(signalled); code != 1 || took > pipeline.SignalDrainGrace+cpclient.DefaultAttemptTimeout {
		t.Fatalf("SIGTERM with the control plane stopped: exit %d after %s\n%s", code, took.Round(time.Millisecond), p.output())
	}
	t.Logf("SIGTERM with the control plane stopped: ended after %s", time.Since(signalled).Round(time.Millisecond))
	if s := readState(t, dir); s.Interrupted == nil || !strings.Contains(s.Interrupted.Reason, "SIGTERM") || len(s.Outbox) == 0 {
		t.Fatalf("after SIGTERM: interrupted %v, %d in the outbox\n%s", s.Interrupted, len(s.Outbox), p.output())
	}
	if !strings.Contains(p.output(), "kept in the state file's outbox") {
		t.Errorf("the executor did not say where the undelivered transitions are:\n%s", p.output())
	}

	// Still stopped at the next start: the resume's first call is bounded too.
	p = start(t, dir, args...)
	started := time.Now()
	code = p.wait(t)
	if took := time.Since(started); code != 2 || took > timeout+slack || !strings.Contains(p.output(), "did not answer") {
		t.Fatalf("starting against a stopped control plane: exit %d after %s\n%s", code, took.Round(time.Millisecond), p.output())
	}

	t.Logf("start against a stopped control plane: halted after %s", time.Since(started).Round(time.Millisecond))
	// Continued: the run resumes and the records agree.
	cp.signal(syscall.SIGCONT)
	out, code := run(t, dir, "yes\n", args...)
	if code != 0 || !strings.Contains(out, "RESUMING run") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	s = readState(t, dir)
	resp := getRun(t, cp.url(), s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if s.steps() != demoPass || int64(len(resp.GetTransitions())) != s.Seq {
		t.Fatalf("after resume: %q, control plane %d transitions, state seq %d", s.steps(), len(resp.GetTransitions()), s.Seq)
	}
}

// Every kind of transient failure between executor and control plane is
// retried — a reset connection, 502/503/504, an answer lost after the server acted, a delay,
// an answer cut inside its Connect envelope — on every RPC the executor makes, and the run
// completes with the control plane's record equal to the state file's.
func TestTransientFailuresRetried(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	px := newFaultProxy(t, cp.url())
	plan := map[string][]fault{
		"StartRun":          {status503, reset},
		"RecordTransitions": {reset, status502, dropAnswer, status504, delay, truncate, status503}, // the sender's batches
		"RequestApproval":   {dropAnswer, status502},
		"WatchApproval":     {truncate, reset, status503},
		"Approve":           {status503, reset},
	}
	px.setRule(func(c call) fault {
		if f := plan[c.Method]; c.N <= len(f) {
			return f[c.N-1]
		}
		return pass
	})
	p := start(t, dir, "run", "demo", "--control-plane", px.url, "--control-plane-timeout", "30s")
	// Answer only once the watch has come through its faults, so they all happen.
	px.waitCall("a clean WatchApproval", 0, func(c call) bool { return c.Method == "WatchApproval" && c.Fault == pass })
	io.WriteString(p.stdin, "yes\n")
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
	for method, faults := range plan {
		if got := px.seen(func(c call) bool { return c.Method == method }); len(got) <= len(faults) {
			t.Errorf("%s: %d calls, want the %d faulty ones and a good one", method, len(got), len(faults))
		}
	}
	s := readState(t, dir)
	resp := getRun(t, cp.url(), s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if s.steps() != demoPass || int64(len(resp.GetTransitions())) != s.Seq || len(s.Outbox) != 0 {
		t.Fatalf("state %q seq %d outbox %d; control plane %d transitions", s.steps(), s.Seq, len(s.Outbox), len(resp.GetTransitions()))
	}
}

// restartRunbook is a gate-free runbook of many simulated deploys: its runs record enough
// transitions for several control-plane restarts to land in the middle of them.
func restartRunbook(name string, deploys int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "runbook_name: %s\nsubscriptions: [s]\nstate_file_path: .rbook/%s.state.json\nrunbook_steps:\n", name, name)
	for i := range deploys {
		fmt.Fprintf(&b, "  - {name: deploy-%d, type: deploy, kql_or_template: remediation/a.json, on_fail: halt}\n", i)
	}
	return b.String()
}

// `rbook serve` killed (-9) and started again on the same port and database,
// over and over while runs report to it: every run completes, and the control plane holds
// every run's transitions exactly as its state file does. Seen before: 116 of 350 runs
// halted on a restart of under 2 s.
func TestControlPlaneRestartsDuringRuns(t *testing.T) {
	skipShort(t)
	// restartEvery counts RecordTransitions calls, each carrying what the sender had queued: far
	// fewer calls than transitions.
	const workspaces, runsEach, deploys, restartEvery = 3, 3, 20, 5
	cp := startServe(t, t.TempDir())
	dirs := make([]string, workspaces)
	for i := range dirs {
		dirs[i] = workdir(t)
		name := fmt.Sprintf("w%d", i)
		os.WriteFile(filepath.Join(dirs[i], "runbooks", name+".yaml"), []byte(restartRunbook(name, deploys)), 0o644)
		os.WriteFile(filepath.Join(dirs[i], "runbooks", name+".values.yaml"), []byte("{}\n"), 0o644)
	}

	done := make(chan struct{})
	var restarts int
	var restartErr error
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-cp.recorded:
			}
			if n%restartEvery == 0 {
				if restartErr = cp.restart(); restartErr != nil {
					return
				}
				restarts++
			}
		}
	}()

	type result struct {
		name string
		code int
		out  string
	}
	results := make(chan result, workspaces*runsEach)
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() {
			name := fmt.Sprintf("w%d", i)
			for range runsEach {
				cmd := exec.Command(rbookBin, "run", name, "--control-plane", cp.url(), "--control-plane-timeout", "30s")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				results <- result{name, code, string(out)}
			}
		})
	}
	wg.Wait()
	close(done)
	<-restarted
	close(results)
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	for r := range results {
		if r.code != 0 {
			t.Errorf("a run of %s exited %d:\n%s", r.name, r.code, r.out)
		}
	}
	if restarts < 3 {
		t.Fatalf("only %d restarts happened while the runs reported; the test proves nothing", restarts)
	}
	t.Logf("%d runs, %d control-plane restarts", workspaces*runsEach, restarts)
	for i, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, ".rbook", fmt.Sprintf("w%d.state.json*", i)))
		checked := 0
		for _, f := range files {
			if strings.HasSuffix(f, ".lock") {
				continue
			}
			s := readStateAt(t, f)
			resp := getRun(t, cp.url(), s.RunID)
			checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
			if int64(len(resp.GetTransitions())) != s.Seq || len(s.Outbox) != 0 || s.RunStatus != "COMPLETED" {
				t.Errorf("%s: state %s seq %d outbox %d; control plane %d transitions", f, s.RunStatus, s.Seq, len(s.Outbox), len(resp.GetTransitions()))
			}
			checked++
		}
		if checked != runsEach {
			t.Errorf("workspace %d: %d state files, want %d", i, checked, runsEach)
		}
	}
}

// checkTerminalApproval asserts that the run's one approval was decided on the control plane
// by the answer typed at the executor's terminal.
func checkTerminalApproval(t *testing.T, url, runID string) {
	t.Helper()
	list, err := cpclient.New(url, "").Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	as := list.GetApprovals()
	if len(as) != 1 || as[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || as[0].GetApprover() != "unverified:"+currentUser() ||
		as[0].GetReason() != "answered at the executor's terminal: yes" {
		t.Fatalf("approvals of %s: %v", runID, as)
	}
}

// A `yes` typed at the terminal is never lost. The executor keeps it and
// sends it again while the control plane cannot take it; a retry that finds the gate already
// decided by its own first attempt takes the control plane's record; and an answer that
// cannot be recorded halts the run, resumable — never TIMED_OUT into on_fail.
func TestTypedAnswerNeverLost(t *testing.T) {
	skipShort(t)
	approves := func(px *faultProxy) []call { return px.seen(func(c call) bool { return c.Method == "Approve" }) }

	t.Run("retried through 503s", func(t *testing.T) {
		dir := workdir(t)
		cp := startServe(t, dir)
		px := newFaultProxy(t, cp.url())
		px.setRule(func(c call) fault {
			if c.Method == "Approve" && c.N <= 3 {
				return status503
			}
			return pass
		})
		p := start(t, dir, "run", "demo", "--control-plane", px.url)
		p.waitFor(t, gateOpen)
		io.WriteString(p.stdin, "yes\n")
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, p.output())
		}
		s := readState(t, dir)
		resp := getRun(t, cp.url(), s.RunID)
		checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
		if s.steps() != demoPass || len(approves(px)) != 4 || !regexp.MustCompile(`approved by (unverified:)?`+regexp.QuoteMeta(currentUser())+` via `).MatchString(decidedMessage(resp)) {
			// The terminal's own decision names the user; the control plane's (delivered by the
			// watch first) records the unauthenticated name as unverified.
			t.Fatalf("steps %q, %d Approve calls, gate_decided %q", s.steps(), len(approves(px)), decidedMessage(resp))
		}
		checkTerminalApproval(t, cp.url(), s.RunID)
	})

	t.Run("first attempt committed, its answer lost", func(t *testing.T) {
		dir := workdir(t)
		cp := startServe(t, dir)
		px := newFaultProxy(t, cp.url())
		// The first watch hangs (until its attempt timeout), so the decision cannot reach the
		// executor before the retry of Approve meets the gate already decided.
		px.setRule(func(c call) fault {
			switch {
			case c.Method == "Approve" && c.N == 1:
				return dropAnswer
			case c.Method == "WatchApproval" && c.N == 1:
				return hang
			}
			return pass
		})
		p := start(t, dir, "run", "demo", "--control-plane", px.url)
		p.waitFor(t, gateOpen)
		io.WriteString(p.stdin, "yes\n")
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d\n%s", code, p.output())
		}
		s := readState(t, dir)
		resp := getRun(t, cp.url(), s.RunID)
		checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
		// The retry met E_APPROVAL_ALREADY_DECIDED; the decision is the person's own.
		if s.steps() != demoPass || len(approves(px)) != 2 || !strings.Contains(decidedMessage(resp), "approved by unverified:"+currentUser()+" via control-plane: answered at the executor's terminal: yes") {
			t.Fatalf("steps %q, %d Approve calls, gate_decided %q", s.steps(), len(approves(px)), decidedMessage(resp))
		}
		checkTerminalApproval(t, cp.url(), s.RunID)
		if strings.Contains(p.output(), "could not decide") {
			t.Errorf("the executor called its own committed answer a refusal:\n%s", p.output())
		}
	})

	t.Run("unrecordable answer halts, resumable", func(t *testing.T) {
		dir := workdir(t)
		cp := startServe(t, dir)
		px := newFaultProxy(t, cp.url())
		px.setRule(func(c call) fault {
			if c.Method == "Approve" {
				return status503
			}
			return pass
		})
		p := start(t, dir, "run", "demo", "--control-plane", px.url, "--control-plane-timeout", "3s")
		p.waitFor(t, gateOpen)
		io.WriteString(p.stdin, "yes\n")
		if code := p.wait(t); code != 2 || !strings.Contains(p.output(), `your answer "yes" could not be recorded`) {
			t.Fatalf("exit %d\n%s", code, p.output())
		}
		s := readState(t, dir)
		if s.RunStatus != "IN_PROGRESS" || strings.Contains(s.steps(), "confirm-rollout") || len(approves(px)) < 2 {
			t.Fatalf("after the halt: %s %q, %d Approve calls", s.RunStatus, s.steps(), len(approves(px)))
		}
		px.setRule(nil)
		out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", px.url)
		if code != 0 || !strings.Contains(out, "RESUMING run") || readState(t, dir).steps() != demoPass {
			t.Fatalf("resume: exit %d %q\n%s", code, readState(t, dir).steps(), out)
		}
		checkTransitions(t, getRun(t, cp.url(), s.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	})

	t.Run("gate deadline passes while the answer is unrecorded", func(t *testing.T) {
		dir := workdir(t)
		// testdata/runbooks/gate.yaml: a deploy, a confirm gate with a 2 s deadline whose on_fail is
		// rollback, and the rollback: a gate that times out shows as confirm FAIL/TIMED_OUT and a
		// rollback PASS.
		writeFixture(t, filepath.Join(dir, "runbooks", "gate.yaml"), "runbooks", "gate.yaml")
		os.WriteFile(filepath.Join(dir, "runbooks", "gate.values.yaml"), []byte("{}\n"), 0o644)
		statePath := filepath.Join(dir, ".rbook", "gate.state.json")
		cp := startServe(t, dir)
		px := newFaultProxy(t, cp.url())
		px.setRule(func(c call) fault {
			if c.Method == "Approve" {
				return status503
			}
			return pass
		})
		p := start(t, dir, "run", "gate", "--control-plane", px.url, "--control-plane-timeout", "20s")
		p.waitFor(t, gateOpen)
		io.WriteString(p.stdin, "yes\n")
		// The control plane closes the gate at its deadline (2 s) while every Approve fails.
		if code := p.wait(t); code != 2 || !strings.Contains(p.output(), "before the gate's deadline, so it was not recorded") {
			t.Fatalf("exit %d\n%s", code, p.output())
		}
		s := readStateAt(t, statePath)
		if s.RunStatus != "IN_PROGRESS" || s.steps() != "deploy-a=PASS" {
			t.Fatalf("after the halt: %s %q (no TIMED_OUT, no rollback)", s.RunStatus, s.steps())
		}
		px.setRule(nil)
		p = start(t, dir, "run", "gate", "--control-plane", px.url)
		p.waitFor(t, gateOpen) // asked again: a new approval
		io.WriteString(p.stdin, "yes\n")
		if code := p.wait(t); code != 0 {
			t.Fatalf("resume: exit %d\n%s", code, p.output())
		}
		if s := readStateAt(t, statePath); s.steps() != "deploy-a=PASS confirm-a=PASS rollback-a=SKIPPED" {
			t.Fatalf("after resume: %q", s.steps())
		}
		checkTransitions(t, getRun(t, cp.url(), s.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	})
}
