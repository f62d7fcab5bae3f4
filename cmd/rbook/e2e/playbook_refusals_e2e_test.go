package e2e

// Refusals of rbook playbook, end to end with the built binary and real
// processes: kill -9 during parallel nodes, contradictory resume answers, state file
// collisions between a runbook and a playbook, node outputs that break the state file, and
// inputs given twice.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// killInParallelNodes writes dir/par.cantbook (testdata/playbooks/par.cantbook: two
// side-effecting roots a and b that run at the same time, each counting its executions in
// <id>.count and saying it started in <id>.started, then waiting until go-fast exists; and c
// after both), starts rbook args on it, and kills it with SIGKILL once a and b both run and
// b's step_started is recorded (both nodes are in flight in the state file). It returns the
// state file's path and its state.
func killInParallelNodes(t *testing.T, dir string, args []string) (string, *state.State) {
	t.Helper()
	writeFixture(t, filepath.Join(dir, "par.cantbook"), "playbooks", "par.cantbook")
	p := start(t, dir, args...)
	waitForFile(t, filepath.Join(dir, "a.started"))
	waitForFile(t, filepath.Join(dir, "b.started"))
	p.waitFor(t, "'b'")
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	statePath := filepath.Join(dir, ".rbook", "par.playbook.state.json")
	return statePath, readPlaybookState(t, statePath)
}

func countRuns(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "ran")
}

// TestRerunAndSkipSameNodeRefused: kill -9 while two side-effecting nodes run at
// once leaves both in unknown state; a resume that gives one node both answers
// (--rerun-node a --skip-node a) used to skip it silently. It is refused, naming the node,
// and changes nothing; the resume with one answer each runs a again (and only a), never b,
// then c once; the control plane's record matches the state file (status, bindings,
// iteration_counts).
func TestRerunAndSkipSameNodeRefused(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	args := []string{"playbook", "run", "par.cantbook", "--control-plane", url}
	statePath, st := killInParallelNodes(t, dir, args)
	if len(st.InFlightNodes) != 2 {
		t.Fatalf("after kill -9 during a and b, in_flight_nodes = %v", st.InFlightNodes)
	}
	before := readFile(t, statePath)
	writeTestFile(t, filepath.Join(dir, "go-fast"), []byte("1"))

	out, code := run2(t, dir, append(args, "--rerun-node", "a", "--skip-node", "a", "--skip-node", "b")...)
	if code != 2 || !strings.Contains(out, "node 'a' of run "+st.RunID+" is given both answers") {
		t.Fatalf("--rerun-node a --skip-node a: exit %d, want 2 naming node a:\n%s", code, out)
	}
	if readFile(t, statePath) != before {
		t.Errorf("the refused resume changed the state file")
	}
	if n := countRuns(t, filepath.Join(dir, "c.count")); n != 0 {
		t.Errorf("the refused resume ran c %d time(s)", n)
	}

	out, code = run2(t, dir, append(args, "--rerun-node", "a", "--skip-node", "b")...)
	if code != 0 || !strings.Contains(out, "RESUMING run "+st.RunID) {
		t.Fatalf("resume --rerun-node a --skip-node b: exit %d\n%s", code, out)
	}
	for f, want := range map[string]int{"a.count": 2, "b.count": 1, "c.count": 1} {
		if n := countRuns(t, filepath.Join(dir, f)); n != want {
			t.Errorf("%s: %d executions, want %d", f, n, want)
		}
	}
	st = readPlaybookState(t, statePath)
	run := getRun(t, url, st.RunID).GetRun()
	if st.RunStatus != "COMPLETED" || run.GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Fatalf("state %s, control plane %v; want COMPLETED / succeeded", st.RunStatus, run.GetStatus())
	}
	if st.IterationCounts["a"] != 2 || st.IterationCounts["b"] != 1 || st.IterationCounts["c"] != 1 {
		t.Errorf("state iteration_counts %v, want a 2, b 1, c 1", st.IterationCounts)
	}
	for id, n := range st.IterationCounts {
		if got := run.GetPlaybook().GetIterationCounts()[id]; int(got) != n {
			t.Errorf("iteration_counts[%s]: state %d, control plane %d", id, n, got)
		}
	}
	var cpBindings map[string]any
	if err := json.Unmarshal([]byte(run.GetPlaybook().GetBindings()), &cpBindings); err != nil {
		t.Fatalf("control plane bindings %q: %v", run.GetPlaybook().GetBindings(), err)
	}
	sb, _ := json.Marshal(st.Bindings)
	cb, _ := json.Marshal(cpBindings)
	if string(sb) != string(cb) {
		t.Errorf("bindings differ:\nstate         %s\ncontrol plane %s", sb, cb)
	}
	if a, _ := st.Bindings["a"].(map[string]any); a["x"] != float64(1) {
		t.Errorf("bindings.a = %v, want {x: 1}", st.Bindings["a"])
	}
	if _, ok := st.Bindings["b"]; ok {
		t.Errorf("the skipped node b has bindings: %v", st.Bindings["b"])
	}
}

