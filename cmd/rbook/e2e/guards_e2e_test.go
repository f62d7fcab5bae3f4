package e2e

// End-to-end tests, with the built binary, of the guards a run checks before its first step:
// a setup problem that 'rbook validate' reports stops the run with exit 2 and leaves nothing
// behind; it is never recorded as a step's result.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFixture copies testdata/guards/name to dst.
func copyFixture(t *testing.T, name, dst string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "guards", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertNothingRecorded fails when dir has a .rbook folder (a state file, a lock, an
// embedded control plane) or out shows that a step ran.
func assertNothingRecorded(t *testing.T, dir, out string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".rbook")); !os.IsNotExist(err) {
		t.Errorf(".rbook exists after a refused run (stat: %v)", err)
	}
	for _, ran := range []string{"deploy-app-config", "web-apps-enforce-https", "PASS", "FAIL", "COMPLETED"} {
		if strings.Contains(out, ran) {
			t.Errorf("the output mentions %q, as if a step ran:\n%s", ran, out)
		}
	}
}

// TestSetupProblemsValidateReportsStopTheRunBeforeItsFirstStep: a setup problem that 'rbook
// validate' (or 'rbook playbook validate') reports with exit 2 stops 'rbook run', 'rbook
// resume' and 'rbook playbook run' with exit 2 and the same problem, before the first step or
// node: no state file, no .rbook folder, no simulated deploy, although the demo's second check
// has on_fail: continue. The problems: an MCP config whose server command does not exist; one
// with two servers where check steps use the only one; an agentic node whose server cannot
// start; and a report template that parses but fails when rendered ({{ .Nope.Field }}), which
// used to let every step run, the deploy included, and end the run COMPLETED with exit 2 when
// its report could not be rendered.
func TestSetupProblemsValidateReportsStopTheRunBeforeItsFirstStep(t *testing.T) {
	skipShort(t)
	tmpl, err := filepath.Abs(filepath.Join("testdata", "guards", "broken-templates"))
	if err != nil {
		t.Fatal(err)
	}
	demoRuns := [][]string{
		{"run", "demo"},
		{"run", "demo", "--control-plane", "off"},
		{"resume", "demo", "--control-plane", "http://127.0.0.1:9"},
	}
	for _, tc := range []struct {
		name         string
		workdir      func(*testing.T) string
		fixture, dst string // testdata/guards file copied to dst in the work folder ("" for none)
		validate     []string
		runs         [][]string
		want         string
		nothingRun   bool // the refusal also says "Nothing was run or recorded"
	}{
		{"MCP server command not found", workdir, "missing-command.mcp.json", "runbooks/demo.mcp.json", []string{"validate", "demo"}, demoRuns,
			`runbooks/demo.mcp.json:3:5: mcpServers.inventory.command: command "no-such-mcp-server-xyz" is not found (on PATH, or as a path from the working directory); a run's check steps could not start this server`, true},
		{"two MCP servers", workdir, "two-servers.mcp.json", "runbooks/demo.mcp.json", []string{"validate", "demo"}, demoRuns,
			`runbooks/demo.mcp.json: mcpServers: defines 2 servers (inventory, release); a run's check steps use the only server of their MCP config`, true},
		{"agentic node's server command not found", playbookWorkdir, "release-missing-agent.mcp.json", "runbooks/release.mcp.json",
			[]string{"playbook", "validate", "runbooks/release.cantbook"}, [][]string{{"playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3"}},
			`runbooks/release.mcp.json:3:5: mcpServers.demo-release.command: command "no-such-release-server-xyz" is not found (on PATH, or as a path from the working directory); agentic node "publish" could not start this server`, true},
		{"report template fails when rendered", workdir, "", "", []string{"validate", "demo", "--templates", tmpl},
			[][]string{{"run", "demo", "--templates", tmpl}, {"playbook", "run", "runbooks/release.cantbook", "--input", "version=1", "--templates", tmpl}},
			filepath.Join(tmpl, "templates", "output-report.md") + `:5: fails when rendered for a sample IN_PROGRESS runbook run report: executing "templates/output-report.md" at <.Nope.Field>: can't evaluate field Nope in type report.Report`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.workdir(t)
			if tc.fixture != "" {
				copyFixture(t, tc.fixture, filepath.Join(dir, filepath.FromSlash(tc.dst)))
			}
			out, errOut, code := runSplit(t, dir, nil, tc.validate...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("%s: exit %d, want 2 and\n%s\nstdout:\n%s\nstderr:\n%s", tc.validate, code, tc.want, out, errOut)
			}
			for _, args := range tc.runs {
				out, errOut, code := runSplitIn(t, dir, nil, strings.NewReader("yes\nyes\n"), args...)
				if code != 2 || !strings.Contains(errOut, tc.want) || tc.nothingRun && !strings.Contains(errOut, "Nothing was run or recorded") {
					t.Fatalf("%s: exit %d, want 2 and\n%s\nstdout:\n%s\nstderr:\n%s", args, code, tc.want, out, errOut)
				}
				assertNothingRecorded(t, dir, out+errOut)
			}
		})
	}
}

