// Package e2e holds rbook's end-to-end tests: they build the rbook binary once (with -race)
// and drive it as a user would, in a throwaway copy of the shipped runbooks, synchronising on
// what it prints. `go test -short` skips every one of them without building the binary; the
// tests of cmd/rbook's own code (its cobra tree, help texts, docs) stay in package main.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var rbookBin string

func TestMain(m *testing.M) {
	flag.Parse() // for testing.Short, before m.Run parses the flags
	if testing.Short() {
		// Every test calls skipShort first: nothing here runs without the binary.
		fmt.Fprintln(os.Stderr, "cmd/rbook/e2e: -short: skipping the end-to-end tests (they build the -race rbook binary and drive it)")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "rbook-e2e-")
	if err != nil {
		panic(err)
	}
	rbookBin = filepath.Join(dir, "rbook")
	// Shown by `go test -v` (and on failure): the end-to-end tests start the binary
	// hundreds of times and take minutes on a small machine, hence the README's -timeout.
	fmt.Fprintln(os.Stderr, "cmd/rbook/e2e: building the -race rbook binary for the end-to-end tests; they take minutes on a 2-core machine (-short skips them, -v shows each wait)")
	build := exec.Command("go", "build", "-race", "-o", rbookBin, "..")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building rbook:", err)
		os.Exit(1)
	}
	// Every -race binary sleeps 1 s at exit by default; the e2e tests start hundreds of them.
	// Races are still reported (and fail the process) without the sleep.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipShort skips t under `go test -short`: every test here builds on the rbook binary (or on
// other real processes), which -short does not build.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: drives the rbook binary; run without -short")
	}
}

// The exit codes rbook documents in every --help ("Exit codes:").
const (
	exitFailed    = 1 // the run failed
	exitAborted   = 2 // aborted before running, or a usage error
	exitCancelled = 3 // the run was cancelled
)

// currentUser is the name rbook records for a person at the terminal: $GITHUB_ACTOR in a job,
// else the OS user, else "unknown" (as cmd/rbook's currentUser decides it).
func currentUser() string {
	if a := os.Getenv("GITHUB_ACTOR"); a != "" {
		return a
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

// workdir copies the shipped runbooks into a fresh folder that becomes the working directory.
func workdir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "..", "runbooks")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "runbooks"), 0o755)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "runbooks", e.Name()), data, 0o644)
	}
	return dir
}

// proc is a running rbook whose combined output is collected and can be waited on.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	out   bytes.Buffer
	seen  chan string
	done  chan struct{}
	code  int
}

func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	t.Logf("starting rbook %s", strings.Join(args, " "))
	p := &proc{cmd: exec.Command(rbookBin, args...), seen: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), "RBOOK_CONTROL_PLANE=")
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.seen <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		<-read
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// waitFor blocks until a printed line contains s (or the process ends, or 60 s pass).
func (p *proc) waitFor(t *testing.T, s string) {
	t.Helper()
	p.mu.Lock()
	if strings.Contains(p.out.String(), s) {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	// Logged so `go test -v` shows what a slow machine is waiting for.
	t.Logf("waiting (up to 60 s) for rbook to print %q", s)
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line := <-p.seen:
			if strings.Contains(line, s) {
				return
			}
		case <-p.done:
			t.Fatalf("rbook exited %d before printing %q:\n%s", p.code, s, p.output())
		case <-deadline:
			t.Fatalf("no %q within 60s:\n%s", s, p.output())
		}
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	t.Logf("waiting (up to 90 s) for rbook %s to exit", strings.Join(p.cmd.Args[1:], " "))
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("rbook did not exit within 90s:\n%s", p.output())
	}
	return p.code
}

// run runs rbook to completion with the given stdin.
func run(t *testing.T, dir, stdin string, args ...string) (string, int) {
	t.Helper()
	t.Logf("running rbook %s", strings.Join(args, " "))
	cmd := exec.Command(rbookBin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	return combinedExit(t, cmd)
}

type stateFile struct {
	RunID          string `json:"run_id"`
	RunStatus      string `json:"run_status"`
	LastCompleted  int    `json:"last_completed_step_index"`
	TotalSteps     int    `json:"total_steps"`
	SchemaHash8    string `json:"schema_hash8"`
	LastDeployName string `json:"last_deploy_name"`
	Seq            int64  `json:"seq"`
	// Outbox holds the transitions the control plane has not acknowledged.
	Outbox               []json.RawMessage        `json:"outbox"`
	Interrupted          *struct{ Reason string } `json:"interrupted"`
	ControlPlane         string                   `json:"control_plane"`
	ControlPlaneEmbedded bool                     `json:"control_plane_embedded"`
	EvidencePack         []struct {
		StepName     string  `json:"step_name"`
		Type         string  `json:"type"`
		Input        *string `json:"input"`
		Output       string  `json:"output"`
		Status       string  `json:"status"`
		TimestampUTC string  `json:"timestamp_utc"`
	} `json:"evidence_pack"`
}

func readState(t *testing.T, dir string) stateFile {
	t.Helper()
	return readStateAt(t, filepath.Join(dir, ".rbook", "demo.state.json"))
}

// readStateAt reads the state file at path (readState for another runbook).
func readStateAt(t *testing.T, path string) stateFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s stateFile
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("state file is not valid JSON: %v\n%s", err, data)
	}
	return s
}