// TestRunbookRefusesPlaybookState: a runbook whose state_file_path is an
// unfinished playbook run's state file used to resume that run as its own (with
// --allow-edited-runbook, which its refusal suggested), running the runbook's deploy on the
// playbook's state. It is refused as a playbook's state, naming the run, and the state file is
// left byte for byte; the playbook then still resumes.
func TestRunbookRefusesPlaybookState(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	args := []string{"playbook", "run", "par.cantbook", "--control-plane", "off"}
	statePath, st := killInParallelNodes(t, dir, args)
	before := readFile(t, statePath)

	// The demo runbook, named par, recording into the playbook's state file.
	rb := readFile(t, filepath.Join(dir, "runbooks", "demo.yaml"))
	rb = strings.Replace(rb, "runbook_name: demo", "runbook_name: par", 1)
	rb = strings.Replace(rb, "state_file_path: .rbook/demo.state.json", "state_file_path: .rbook/par.playbook.state.json", 1)
	if !strings.Contains(rb, "state_file_path: .rbook/par.playbook.state.json") {
		t.Fatal("demo.yaml has no state_file_path line to replace")
	}
	writeTestFile(t, filepath.Join(dir, "runbooks", "par.yaml"), []byte(rb))
	for _, ext := range []string{".values.yaml", ".mcp.json"} {
		writeTestFile(t, filepath.Join(dir, "runbooks", "par"+ext), []byte(readFile(t, filepath.Join(dir, "runbooks", "demo"+ext))))
	}
	for _, extra := range [][]string{nil, {"--allow-edited-runbook"}} {
		out, code := run2(t, dir, append([]string{"run", "par", "--control-plane", "off"}, extra...)...)
		if code != 2 || !strings.Contains(out, "it holds an unfinished playbook run ("+st.RunID) {
			t.Errorf("rbook run par %v on the playbook's state: exit %d, want 2 naming the playbook run:\n%s", extra, code, out)
		}
		if readFile(t, statePath) != before {
			t.Fatalf("rbook run par %v changed the playbook's state file", extra)
		}
	}
	writeTestFile(t, filepath.Join(dir, "go-fast"), []byte("1"))
	out, code := run2(t, dir, append(args, "--skip-node", "a", "--skip-node", "b")...)
	if code != 0 || !strings.Contains(out, "RESUMING run "+st.RunID) {
		t.Fatalf("the playbook's resume: exit %d\n%s", code, out)
	}
	if n := countRuns(t, filepath.Join(dir, "c.count")); n != 1 {
		t.Errorf("c ran %d time(s), want 1", n)
	}
}