// TestPinnedApprovalNodeWaitsForAPersonWhereTheDefaultPolicyWouldPassIt: the go-live node
// guards only `echo deploying production`, which the built-in read-only rule passes: without
// a pin, validate and the run's start say so and the run passes it with nobody asked; with
// policy: require-human, validate is quiet about it and the run (on the embedded control
// plane, and with --control-plane off) waits for a person, whose yes decides it.
func TestPinnedApprovalNodeWaitsForAPersonWhereTheDefaultPolicyWouldPassIt(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	for _, f := range []string{"go-live.cantbook", "go-live-unpinned.cantbook"} {
		copyFixture(t, f, filepath.Join(dir, f))
	}
	warning := "approval node 'go-live' would be auto-passed by rule 'default-read-only' (only read-only or QA commands, no agentic node); add policy: require-human to it to ask a person"

	_, errOut, code := runSplit(t, dir, nil, "playbook", "validate", "go-live-unpinned.cantbook")
	if code != 0 || !strings.Contains(errOut, "warning: go-live-unpinned.cantbook:5:5: nodes[1]: "+warning) {
		t.Fatalf("validate unpinned: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := runSplit(t, dir, nil, "playbook", "validate", "go-live.cantbook"); code != 0 || strings.Contains(errOut, "would be auto-passed") {
		t.Fatalf("validate pinned: exit %d\n%s", code, errOut)
	}

	// Unpinned: passed by the policy, nobody asked (stdin is empty), and the start said so.
	out, code := run(t, dir, "", "playbook", "run", "go-live-unpinned.cantbook", "--control-plane", "off")
	if code != 0 || !strings.Contains(out, warning) {
		t.Fatalf("unpinned run: exit %d\n%s", code, out)
	}
	if got := approvalOutput(t, dir, "go-live-unpinned"); !strings.Contains(got, `"auto_passed":true`) || !strings.Contains(got, `"rule":"default-read-only"`) {
		t.Fatalf("unpinned gate's evidence: %s", got)
	}

	// Pinned: the run waits at the gate until a person answers, on either kind of gate.
	for _, args := range [][]string{{"playbook", "run", "go-live.cantbook"}, {"playbook", "run", "go-live.cantbook", "--control-plane", "off"}} {
		os.RemoveAll(filepath.Join(dir, ".rbook"))
		p := start(t, dir, args...)
		p.waitFor(t, "Type yes")
		if strings.Contains(p.output(), "deploying") {
			t.Fatalf("%s: the deploy ran before the gate was answered:\n%s", args, p.output())
		}
		if _, err := p.stdin.Write([]byte("yes\n")); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != 0 || strings.Contains(p.output(), "would be auto-passed") {
			t.Fatalf("%s: exit %d\n%s", args, code, p.output())
		}
		got := approvalOutput(t, dir, "go-live")
		if !strings.Contains(got, `"auto_passed":false`) || !strings.Contains(got, `"rule":"node-policy"`) || !strings.Contains(got, `"approved":true`) || strings.Contains(got, `"by":"policy"`) {
			t.Fatalf("%s: pinned gate's evidence: %s", args, got)
		}
	}
}

// approvalOutput is the evidence output of the go-live approval node in the state file of
// playbook name.
func approvalOutput(t *testing.T, dir, name string) string {
	t.Helper()
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", name+".playbook.state.json"))
	for _, e := range st.EvidencePack {
		if e.StepName == "go-live" {
			return e.Output
		}
	}
	t.Fatalf("no evidence of go-live in %s's state file", name)
	return ""
}