func (s stateFile) steps() string {
	var b []string
	for _, e := range s.EvidencePack {
		b = append(b, e.StepName+"="+e.Status)
	}
	return strings.Join(b, " ")
}

var runIDRe = regexp.MustCompile(`^RBOOK-\d{8}-demo-[0-9a-f]{8}$`)

const demoPass = "web-apps-enforce-https=PASS resources-have-owner-tag=FAIL deploy-app-config=PASS rollback-app-config=SKIPPED confirm-rollout=PASS app-running-after-rollout=PASS"

func TestDemoApproved(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !regexp.MustCompile(`(?m)^# Runbook Execution Report$`).MatchString(out) || !strings.Contains(out, "AWAITING_CONFIRMATION") {
		t.Errorf("output lacks the report heading or the gate:\n%s", out)
	}
	s := readState(t, dir)
	if s.RunStatus != "COMPLETED" || !runIDRe.MatchString(s.RunID) || s.steps() != demoPass {
		t.Fatalf("state %s %s %q", s.RunStatus, s.RunID, s.steps())
	}
	for i := 1; i < len(s.EvidencePack); i++ {
		if s.EvidencePack[i].TimestampUTC < s.EvidencePack[i-1].TimestampUTC {
			t.Errorf("evidence not in execution order at %d", i)
		}
	}
	if s.LastDeployName == "" || !strings.HasPrefix(s.LastDeployName, "rbook-deploy-deploy-app-config-") {
		t.Errorf("last_deploy_name %q", s.LastDeployName)
	}
	ev, err := os.ReadFile(filepath.Join(dir, ".rbook", s.RunID+".evidence.json"))
	var arr []any
	if err != nil || json.Unmarshal(ev, &arr) != nil || len(arr) != len(s.EvidencePack) {
		t.Errorf("evidence pack file: %v (%d entries)", err, len(arr))
	}
}

func TestDemoRejectedAppliesOnFail(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "no\n", "run", "demo")
	s := readState(t, dir)
	want := "web-apps-enforce-https=PASS resources-have-owner-tag=FAIL deploy-app-config=PASS rollback-app-config=SKIPPED confirm-rollout=FAIL rollback-app-config=PASS"
	if code != 1 || s.RunStatus != "FAILED" || s.steps() != want {
		t.Fatalf("exit %d, %s, %q\n%s", code, s.RunStatus, s.steps(), out)
	}
	if !strings.Contains(s.EvidencePack[len(s.EvidencePack)-1].Output, "WOULD ROLLBACK (NOT EXECUTED in v1)") {
		t.Errorf("rollback output %q", s.EvidencePack[len(s.EvidencePack)-1].Output)
	}
}

func TestProdWithoutValuesAborts(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "", "run", "prod")
	want := "ABORT: runbooks/prod.values.yaml missing — copy prod.values.yaml.example and fill in real values."
	if code != 2 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(want)+`$`).MatchString(out) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook")); !os.IsNotExist(err) {
		t.Errorf("an aborted run wrote state: %v", err)
	}
	if strings.Contains(out, "No RUNBOOK was given") {
		t.Errorf("a named runbook got the default's hint:\n%s", out)
	}
	// The default runbook is prod; when it was not named, the ABORT line says so and how to
	// name another (a new user's 'rbook status' after the demo).
	for _, verb := range []string{"run", "status", "cancel", "rollback"} {
		hint := "(No RUNBOOK was given, so rbook " + verb + " used the default, prod; name the runbook to use another, e.g. 'rbook " + verb + " demo'.)"
		if out2, code2 := run(t, dir, "", verb); code2 != 2 || !strings.Contains(out2, want+"\n"+hint) {
			t.Errorf("rbook %s (default prod): exit %d\n%s", verb, code2, out2)
		}
	}
}

