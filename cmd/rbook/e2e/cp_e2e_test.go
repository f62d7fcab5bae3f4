package e2e

// End-to-end tests of the executor with a real `rbook serve` control plane, driven by the Go
// Connect client, a grpc-go client, the CLI and the buf-generated TypeScript client.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const testSecret = "e2e-test-secret-0123456789abcdef"

// serveCP starts `rbook serve` on a free loopback port (with extra flags) and returns its
// URL once it listens.
func serveCP(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	return startServe(t, dir, extra...).url()
}

// cpServer is an `rbook serve` process that a test can stop (SIGSTOP), continue, kill and
// start again on the same address and database.
type cpServer struct {
	t        *testing.T
	addr, db string
	mu       sync.Mutex
	extra    []string // more rbook serve flags
	cmd      *exec.Cmd
	exited   chan struct{}
	// recorded gets one value per RecordTransition call any instance logged.
	recorded chan struct{}
	// log is every line the instances printed, in order (under mu).
	log []string
}

// startServe starts `rbook serve` (with extra flags) on a free loopback port with its
// database in dir and waits until it says it listens. The test's cleanup kills it.
func startServe(t *testing.T, dir string, extra ...string) *cpServer {
	t.Helper()
	return startServeDB(t, filepath.Join(dir, "cp.db"), extra...)
}

// startServeDB is startServe with the database file db.
func startServeDB(t *testing.T, db string, extra ...string) *cpServer {
	t.Helper()
	return startServeAt(t, freeAddr(t), db, extra...)
}

// startServeAt is startServeDB on the loopback address addr (host:port), for a test that
// must name the server's URL in its flags (--public-url) before it starts.
func startServeAt(t *testing.T, addr, db string, extra ...string) *cpServer {
	t.Helper()
	s := &cpServer{t: t, addr: addr, db: db, extra: extra, recorded: make(chan struct{}, 1<<16)}
	if err := s.launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

func (s *cpServer) url() string { return "http://" + s.addr }

// launch runs a new instance on s.addr and s.db and waits for its "listening on" line. It
// does not call t.Fatal, so a restarting goroutine may use it.
func (s *cpServer) launch() error {
	cmd := exec.Command(rbookBin, append([]string{"serve", "--addr", s.addr, "--db", s.db}, s.extra...)...)
	cmd.Env = append(os.Environ(), "RBOOK_APPROVAL_SECRET="+testSecret)
	logs, _ := cmd.StderrPipe()
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		once := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log = append(s.log, line)
			s.mu.Unlock()
			if !once && strings.Contains(line, "listening on") {
				once = true
				close(ready)
			}
			if strings.Contains(line, "/rbook.v1.RunService/RecordTransition") {
				select {
				case s.recorded <- struct{}{}:
				default:
				}
			}
		}
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-exited:
		return fmt.Errorf("rbook serve on %s exited before it said it was listening", s.addr)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("rbook serve on %s did not say it was listening within 60s", s.addr)
	}
}

// signal sends sig to the running instance.
func (s *cpServer) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// kill ends the running instance with SIGKILL (which also ends a stopped one) and waits
// until it is gone.
func (s *cpServer) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// restart kills the running instance and starts a new one on the same address and database.
func (s *cpServer) restart() error {
	s.kill()
	return s.launch()
}

var (
	approveLine = regexp.MustCompile(`rbook approve (\S+)`)
	demoRunID   = regexp.MustCompile(`RBOOK-\d{8}-demo-[0-9a-f]{8}(\.\d+)?`)
)

// tokenFrom waits for the executor's "rbook approve <token>" line and returns the token.
func tokenFrom(t *testing.T, p *proc) string {
	t.Helper()
	p.waitFor(t, "rbook approve ")
	m := approveLine.FindAllStringSubmatch(p.output(), -1)
	return m[len(m)-1][1]
}

