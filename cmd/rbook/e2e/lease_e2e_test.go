//go:build unix

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Five workspaces (five CI jobs) run the same runbook at once against one control plane:
// all five complete, each under its own run id (docs/decisions/run-ids.md), none adopts
// another's run, no E_SEQ_CONFLICT.
func TestFiveWorkspacesOneRunbook(t *testing.T) {
	skipShort(t)
	base := workdir(t)
	url := serveCP(t, base)
	const n = 5
	procs := make([]*proc, n)
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = workdir(t)
		procs[i] = start(t, dirs[i], "run", "demo", "--control-plane", url)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			p.waitFor(t, "AWAITING_CONFIRMATION")
			p.stdin.Write([]byte("yes\n"))
		})
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, p := range procs {
		if code := p.wait(t); code != 0 || strings.Contains(p.output(), "E_SEQ_CONFLICT") {
			t.Fatalf("workspace %d: exit %d\n%s", i, code, p.output())
		}
		id := readState(t, dirs[i]).RunID
		if ids[id] {
			t.Fatalf("workspace %d reuses run id %s", i, id)
		}
		ids[id] = true
		resp := getRun(t, url, id)
		checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
		if got := len(readState(t, dirs[i]).EvidencePack); got != 6 {
			t.Fatalf("workspace %d: %d evidence entries, want 6", i, got)
		}
	}
	suffixed := 0
	for id := range ids {
		if regexp.MustCompile(`\.[2-5]$`).MatchString(id) {
			suffixed++
		}
	}
	if len(ids) != n || suffixed != n-1 {
		t.Fatalf("run ids %v: want %d distinct, %d with a .N suffix", ids, n, n-1)
	}
}

// A zombie executor can never write again, and taking a run over is explicit
// (docs/decisions/leases-and-fencing.md): executor A waits at the gate and is frozen (SIGSTOP); a
// second workspace holding the run's state under another owner id is refused (E_RUN_OWNED, with the
// --take-over hint), may take it over only once A's lease expired, and completes the run; A,
// thawed, is fenced (E_LEASE_LOST) and halts without writing to the control plane.
func TestTakeOverFencesTheZombie(t *testing.T) {
	skipShort(t)
	a := workdir(t)
	url := serveCP(t, a)
	pa := start(t, a, "run", "demo", "--control-plane", url, "--control-plane-lease", "5s")
	pa.waitFor(t, "AWAITING_CONFIRMATION")
	runID := readState(t, a).RunID
	if err := pa.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer pa.cmd.Process.Signal(syscall.SIGCONT)
	before := getRun(t, url, runID).GetRun().GetLastSeq()

	b := copiedWorkspace(t, a)
	out, code := run(t, b, "", "run", "demo", "--control-plane", url)
	if code != 2 || !strings.Contains(out, "E_RUN_OWNED") || !strings.Contains(out, "--take-over") {
		t.Fatalf("resume of a run another executor owns: exit %d\n%s", code, out)
	}
	// --take-over before the lease lapsed is refused (5 s lease, no renewals from the frozen A).
	pb := takeOverAtGate(t, b, url)
	pb.stdin.Write([]byte("yes\n"))
	if code := pb.wait(t); code != 0 {
		t.Fatalf("the taken-over run: exit %d\n%s", code, pb.output())
	}
	final := getRun(t, url, runID)
	checkTransitions(t, final, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if l := final.GetRun().GetLease(); l.GetEpoch() != 2 || final.GetRun().GetLastSeq() <= before {
		t.Fatalf("after the take-over: lease %v, last_seq %d (was %d)", l, final.GetRun().GetLastSeq(), before)
	}

	// A wakes up: it must stop, and the control plane's record stays B's.
	if err := pa.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := pa.wait(t); code != 2 || !strings.Contains(pa.output(), "lease") {
		t.Fatalf("the zombie: exit %d\n%s", code, pa.output())
	}
	after := getRun(t, url, runID)
	if len(after.GetTransitions()) != len(final.GetTransitions()) || after.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Fatalf("the zombie wrote: %d transitions, was %d; status %s", len(after.GetTransitions()), len(final.GetTransitions()), after.GetRun().GetStatus())
	}
}

