package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runSplitStdin is runSplit with stdin (a pipe, not a terminal) and no $RBOOK_CONTROL_PLANE.
func runSplitStdin(t *testing.T, dir, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runSplitIn(t, dir, nil, strings.NewReader(stdin), args...)
}

// The playbook words a new user meets: every test runs the built binary. Runbook strings are
// contracts (docs/spec/runbooks.md); each test also checks a runbook run still says what it said.

// TestPlaybookRunJSON: rbook playbook run -o json keeps the state-file keys
// (run_status COMPLETED/FAILED, runbook_name, total_steps) and adds kind "playbook", name,
// status in playbook words and the nodes with their status and iterations; a runbook run's
// JSON has none of the new keys.
func TestPlaybookRunJSON(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	stdout, stderr, code := runSplitStdin(t, dir, "no\n", "playbook", "run", "runbooks/release.cantbook", "--input", "version=2026.4.90", "--control-plane", "off", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (rejected)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res struct {
		Kind        string `json:"kind"`
		Name        string `json:"name"`
		Status      string `json:"status"`
		RunStatus   string `json:"run_status"`
		RunbookName string `json:"runbook_name"`
		TotalSteps  int    `json:"total_steps"`
		ExitCode    int    `json:"exit_code"`
		Nodes       []struct {
			ID, Type, Status string
			Iterations       int
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if res.Kind != "playbook" || res.Name != "release-cut" || res.Status != "failed" || res.RunStatus != "FAILED" ||
		res.RunbookName != "release-cut" || res.TotalSteps != 4 || res.ExitCode != 1 {
		t.Errorf("playbook result: %+v\n%s", res, stdout)
	}
	want := []string{"build deterministic PASS 1", "test deterministic PASS 1", "review approval FAIL 1", "publish agentic SKIPPED 0"}
	var got []string
	for _, n := range res.Nodes {
		got = append(got, strings.Join([]string{n.ID, n.Type, n.Status, strconv.Itoa(n.Iterations)}, " "))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("nodes %q, want %q (publish SKIPPED: not run after the rejection)", got, want)
	}

	// A runbook run: the same JSON as before, without the playbook keys.
	rdir := workdir(t)
	stdout, stderr, code = runSplitStdin(t, rdir, "yes\n", "run", "demo", "--control-plane", "off", "-o", "json")
	if code != 0 {
		t.Fatalf("runbook run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kind", "name", "status", "nodes"} {
		if _, ok := keys[k]; ok {
			t.Errorf("a runbook run's -o json has the playbook key %q:\n%s", k, stdout)
		}
	}
	if string(keys["run_status"]) != `"COMPLETED"` || string(keys["runbook_name"]) != `"demo"` {
		t.Errorf("runbook run JSON changed:\n%s", stdout)
	}
}

// TestPolicyLineIsOneSentence: at a gate no rule auto-passes, the decided line says
// "policy: a person decides (no auto-pass rule matched)", not the rule machinery.
func TestPolicyLineIsOneSentence(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	_, stderr, code := runSplitStdin(t, dir, "no\n", "playbook", "run", "runbooks/release.cantbook", "--input", "version=2026.4.90", "--control-plane", "off")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "Gate 'review' rejected by ") || !strings.Contains(stderr, "; policy: a person decides (no auto-pass rule matched)\n") ||
		strings.Contains(stderr, "require-human by rule") || strings.Contains(stderr, "a human decides") {
		t.Errorf("policy line:\n%s", stderr)
	}
}

// TestRunsListsTheKindOfEachRun: rbook runs names the kind of each run, with playbook and
// runbook runs in one list: NAME, KIND, status in the kind's words, DONE (nodes finished of
// the playbook's nodes; steps done of the runbook's steps, as before).
func TestRunsListsTheKindOfEachRun(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	if _, stderr, code := runSplitStdin(t, dir, "no\n", "playbook", "run", "runbooks/release.cantbook", "--input", "version=2026.4.90"); code != 1 {
		t.Fatalf("playbook run: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runSplitStdin(t, dir, "yes\n", "run", "demo"); code != 0 {
		t.Fatalf("runbook run: exit %d\n%s", code, stderr)
	}
	stdout, stderr, code := runSplit(t, dir, nil, "runs")
	if code != 0 {
		t.Fatalf("runs: exit %d\n%s", code, stderr)
	}
	for _, re := range []string{
		`(?m)^RUN +NAME +KIND +STATUS +DONE +STARTED +BY$`,
		`(?m)^RBOOK-\S+ +release-cut +playbook +failed +4/4 `,
		`(?m)^RBOOK-\S+ +demo +runbook +COMPLETED +6/6 `,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("runs output lacks %s:\n%s", re, stdout)
		}
	}
}

// TestPlaybookHelpSpeaksPlainly: the playbook commands' help has no spec jargon,
// names 'rbook playbook run' as the run whose embedded control plane they talk to, gives a
// reject example with a reason for rejecting, and says what validate prints and exits; the
// runbook commands' help still names 'rbook run'; parser messages carry no rule numbers.
func TestPlaybookHelpSpeaksPlainly(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	help := func(args ...string) string {
		out, code := run2(t, dir, append(args, "--help")...)
		if code != 0 {
			t.Fatalf("%v --help: exit %d\n%s", args, code, out)
		}
		return out
	}
	for _, cmd := range [][]string{{"playbook"}, {"playbook", "run"}, {"playbook", "validate"}, {"playbook", "status"}, {"playbook", "approve"}, {"playbook", "reject"}, {"playbook", "cancel"}} {
		out := help(cmd...)
		for _, bad := range []string{"seed ", "playbooks.txt", "(rule ", "a running 'rbook run'", "an 'rbook run' in progress"} {
			if strings.Contains(out, bad) {
				t.Errorf("rbook %s --help says %q:\n%s", strings.Join(cmd, " "), bad, out)
			}
		}
	}
	for _, cmd := range [][]string{{"playbook", "status"}, {"playbook", "approve"}, {"playbook", "reject"}} {
		if out := help(cmd...); !strings.Contains(out, "'rbook playbook run'") {
			t.Errorf("rbook %s --help does not name 'rbook playbook run':\n%s", strings.Join(cmd, " "), out)
		}
	}
	if out := help("playbook", "reject"); strings.Contains(out, "looks right") || !strings.Contains(out, `--reason "wrong version`) {
		t.Errorf("reject example:\n%s", out)
	}
	if out := help("playbook", "validate"); !strings.Contains(out, `"FILE: ok (N nodes, playbook NAME, hash H)"`) || !strings.Contains(out, "2 some file has issues") {
		t.Errorf("validate help:\n%s", out)
	}
	if out := help("approve"); !strings.Contains(out, "the embedded one of a running 'rbook run')") {
		t.Errorf("the runbook approve help changed:\n%s", out)
	}
	_, stderr, code := runSplit(t, dir, nil, "playbook", "approve", "bm90LWEtdG9rZW4")
	if code != 2 || !strings.Contains(stderr, "a running 'rbook playbook run' starts an embedded one") {
		t.Errorf("playbook approve with no control plane: exit %d\n%s", code, stderr)
	}
	_, stderr, code = runSplit(t, dir, nil, "approve", "a-"+strings.Repeat("a", 26))
	if code != 2 || !strings.Contains(stderr, "a running 'rbook run' starts an embedded one") {
		t.Errorf("approve with no control plane: exit %d\n%s", code, stderr)
	}
	writeTestFile(t, filepath.Join(dir, "bad.cantbook"), []byte("version: \"1.0\"\nname: \"\"\nnodes:\n  - id: a\n    type: approval\n    depends: [a]\n"))
	_, stderr, _ = runSplit(t, dir, nil, "playbook", "validate", "bad.cantbook")
	if !strings.Contains(stderr, "bad.cantbook:2:7: name: must not be empty") || !strings.Contains(stderr, "is required for approval nodes") || strings.Contains(stderr, "(rule ") {
		t.Errorf("parser messages:\n%s", stderr)
	}
}

// TestPlaybookValidateOutputMatchesRbookValidate: rbook playbook validate prints issues on stderr
// and one line per file on stdout, and exits 2 on issues (as rbook validate); -o json lists each
// file with ok, name, nodes, hash and every issue with its line.
func TestPlaybookValidateOutputMatchesRbookValidate(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	// Node a has no command and no args (line 4), approval node b no prompt (line 6): 3 issues.
	writeFixture(t, filepath.Join(dir, "bad.cantbook"), "playbooks", "validate-three-issues.cantbook")
	stdout, stderr, code := runSplit(t, dir, nil, "playbook", "validate", "runbooks/release.cantbook", "bad.cantbook")
	if code != 2 || !regexp.MustCompile(`(?m)^runbooks/release\.cantbook: ok \(4 nodes, playbook release-cut, hash [0-9a-f]{64}\)\nbad\.cantbook: 3 issues\n$`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^bad\.cantbook:6:5: nodes\[1\]\.prompt: `).MatchString(stderr) || strings.Contains(stdout, "bad.cantbook:4") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, _, code = runSplit(t, dir, nil, "playbook", "validate", "runbooks/release.cantbook", "bad.cantbook", "-o", "json")
	var res struct {
		Files []struct {
			File, Name, Hash string
			OK               bool
			Nodes            int
			Issues           []struct {
				Line, Column   int
				Field, Message string
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 2 || len(res.Files) != 2 {
		t.Fatalf("exit %d, %v\n%s", code, err, stdout)
	}
	if f := res.Files[0]; !f.OK || f.Name != "release-cut" || f.Nodes != 4 || len(f.Hash) != 64 || len(f.Issues) != 0 {
		t.Errorf("release.cantbook: %+v", f)
	}
	if f := res.Files[1]; f.OK || len(f.Issues) != 3 || f.Issues[2].Line != 6 || f.Issues[2].Field != "nodes[1].prompt" {
		t.Errorf("bad.cantbook: %+v", f)
	}
}

// TestReadmePlaybookWorkflowIsTheExample: the playbook workflow docs/action.md shows is
// examples/workflows/rbook-playbook.yml byte for byte (actionlint checks the file:
// TestActionlintAcceptsTheExampleWorkflows), and it runs both demo playbooks with
// multiline inputs, fanout without a control plane and release only with one.
func TestReadmePlaybookWorkflowIsTheExample(t *testing.T) {
	skipShort(t)
	wf := readFile(t, "../../../examples/workflows/rbook-playbook.yml")
	doc := readFile(t, "../../../docs/action.md")
	if !strings.Contains(doc, "```yaml\n"+wf+"```\n") {
		t.Fatal("docs/action.md does not show examples/workflows/rbook-playbook.yml as it is")
	}
	for _, want := range []string{
		"playbook: runbooks/fanout.cantbook", "inputs: |\n            channel=nightly", `control-plane: "off"`,
		"playbook: runbooks/release.cantbook", "version=2026.4.90", "if: vars.RBOOK_CONTROL_PLANE != ''", "control-plane: ${{ vars.RBOOK_CONTROL_PLANE }}",
	} {
		if !strings.Contains(wf, want) {
			t.Errorf("rbook-playbook.yml lacks %q", want)
		}
	}
}
