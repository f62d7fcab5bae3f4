package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// exampleWorkflow is the workflow the README shows.
const exampleWorkflow = "../../../examples/workflows/rbook-demo.yml"

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

// TestReadmeActionExampleIsACompleteWorkflow: the README's Action example is
// examples/workflows/rbook-demo.yml byte for byte; it has triggers, uses this repository's
// action with inputs action.yml declares, names a runbook that exists with its values and
// MCP config, and every step after the rbook step runs also when the run failed.
func TestReadmeActionExampleIsACompleteWorkflow(t *testing.T) {
	skipShort(t)
	text := readFile(t, exampleWorkflow)
	if !strings.Contains(readFile(t, "../../../README.md"), "```yaml\n"+text+"```\n") {
		t.Fatalf("README.md does not show %s as it is", exampleWorkflow)
	}
	var wf workflow
	if err := yaml.Unmarshal([]byte(text), &wf); err != nil {
		t.Fatal(err)
	}
	var action struct {
		Inputs map[string]any `yaml:"inputs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "../../../action.yml")), &action); err != nil {
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
				if _, err := os.Stat(filepath.Join("..", "..", "..", "runbooks", f)); err != nil {
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

// TestExampleRunbookCompletesInCI runs the workflow's runbook as the Action does
// in a job: GITHUB_ACTIONS set, stdin closed, control plane off. It completes, and the
// files the upload step collects are there.
func TestExampleRunbookCompletesInCI(t *testing.T) {
	skipShort(t)
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
	if p, err := filepath.Abs("../../../.ci-bin/actionlint"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("actionlint is not built: run `go build -C tools -o .ci-bin/actionlint github.com/rhysd/actionlint/cmd/actionlint` (bash .ci/run does)")
	return ""
}

// TestActionlintAcceptsTheExampleWorkflows: .ci/actionlint passes on
// examples/workflows, and fails on a copy with an input the action does not declare (so the
// check is real: it reads action.yml).
func TestActionlintAcceptsTheExampleWorkflows(t *testing.T) {
	skipShort(t)
	bin := actionlintBin(t)
	lint := func(dir string) (string, error) {
		cmd := exec.Command("bash", "../../../.ci/actionlint", dir)
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

// TestTypeScriptClientHelpAndToken: the documented `npx tsx smoke.ts --help`
// works, and the client sends $RBOOK_TOKEN (the variable docs/control-plane.md names) as its bearer token.
func TestTypeScriptClientHelpAndToken(t *testing.T) {
	skipShort(t)
	npx, tsDir := tsClient(t)
	if npx == "" {
		t.Skip("the TypeScript client is not installed (see the log above)")
	}
	help := exec.Command(npx, "tsx", "smoke.ts", "--help")
	help.Dir = tsDir
	out, err := help.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "Usage (from clients/ts, after npm ci):") || !strings.Contains(string(out), "RBOOK_TOKEN") {
		t.Fatalf("smoke.ts --help: %v\n%s", err, out)
	}
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.txt")
	os.WriteFile(auth, []byte("reader viewer viewer-token-0123456789\n"), 0o600)
	url := serveCP(t, dir, "--auth-file", auth)
	code := func(env ...string) string {
		t.Helper()
		cmd := exec.Command(npx, "tsx", "smoke.ts", "--addr", url, "--run-id", "RBOOK-20260101-none-00000000", "--protocol", "connect")
		cmd.Dir = tsDir
		cmd.Env = append(os.Environ(), env...)
		out, _ := cmd.Output()
		var line struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(out, &line); err != nil {
			t.Fatalf("smoke.ts output: %v\n%s", err, out)
		}
		return line.Error.Code
	}
	if got := code("RBOOK_TOKEN="); got != "unauthenticated" {
		t.Errorf("without RBOOK_TOKEN: %q, want unauthenticated", got)
	}
	if got := code("RBOOK_TOKEN=viewer-token-0123456789"); got != "not_found" {
		t.Errorf("with RBOOK_TOKEN: %q, want not_found (authenticated, no such run)", got)
	}
}

// TestNodeVersionTheReadmeNames: the Node version the docs name is the one
// npm ci accepts: package.json's engines, and every package in the lock file.
func TestNodeVersionTheReadmeNames(t *testing.T) {
	skipShort(t)
	named := regexp.MustCompile(`Node (\d+) or newer`)
	var major string
	for _, f := range []string{"../../../docs/control-plane.md", "../../../clients/ts/README.md"} {
		m := named.FindStringSubmatch(readFile(t, f))
		if m == nil {
			t.Fatalf("%s names no Node version", f)
		}
		if major != "" && m[1] != major {
			t.Fatalf("the docs name Node %s and %s", major, m[1])
		}
		major = m[1]
	}
	var pkg struct {
		Engines struct{ Node string } `json:"engines"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "../../../clients/ts/package.json")), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Engines.Node != ">="+major {
		t.Errorf("package.json engines.node = %q, the docs say Node %s or newer", pkg.Engines.Node, major)
	}
	if !strings.Contains(readFile(t, "../../../clients/ts/.npmrc"), "engine-strict=true") {
		t.Error("clients/ts/.npmrc does not make npm ci refuse other Node versions")
	}
	var lock struct {
		Packages map[string]struct {
			Engines  map[string]string `json:"engines"`
			Optional bool              `json:"optional"`
			OS       []string          `json:"os"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "../../../clients/ts/package-lock.json")), &lock); err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.Atoi(major)
	lowerBound := regexp.MustCompile(`^>=\s*(\d+)`)
	checked := 0
	for name, p := range lock.Packages {
		rng, ok := p.Engines["node"]
		if !ok || (p.Optional && len(p.OS) > 0) { // platform-only optional packages are not installed everywhere
			continue
		}
		accepted := false
		for _, alt := range strings.Split(rng, "||") {
			if m := lowerBound.FindStringSubmatch(strings.TrimSpace(alt)); m != nil {
				if n, _ := strconv.Atoi(m[1]); n <= want {
					accepted = true
				}
			}
		}
		checked++
		if !accepted {
			t.Errorf("%s requires node %q, which Node %d does not satisfy", name, rng, want)
		}
	}
	if checked == 0 {
		t.Fatal("no engines found in package-lock.json")
	}
}
