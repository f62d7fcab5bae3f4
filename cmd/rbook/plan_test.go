package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A runbook, playbook, inputs file or policy file that does not load stops rbook plan with
// exit 2 and names the file, line and column of each problem, and what to do; nothing else is
// shown.
func TestPlanErrorsNameFileAndLine(t *testing.T) {
	td := filepath.Join("..", "..", "internal", "planview", "testdata")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"runbook", []string{"--dir", filepath.Join(td, "runbooks"), "broken"},
			[]string{filepath.Join(td, "runbooks", "broken.yaml") + ":6:14: runbook_steps[0].on_fail: must be one of halt, rollback, continue"}},
		{"runbook by its path, as validate takes it", []string{filepath.Join(td, "runbooks", "broken.yaml")},
			[]string{filepath.Join(td, "runbooks", "broken.yaml") + ":6:14: runbook_steps[0].on_fail: must be one of halt, rollback, continue"}},
		{"playbook name not in the working folder", []string{"--dir", td, "ship.cantbook"},
			[]string{"ship.cantbook: playbook file not found; playbooks in " + td + ": ", "(give its path: rbook plan " + filepath.Join(td, "ship.cantbook") + ")"}},
		{"playbook", []string{filepath.Join(td, "broken.cantbook")},
			[]string{filepath.Join(td, "broken.cantbook") + ":12:15: nodes[1].depends[0]: unknown node id \"nowhere\"", "has 3 issue(s)"}},
		{"missing playbook input", []string{filepath.Join(td, "ship.cantbook"), "--input", "version=1"},
			[]string{"deploy_token"}},
		{"gate policy", []string{"--dir", filepath.Join(td, "runbooks"), "shop", "--gate-policy", filepath.Join(td, "ship.cantbook")},
			[]string{"--gate-policy: " + filepath.Join(td, "ship.cantbook") + ":"}},
		{"inputs for a runbook", []string{"--dir", filepath.Join(td, "runbooks"), "shop", "--input", "a=b"},
			[]string{"--input and --inputs are for a playbook"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := rbookIn(t, append([]string{"plan"}, c.args...)...)
			if code != exitAborted || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}

// --summary appends the Markdown -o markdown prints to $GITHUB_STEP_SUMMARY, after what the
// job summary held already, and prints only one line (the Action's plan input; docs/plan.md).
func TestPlanSummaryAppendsTheMarkdownToTheJobSummary(t *testing.T) {
	sum := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(sum, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", sum)
	args := []string{"plan", "--dir", filepath.Join("..", "..", "runbooks"), "demo"}
	md, errs, code := rbookIn(t, append(args, "-o", "markdown")...)
	if code != 0 || !strings.Contains(md, "### Plan: runbook `demo`") {
		t.Fatalf("exit %d:\n%s%s", code, md, errs)
	}
	out, errs, code := rbookIn(t, append(args, "--summary")...)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	b, err := os.ReadFile(sum)
	if got := string(b); err != nil || got != "before\n"+md+"\n" {
		t.Errorf("summary:\n%s", got)
	}
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "is in the job summary") {
		t.Errorf("stdout %q", out)
	}
}

// In a GitHub Actions job the plan's text goes through the runner log, inside a
// stop-commands block, so a runbook's text is never read as a workflow command.
func TestPlanInAJobIsInsideStopCommands(t *testing.T) {
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Cleanup(func() { ciClose(); ciOut = nil })
	root := newRootCmd()
	var stdout, errw bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&errw)
	root.SetArgs([]string{"plan", "--dir", filepath.Join("..", "..", "runbooks"), "demo"})
	if code := execute(root, &errw); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errw.String())
	}
	ciClose() // as main does: the block ends
	out := stdout.String()
	first, rest, _ := strings.Cut(out, "\n")
	token, ok := strings.CutPrefix(first, "::stop-commands::")
	if !ok || !strings.Contains(rest, "confirm-rollout") || !strings.HasSuffix(rest, "::"+token+"::\n") {
		t.Errorf("output not inside one stop-commands block:\n%s", out)
	}
}
