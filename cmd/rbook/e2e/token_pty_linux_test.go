//go:build linux

package e2e

// An approver token never reaches a CI terminal (it needs startPTY, Linux only).

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTokenNotPrintedOnACITerminal: a CI job that gives rbook a pseudo-terminal
// (CI=true, GITHUB_ACTIONS unset) used to get the approval token printed into its log, because
// only GITHUB_ACTIONS=true counted as CI. With CI=true the playbook's approval node announces
// only its approval id, and the token is in neither the output nor the state file; a plain
// terminal still gets the approve command with its token.
func TestTokenNotPrintedOnACITerminal(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	writeFixture(t, filepath.Join(dir, "gate.cantbook"), "playbooks", "push-gate.cantbook") // approval ok, then a node that echoes git push
	tokenLike := regexp.MustCompile(`ey[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}`)
	p := startPTY(t, dir, []string{"CI=true", "GITHUB_ACTIONS=", "RBOOK_SHOW_TOKEN="}, "playbook", "run", "gate.cantbook", "--control-plane", url)
	p.waitFor(t, "its token is a secret and is not printed here")
	out := p.output()
	if tok := tokenLike.FindString(out); tok != "" || strings.Contains(out, "rbook playbook approve ") {
		t.Errorf("CI=true on a terminal printed the token or the approve command:\n%s", out)
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "gate.playbook.state.json"))
	if tokenLike.MatchString(readFile(t, filepath.Join(dir, ".rbook", "gate.playbook.state.json"))) {
		t.Errorf("the state file of run %s holds a token", st.RunID)
	}
	p.cmd.Process.Kill()
	p.wait(t)

	// The same on a person's terminal (no CI): the approve command with its token.
	dir2 := playbookWorkdir(t)
	writeTestFile(t, filepath.Join(dir2, "gate.cantbook"), []byte(readFile(t, filepath.Join(dir, "gate.cantbook"))))
	q := startPTY(t, dir2, []string{"CI=", "GITHUB_ACTIONS=", "RBOOK_SHOW_TOKEN="}, "playbook", "run", "gate.cantbook", "--control-plane", url)
	q.waitFor(t, "rbook playbook approve ")
	q.waitFor(t, "--control-plane "+url)
	if !tokenLike.MatchString(q.output()) {
		t.Errorf("a plain terminal did not get the token:\n%s", q.output())
	}
}