// A kill -9 mid-run leaves a run that status calls interrupted; of two executors
// started together exactly one takes it, and the survivor resumes without repeating a step.
func TestKilledRunResumesOnce(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	first := start(t, dir, "run", "demo")
	first.waitFor(t, "AWAITING_CONFIRMATION")
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.wait(t)
	before := readState(t, dir)

	out, code := run(t, dir, "", "status", "demo")
	if code != 0 || !strings.Contains(out, "interrupted") || !strings.Contains(out, "IN_PROGRESS") {
		t.Fatalf("status after kill -9: exit %d\n%s", code, out)
	}

	a, b := start(t, dir, "run", "demo"), start(t, dir, "run", "demo")
	var winner, loser *proc
	select {
	case <-a.done:
		winner, loser = b, a
	case <-b.done:
		winner, loser = a, b
	case <-time.After(60 * time.Second):
		t.Fatalf("neither executor gave way:\n%s\n---\n%s", a.output(), b.output())
	}
	if loser.code == 0 || !strings.Contains(loser.output(), "held by another executor") {
		t.Fatalf("the second executor: exit %d\n%s", loser.code, loser.output())
	}
	winner.waitFor(t, "AWAITING_CONFIRMATION")
	if !regexp.MustCompile(`(?m)^RESUMING run RBOOK-\d{8}-demo-[0-9a-f]{8} from step index 4\.$`).MatchString(winner.output()) {
		t.Errorf("no RESUMING line:\n%s", winner.output())
	}
	out, _ = run(t, dir, "", "status", "demo")
	if !strings.Contains(out, "running: an executor holds it (run, pid") || strings.Contains(out, "Undelivered:") {
		t.Errorf("status while resumed run waits:\n%s", out)
	}
	io.WriteString(winner.stdin, "yes\n")
	if code := winner.wait(t); code != 0 {
		t.Fatalf("resumed run exit %d\n%s", code, winner.output())
	}
	after := readState(t, dir)
	if after.RunID != before.RunID || after.steps() != demoPass {
		t.Fatalf("after resume: %s %q", after.RunID, after.steps())
	}
	for i, e := range before.EvidencePack {
		if after.EvidencePack[i].TimestampUTC != e.TimestampUTC {
			t.Errorf("entry %d was rewritten on resume", i)
		}
	}
}

// End to end: a deploy that started with no recorded outcome stops the resume;
// --step-index lets the operator decide; an edited runbook is refused naming both hashes.
func TestUnknownStepAndEditedRunbook(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	first := start(t, dir, "run", "demo")
	first.waitFor(t, "AWAITING_CONFIRMATION")
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.wait(t)
	path := filepath.Join(dir, ".rbook", "demo.state.json")
	var raw map[string]any
	data, _ := os.ReadFile(path)
	json.Unmarshal(data, &raw)
	// Rewind to "deploy started, outcome never recorded", as a crash mid-deploy leaves it.
	raw["evidence_pack"] = raw["evidence_pack"].([]any)[:2]
	raw["last_completed_step_index"], raw["current_step_index"] = 1, 2
	raw["in_flight"] = map[string]any{"step_index": 2, "step_name": "deploy-app-config", "step_type": "deploy", "started_utc": "2026-01-01T00:00:00Z"}
	data, _ = json.Marshal(raw)
	os.WriteFile(path, data, 0o600)

	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 2 || !strings.Contains(out, "step in unknown state") || !strings.Contains(out, "--step-index 3") {
		t.Fatalf("exit %d\n%s", code, out)
	}

	rb := filepath.Join(dir, "runbooks", "demo.yaml")
	orig, _ := os.ReadFile(rb)
	os.WriteFile(rb, append(orig, []byte("\n# edited\n")...), 0o644)
	out, code = run(t, dir, "yes\n", "run", "demo", "--step-index", "3")
	if code != 2 || !regexp.MustCompile(`started from runbook content [0-9a-f]{64}, but the runbook .* is now [0-9a-f]{64}`).MatchString(out) {
		t.Fatalf("edited runbook: exit %d\n%s", code, out)
	}
	os.WriteFile(rb, orig, 0o644)

	out, code = run(t, dir, "yes\n", "run", "demo", "--step-index", "3")
	s := readState(t, dir)
	if code != 0 || strings.Count(s.steps(), "deploy-app-config=SKIPPED") != 1 || strings.Contains(s.steps(), "deploy-app-config=PASS") || s.RunStatus != "COMPLETED" {
		t.Fatalf("operator skipped the deploy: exit %d %q\n%s", code, s.steps(), out)
	}
}