// copiedWorkspace is a new workspace holding a's state file as another executor instance
// would (another owner id), for a take-over.
func copiedWorkspace(t *testing.T, a string) string {
	t.Helper()
	b := workdir(t)
	raw, err := os.ReadFile(filepath.Join(a, ".rbook", "demo.state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	st["owner_id"] = "o-anotherexecutorinstance0"
	raw, _ = json.Marshal(st)
	os.MkdirAll(filepath.Join(b, ".rbook"), 0o755)
	if err := os.WriteFile(filepath.Join(b, ".rbook", "demo.state.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// takeOverAtGate runs `rbook run demo --take-over` in dir until the control plane lets it
// take the run over (the server's clock decides when the owner's lease lapses, so a refusal
// with E_LEASE_HELD is tried again, for up to 20 s) and returns it waiting at the gate.
func takeOverAtGate(t *testing.T, dir, url string) *proc {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		p := start(t, dir, "run", "demo", "--control-plane", url, "--take-over")
		select {
		case line := <-waitLine(p, "AWAITING_CONFIRMATION", "E_LEASE_HELD"):
			if strings.Contains(line, "AWAITING_CONFIRMATION") {
				return p
			}
		case <-p.done:
		}
		p.wait(t)
		if !strings.Contains(p.output(), "E_LEASE_HELD") || time.Now().After(deadline) {
			t.Fatalf("take-over: exit %d\n%s", p.code, p.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitLine delivers the first output line of p containing any of subs.
func waitLine(p *proc, subs ...string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		for {
			select {
			case line := <-p.seen:
				for _, s := range subs {
					if strings.Contains(line, s) {
						ch <- line
						return
					}
				}
			case <-p.done:
				return
			}
		}
	}()
	return ch
}

// A take-over checks the lease even when the state file was copied as it is: the documented way to
// continue a run from another workspace is to restore its state file there — owner id included —
// and run with --take-over. That must not pass as the owner resuming: while executor A is alive at
// its gate (its lease live), B's plain run is refused with E_RUN_OWNED (the owner id belongs to A's
// workspace), B's --take-over with E_LEASE_HELD, the lease stays A's at epoch 1, and A completes
// the run undisturbed.
func TestTakeOverOfACopiedStateFileChecksTheLease(t *testing.T) {
	skipShort(t)
	a := workdir(t)
	url := serveCP(t, a)
	pa := start(t, a, "run", "demo", "--control-plane", url)
	pa.waitFor(t, "AWAITING_CONFIRMATION")
	runID := readState(t, a).RunID

	b := workdir(t)
	raw, err := os.ReadFile(filepath.Join(a, ".rbook", "demo.state.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(b, ".rbook"), 0o755)
	if err := os.WriteFile(filepath.Join(b, ".rbook", "demo.state.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// Without --take-over, the copy is another workspace, so the owner id does not come
	// along: refused with E_RUN_OWNED and the hint, and A's lease is untouched.
	out, code := run(t, b, "", "run", "demo", "--control-plane", url)
	if code != 2 || !strings.Contains(out, "E_RUN_OWNED") || !strings.Contains(out, "--take-over") {
		t.Fatalf("plain run of a live run from a copied state file: exit %d, want 2 with E_RUN_OWNED\n%s", code, out)
	}
	if l := getRun(t, url, runID).GetRun().GetLease(); l.GetEpoch() != 1 {
		t.Fatalf("after the refused resume: lease %v, want epoch 1 (A's)", l)
	}
	pb := start(t, b, "run", "demo", "--control-plane", url, "--take-over")
	select {
	case line := <-waitLine(pb, "AWAITING_CONFIRMATION"):
		pb.cmd.Process.Kill()
		pb.wait(t)
		t.Fatalf("--take-over of a live run from a copied state file resumed it (%q), want exit 2 with E_LEASE_HELD\n%s", line, pb.output())
	case <-pb.done:
	}
	if code := pb.wait(t); code != 2 || !strings.Contains(pb.output(), "E_LEASE_HELD") {
		t.Fatalf("--take-over of a live run from a copied state file: exit %d, want 2 with E_LEASE_HELD\n%s", code, pb.output())
	}
	if l := getRun(t, url, runID).GetRun().GetLease(); l.GetEpoch() != 1 {
		t.Fatalf("after the refused take-over: lease %v, want epoch 1 (A's)", l)
	}
	pa.stdin.Write([]byte("yes\n"))
	if code := pa.wait(t); code != 0 {
		t.Fatalf("A after the refused take-over: exit %d\n%s", code, pa.output())
	}
	checkTransitions(t, getRun(t, url, runID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}

// --take-over in a folder with no unfinished run says what it needs instead of quietly
// starting a new run, and changes nothing.
func TestTakeOverNeedsAnUnfinishedRun(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "", "run", "demo", "--control-plane", "off", "--take-over")
	if code != 2 || !strings.Contains(out, "--take-over continues an unfinished run, but .rbook/demo.state.json holds none") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused take-over wrote the state file: %v", err)
	}
}
