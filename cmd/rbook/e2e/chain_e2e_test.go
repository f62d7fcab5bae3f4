//go:build unix

package e2e

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// checkChain verifies the control plane's record of a run as an auditor would
// (docs/evidence-chain.md): from seq 1 every transition follows the one before and hashes to
// its content, and GetRun's chain_head is the last hash. It returns the head.
func checkChain(t *testing.T, resp *rbookv1.GetRunResponse) string {
	t.Helper()
	var links []evidencechain.Link
	for _, p := range resp.GetTransitions() {
		tr, err := cpclient.FromProto(p)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, tr.Link())
	}
	head, err := evidencechain.Verify(links)
	if err != nil {
		t.Fatalf("the control plane's record of run %s: %v", resp.GetRun().GetRunId(), err)
	}
	if len(links) == 0 || head != resp.GetRun().GetChainHead() {
		t.Fatalf("GetRun chain_head %q; the record's %d transitions end at %s", resp.GetRun().GetChainHead(), len(links), head)
	}
	return head
}

// checkFolderChain fails t unless the state file at path holds head as its chain_head and
// each of its evidence entries names the hash of a transition of resp that carries it.
func checkFolderChain(t *testing.T, path, head string, resp *rbookv1.GetRunResponse) {
	t.Helper()
	st, err := state.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChainHead != head {
		t.Errorf("%s: chain_head %q, want the control plane's %s", path, st.ChainHead, head)
	}
	carried := map[string]bool{}
	for _, p := range resp.GetTransitions() {
		if p.GetEvidence() != nil {
			carried[p.GetHash()] = true
		}
	}
	for i, e := range st.EvidencePack {
		if !carried[e.TransitionHash] {
			t.Errorf("%s: evidence_pack[%d] (%s) names transition %q, which carries no entry on the control plane", path, i, e.StepName, e.TransitionHash)
		}
	}
}

// A paused run resumed in an empty folder (the state file rebuilt from the control plane's
// record) continues the chain its first job started: the record verifies from seq 1 to the
// end, and the new folder's state file holds the same head.
func TestResumedRunContinuesTheChain(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	dirA, runID, id := pauseAtGate(t, url)
	paused := checkChain(t, getRunAs(t, url, runID))
	checkFolderChain(t, filepath.Join(dirA, ".rbook", "demo.state.json"), paused, getRunAs(t, url, runID))
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "canary green"); code != 0 {
		t.Fatalf("alice approves: exit %d\n%s", code, out)
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	if out, code := rbookIn(t, dirB, envB, "resume", "demo", "--control-plane", url); code != 0 {
		t.Fatalf("rbook resume in folder B: exit %d\n%s", code, out)
	}
	final := getRunAs(t, url, runID)
	checkTransitions(t, final, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	head := checkChain(t, final)
	if head == paused {
		t.Fatal("the resumed job added nothing to the chain")
	}
	checkFolderChain(t, filepath.Join(dirB, ".rbook", "demo.state.json"), head, final)
}

// A run taken over from an executor that died at its gate (kill -9) continues its chain: the
// new executor's first transition follows the dead one's last, and the record verifies.
func TestTakeOverContinuesTheChain(t *testing.T) {
	skipShort(t)
	a := workdir(t)
	url := serveCP(t, a)
	pa := start(t, a, "run", "demo", "--control-plane", url, "--control-plane-lease", "5s")
	pa.waitFor(t, "AWAITING_CONFIRMATION")
	runID := readState(t, a).RunID
	if err := pa.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pa.wait(t)
	before := checkChain(t, getRun(t, url, runID))

	b := copiedWorkspace(t, a)
	pb := takeOverAtGate(t, b, url)
	pb.stdin.Write([]byte("yes\n"))
	if code := pb.wait(t); code != 0 {
		t.Fatalf("the taken-over run: exit %d\n%s", code, pb.output())
	}
	final := getRun(t, url, runID)
	checkTransitions(t, final, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if final.GetRun().GetLease().GetEpoch() != 2 {
		t.Fatalf("lease %v after the take-over; want epoch 2", final.GetRun().GetLease())
	}
	head := checkChain(t, final)
	if head == before {
		t.Fatal("the take-over added nothing to the chain")
	}
	checkFolderChain(t, filepath.Join(b, ".rbook", "demo.state.json"), head, final)
}