func getRun(t *testing.T, url, runID string) *rbookv1.GetRunResponse {
	t.Helper()
	resp, err := cpclient.New(url, "").Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// checkTransitions asserts seq 1..n without gaps and one final transition last.
func checkTransitions(t *testing.T, resp *rbookv1.GetRunResponse, final rbookv1.RunStatus) {
	t.Helper()
	ts := resp.GetTransitions()
	for i, tr := range ts {
		if tr.GetSeq() != int64(i+1) {
			t.Fatalf("transition %d has seq %d: gap or reorder", i, tr.GetSeq())
		}
	}
	finals := 0
	for _, tr := range ts {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED {
			finals++
		}
	}
	if finals != 1 || ts[len(ts)-1].GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED || resp.GetRun().GetStatus() != final {
		t.Fatalf("%d run_finished transitions, last %s, run status %s; want one, last, %s", finals, ts[len(ts)-1].GetKind(), resp.GetRun().GetStatus(), final)
	}
}

func TestControlPlane_ApproveOverRPCAndReplayRefused(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	out, code := run(t, dir, "", "approve", tok, "--control-plane", url, "--reason", "looks good")
	if code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("rbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	s := readState(t, dir)
	resp := getRun(t, url, s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	decided := decidedMessage(resp)
	if !strings.Contains(decided, "approved") || !strings.Contains(decided, "looks good") {
		t.Errorf("gate_decided message %q", decided)
	}
	out, code = run(t, dir, "", "approve", tok, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_APPROVAL_ALREADY_DECIDED") {
		t.Fatalf("replayed token: exit %d\n%s", code, out)
	}
	if b, _ := json.Marshal(resp); strings.Contains(string(b), tok) {
		t.Errorf("GetRun output contains the token")
	}
	if strings.Contains(readFile(t, filepath.Join(dir, ".rbook", "demo.state.json")), tok) {
		t.Errorf("the state file contains the token")
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The terminal answer and the RPC race through one compare-and-set; here the terminal wins.
func TestControlPlane_TerminalAnswerDecidesTheApproval(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", url)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	s := readState(t, dir)
	checkTransitions(t, getRun(t, url, s.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	c := cpclient.New(url, "")
	list, err := c.Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: s.RunID})
	if err != nil || len(list.GetApprovals()) != 1 || list.GetApprovals()[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("approvals %v %v", list, err)
	}
	if strings.Contains(out, "rbook approve ") {
		t.Errorf("the token was printed although stderr is not a terminal:\n%s", out)
	}
}

// Kill -9 at the gate, resume against the same control plane: no gap, no duplicate, one final.
func TestControlPlane_KillResume(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	p.waitFor(t, "AWAITING_CONFIRMATION")
	p.cmd.Process.Kill()
	p.wait(t)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "RESUMING run") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	s := readState(t, dir)
	resp := getRun(t, url, s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if len(s.EvidencePack) != 6 {
		t.Errorf("evidence %q", s.steps())
	}
	if raw := readFile(t, filepath.Join(dir, ".rbook", "demo.state.json")); strings.Contains(raw, `"outbox": [`) && !strings.Contains(raw, `"outbox": []`) {
		t.Errorf("acknowledged transitions left in the outbox")
	}
}

// An unreachable control plane halts the run with a clear message and loses nothing.
func TestControlPlane_UnreachableHalts(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", "http://127.0.0.1:1", "--control-plane-timeout", "500ms")
	if code != 2 || !strings.Contains(out, "did not answer") || !strings.Contains(out, "run the same command again") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	url := serveCP(t, dir)
	out, code = run(t, dir, "yes\n", "run", "demo", "--control-plane", url)
	if code != 0 {
		t.Fatalf("once the control plane is back: exit %d\n%s", code, out)
	}
	checkTransitions(t, getRun(t, url, readState(t, dir).RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}

// End to end: CancelRun while the executor waits at the gate.
func TestCancelRunWhileGateWaits(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	runID := demoRunID.FindString(p.output())
	c := cpclient.New(url, "")
	if _, err := c.Runs.CancelRun(context.Background(), &rbookv1.CancelRunRequest{RunId: runID, Reason: "change freeze"}); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 3 {
		t.Fatalf("executor exit %d, want 3 (cancelled)\n%s", code, p.output())
	}
	s := readState(t, dir)
	if s.RunStatus != "CANCELLED" || s.EvidencePack[len(s.EvidencePack)-1].StepName != "CANCEL" || strings.Contains(s.steps(), "app-running-after-rollout") {
		t.Fatalf("state %s %q", s.RunStatus, s.steps())
	}
	if getRun(t, url, runID).GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
		t.Errorf("control plane status is not CANCELLED")
	}
	out, code := run(t, dir, "", "approve", tok, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_RUN_CANCELLED") && !strings.Contains(out, "E_APPROVAL_ALREADY_DECIDED") {
		t.Fatalf("approve after cancel: exit %d\n%s", code, out)
	}
}

// A grpc-go client, the Go Connect client and the TypeScript client all reach one server.
func TestControlPlane_ThreeClients(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	runID := demoRunID.FindString(p.output())

	conn, err := grpc.NewClient(strings.TrimPrefix(url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var viaGRPC rbookv1.GetRunResponse
	if err := conn.Invoke(context.Background(), "/rbook.v1.RunService/GetRun", &rbookv1.GetRunRequest{RunId: runID}, &viaGRPC); err != nil {
		t.Fatalf("grpc-go GetRun: %v", err)
	}
	if viaGRPC.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED {
		t.Errorf("grpc-go sees %s while the gate waits, want PAUSED", viaGRPC.GetRun().GetStatus())
	}

	npx, tsDir := tsClient(t)
	if npx == "" {
		io.WriteString(p.stdin, "yes\n")
		p.wait(t)
		return
	}
	lines := smoke(t, npx, tsDir, "--addr", url, "--run-id", runID, "--token", tok, "--protocol", "grpc")
	if len(lines) != 2 || lines[0]["rpc"] != "GetRun" || lines[0]["ok"] != true || lines[1]["rpc"] != "Approve" || lines[1]["ok"] != true {
		t.Fatalf("TypeScript over gRPC: %v", lines)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the TypeScript approval\n%s", code, p.output())
	}
	lines = smoke(t, npx, tsDir, "--addr", url, "--run-id", runID, "--token", tok, "--protocol", "connect")
	if len(lines) != 2 || lines[0]["ok"] != true || lines[1]["ok"] != false || !strings.Contains(fmt.Sprint(lines[1]["error"]), "E_APPROVAL_ALREADY_DECIDED") {
		t.Fatalf("TypeScript over Connect: %v", lines)
	}
	if s := fmt.Sprint(lines[0]["response"]); !strings.Contains(s, "RUN_STATUS_SUCCEEDED") {
		t.Errorf("TypeScript GetRun response: %s", s)
	}
	if resp := getRun(t, url, runID); resp.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED {
		t.Errorf("Go Connect client sees %s", resp.GetRun().GetStatus())
	}
}

// tsClient finds npx and an installed clients/ts, or skips saying why (CI installs both).
func tsClient(t *testing.T) (string, string) {
	t.Helper()
	tsDir, _ := filepath.Abs(filepath.Join("..", "..", "..", "clients", "ts"))
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Log("skipping the TypeScript client: node/npx is not installed (.ci/run installs it)")
		return "", ""
	}
	if _, err := os.Stat(filepath.Join(tsDir, "node_modules", ".bin", "tsx")); err != nil {
		t.Log("skipping the TypeScript client: run `npm ci` in clients/ts first (.ci/run does)")
		return "", ""
	}
	return npx, tsDir
}

func smoke(t *testing.T, npx, dir string, args ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command(npx, append([]string{"tsx", "smoke.ts"}, args...)...)
	cmd.Dir = dir
	out, _ := cmd.Output()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// The CLI against a control plane: runs, get, watch, approvals --pending, reject, -o json.
func TestControlPlane_CLI(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	runID := demoRunID.FindString(p.output())

	out, code := run(t, dir, "", "approvals", "--pending", "--control-plane", url)
	if code != 0 || !strings.Contains(out, runID) || !strings.Contains(out, "confirm-rollout") || !strings.Contains(out, "pending") || strings.Contains(out, tok) {
		t.Fatalf("approvals --pending: exit %d\n%s", code, out)
	}
	out, code = run(t, dir, "", "runs", "--control-plane", url, "-o", "json")
	var runs struct {
		Runs []struct{ RunID, Status string } `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs.Runs) != 1 || runs.Runs[0].Status != "RUN_STATUS_PAUSED" {
		t.Fatalf("runs -o json: exit %d %v\n%s", code, err, out)
	}
	// A gate-waiting runbook run reads AWAITING_CONFIRMATION in text.
	out, code = run(t, dir, "", "runs", "--status", "AWAITING_CONFIRMATION", "--control-plane", url)
	if code != 0 || !strings.Contains(out, runID) || !strings.Contains(out, "AWAITING_CONFIRMATION") {
		t.Fatalf("runs --status AWAITING_CONFIRMATION: exit %d\n%s", code, out)
	}
	out, code = run(t, dir, "", "runs", "--status", "in_progress", "--control-plane", url)
	if code != 0 || !strings.Contains(out, runID) {
		t.Fatalf("runs --status in_progress (IN_PROGRESS covers a waiting gate): exit %d\n%s", code, out)
	}

	watch := start(t, dir, "watch", runID, "--control-plane", url)
	watch.waitFor(t, "gate_opened")
	out, code = run(t, dir, "", "reject", tok, "--reason", "not today", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "rejected") {
		t.Fatalf("reject: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 1 {
		t.Fatalf("the rejected run exits %d, want 1 (on_fail: rollback)\n%s", code, p.output())
	}
	// One vocabulary: a runbook run is FAILED in watch and get, as in the
	// state file and the report; the enum stays the machine form in -o json.
	if code := watch.wait(t); code != 0 || !strings.Contains(watch.output(), "is FAILED.") || !strings.Contains(watch.output(), "rollback 'rollback-app-config'") ||
		strings.Contains(watch.output(), "RUN_STATUS_") {
		t.Fatalf("watch: exit %d\n%s", code, watch.output())
	}
	out, code = run(t, dir, "", "get", runID, "--control-plane", url)
	if code != 0 || !strings.Contains(out, " · FAILED · ") || !strings.Contains(out, "not today") || strings.Contains(out, "RUN_STATUS_") {
		t.Fatalf("get: exit %d\n%s", code, out)
	}
	for _, spelling := range []string{"FAILED", "failed", "RUN_STATUS_FAILED"} {
		out, code = run(t, dir, "", "runs", "--status", spelling, "--control-plane", url)
		if code != 0 || !strings.Contains(out, runID) || !strings.Contains(out, "FAILED") {
			t.Fatalf("runs --status %s: exit %d\n%s", spelling, code, out)
		}
	}
	for _, spelling := range []string{"COMPLETED", "succeeded", "IN_PROGRESS", "running", "AWAITING_CONFIRMATION", "paused", "cancelled"} {
		out, code = run(t, dir, "", "runs", "--status", spelling, "--control-plane", url)
		if code != 0 || strings.Contains(out, runID) {
			t.Fatalf("runs --status %s lists the failed run: exit %d\n%s", spelling, code, out)
		}
	}
	if out, code = run(t, dir, "", "runs", "--status", "done", "--control-plane", url); code != 2 || !strings.Contains(out, "IN_PROGRESS, AWAITING_CONFIRMATION, COMPLETED, FAILED, CANCELLED") {
		t.Fatalf("runs --status done: exit %d\n%s", code, out)
	}
	out, code = run(t, dir, "", "approvals", "--pending", "--control-plane", url, "-o", "json")
	if code != 0 || strings.Contains(out, runID) {
		t.Fatalf("no gate is pending any more: exit %d\n%s", code, out)
	}
	if out, code = run(t, dir, "", "runs", "--control-plane", "http://127.0.0.1:1"); code != 1 || !strings.Contains(out, "unavailable") {
		t.Errorf("unreachable control plane: exit %d\n%s", code, out)
	}
}

// One control plane per database: a second `rbook serve` on the same file is refused, and a
// run that finds the embedded one taken keeps to its state file.
func TestControlPlane_OneServerPerDatabase(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	serveCP(t, dir)
	cmd := exec.Command(rbookBin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "cp.db"))
	cmd.Env = append(os.Environ(), "RBOOK_APPROVAL_SECRET="+testSecret)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "another control plane is serving") {
		t.Fatalf("second serve: %v\n%s", err, out)
	}
	first := start(t, dir, "run", "demo")
	first.waitFor(t, "AWAITING_CONFIRMATION")
	second, code := run(t, dir, "", "run", "demo")
	if code != 2 || !strings.Contains(second, "held by another executor") {
		t.Fatalf("same runbook: exit %d\n%s", code, second)
	}
	os.WriteFile(filepath.Join(dir, "runbooks", "other.yaml"), []byte("runbook_name: other\nsubscriptions: [s]\nstate_file_path: .rbook/other.json\nrunbook_steps:\n  - {name: d, type: deploy, kql_or_template: remediation/a.json, on_fail: halt}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "runbooks", "other.values.yaml"), []byte("{}\n"), 0o644)
	other, code := run(t, dir, "", "run", "other")
	if code != 0 || !strings.Contains(other, "keeps its record in the state file only") {
		t.Fatalf("another runbook while the embedded control plane is taken: exit %d\n%s", code, other)
	}
	io.WriteString(first.stdin, "yes\n")
	if code := first.wait(t); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, first.output())
	}
}

// An approval given while the executor was dead stands: the resumed run takes it instead of
// asking again.
func TestControlPlane_ApprovedWhileExecutorWasDead(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	p.cmd.Process.Kill()
	p.wait(t)
	if out, code := run(t, dir, "", "approve", tok, "--control-plane", url, "--reason", "while it was down"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	out, code := run(t, dir, "", "run", "demo", "--control-plane", url) // stdin closed: nobody types
	if code != 0 || !strings.Contains(out, "RESUMING run") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	s := readState(t, dir)
	var gate string
	for _, e := range s.EvidencePack {
		if e.StepName == "confirm-rollout" {
			gate = e.Status + " " + e.Output
		}
	}
	if !strings.HasPrefix(gate, "PASS") || !strings.Contains(gate, "while it was down") {
		t.Fatalf("gate entry %q", gate)
	}
	checkTransitions(t, getRun(t, url, s.RunID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}