// Cancel while parked at a gate, from another terminal.
func TestCancelWhileParked(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	exe := start(t, dir, "run", "demo")
	exe.waitFor(t, "AWAITING_CONFIRMATION")
	out, code := run(t, dir, "yes\n", "cancel", "demo")
	if code != 3 || !strings.Contains(out, "rbook-deploy-deploy-app-config-") {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	if code := exe.wait(t); code != 3 {
		t.Fatalf("executor exit %d\n%s", code, exe.output())
	}
	s := readState(t, dir)
	last := s.EvidencePack[len(s.EvidencePack)-1]
	if s.RunStatus != "CANCELLED" || last.StepName != "CANCEL" || last.Type != "cancel" || strings.Contains(s.steps(), "app-running-after-rollout") {
		t.Fatalf("%s %q", s.RunStatus, s.steps())
	}
	if !strings.Contains(exe.output(), "WOULD CANCEL (NOT EXECUTED in v1) — deployment: rbook-deploy-deploy-app-config-") {
		t.Errorf("no WOULD CANCEL line:\n%s", exe.output())
	}
	// Not confirming changes nothing.
	dir2 := workdir(t)
	exe2 := start(t, dir2, "run", "demo")
	exe2.waitFor(t, "AWAITING_CONFIRMATION")
	if _, code := run(t, dir2, "no\n", "cancel", "demo"); code != 1 {
		t.Errorf("unconfirmed cancel exit %d, want 1", code)
	}
	io.WriteString(exe2.stdin, "yes\n")
	if code := exe2.wait(t); code != 0 {
		t.Errorf("run after an unconfirmed cancel: exit %d\n%s", code, exe2.output())
	}
}

// SIGINT, SIGTERM and SIGHUP all stop a run with one final record; the run stays
// resumable and the interrupted gate asks again.
func TestSignalsStopARunResumably(t *testing.T) {
	skipShort(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := workdir(t)
			p := start(t, dir, "run", "demo")
			p.waitFor(t, "AWAITING_CONFIRMATION")
			before := readState(t, dir)
			p.cmd.Process.Signal(sig)
			if code := p.wait(t); code != 1 {
				t.Fatalf("exit %d\n%s", code, p.output())
			}
			s := readState(t, dir)
			if s.RunStatus != "IN_PROGRESS" || s.steps() != before.steps() {
				t.Fatalf("after %s: %s %q (was %q)", sig, s.RunStatus, s.steps(), before.steps())
			}
			raw, _ := os.ReadFile(filepath.Join(dir, ".rbook", "demo.state.json"))
			if !strings.Contains(string(raw), `"interrupted"`) || !strings.Contains(p.output(), "can be resumed: rbook run demo") {
				t.Errorf("no interruption record or resume hint:\n%s", p.output())
			}
			out, code := run(t, dir, "yes\n", "run", "demo")
			if code != 0 || !strings.Contains(out, "RESUMING run "+s.RunID+" from step index 4.") || readState(t, dir).steps() != demoPass {
				t.Fatalf("resume after %s: exit %d\n%s", sig, code, out)
			}
		})
	}
}

func TestCancelCinDoesNotRunDeploysTwice(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	// "cancel" typed at the gate, then "yes" to the per-deployment confirmation.
	out, code := run(t, dir, "cancel\nyes\n", "run", "demo")
	s := readState(t, dir)
	if code != 3 || s.RunStatus != "CANCELLED" || strings.Count(s.steps(), "deploy-app-config=PASS") != 1 || !strings.HasSuffix(s.steps(), "CANCEL=PASS") {
		t.Fatalf("exit %d %s %q\n%s", code, s.RunStatus, s.steps(), out)
	}
}

