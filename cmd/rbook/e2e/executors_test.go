//go:build unix

package e2e

// End-to-end tests of check steps against an MCP server that never answers the initialize
// handshake: the connect is bounded by each step's deadline, signals still stop the run, and
// no server process outlives rbook.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
)

// muteServerRunbook writes runbook "h" (checks c1 and c2 with the given max_timeout_seconds,
// then deploy d) into a fresh working directory. Its MCP server is `sh -c script`, which
// never answers. It returns the directory.
func muteServerRunbook(t *testing.T, checkTimeoutSeconds int, script string) string {
	t.Helper()
	dir := t.TempDir()
	rb := filepath.Join(dir, "runbooks")
	if err := os.Mkdir(rb, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`runbook_name: h
subscriptions: [s1]
state_file_path: .rbook/h.json
max_step_timeout_seconds: %[1]d
runbook_steps:
  - {name: c1, type: check, kql_or_template: "Resources | project name", on_fail: continue, max_timeout_seconds: %[1]d}
  - {name: c2, type: check, kql_or_template: "Resources | project name", on_fail: continue, max_timeout_seconds: %[1]d}
  - {name: d, type: deploy, kql_or_template: remediation/a.json, on_fail: halt}
`, checkTimeoutSeconds)
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"mute": map[string]any{"command": "sh", "args": []string{"-c", script}}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"h.yaml": yaml, "h.values.yaml": "x: 1\n", "h.mcp.json": string(cfg)} {
		if err := os.WriteFile(filepath.Join(rb, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestUnansweredMCPHandshakeTimesOutEachCheck: each check's connect ends at the step's
// deadline (TIMED_OUT, on_fail continue), the next check dials afresh, the run completes and
// exits, and every server's process group is gone.
func TestUnansweredMCPHandshakeTimesOutEachCheck(t *testing.T) {
	skipShort(t)
	pids := filepath.Join(t.TempDir(), "pids")
	// "; true" keeps sh from exec'ing sleep: the group has a leader and a child.
	dir := muteServerRunbook(t, 1, fmt.Sprintf(`echo $$ >> %q; sleep 1000; true`, pids))
	p := start(t, dir, "run", "h", "--control-plane", "off")
	t.Cleanup(func() { // runs before start's cleanup, which waits for output the servers hold open
		data, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(data)) {
			if pgid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
	})
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, p.output())
	}
	var st stateFile
	raw, err := os.ReadFile(filepath.Join(dir, ".rbook", "h.json"))
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.steps(), "c1=TIMED_OUT c2=TIMED_OUT d=PASS"; got != want || st.RunStatus != "COMPLETED" {
		t.Errorf("run %s with %q, want COMPLETED with %q\n%s", st.RunStatus, got, want, p.output())
	}
	// At least one check names the unanswered connect (on a loaded machine the engine's own
	// deadline may word the other one); both TIMED_OUT and one server per check is asserted.
	if want := `mcp server \"mute\": connect: context deadline exceeded`; !strings.Contains(p.output(), want) {
		t.Errorf("output does not show the connect timing out (%s):\n%s", want, p.output())
	}
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		t.Fatalf("servers started: %q, want one per check", fields)
	}
	for _, f := range fields {
		pgid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
			t.Error(err)
		}
	}
}

// startMuteServerRun starts a run whose first check waits up to 60 s on a server that never
// answers, and returns it once the server runs, with the server's process group id.
func startMuteServerRun(t *testing.T, script string) (*proc, int) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := muteServerRunbook(t, 60, fmt.Sprintf(script, fifo))
	p := start(t, dir, "run", "h", "--control-plane", "off")
	pidc := make(chan string, 1)
	go func() {
		data, _ := os.ReadFile(fifo) // returns once the server has written its pid
		pidc <- string(data)
	}()
	var text string
	select {
	case text = <-pidc:
	case <-p.done:
		t.Fatalf("rbook exited %d before starting the MCP server:\n%s", p.code, p.output())
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil {
		t.Fatalf("server pid %q: %v", text, err)
	}
	// Runs before start's cleanup, which waits for output the server holds open.
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return p, pgid
}

// TestSIGTERMStopsRunWaitingForMCPHandshake: SIGTERM during a check's connect stops the run
// (exit 1, resumable) long before the step's 60 s deadline and kills the server's group.
func TestSIGTERMStopsRunWaitingForMCPHandshake(t *testing.T) {
	skipShort(t)
	p, pgid := startMuteServerRun(t, `echo $$ > %q; sleep 1000; true`)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // generous; without the fix rbook never exits
		t.Fatalf("rbook still running 30 s after SIGTERM:\n%s", p.output())
	}
	if p.code != 1 || !strings.Contains(p.output(), "can be resumed: rbook run h") {
		t.Errorf("exit %d, want 1 and a resume hint:\n%s", p.code, p.output())
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
}

// TestKilledRbookTakesMCPServerAlong: kill -9 of rbook runs no cleanup, yet the stdio server
// (here a single process) dies with it (Pdeathsig).
func TestKilledRbookTakesMCPServerAlong(t *testing.T) {
	skipShort(t)
	p, pgid := startMuteServerRun(t, `echo $$ > %q; exec sleep 1000`)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Not waiting for p.done: rbook's output pipe stays open as long as the server lives.
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
}
