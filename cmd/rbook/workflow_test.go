package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// exampleWorkflow is the workflow the README shows (issue 6, item 3.5).
const exampleWorkflow = "../../examples/workflows/rbook-demo.yml"

type workflow struct {
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		Steps []struct {
			ID   string            `yaml:"id"`
			If   string            `yaml:"if"`
			Uses string            `yaml:"uses"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestIssue6_3_5_ReadmeActionExampleIsACompleteWorkflow: the README's Action example is
// examples/workflows/rbook-demo.yml byte for byte; it has triggers, uses this repository's
// action with inputs action.yml declares, names a runbook that exists with its values and
// MCP config, and every step after the rbook step runs also when the run failed.
func TestIssue6_3_5_ReadmeActionExampleIsACompleteWorkflow(t *testing.T) {
	text := readFile(t, exampleWorkflow)
	if !strings.Contains(readFile(t, "../../README.md"), "```yaml\n"+text+"```\n") {
		t.Fatalf("README.md does not show %s as it is", exampleWorkflow)
	}
	var wf workflow
	if err := yaml.Unmarshal([]byte(text), &wf); err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]any `yaml:"inputs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "../../action.yml")), &action); err != nil {
		t.Fatal(err)
	}
	if len(wf.On) == 0 {
		t.Fatal("the workflow has no on: triggers")
	}
	job, ok := wf.Jobs["runbook"]
	if !ok {
		t.Fatalf("no job 'runbook': %v", wf.Jobs)
	}
	after := false
	for _, st := range job.Steps {
		switch {
		case st.Uses == "./":
			after = true
			for k := range st.With {
				if _, ok := action.Inputs[k]; !ok {
					t.Errorf("input %q is not declared in action.yml", k)
				}
			}
			name := st.With["runbook"]
			for _, f := range []string{name + ".yaml", name + ".values.yaml", name + ".mcp.json"} {
				if _, err := os.Stat(filepath.Join("..", "..", "runbooks", f)); err != nil {
					t.Errorf("the workflow's runbook needs runbooks/%s: %v", f, err)
				}
			}
		case after && st.If != "always()":
			t.Errorf("step %+v after the rbook step has no if: always()", st)
		}
	}
	if !after {
		t.Fatal("no step uses ./ (this repository's action)")
	}
}

// TestIssue6_3_5_ExampleRunbookCompletesInCI runs the workflow's runbook as the Action does
// in a job: GITHUB_ACTIONS set, stdin closed, control plane off. It completes, and the
// files the upload step collects are there.
func TestIssue6_3_5_ExampleRunbookCompletesInCI(t *testing.T) {
	dir := workdir(t)
	cmd := exec.Command(rbookBin, "run", "ci-demo", "--dir", "runbooks")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GITHUB_ACTIONS=true", "RBOOK_CONTROL_PLANE=off",
		"GITHUB_STEP_SUMMARY="+filepath.Join(dir, "summary.md"), "GITHUB_OUTPUT="+filepath.Join(dir, "output"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "COMPLETED") {
		t.Fatalf("run ci-demo: %v\n%s", err, out)
	}
	for _, glob := range []string{".rbook/*.state.json", ".rbook/*.evidence.json"} {
		if m, _ := filepath.Glob(filepath.Join(dir, glob)); len(m) != 1 {
			t.Errorf("%s matches %v, want one file", glob, m)
		}
	}
	if o := readFile(t, filepath.Join(dir, "output")); !strings.Contains(o, "COMPLETED") {
		t.Errorf("step outputs: %s", o)
	}
}

// actionlintBin finds the pinned actionlint: on PATH, or built by .ci/run into .ci-bin.
func actionlintBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("actionlint"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../../.ci-bin/actionlint"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("actionlint is not built: run `go build -C tools -o .ci-bin/actionlint github.com/rhysd/actionlint/cmd/actionlint` (bash .ci/run does)")
	return ""
}

// TestIssue6_3_5_ActionlintAcceptsTheExampleWorkflows: .ci/actionlint passes on
// examples/workflows, and fails on a copy with an input the action does not declare (so the
// check is real: it reads action.yml).
func TestIssue6_3_5_ActionlintAcceptsTheExampleWorkflows(t *testing.T) {
	bin := actionlintBin(t)
	lint := func(dir string) (string, error) {
		cmd := exec.Command("bash", "../../.ci/actionlint", dir)
		cmd.Env = append(os.Environ(), "ACTIONLINT="+bin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := lint("examples/workflows"); err != nil || !strings.Contains(out, "actionlint: ok") {
		t.Fatalf("actionlint on examples/workflows: %v\n%s", err, out)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "bad.yml"), []byte(strings.Replace(readFile(t, exampleWorkflow), "runbook: ci-demo", "runbok: ci-demo", 1)), 0o644)
	if out, err := lint(bad); err == nil || !strings.Contains(out, `input "runbok" is not defined in action "rbook"`) {
		t.Fatalf("actionlint accepted an undeclared input: %v\n%s", err, out)
	}
}
