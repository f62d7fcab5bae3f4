package e2e

// End-to-end tests of rbook playbook with the built binary, as a user runs it.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

var playbookApproveLine = regexp.MustCompile(`rbook playbook approve (\S+)`)

// playbookWorkdir is workdir with the shipped runbooks/bin (the demo's stub pnpm) and the
// built rbook first on PATH (the demo's mcp.json starts "rbook mcp demo-release").
func playbookWorkdir(t *testing.T) string {
	t.Helper()
	dir := workdir(t)
	bin := filepath.Join(dir, "runbooks", "bin")
	os.MkdirAll(bin, 0o755)
	entries, err := os.ReadDir(filepath.Join("..", "..", "..", "runbooks", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "runbooks", "bin", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(bin, e.Name()), data)
		os.Chmod(filepath.Join(bin, e.Name()), 0o755)
	}
	t.Setenv("PATH", filepath.Dir(rbookBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func readPlaybookState(t *testing.T, path string) *state.State {
	t.Helper()
	st, err := state.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readPlaybookRun reads the run of the state file at path as its journal has it, as `rbook
// status` reads it (state.ReadCurrent): after a kill -9 the state file itself may be one
// rewrite behind, since the rewrite that records a node's start overlaps the node
// (docs/decisions/durability.md, "The journal").
func readPlaybookRun(t *testing.T, path string) *state.State {
	t.Helper()
	st, err := state.ReadCurrent(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPlaybookReleaseFlow is the acceptance flow: release.cantbook runs build →
// test → pauses at review (paused on the control plane, a pending approval of node review) →
// rbook playbook approve <token> → publish → succeeded; the token replayed gets
// E_APPROVAL_ALREADY_DECIDED; the bindings hold the input and each node's output; the report
// shows the DAG; rbook playbook status shows the nodes.
func TestPlaybookReleaseFlow(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "runbooks/release.cantbook", "--input", "version=2026.4.90", "--control-plane", url,
		"--report", "report.md", "--epic", "T889", "--session", "ses_xyz")
	p.waitFor(t, "rbook playbook approve ")
	tok := playbookApproveLine.FindStringSubmatch(p.output())[1]
	statePath := filepath.Join(dir, ".rbook", "release-cut.playbook.state.json")
	st := readPlaybookState(t, statePath)
	c := cpclient.New(url, "")
	run := getRun(t, url, st.RunID).GetRun()
	if run.GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED || run.GetKind() != rbookv1.RunKind_RUN_KIND_PLAYBOOK {
		t.Fatalf("at the review gate the run is %v (%v), want paused playbook", run.GetStatus(), run.GetKind())
	}
	if pb := run.GetPlaybook(); pb.GetEpicId() != "T889" || pb.GetSessionId() != "ses_xyz" {
		t.Errorf("epic %q session %q", pb.GetEpicId(), pb.GetSessionId())
	}
	aps, err := c.Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: st.RunID, Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING})
	if err != nil || len(aps.GetApprovals()) != 1 || aps.GetApprovals()[0].GetStepName() != "review" {
		t.Fatalf("pending approvals: %v %v", aps.GetApprovals(), err)
	}
	if out, code := run2(t, dir, "playbook", "approve", tok, "--control-plane", url, "--reason", "ship it"); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("rbook playbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the approval\n%s", code, p.output())
	}
	out := p.output()
	for _, want := range []string{"first (PATH is prepended with the playbook's bin folder)", "Run " + st.RunID + " succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	resp := getRun(t, url, st.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	var cpBindings map[string]any
	if err := json.Unmarshal([]byte(resp.GetRun().GetPlaybook().GetBindings()), &cpBindings); err != nil {
		t.Fatalf("control plane bindings %q: %v", resp.GetRun().GetPlaybook().GetBindings(), err)
	}
	st = readPlaybookState(t, statePath)
	for name, b := range map[string]map[string]any{"state file": st.Bindings, "control plane": cpBindings} {
		if b["version"] != "2026.4.90" {
			t.Errorf("%s bindings lack the input version: %v", name, b)
		}
		for _, node := range []string{"build", "test", "review", "publish"} {
			if _, ok := b[node].(map[string]any); !ok {
				t.Errorf("%s bindings lack node %s's output: %v", name, node, b)
			}
		}
		if rv, _ := b["review"].(map[string]any); rv["approved"] != true {
			t.Errorf("%s bindings: review = %v, want approved true", name, b["review"])
		}
	}
	if st.IterationCounts["build"] != 1 || st.IterationCounts["publish"] != 1 {
		t.Errorf("iteration_counts %v", st.IterationCounts)
	}
	rep := readFile(t, filepath.Join(dir, "report.md"))
	for _, want := range []string{"# Playbook Execution Report", "| Playbook | release-cut", "| Status | **succeeded** |", "| Playbook hash |", "## Nodes", "## Playbook graph", "```mermaid", "review<br/>approval · PASS", "class n3 pass"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	out, code := run2(t, dir, "playbook", "approve", tok, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_APPROVAL_ALREADY_DECIDED") {
		t.Fatalf("replayed token: exit %d\n%s", code, out)
	}
	out, code = run2(t, dir, "playbook", "status", st.RunID, "--control-plane", url)
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, `"version": "2026.4.90"`) || !regexp.MustCompile(`publish\s+agentic\s+PASS\s+1`).MatchString(out) {
		t.Errorf("rbook playbook status: exit %d\n%s", code, out)
	}
	for _, f := range []string{statePath, filepath.Join(dir, "report.md"), state.EvidencePath(statePath, st.RunID)} {
		if strings.Contains(readFile(t, f), tok) {
			t.Errorf("%s holds the approval token", f)
		}
	}
}

// run2 is run with no stdin.
func run2(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	return run(t, dir, "", args...)
}

// TestPlaybookBadInputsRefusedBeforeAnyRecord: a missing required input, an unknown
// one and an invalid playbook are refused (exit 2) before anything is recorded: no state
// file, no run on the control plane.
func TestPlaybookBadInputsRefusedBeforeAnyRecord(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	writeTestFile(t, filepath.Join(dir, "bad.cantbook"), []byte("version: \"1.0\"\nname: bad\nnodes:\n  - id: a\n    type: deterministic\n"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"runbooks/release.cantbook"}, "version"},
		{[]string{"runbooks/release.cantbook", "--input", "version=1", "--input", "bogus=2"}, "bogus"},
		{[]string{"runbooks/release.cantbook", "--input", "novalue"}, `--input "novalue": write NAME=VALUE`},
		{[]string{"bad.cantbook"}, "bad.cantbook:4"},
	} {
		out, code := run2(t, dir, append(append([]string{"playbook", "run"}, tc.args...), "--control-plane", url)...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("playbook run %v: exit %d, want 2 naming %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "release-cut.playbook.state.json")); !os.IsNotExist(err) {
		t.Errorf("a refused run left a state file: %v", err)
	}
	runs, err := cpclient.New(url, "").Runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{})
	if err != nil || len(runs.GetRuns()) != 0 {
		t.Errorf("a refused run reached the control plane: %v %v", runs.GetRuns(), err)
	}
}

// TestPlaybookValidateListsEveryIssue: validate prints every issue of every file as
// file:line:col: field: message and exits 2 (as rbook validate); valid files print ok and exit 0.
func TestPlaybookValidateListsEveryIssue(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeFixture(t, filepath.Join(dir, "bad.cantbook"), "playbooks", "validate-issues.cantbook")
	out, code := run2(t, dir, "playbook", "validate", "runbooks/release.cantbook", "bad.cantbook")
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	lines := regexp.MustCompile(`(?m)^bad\.cantbook:\d+:\d+: \S+: .+$`).FindAllString(out, -1)
	if len(lines) < 4 {
		t.Errorf("want at least 4 issues (command/args, duplicate id, prompt, skill/agent, depends), got %d:\n%s", len(lines), out)
	}
	if !strings.Contains(out, "runbooks/release.cantbook: ok (4 nodes, playbook release-cut") {
		t.Errorf("release.cantbook not ok:\n%s", out)
	}
	if out, code := run2(t, dir, "playbook", "validate", "runbooks/release.cantbook"); code != 0 {
		t.Errorf("valid playbook: exit %d\n%s", code, out)
	}
}

// TestPlaybookKillResumeRunsNoRecordedNodeAgain: kill -9 while a slow node runs, then
// rbook playbook run again: it resumes the same run (RESUMING), refuses first because the slow
// node is in unknown state (naming it and --rerun-node/--skip-node), and with --rerun-node
// runs only that node again: the node recorded before the kill ran exactly once (a marker
// file counts executions).
func TestPlaybookKillResumeRunsNoRecordedNodeAgain(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeSlowPlaybook(t, dir)
	args := []string{"playbook", "run", "slow.cantbook", "--control-plane", "off"}
	p := start(t, dir, args...)
	p.waitFor(t, "'slow'") // the step_started line: the journal already holds slow in flight
	killInSlowNode(t, p, dir)
	statePath := filepath.Join(dir, ".rbook", "slow.playbook.state.json")
	st := readPlaybookRun(t, statePath)
	if len(st.InFlightNodes) != 1 || st.InFlightNodes[0].StepName != "slow" {
		t.Fatalf("after kill -9, in_flight_nodes = %v", st.InFlightNodes)
	}
	rerunSlowNode(t, dir, args, st.RunID)
	st = readPlaybookState(t, statePath)
	if st.RunStatus != "COMPLETED" || st.IterationCounts["slow"] != 2 || st.IterationCounts["first"] != 1 {
		t.Errorf("final %s, iteration_counts %v", st.RunStatus, st.IterationCounts)
	}
}

// TestPlaybookSkipNodeGoesOnAfterIt: after kill -9 mid-node, --skip-node records the
// node SKIPPED (saying who and why) and the run goes on with its dependants; the node
// recorded before the kill never runs again and the skipped one is not run.
func TestPlaybookSkipNodeGoesOnAfterIt(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeSlowPlaybook(t, dir)
	args := []string{"playbook", "run", "slow.cantbook", "--control-plane", "off"}
	p := start(t, dir, args...)
	p.waitFor(t, "'slow'")
	killInSlowNode(t, p, dir)
	out, code := run2(t, dir, append(args, "--skip-node", "slow")...)
	if code != 0 || !strings.Contains(out, "RESUMING run") {
		t.Fatalf("resume --skip-node slow: exit %d\n%s", code, out)
	}
	for f, want := range map[string]int{"first.count": 1, "slow.count": 1, "last.count": 1} {
		if n := strings.Count(readFile(t, filepath.Join(dir, f)), "ran"); n != want {
			t.Errorf("%s: %d executions, want %d", f, n, want)
		}
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "slow.playbook.state.json"))
	var slow []string
	for _, e := range st.EvidencePack {
		if e.StepName == "slow" {
			slow = append(slow, string(e.Status)+": "+e.Output)
		}
	}
	if len(slow) != 1 || !strings.HasPrefix(slow[0], "SKIPPED: skipped: when resumed, by ") || !strings.Contains(slow[0], "--skip-node") {
		t.Errorf("slow's evidence: %q", slow)
	}
}

// TestPlaybookLocalPolicyAutoPasses: with --control-plane off the auto-pass policy is
// evaluated before the terminal is asked: the fanout demo's gate guards only read-only
// commands, so the default rules pass it (stdin is closed: nobody could answer), and the
// decision (rule, auto_passed) is in the node's evidence output; --policy-shadow records the
// same verdict and lets the closed terminal decide, which fails the gate.
func TestPlaybookLocalPolicyAutoPasses(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	out, code := run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off")
	if code != 0 {
		t.Fatalf("fanout: exit %d\n%s", code, out)
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "fanout-demo.playbook.state.json"))
	gate := ""
	for _, e := range st.EvidencePack {
		if e.Type == "approval" {
			gate = e.Output
		}
	}
	if !strings.Contains(gate, `"auto_passed":true`) || !strings.Contains(gate, "default-read-only") {
		t.Errorf("the gate's evidence output %q lacks the policy's decision", gate)
	}
	out, code = run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off", "--policy-shadow")
	if code != 1 {
		t.Fatalf("shadow: exit %d, want 1 (nobody can answer)\n%s", code, out)
	}
}

// waitForFile waits until path exists (the slow node's own marker), for at most 60 s, the
// bound of the process waits (waitFor): a loaded CI machine may take seconds to start a node.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); waitTick() {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared within 60 s", path)
}

