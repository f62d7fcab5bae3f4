//go:build unix

package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func detNode(id, command string, args ...string) runbook.Step {
	return runbook.Step{Name: id, Type: runbook.TypeDeterministic, TimeoutSeconds: 30,
		Node: &runbook.Node{ID: id, Command: command, Args: args}}
}

func runDet(t *testing.T, d Deterministic, step runbook.Step, bindings map[string]any) engine.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.Execute(ctx, step, engine.RunContext{RunID: "RBOOK-test", Bindings: bindings, Iteration: 1})
}

// TestDeterministicArgvIsExact: each rendered arg is exactly one argv entry, byte for
// byte, whatever it holds (spaces, ';', $(x), quotes, a newline, a "{{ y }}" inside a bound
// value is not rendered again); env values and cwd are rendered too; the evidence input is the
// argv as JSON.
func TestDeterministicArgvIsExact(t *testing.T) {
	hostile := "a b; rm -rf / $(touch x) `id` 'q' \"dq\"\nsecond line {{ y }} \\ $HOME *"
	work := t.TempDir()
	if err := os.Mkdir(filepath.Join(work, "sub dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	bindings := map[string]any{
		"v": hostile, "y": "MUST-NOT-APPEAR", "n": json.Number("42"), "flag": true,
		"build": map[string]any{"meta": map[string]any{"tag": "v1"}, "list": []any{"x", json.Number("1")}},
		"sub":   "sub dir",
	}
	step := detNode("argv", os.Args[0], "{{ v }}", "pre-{{ n }}-{{ flag }}-post", "{{build.meta.tag}}", "{{ build.list }}", "plain words stay one", "", " ")
	step.Node.Env = map[string]string{helperModeEnv: "argv", "HOSTILE": "env={{ v }}"}
	step.Node.Cwd = "{{ sub }}"
	d := Deterministic{WorkDir: work}
	run := engine.RunContext{Bindings: bindings}

	out := runDet(t, d, step, bindings)
	if out.Status != engine.StatusPass {
		t.Fatalf("status %s, output %s", out.Status, out.Output)
	}
	wantArgs := []any{hostile, "pre-42-true-post", "v1", `["x",1]`, "plain words stay one", "", " "}
	if got := out.Value["argv"]; !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("argv\n got %q\nwant %q", got, wantArgs)
	}
	if got := out.Value["env"]; got != "env="+hostile {
		t.Errorf("env HOSTILE = %q", got)
	}
	if got, want := out.Value["cwd"], filepath.Join(work, "sub dir"); got != want {
		t.Errorf("cwd %q, want %q", got, want)
	}
	if strings.Contains(out.Output, "MUST-NOT-APPEAR") {
		t.Errorf("a {{ }} inside a bound value was rendered again: %s", out.Output)
	}
	if _, err := os.Stat(filepath.Join(work, "sub dir", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("$(touch x) ran: %v", err)
	}
	input := d.RunInput(step, run)
	if input == nil {
		t.Fatal("RunInput nil")
	}
	var argv []string
	if err := json.Unmarshal([]byte(*input), &argv); err != nil {
		t.Fatalf("RunInput %q: %v", *input, err)
	}
	wantArgv := []string{os.Args[0], hostile, "pre-42-true-post", "v1", `["x",1]`, "plain words stay one", "", " "}
	if !reflect.DeepEqual(argv, wantArgv) {
		t.Errorf("RunInput argv\n got %q\nwant %q", argv, wantArgv)
	}
}

// TestDeterministicMissingVarStartsNothing: every missing variable of args, env and
// cwd is named in one error, and the command never starts (the marker it would create is absent).
func TestDeterministicMissingVarStartsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	step := detNode("build", "sh", "-c", `touch "$0"; echo "$1"`, marker, "{{ version }} {{ build.stdout }}")
	step.Node.Env = map[string]string{"TAG": "{{ tag }}", "OK": "{{ present }}"}
	step.Node.Cwd = "{{ folder }}"
	bindings := map[string]any{"present": "yes"}
	out := runDet(t, Deterministic{}, step, bindings)
	if out.Status != engine.StatusFail {
		t.Fatalf("status %s, want FAIL", out.Status)
	}
	want := (&runbook.MissingVarError{Names: []string{"version", "build.stdout", "tag", "folder"}}).Error()
	if !strings.Contains(out.Output, want) || !strings.Contains(out.Output, `"build"`) {
		t.Errorf("output %q lacks %q", out.Output, want)
	}
	if strings.Contains(out.Output, "{{") {
		t.Errorf("output shows a template: %q", out.Output)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command started despite missing variables (marker: %v)", err)
	}
	if in := (Deterministic{}).RunInput(step, engine.RunContext{Bindings: bindings}); in != nil {
		t.Errorf("RunInput = %q for an unrenderable node, want nil", *in)
	}
	// A null binding is an error too, never an empty string.
	out = runDet(t, Deterministic{}, detNode("n", "sh", "-c", `touch "$0"`, marker, "{{ gone }}"), map[string]any{"gone": nil})
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, `binding "gone" is null`) {
		t.Errorf("null binding: %s %q", out.Status, out.Output)
	}
	// The command is not templated.
	out = runDet(t, Deterministic{}, detNode("c", "{{ tool }}", "x"), map[string]any{"tool": "sh"})
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, "is not templated") {
		t.Errorf("templated command: %s %q", out.Status, out.Output)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker exists: %v", err)
	}
}

