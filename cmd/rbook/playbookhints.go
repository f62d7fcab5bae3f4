package main

// Copy-pasteable hints of rbook playbook run (issue 9 UX, items 3 and 4): how to resume an
// interrupted run, how to end it, and how to decide an open approval node from elsewhere.

import (
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/state"
)

// shellQuote quotes s for a POSIX shell when it holds anything but [A-Za-z0-9_./:=@%+,-].
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:=@%+,-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// playbookResumeCmd is the command that resumes this playbook run, as a person would paste
// it: rbook playbook run FILE, with --state-file when it is not the default, --control-plane
// when one was named on the command line and --mcp-config when given. The inputs are not
// repeated: a resume reads them from the state file (runPlaybook), which the hint says.
func playbookResumeCmd(file, statePath string, f playbookFlags, planName string) string {
	parts := []string{"rbook", "playbook", "run", shellQuote(file)}
	if statePath != state.DefaultPlaybookStatePath(planName) {
		parts = append(parts, "--state-file", shellQuote(statePath))
	}
	if f.controlPlane != "" {
		parts = append(parts, "--control-plane", shellQuote(f.controlPlane))
	}
	if f.mcpConfig != "" {
		parts = append(parts, "--mcp-config", shellQuote(f.mcpConfig))
	}
	return strings.Join(parts, " ") + " (its inputs are read from the state file)"
}

// playbookEndHint is how to end an interrupted playbook run instead of resuming it. With a
// separate control plane (cpURL, not embedded) that is rbook playbook cancel RUN_ID
// --control-plane URL; with the embedded one or none, nothing can reach the run once this
// process has exited, so it says what works: resume it and type cancel at an approval node,
// or move the state file aside to drop the run.
func playbookEndHint(runID, statePath, cpURL string, embedded bool) string {
	if cpURL != "" && !embedded {
		return fmt.Sprintf("rbook playbook cancel %s --control-plane %s", runID, shellQuote(cpURL))
	}
	why := "it has no control plane to cancel it on"
	if embedded {
		why = "the embedded control plane that could cancel it ended with this process"
	}
	return fmt.Sprintf("resume it and type cancel at an approval node, or move %s aside to drop the run; %s", shellQuote(statePath), why)
}
