//go:build linux

package e2e

import (
	"io"
	"strings"
	"testing"
)

// TestApprovalBoxShowsThePrompt: on a terminal, a playbook approval node's box is
// titled "Approval · node 'review'", shows the node's rendered prompt, says the run is paused
// and what approve and reject lead to; none of the runbook's confirm-gate words.
func TestApprovalBoxShowsThePrompt(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	p := startPTY(t, dir, []string{"NO_COLOR=1"}, "playbook", "run", "runbooks/release.cantbook", "--input", "version=2026.4.90", "--control-plane", "off")
	p.waitFor(t, "╭─ Approval · node 'review' ")
	p.waitFor(t, "> ")
	io.WriteString(p.ctl, "no\n")
	if code := p.wait(t); code != 1 {
		t.Fatalf("exit %d, want 1 (rejected)\n%s", code, p.output())
	}
	out := p.output()
	box := out[strings.Index(out, "╭─ Approval"):]
	box = box[:strings.Index(box, "╯")]
	for _, want := range []string{
		"│ Build + tests green. Publish 2026.4.90 to npm?",
		"is paused at approval node",
		"The approval closes at",
		"│   yes, approve    approve: the nodes after 'review' run",
		"│   anything else   reject: node 'review' fails; the playbook's error",
		"handlers apply (without one, the run fails)",
	} {
		if !strings.Contains(box, want) {
			t.Errorf("the approval box lacks %q:\n%s", want, box)
		}
	}
	for _, bad := range []string{"Confirm gate", "AWAITING_CONFIRMATION", "you confirm the deployment", "step 3 of 4"} {
		if strings.Contains(box, bad) {
			t.Errorf("the approval box says %q:\n%s", bad, box)
		}
	}
}