// TestDeterministicStdoutValue: a JSON object on stdout is the Value (numbers as
// json.Number); anything else is {"stdout": text minus one trailing newline, "exit_code": 0}.
func TestDeterministicStdoutValue(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   map[string]any
	}{
		{`printf '{"dist-exists": true, "n": 3.50, "nested": {"k": [1]}}\n'`,
			map[string]any{"dist-exists": true, "n": json.Number("3.50"), "nested": map[string]any{"k": []any{json.Number("1")}}}},
		{`printf 'hello\n\n'`, map[string]any{"stdout": "hello\n", "exit_code": 0}},
		{`printf 'no newline'`, map[string]any{"stdout": "no newline", "exit_code": 0}},
		{`printf '[1, 2]\n'`, map[string]any{"stdout": "[1, 2]", "exit_code": 0}},
		{`printf '{"a": 1} trailing'`, map[string]any{"stdout": `{"a": 1} trailing`, "exit_code": 0}},
		{`printf '{"a": 1}{"b": 2}'`, map[string]any{"stdout": `{"a": 1}{"b": 2}`, "exit_code": 0}},
		{`printf 'null'`, map[string]any{"stdout": "null", "exit_code": 0}},
		{`:`, map[string]any{"stdout": "", "exit_code": 0}},
	} {
		out := runDet(t, Deterministic{}, detNode("s", "sh", "-c", tc.script), nil)
		if out.Status != engine.StatusPass || !reflect.DeepEqual(out.Value, tc.want) {
			t.Errorf("%s: %s %#v, want %#v", tc.script, out.Status, out.Value, tc.want)
		}
		if b, _ := json.Marshal(tc.want); out.Output != string(b) {
			t.Errorf("%s: output %q, want %s", tc.script, out.Output, b)
		}
	}
}

// TestDeterministicNonZeroExitFails: FAIL, the output names the exit code and holds
// stderr and stdout, the Value is {"stdout", "stderr", "exit_code"}.
func TestDeterministicNonZeroExitFails(t *testing.T) {
	out := runDet(t, Deterministic{}, detNode("t", "sh", "-c", `echo partial; echo "boom: tests failed" >&2; exit 3`), nil)
	if out.Status != engine.StatusFail {
		t.Fatalf("status %s", out.Status)
	}
	for _, s := range []string{"exit code 3", "boom: tests failed", "partial"} {
		if !strings.Contains(out.Output, s) {
			t.Errorf("output %q lacks %q", out.Output, s)
		}
	}
	want := map[string]any{"stdout": "partial", "stderr": "boom: tests failed", "exit_code": 3}
	if !reflect.DeepEqual(out.Value, want) {
		t.Errorf("value %#v, want %#v", out.Value, want)
	}
	// A JSON object on stdout does not make a failed command pass.
	out = runDet(t, Deterministic{}, detNode("t", "sh", "-c", `echo '{"tests-passed": true}'; exit 1`), nil)
	if out.Status != engine.StatusFail || out.Value["exit_code"] != 1 {
		t.Errorf("exit 1 with JSON: %s %#v", out.Status, out.Value)
	}
	// A command that cannot be found fails before anything runs, naming it.
	out = runDet(t, Deterministic{}, detNode("t", "rbook-no-such-command-xyz"), nil)
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, `command "rbook-no-such-command-xyz" not found on the node's PATH`) {
		t.Errorf("missing command: %s %q", out.Status, out.Output)
	}
}

