package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestApproveByIDDecidesTheEmbeddedGateFromAnotherProcess: while `rbook run demo` waits at
// its gate on the embedded control plane (no auth), `rbook approve <approval id>` from another
// process in the same folder decides it with the folder's local approver key; the vote is
// recorded as unverified:<user> with its reason, and the run completes.
func TestApproveByIDDecidesTheEmbeddedGateFromAnotherProcess(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	p := start(t, dir, "run", "demo")
	id := approvalIDFrom(t, p)
	if fi, err := os.Stat(filepath.Join(dir, ".rbook", "local-approver-key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("local approver key: %v (mode %v), want a 0600 file", err, fi)
	}
	out, code := run(t, dir, "", "approve", id, "--approver", "alice", "--reason", "checked the canary")
	if code != 0 || !strings.Contains(out, "approved by unverified:alice") {
		t.Fatalf("approve %s: exit %d\n%s", id, code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	var gate string
	for _, e := range readState(t, dir).EvidencePack {
		if e.StepName == "confirm-rollout" {
			gate = e.Status + " " + e.Output
		}
	}
	if !strings.HasPrefix(gate, "PASS ") || !strings.Contains(gate, "unverified:alice") || !strings.Contains(gate, "checked the canary") {
		t.Errorf("gate evidence %q, want PASS by unverified:alice with the reason", gate)
	}
	if row := "| confirm-rollout | ✅ approved | unverified:alice | control-plane | checked the canary |"; !strings.Contains(p.output(), row) {
		t.Errorf("the report lacks the gate decision row %q:\n%s", row, p.output())
	}
}

// TestRunShowsTheGateNeedsAndEachVoteAsItArrives: at a 2-of-N gate the run says how many
// approvals it needs and from whom, prints each vote as it arrives with the tally, and its
// report names both approvers, the channel and the reason.
func TestRunShowsTheGateNeedsAndEachVoteAsItArrives(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := gatesServe(t, dir)
	t.Setenv("RBOOK_TOKEN", gatesExecToken)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)
	p.waitFor(t, "Gate 'confirm-rollout' needs 2 approvals from")
	if out, code := runAs(t, dir, gatesAliceToken, "approve", id, "--control-plane", url, "--reason", "canary is green"); code != 0 {
		t.Fatalf("alice: exit %d\n%s", code, out)
	}
	p.waitFor(t, "Vote: alice approved (canary is green) · gate confirm-rollout: 1 of 2 approvals (alice); waiting for 1 more")
	if out, code := runAs(t, dir, gatesBobToken, "approve", id, "--control-plane", url, "--reason", "ship it"); code != 0 {
		t.Fatalf("bob: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	if row := "| confirm-rollout | ✅ approved | alice, bob | control-plane | ship it |"; !strings.Contains(p.output(), row) {
		t.Errorf("the report lacks the gate decision row %q:\n%s", row, p.output())
	}
}

// TestApproveByIDIsRefusedWithoutAuthOnAServedControlPlane: on `rbook serve` without an auth
// file the approval id is no capability (ids are printed in CI logs): approve by id is
// refused with E_UNAUTHENTICATED, even from a folder that holds a local approver key.
func TestApproveByIDIsRefusedWithoutAuthOnAServedControlPlane(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)
	os.WriteFile(filepath.Join(dir, ".rbook", "local-approver-key"), []byte("a-key-that-serve-never-had-0123456789\n"), 0o600)
	out, code := run(t, dir, "", "approve", id, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_UNAUTHENTICATED") {
		t.Fatalf("approve by id on rbook serve without auth: exit %d, want 1 with E_UNAUTHENTICATED\n%s", code, out)
	}
	out, code = run(t, dir, "", "approvals", "--pending", "--control-plane", url)
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("the gate should still be pending: exit %d\n%s", code, out)
	}
}

// TestVerbsWorkOnAnInterruptedEmbeddedPlaybookRun: after a playbook run on the embedded
// control plane is killed, `rbook watch` shows what is recorded and ends, and `rbook playbook
// cancel RUN` cancels it (exit 3) by serving the folder's .rbook/controlplane.db for the
// command, instead of "no control plane to talk to".
func TestVerbsWorkOnAnInterruptedEmbeddedPlaybookRun(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeSlowPlaybook(t, dir)
	p := start(t, dir, "playbook", "run", "slow.cantbook")
	p.waitFor(t, "'slow'")
	killInSlowNode(t, p, dir)
	runID := regexp.MustCompile(`RBOOK-\d{8}-slow-[0-9a-f]{8}`).FindString(p.output())
	if runID == "" {
		t.Fatalf("no run id:\n%s", p.output())
	}
	out, code := run(t, dir, "", "watch", runID)
	if code != 0 || !strings.Contains(out, "Run "+runID+" is running.") || !strings.Contains(out, "nothing more will arrive") {
		t.Fatalf("watch: exit %d\n%s", code, out)
	}
	out, code = run(t, dir, "", "playbook", "cancel", runID, "--reason", "abandoned")
	if code != 3 || !strings.Contains(out, "serves .rbook/controlplane.db") || !strings.Contains(out, "Run "+runID+" is cancelled.") {
		t.Fatalf("playbook cancel: exit %d, want 3\n%s", code, out)
	}
	out, code = run(t, dir, "", "get", runID)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("get after cancel: exit %d\n%s", code, out)
	}
}

// silentControlPlane listens on loopback and accepts connections without ever answering; it
// returns the URL.
func silentControlPlane(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// TestUnansweredControlPlaneIsNamedByURL: a control-plane command whose control plane accepts
// the connection but never answers says which URL did not answer, not a bare "context
// deadline exceeded"; a run that could not start there says no state file was written.
func TestUnansweredControlPlaneIsNamedByURL(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := silentControlPlane(t)
	for _, args := range [][]string{
		{"get", "RBOOK-20260101-demo-0123abcd", "--control-plane", url},
		{"approve", "a-aaaaaaaaaaaaaaaaaaaaaaaaaa", "--control-plane", url},
		{"watch", "RBOOK-20260101-demo-0123abcd", "--control-plane", url},
	} {
		out, code := run(t, dir, "", args...)
		if code != 1 || !strings.Contains(out, "rbook: the control plane at "+url+" ") || !strings.Contains(out, " did not answer ") {
			t.Errorf("%s: exit %d, want 1 naming %s and that it did not answer\n%s", args[0], code, url, out)
		}
	}
	out, code := run(t, dir, "", "run", "demo", "--control-plane", url, "--control-plane-timeout", "2s")
	if code != 2 || strings.Contains(out, "kept in the state file") || !strings.Contains(out, "no state file was written") {
		t.Errorf("run on a silent control plane: exit %d, want 2 without claiming a state file\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json")); !os.IsNotExist(err) {
		t.Errorf("state file: %v, want none", err)
	}
}