func TestValidateReportsEveryError(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	bad := filepath.Join(dir, "runbooks", "bad.yaml")
	os.WriteFile(bad, []byte("runbook_name: bad\nsubscriptions: [a]\nstate_file_path: x.json\nrunbook_steps:\n  - name: a\n    type: chek\n    on_fail: halt\n  - name: b\n    type: check\n    on_fail: explode\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "runbooks", "bad.values.yaml"), []byte("{}\n"), 0o644)
	out, code := run(t, dir, "", "validate", "runbooks/demo.yaml", "runbooks/demo.values.yaml", "runbooks/prod.yaml", "runbooks/bad.yaml")
	if code != 2 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"runbooks/demo.yaml: ok", "runbooks/demo.values.yaml: skipped", "runbooks/prod.yaml: 2 error(s) (checked with runbooks/prod.values.yaml.example", "runbooks/bad.yaml:6:", "runbooks/bad.yaml:10:", "2 of 3 runbooks have errors"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateDefaultsToTheRunbooksFolder(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	os.WriteFile(filepath.Join(dir, "runbooks", "prod.values.yaml"), []byte(readFile(t, filepath.Join(dir, "runbooks", "prod.values.yaml.example"))), 0o644)
	os.WriteFile(filepath.Join(dir, "runbooks", "prod.mcp.json"), []byte(readFile(t, filepath.Join(dir, "runbooks", "demo.mcp.json"))), 0o644)
	out, code := run(t, dir, "", "validate")
	if code != 0 || !strings.Contains(out, "runbooks/demo.yaml: ok") || !strings.Contains(out, "runbooks/prod.yaml: ok") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	skipShort(t)
	out, code := run(t, t.TempDir(), "", "run", "--help")
	if code != 0 || !strings.Contains(out, "3  the run was cancelled") || !strings.Contains(out, "--step-index") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// Inside a GitHub Actions job the report lands in the job summary and the run id and status
// in the step outputs.
func TestGitHubRunnerGlue(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	summary, output := filepath.Join(dir, "summary.md"), filepath.Join(dir, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	out, code := run(t, dir, "yes\n", "run", "demo")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	s := readState(t, dir)
	// At the end the report replaces the gate's announcement.
	if sum := readFile(t, summary); !strings.HasPrefix(sum, "# Runbook Execution Report\n") || !strings.Contains(sum, s.RunID) {
		t.Errorf("job summary:\n%s", sum)
	}
	if o := readFile(t, output); !strings.Contains(o, s.RunID) || !strings.Contains(o, "COMPLETED") {
		t.Errorf("step outputs:\n%s", o)
	}
	// In CI the command names the approval id, never the token.
	approves := regexp.MustCompile(`rbook approve (\S+)`).FindAllStringSubmatch(out, -1)
	for _, m := range approves {
		if !regexp.MustCompile(`^a-[a-z0-9]+$`).MatchString(m[1]) {
			t.Errorf("rbook approve %s: not an approval id (the token was printed in CI?):\n%s", m[1], out)
		}
	}
	if len(approves) == 0 {
		t.Errorf("the gate did not say how to approve it:\n%s", out)
	}
}

// TestEndedAfterIsTheRunsDuration: with Markdown output, "Run … ended … after D"
// gives the run's duration from its started_utc, also when this rbook process only resumed
// or cancelled it (it said "after 3ms" for a run started minutes before; found trying the
// README as a new user).
func TestEndedAfterIsTheRunsDuration(t *testing.T) {
	skipShort(t)
	for _, verb := range []string{"run", "cancel"} {
		t.Run(verb, func(t *testing.T) {
			dir := workdir(t)
			p := start(t, dir, "run", "demo", "--control-plane", "off")
			p.waitFor(t, "AWAITING_CONFIRMATION")
			p.cmd.Process.Signal(syscall.SIGINT)
			if code := p.wait(t); code != 1 {
				t.Fatalf("exit %d\n%s", code, p.output())
			}
			// The run started an hour ago, as far as its state file says.
			statePath := filepath.Join(dir, ".rbook", "demo.state.json")
			s := readState(t, dir)
			raw, _ := os.ReadFile(statePath)
			var fields map[string]any
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatal(err)
			}
			old := fields["started_utc"].(string)
			at, err := time.Parse(time.RFC3339Nano, old)
			if err != nil {
				t.Fatal(err)
			}
			earlier := at.Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.000000000Z")
			os.WriteFile(statePath, []byte(strings.Replace(string(raw), `"started_utc": "`+old+`"`, `"started_utc": "`+earlier+`"`, 1)), 0o600)
			args, want := []string{"run", "demo", "--control-plane", "off"}, "ended COMPLETED after "
			if verb == "cancel" {
				args, want = []string{"cancel", "demo"}, "ended CANCELLED after "
			}
			out, _ := run(t, dir, "yes\n", args...)
			if !regexp.MustCompile(regexp.QuoteMeta("Run "+s.RunID+" "+want) + `1h0m\d+s\.`).MatchString(out) {
				t.Errorf("rbook %s: want %q and about 1h:\n%s", verb, want, out)
			}
			if verb == "run" {
				// A rollback of the final run keeps its status and duration: the line gives
				// the rollback's own time, not the hour since the run started.
				out, _ := run(t, dir, "", "rollback", "demo")
				if !regexp.MustCompile(regexp.QuoteMeta("Run "+s.RunID+" ended COMPLETED after ") + `[0-9.]+m?s\.`).MatchString(out) {
					t.Errorf("rollback of the final run:\n%s", out)
				}
			}
		})
	}
}