// TestDeepJSONOutputStaysText: a node whose stdout is a JSON object nested 9999
// levels deep used to become its bindings; nested under the state file's "bindings" it
// passed encoding/json's read limit, so every write of the state file failed ("state_file_path
// not writable") and the run halted for good with the node in unknown state. An object deeper
// than steps.MaxOutputDepth (64) is kept as text ({"stdout", "exit_code"}); one exactly 64 deep
// still becomes bindings; the run succeeds and the control plane holds the same bindings.
func TestDeepJSONOutputStaysText(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	// testdata/playbooks/deep.cantbook: nodes deep, ok64 and over65 print an object nested 9999,
	// 64 and 65 levels deep ({"a":{"a":…1…}}); after depends on all three.
	writeFixture(t, filepath.Join(dir, "deep.cantbook"), "playbooks", "deep.cantbook")
	out, code := run2(t, dir, "playbook", "run", "deep.cantbook", "--control-plane", url)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, cutOutput(out))
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "deep.playbook.state.json"))
	// deep's text form is over the evidence output cap, so it has no bindings at all (as any
	// node whose output is too big); over65's text form fits.
	if b, ok := st.Bindings["deep"]; ok {
		t.Errorf("bindings.deep = %.200v, want none (its text form is over the output cap)", b)
	}
	b, _ := st.Bindings["over65"].(map[string]any)
	if s, _ := b["stdout"].(string); !strings.HasPrefix(s, `{"a":{"a":`) || b["exit_code"] != float64(0) {
		t.Errorf("bindings.over65 is not the text form {stdout, exit_code}: %.200v", st.Bindings["over65"])
	}
	if b, _ := st.Bindings["ok64"].(map[string]any); b["a"] == nil {
		t.Errorf("bindings.ok64 (64 levels) is not the object: %.200v", st.Bindings["ok64"])
	}
	if n := countRuns(t, filepath.Join(dir, "after.count")); n != 1 {
		t.Errorf("after ran %d time(s), want 1", n)
	}
	run := getRun(t, url, st.RunID).GetRun()
	var cpBindings map[string]any
	if err := json.Unmarshal([]byte(run.GetPlaybook().GetBindings()), &cpBindings); err != nil {
		t.Fatalf("control plane bindings: %v", err)
	}
	// The control plane keeps a PASS output that is no JSON object (deep's, cut at the output
	// cap) as {"output": text}, where the state file keeps none: a known difference of the two
	// derivations (reported to the coordinator), so deep is left out of the comparison.
	delete(cpBindings, "deep")
	sb, _ := json.Marshal(st.Bindings)
	cb, _ := json.Marshal(cpBindings)
	if string(sb) != string(cb) || run.GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Errorf("control plane %v, bindings differ:\nstate         %.300s\ncontrol plane %.300s", run.GetStatus(), sb, cb)
	}
}

// TestDuplicateInputFlagRefused: the same --input twice used to let the last one
// win silently (an --inputs file with a key twice is refused); it is refused before anything
// is recorded. An --inputs key that is not a string (a YAML complex key) is refused with its
// line, not reported as an unknown input "". Values with a newline or {{ w }} stay literal,
// inserted as one argument.
func TestDuplicateInputFlagRefused(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeFixture(t, filepath.Join(dir, "inp.cantbook"), "playbooks", "inp.cantbook") // v required, w defaults to dflt; a prints both
	writeTestFile(t, filepath.Join(dir, "ck.yaml"), []byte("v: 1\n? [a]\n: 1\n"))
	statePath := filepath.Join(dir, ".rbook", "inp.playbook.state.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", "v=1", "--input", "v=2"}, "--input v: the input is given twice"},
		{[]string{"--inputs", "ck.yaml"}, "ck.yaml:2:3: --inputs: an input name must be a plain string"},
	} {
		out, code := run2(t, dir, append([]string{"playbook", "run", "inp.cantbook", "--control-plane", "off"}, tc.args...)...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, out)
		}
		if _, err := os.Stat(statePath); !os.IsNotExist(err) {
			t.Fatalf("%v: a refused run left a state file (%v)", tc.args, err)
		}
	}
	out, code := run2(t, dir, "playbook", "run", "inp.cantbook", "--control-plane", "off", "--input", "v=x\n{{ w }}", "--input", "w={{ v }}")
	if code != 0 {
		t.Fatalf("literal values: exit %d\n%s", code, out)
	}
	st := readPlaybookState(t, statePath)
	if a, _ := st.Bindings["a"].(map[string]any); a["stdout"] != "x\n{{ w }}|{{ v }}" {
		t.Errorf("bindings.a = %v, want stdout %q", st.Bindings["a"], "x\n{{ w }}|{{ v }}")
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// cutOutput keeps a failing test's log readable when a node printed a huge stdout.
func cutOutput(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n…\n" + s[len(s)-2000:]
	}
	return s
}
