package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A run parked at a gate does not leave delivered transitions in its outbox: once the
// control plane acknowledged everything up to
// gate_opened, the state file's outbox is empty, so an executor killed at the gate leaves a
// state file that `rbook status` reads truthfully — no "Undelivered:" line for transitions
// the control plane holds. (Before, the acknowledgements reached the file only with the next
// write, which a parked run never makes: status claimed 3 undelivered transitions that the
// control plane had stored.)
func TestParkedGateOutboxIsSynced(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	p.waitFor(t, "AWAITING_CONFIRMATION")
	runID := readState(t, dir).RunID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st := readState(t, dir)
		if len(st.Outbox) == 0 && st.Seq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("parked at the gate, the state file still lists %d outbox transition(s) (seq %d); the control plane's last_seq is %d",
				len(st.Outbox), st.Seq, getRun(t, url, runID).GetRun().GetLastSeq())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	out, code := run(t, dir, "", "status", "demo")
	if code != 0 || strings.Contains(out, "Undelivered:") || !strings.Contains(out, "interrupted") {
		t.Fatalf("status after kill -9 at the gate: exit %d\n%s", code, out)
	}
	if last, seq := getRun(t, url, runID).GetRun().GetLastSeq(), readState(t, dir).Seq; last != seq {
		t.Fatalf("control plane last_seq %d, state file seq %d", last, seq)
	}
}
