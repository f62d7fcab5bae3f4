package e2e

// What a new user meets first: validate, local history, the embedded control plane, and URLs.

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runSplit runs rbook to completion with no stdin and returns stdout and stderr apart.
func runSplit(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runSplitIn(t, dir, env, nil, args...)
}

// runSplitIn is runSplit with stdin (nil: none, /dev/null) and env added after
// RBOOK_CONTROL_PLANE= (empty: no control plane from the environment).
func runSplitIn(t *testing.T, dir string, env []string, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(rbookBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "RBOOK_CONTROL_PLANE="), env...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestValidateSaysWhatRunWouldDo: validate is ok only when run starts. A missing
// values file is the run's own ABORT line (byte for byte), and the runbook is still checked
// with the .example file, saying so; a missing MCP config, an MCP config naming a command
// that does not exist, a template override that does not parse are errors, all reported at
// once and sorted by file and line.
func TestValidateSaysWhatRunWouldDo(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	abort := "ABORT: runbooks/prod.values.yaml missing — copy prod.values.yaml.example and fill in real values."

	runOut, runErr, runCode := runSplit(t, dir, nil, "run", "prod", "--control-plane", "off")
	if runCode != 2 || !strings.Contains(runOut+runErr, abort) {
		t.Fatalf("run prod: exit %d\n%s%s", runCode, runOut, runErr)
	}
	out, errOut, code := runSplit(t, dir, nil, "validate", "prod")
	if code != 2 || !strings.Contains(errOut, "runbooks/prod.values.yaml: "+abort+"\n") ||
		!strings.Contains(out, "runbooks/prod.yaml: 2 error(s) (checked with runbooks/prod.values.yaml.example because runbooks/prod.values.yaml is missing: 'rbook run' stops there") {
		t.Fatalf("validate prod without values: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// With the values file, the next thing run needs is prod's MCP config: missing.
	values := filepath.Join(dir, "runbooks", "prod.values.yaml")
	os.WriteFile(values, []byte(readFile(t, values+".example")), 0o644)
	runOut, runErr, runCode = runSplit(t, dir, nil, "run", "prod", "--control-plane", "off")
	missing := "runbooks/prod.yaml has check steps, which query an MCP server, but runbooks/prod.mcp.json does not exist"
	if runCode != 2 || !strings.Contains(runOut+runErr, missing) {
		t.Fatalf("run prod without MCP config: exit %d\n%s%s", runCode, runOut, runErr)
	}
	out, errOut, code = runSplit(t, dir, nil, "validate", "prod")
	if code != 2 || !strings.Contains(errOut, "runbooks/prod.mcp.json: "+missing) {
		t.Fatalf("validate prod without MCP config: exit %d\n%s\n%s", code, out, errOut)
	}

	// An MCP config with a command that is not on PATH, a broken template override, a
	// schema error in the runbook and a missing values key: all of them, sorted.
	os.WriteFile(filepath.Join(dir, "runbooks", "prod.mcp.json"), []byte("{\n  \"mcpServers\": {\n    \"arg\": {\"command\": \"no-such-mcp-server-xyz\"}\n  }\n}\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "tmpl", "templates"), 0o755)
	os.WriteFile(filepath.Join(dir, "tmpl", "templates", "output-step-status.md"), []byte("ok\n{{ .Entry.StepName \n"), 0o644)
	rb := filepath.Join(dir, "runbooks", "prod.yaml")
	text := strings.Replace(readFile(t, rb), "on_fail: continue", "on_fail: carry-on", 1)
	text = strings.Replace(text, "${traffic_manager_profile}", "${tm_profile}", 1)
	os.WriteFile(rb, []byte(text), 0o644)
	out, errOut, code = runSplit(t, dir, nil, "validate", "prod", "--templates", "tmpl")
	want := strings.Join([]string{
		`runbooks/prod.mcp.json:3:5: mcpServers.arg.command: command "no-such-mcp-server-xyz" is not found (on PATH, or as a path from the working directory); a run's check steps could not start this server`,
		`runbooks/prod.yaml:33:14: runbook_steps[1].on_fail: must be one of halt, rollback, continue, got "carry-on"`,
		`runbooks/prod.yaml:39:20: runbook_steps[2].params.profileName: values key "tm_profile" is not defined in runbooks/prod.values.yaml`,
		`tmpl/templates/output-step-status.md:3: unclosed action started at templates/output-step-status.md:2`,
	}, "\n") + "\n"
	if code != 2 || !strings.HasPrefix(errOut, want) || out != "runbooks/prod.yaml: 4 error(s) (values runbooks/prod.values.yaml; MCP runbooks/prod.mcp.json)\n" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr to start with:\n%s", code, out, errOut, want)
	}

	// A --templates folder that does not exist is an error, as it is for run.
	if _, errOut, code := runSplit(t, dir, nil, "validate", "demo", "--templates", "nope"); code != 2 || !strings.HasPrefix(errOut, "nope: templates folder nope (--templates) does not exist\n") {
		t.Fatalf("validate --templates nope: exit %d\n%s", code, errOut)
	}

	// The demo is ok, and says what it checked.
	out, errOut, code = runSplit(t, dir, nil, "validate", "demo")
	if code != 0 || out != "runbooks/demo.yaml: ok (values runbooks/demo.values.yaml; MCP runbooks/demo.mcp.json: demo-inventory: stdio command rbook found)\n" || errOut != "" {
		t.Fatalf("validate demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestHistoryAfterEmbeddedRunEnds: once the run that served the embedded
// control plane has ended, runs, get and approvals read .rbook/controlplane.db directly,
// read-only, say so on stderr, and leave the folder as it was; a stale controlplane.url
// (a killed run) does not get in the way, and an explicit control plane is never replaced
// by the local file.
func TestHistoryAfterEmbeddedRunEnds(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 0 || !strings.Contains(out, "Control plane (embedded)") {
		t.Fatalf("run demo: exit %d\n%s", code, out)
	}
	s := readState(t, dir)
	rbookDir := filepath.Join(dir, ".rbook")
	if _, err := os.Stat(filepath.Join(rbookDir, "controlplane.url")); !os.IsNotExist(err) {
		t.Fatalf("controlplane.url is still there after the run: %v", err)
	}
	before := dirSnapshot(t, rbookDir)
	note := "No control plane is running: read the local database .rbook/controlplane.db (read-only"

	stdout, stderr, code := runSplit(t, dir, nil, "runs")
	if code != 0 || !strings.Contains(stderr, note) || !strings.Contains(stdout, s.RunID+"  demo") || !strings.Contains(stdout, "6/6") {
		t.Fatalf("runs: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runSplit(t, dir, nil, "get", s.RunID)
	if code != 0 || !strings.Contains(stderr, note) || !strings.Contains(stdout, "Run "+s.RunID+" · runbook demo") ||
		!strings.Contains(stdout, "step_finished    deploy 'deploy-app-config'  pass") || !strings.Contains(stdout, "run_finished") {
		t.Fatalf("get: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runSplit(t, dir, nil, "approvals", "-o", "json")
	var listed struct {
		Approvals []struct{ RunID, StepName, Status string } `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil || code != 0 || !strings.Contains(stderr, note) || len(listed.Approvals) != 1 ||
		listed.Approvals[0] != (struct{ RunID, StepName, Status string }{s.RunID, "confirm-rollout", "APPROVAL_STATUS_APPROVED"}) {
		t.Fatalf("approvals: exit %d, %v %+v\nstdout:\n%s\nstderr:\n%s", code, err, listed, stdout, stderr)
	}
	if after := dirSnapshot(t, rbookDir); !equalSnapshots(before, after) {
		t.Fatalf("reading the history changed .rbook:\nbefore %v\nafter  %v", keys(before), keys(after))
	}

	// A URL file left by a killed run names an address nobody listens on.
	os.WriteFile(filepath.Join(rbookDir, "controlplane.url"), []byte("http://127.0.0.1:1\n"), 0o600)
	stdout, stderr, code = runSplit(t, dir, nil, "runs", "--status", "succeeded")
	if code != 0 || !strings.Contains(stderr, note) || !strings.Contains(stdout, s.RunID) {
		t.Fatalf("runs with a stale URL file: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// A control plane named explicitly is the one asked, even when it is down.
	_, stderr, code = runSplit(t, dir, []string{"RBOOK_CONTROL_PLANE=http://127.0.0.1:1"}, "runs")
	if code != 1 || strings.Contains(stderr, note) {
		t.Fatalf("runs with RBOOK_CONTROL_PLANE: exit %d\n%s", code, stderr)
	}
}

// dirSnapshot maps each file in dir to its bytes.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestServeInTheSameFolder: an 'rbook serve' started in the run's folder with the
// default --db (as docs/control-plane.md, "Starting it", has a new user do) holds
// .rbook/controlplane.db. A run without --control-plane then says that another process
// serves it and generates no approval secret it would not use; runs reads the database and
// says a control plane serves it, not that none is running (found trying the README as a
// new user).
func TestServeInTheSameFolder(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	startServeDB(t, filepath.Join(dir, ".rbook", "controlplane.db"))
	noSecret := []string{"RBOOK_APPROVAL_SECRET=", "RBOOK_SECRET="}
	_, stderr, code := runSplit(t, dir, noSecret, "run", "demo")
	want := "Another rbook process serves .rbook/controlplane.db (an 'rbook serve' in this folder, or the embedded control plane of another 'rbook run'), so this run keeps its record in the state file only"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("run demo with a serve here: exit %d, want 1 and %q\n%s", code, want, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "approval-secret")); !os.IsNotExist(err) {
		t.Errorf("an approval secret was generated for an embedded control plane that never started: %v", err)
	}
	stdout, stderr, code := runSplit(t, dir, nil, "runs")
	if code != 0 || strings.Contains(stderr, "No control plane is running") ||
		!strings.Contains(stderr, "A control plane serves .rbook/controlplane.db (an 'rbook serve' in this folder) but none was named") {
		t.Errorf("runs with a serve here: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestNothingListensSaysWhatToDo: runs, get or approve against a control-plane
// URL where nothing listens name the address, where it came from and what to do, not only
// "connection refused" (found trying the README as a new user).
func TestNothingListensSaysWhatToDo(t *testing.T) {
	skipShort(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		env    []string
		args   []string
		source string
	}{
		{nil, []string{"runs", "--control-plane", u}, "--control-plane"},
		{[]string{"RBOOK_CONTROL_PLANE=" + u}, []string{"get", "RBOOK-x"}, "RBOOK_CONTROL_PLANE"},
		{nil, []string{"approve", "tok", "--control-plane", u}, "--control-plane"},
	} {
		_, stderr, code := runSplit(t, t.TempDir(), tc.env, tc.args...)
		want := "\nNothing listens at " + u + " (from " + tc.source + "): start the control plane there ('rbook serve --addr HOST:PORT'), or point --control-plane at a running one.\n"
		if code != 1 || !strings.Contains(stderr, "connection refused (unavailable)"+want) {
			t.Errorf("rbook %s: exit %d, want 1 and %q\n%s", strings.Join(tc.args, " "), code, want, stderr)
		}
	}
}

// TestControlPlaneURLWithoutScheme: a --control-plane or RBOOK_CONTROL_PLANE
// without http:// or https:// (grpcurl's HOST:PORT spelling) is refused at once, exit 2,
// saying what to write, before anything is run or written; it used to be retried as
// "unavailable" for --control-plane-timeout and then halted "until the control plane is
// back" (found trying the README as a new user). --control-plane off is refused by the
// commands that need a control plane.
func TestControlPlaneURLWithoutScheme(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "demo", "--control-plane", "127.0.0.1:7070"},
			`--control-plane "127.0.0.1:7070" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://127.0.0.1:7070`},
		{[]string{"RBOOK_CONTROL_PLANE=localhost:7070"}, []string{"run", "demo"},
			`RBOOK_CONTROL_PLANE "localhost:7070" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://localhost:7070`},
		{nil, []string{"runs", "--control-plane", "127.0.0.1:7070"},
			`rbook: --control-plane "127.0.0.1:7070" is not a control plane URL`},
		{[]string{"RBOOK_CONTROL_PLANE=ftp://x"}, []string{"get", "RBOOK-x"},
			`rbook: RBOOK_CONTROL_PLANE "ftp://x" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://127.0.0.1:7070`},
		{nil, []string{"approve", "tok", "--control-plane", "off"},
			"rbook: --control-plane off (no control plane) is for rbook run, status and cancel; this command talks to a control plane"},
	} {
		dir := workdir(t)
		start := time.Now()
		_, stderr, code := runSplit(t, dir, tc.env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || time.Since(start) > 20*time.Second {
			t.Errorf("rbook %s (%v): exit %d after %s, want 2 and %q\n%s", strings.Join(tc.args, " "), tc.env, code, time.Since(start), tc.want, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, ".rbook")); !os.IsNotExist(err) {
			t.Errorf("rbook %s wrote .rbook: %v", strings.Join(tc.args, " "), err)
		}
	}
}
