package e2e

import (
	"strings"
	"testing"
)

// One status vocabulary: a run waiting at its gate reads
// AWAITING_CONFIRMATION in `rbook status` (the state file), `rbook runs` and `rbook get` (the
// control plane) alike, and COMPLETED everywhere once it ends.
func TestOneVocabularyEverywhere(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	p.waitFor(t, "AWAITING_CONFIRMATION")
	id := readState(t, dir).RunID
	for _, args := range [][]string{
		{"status", "demo"},
		{"runs", "--control-plane", url},
		{"get", id, "--control-plane", url},
	} {
		out, code := run(t, dir, "", args...)
		if code != 0 || !strings.Contains(out, "AWAITING_CONFIRMATION") || strings.Contains(out, "RUN_STATUS_") || strings.Contains(out, "paused") {
			t.Fatalf("rbook %s while the gate waits: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if out, _ := run(t, dir, "", "status", "demo"); !strings.Contains(out, "waiting at gate 'confirm-rollout'") {
		t.Fatalf("status does not name the gate:\n%s", out)
	}
	p.stdin.Write([]byte("yes\n"))
	if code := p.wait(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, p.output())
	}
	for _, args := range [][]string{
		{"status", "demo"},
		{"runs", "--control-plane", url},
		{"get", id, "--control-plane", url},
	} {
		out, code := run(t, dir, "", args...)
		if code != 0 || !strings.Contains(out, "COMPLETED") || strings.Contains(out, "SUCCEEDED") || strings.Contains(out, "succeeded") {
			t.Fatalf("rbook %s after the run: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}