// TestDeterministicOutputCap: each stream keeps MaxStreamBytes, the rest is counted
// in a truncation note, and the command is not blocked by the cap.
func TestDeterministicOutputCap(t *testing.T) {
	const extra = 12345
	script := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; head -c %d /dev/zero | tr '\0' b >&2`, MaxStreamBytes+extra, MaxStreamBytes+extra)
	out := runDet(t, Deterministic{}, detNode("big", "sh", "-c", script), nil)
	if out.Status != engine.StatusPass {
		t.Fatalf("status %s: %.200s", out.Status, out.Output)
	}
	note := fmt.Sprintf(TruncatedNote, extra, MaxStreamBytes)
	stdout, _ := out.Value["stdout"].(string)
	if want := strings.Repeat("a", MaxStreamBytes) + note; stdout != want {
		t.Errorf("stdout has %d bytes ending %q, want %d ending %q", len(stdout), stdout[max(0, len(stdout)-100):], len(want), note)
	}
	out = runDet(t, Deterministic{}, detNode("big", "sh", "-c", script+"; exit 4"), nil)
	stderr, _ := out.Value["stderr"].(string)
	if out.Status != engine.StatusFail || stderr != strings.Repeat("b", MaxStreamBytes)+note {
		t.Errorf("stderr: %s, %d bytes", out.Status, len(stderr))
	}
}

// TestDeterministicTimeoutKillsTree: at the node's deadline the whole process tree
// is gone, although the command and its grandchild ignore SIGTERM; the outcome is TIMED_OUT.
func TestDeterministicTimeoutKillsTree(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pids")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leader and a grandchild (sh → sleep) ignore SIGTERM; the leader reports both pids.
	script := `trap '' TERM
sh -c 'sleep 60; :' >/dev/null 2>&1 &
echo "$$ $!" > "$0"
wait`
	step := detNode("hang", "sh", "-c", script, fifo)
	step.TimeoutSeconds = 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan engine.Outcome, 1)
	go func() { done <- Deterministic{Grace: 200 * time.Millisecond}.Execute(ctx, step, engine.RunContext{}) }()
	data, err := os.ReadFile(fifo) // blocks until the script wrote its pids
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the script was not ready before the deadline; machine too slow?")
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		t.Fatalf("pids %q", data)
	}
	leader, _ := strconv.Atoi(fields[0])
	child, _ := strconv.Atoi(fields[1])
	t.Cleanup(func() { _ = syscall.Kill(-leader, syscall.SIGKILL) })
	requireIgnoresSIGTERM(t, leader)
	out := <-done
	if out.Status != engine.StatusTimedOut || !strings.Contains(out.Output, "process tree of sh was killed") {
		t.Errorf("outcome %s %q", out.Status, out.Output)
	}
	if err := procgroup.AwaitGone(leader, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("grandchild %d survived (kill -0: %v)", child, err)
	}
}

// TestDeterministicCancelFails: a cancelled run (not a deadline) ends the node FAIL.
func TestDeterministicCancelFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := Deterministic{}.Execute(ctx, detNode("x", "sh", "-c", "exit 0"), engine.RunContext{})
	if out.Status != engine.StatusFail || !strings.HasPrefix(out.Output, "cancelled: ") {
		t.Errorf("outcome %s %q", out.Status, out.Output)
	}
}

// TestPathPrependFindsStub: PathPrepend goes first on the child's PATH and the
// command is resolved against the child's PATH, not rbook's; the shipped runbooks/bin/pnpm
// stub answers the release demo's build and test.
func TestPathPrependFindsStub(t *testing.T) {
	bin := t.TempDir()
	stub := filepath.Join(bin, "rbook-test-stub-tool")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\necho \"{\\\"path\\\": \\\"$PATH\\\"}\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	step := detNode("s", "rbook-test-stub-tool")
	if out := runDet(t, Deterministic{}, step, nil); out.Status != engine.StatusFail || !strings.Contains(out.Output, "not found on the node's PATH") {
		t.Fatalf("without PathPrepend: %s %q", out.Status, out.Output)
	}
	out := runDet(t, Deterministic{PathPrepend: []string{bin}}, step, nil)
	if out.Status != engine.StatusPass || !strings.HasPrefix(fmt.Sprint(out.Value["path"]), bin+string(os.PathListSeparator)) {
		t.Fatalf("with PathPrepend: %s %q", out.Status, out.Output)
	}

	dirs := PlaybookBinDirs(filepath.Join("..", "..", "runbooks", "release.cantbook"))
	if len(dirs) != 1 || !filepath.IsAbs(dirs[0]) || filepath.Base(dirs[0]) != "bin" {
		t.Fatalf("PlaybookBinDirs = %q", dirs)
	}
	if got := PlaybookBinDirs(filepath.Join(t.TempDir(), "x.cantbook")); got != nil {
		t.Errorf("PlaybookBinDirs without a bin folder = %q", got)
	}
	d := Deterministic{PathPrepend: dirs}
	for args, want := range map[string]map[string]any{
		"run build": {"dist-exists": true, "artifact": "dist/", "stub": true},
		"run test":  {"tests-passed": true, "passed": json.Number("3"), "stub": true},
		"run lint":  {"lint-clean": true},
	} {
		out := runDet(t, d, detNode("p", "pnpm", strings.Fields(args)...), nil)
		if out.Status != engine.StatusPass || !reflect.DeepEqual(out.Value, want) {
			t.Errorf("pnpm %s: %s %#v", args, out.Status, out.Value)
		}
	}
	out = runDet(t, d, detNode("p", "pnpm", "publish"), nil)
	if out.Status != engine.StatusFail || out.Value["exit_code"] != 2 || !strings.Contains(fmt.Sprint(out.Value["stderr"]), "rbook demo stub") {
		t.Errorf("pnpm publish: %s %#v", out.Status, out.Value)
	}
	if st, err := os.Stat(filepath.Join(dirs[0], "pnpm")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("runbooks/bin/pnpm mode: %v %v", st.Mode(), err)
	}
}

// TestNodesDoNotInheritRbooksCredentials: a node's command gets rbook's environment without
// rbook's own credentials (docs/decisions/mcp-config.md, "Environment"), whatever their
// case; other variables, RBOOK_ or not, reach it, and a credential the node's env names on
// purpose does too.
func TestNodesDoNotInheritRbooksCredentials(t *testing.T) {
	for name, value := range map[string]string{
		"RBOOK_TOKEN": "tok-inherited", "RBOOK_APPROVAL_SECRET": "sec-inherited",
		"rbook_signing_key": "key-inherited", "RBOOK_OKTA_CLIENT_PASSWORD": "pw-inherited",
		"RBOOK_SERVER": "http://cp.example", "DEPLOY_TOKEN": "cloud-token",
	} {
		t.Setenv(name, value)
	}
	step := detNode("environ", os.Args[0])
	step.Node.Env = map[string]string{helperModeEnv: "environ", "RBOOK_HOOK_SECRET": "given-on-purpose"}
	out := runDet(t, Deterministic{}, step, nil)
	if out.Status != engine.StatusPass {
		t.Fatalf("status %s, output %s", out.Status, out.Output)
	}
	got := map[string]bool{}
	for _, kv := range out.Value["environ"].([]any) {
		got[kv.(string)] = true
	}
	for kv, want := range map[string]bool{
		"RBOOK_TOKEN=tok-inherited": false, "RBOOK_APPROVAL_SECRET=sec-inherited": false,
		"rbook_signing_key=key-inherited": false, "RBOOK_OKTA_CLIENT_PASSWORD=pw-inherited": false,
		"RBOOK_SERVER=http://cp.example": true, "DEPLOY_TOKEN=cloud-token": true,
		"RBOOK_HOOK_SECRET=given-on-purpose": true,
	} {
		if got[kv] != want {
			t.Errorf("the node's environment has %q: %v, want %v", kv, got[kv], want)
		}
	}
}
