//go:build linux

package e2e

import (
	"io"
	"regexp"
	"strings"
	"testing"
)

// TestTerminalGateBoxShowsTheGatePage: `rbook run demo` at a person's terminal (a pty, the
// embedded control plane, no runner) draws the gate's box with a last line naming the gate's
// page on the embedded control plane's loopback address; the run then completes with the
// answer typed at the terminal.
func TestTerminalGateBoxShowsTheGatePage(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	p := startPTY(t, dir, []string{"GITHUB_ACTIONS=", "NO_COLOR=1"}, "run", "demo")
	p.waitFor(t, "AWAITING_CONFIRMATION")
	p.waitFor(t, "> ")
	out := p.output()
	start := strings.Index(out, "╭─ Confirm gate")
	if start < 0 {
		t.Fatalf("no gate box:\n%s", out)
	}
	box := out[start:]
	box = box[:strings.Index(box, "╯")]
	m := regexp.MustCompile(`│ Or decide it in a browser: (http://127\.0\.0\.1:\d+/approvals/(a-[a-z2-7]{26})) +│`).FindStringSubmatch(box)
	if m == nil {
		t.Fatalf("the gate box has no loopback page line:\n%s", box)
	}
	if !strings.Contains(out, "Approval "+m[2]+" is open on ") {
		t.Errorf("the page %s is not the announced approval's:\n%s", m[1], out)
	}
	io.WriteString(p.ctl, "yes\n")
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
}