// waitTick is waitForFile's poll interval: the marker is written by a child process, which
// tells nothing else.
func waitTick() { time.Sleep(10 * time.Millisecond) }

// writeSlowPlaybook writes dir/slow.cantbook (testdata/playbooks/slow.cantbook): nodes first →
// slow → last, each appending "ran" to <id>.count; slow then writes slow.started and sleeps
// 60 s, unless dir/go-fast exists (then it passes at once). Shared by the kill -9 / resume tests.
func writeSlowPlaybook(t *testing.T, dir string) {
	t.Helper()
	writeFixture(t, filepath.Join(dir, "slow.cantbook"), "playbooks", "slow.cantbook")
}

// killInSlowNode waits until p's slow node of writeSlowPlaybook has started (slow.started in
// dir), then kills p with SIGKILL and waits for it to end.
func killInSlowNode(t *testing.T, p *proc, dir string) {
	t.Helper()
	waitForFile(t, filepath.Join(dir, "slow.started"))
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
}

// rerunSlowNode is the resume after killInSlowNode: rbook args again exits 2 naming the slow
// node in unknown state and --rerun-node; with go-fast written and --rerun-node slow it
// resumes run runID (RESUMING) and completes, and only slow ran twice (the .count files).
func rerunSlowNode(t *testing.T, dir string, args []string, runID string) {
	t.Helper()
	out, code := run2(t, dir, args...)
	if code != 2 || !strings.Contains(out, "node in unknown state") || !strings.Contains(out, "'slow'") || !strings.Contains(out, "--rerun-node") {
		t.Fatalf("resume with slow in flight: exit %d, want 2 naming 'slow' and --rerun-node\n%s", code, out)
	}
	writeTestFile(t, filepath.Join(dir, "go-fast"), []byte("1"))
	out, code = run2(t, dir, append(args, "--rerun-node", "slow")...)
	if code != 0 || !strings.Contains(out, "RESUMING run "+runID) {
		t.Fatalf("resume --rerun-node slow: exit %d\n%s", code, out)
	}
	for f, want := range map[string]int{"first.count": 1, "slow.count": 2, "last.count": 1} {
		if n := strings.Count(readFile(t, filepath.Join(dir, f)), "ran"); n != want {
			t.Errorf("%s: %d executions, want %d", f, n, want)
		}
	}
}
