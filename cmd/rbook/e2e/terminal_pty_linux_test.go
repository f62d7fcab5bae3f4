//go:build linux

package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The pseudo-terminal tests of the terminal rendering and of Ctrl-C: they open a Linux pty
// (/dev/ptmx, TIOCSPTLCK), so they build on Linux only.

// openPTY opens a pseudo-terminal with golang.org/x/sys/unix (no new dependency) and returns
// its controller and terminal ends; it skips the test where the system has none.
func openPTY(t *testing.T) (controller, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("cannot unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("cannot open the pseudo-terminal: %v", err)
	}
	return m, s
}

// ptyProc is rbook running with stdin, stdout and stderr on a pseudo-terminal, as in a
// person's terminal.
type ptyProc struct {
	cmd  *exec.Cmd
	ctl  *os.File
	mu   sync.Mutex
	out  strings.Builder
	more chan struct{}
	done chan struct{}
	code int
}

func startPTY(t *testing.T, dir string, env []string, args ...string) *ptyProc {
	t.Helper()
	ctl, tty := openPTY(t)
	p := &ptyProc{cmd: exec.Command(rbookBin, args...), ctl: ctl, more: make(chan struct{}, 1), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Env = append(append(os.Environ(), "RBOOK_CONTROL_PLANE=", "TERM=xterm", "NO_COLOR="), env...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = tty, tty, tty
	// Its own session with the pty as controlling terminal: Ctrl-C typed there is a SIGINT.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := ctl.Read(buf)
			if n > 0 {
				p.mu.Lock()
				p.out.Write(buf[:n])
				p.mu.Unlock()
				select {
				case p.more <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return // EIO once rbook exited and the terminal side is closed
			}
		}
	}()
	go func() {
		err := p.cmd.Wait()
		<-read
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done; ctl.Close() })
	return p
}

// output is what rbook wrote so far, with the terminal's \r\n turned back into \n.
func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.ReplaceAll(p.out.String(), "\r\n", "\n")
}

func (p *ptyProc) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(p.output(), s) {
		select {
		case <-p.more:
		case <-p.done:
			if !strings.Contains(p.output(), s) {
				t.Fatalf("rbook exited %d before printing %q:\n%s", p.code, s, p.output())
			}
		case <-deadline:
			t.Fatalf("no %q within 60s:\n%s", s, p.output())
		}
	}
}

func (p *ptyProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("rbook did not exit within 90s:\n%s", p.output())
	}
	return p.code
}

// On a terminal, a run prints one text line per step (step n
// of N, name, type, status, duration), the gate as a box, and a summary that says where the
// evidence pack and the report are; no Markdown and no evidence-pack JSON. Colour is used,
// and not with NO_COLOR. The Markdown report goes to --report FILE.
func TestTerminalRunReadsLikeATerminalProgram(t *testing.T) {
	skipShort(t)
	for _, noColor := range []bool{false, true} {
		t.Run(fmt.Sprintf("NO_COLOR=%v", noColor), func(t *testing.T) {
			dir := workdir(t)
			var env []string
			if noColor {
				env = []string{"NO_COLOR=1"}
			}
			p := startPTY(t, dir, env, "run", "demo", "--control-plane", "off", "--report", "report.md")
			p.waitFor(t, "AWAITING_CONFIRMATION")
			p.waitFor(t, "> ")
			io.WriteString(p.ctl, "yes\n")
			if code := p.wait(t); code != 0 {
				t.Fatalf("exit %d\n%s", code, p.output())
			}
			raw := p.output()
			if colored := sgrRe.MatchString(raw); colored == noColor {
				t.Errorf("colour codes present: %v, with NO_COLOR=%v:\n%q", colored, noColor, raw)
			}
			out := sgrRe.ReplaceAllString(raw, "")
			s := readState(t, dir)
			for _, want := range []string{
				"✓ step 1 of 6  web-apps-enforce-https     check     PASS",
				"✗ step 2 of 6  resources-have-owner-tag   check     FAIL",
				"✓ step 3 of 6  deploy-app-config          deploy    PASS",
				"↷ step 4 of 6  rollback-app-config        rollback  SKIPPED",
				"✓ step 5 of 6  confirm-rollout            confirm   PASS",
				"✓ step 6 of 6  app-running-after-rollout  check     PASS",
				"╭─ Confirm gate · step 5 of 6 · confirm-rollout ─",
				"│   yes, confirm    continue the run",
				"Run " + s.RunID + " COMPLETED in ",
				"6 steps: 4 passed, 1 failed, 0 timed out, 1 skipped, 0 not run",
				"Evidence pack  .rbook/" + s.RunID + ".evidence.json (6 entries, JSON)",
				"Report         report.md",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("terminal output lacks %q:\n%s", want, out)
				}
			}
			if n := len(regexp.MustCompile(`(?m)^. step \d of 6  `).FindAllString(out, -1)); n != 6 {
				t.Errorf("%d step lines, want one per step:\n%s", n, out)
			}
			for _, bad := range []string{"# Runbook Execution Report", "```", "|---|", "### ", `"step_name"`, "▶ step"} {
				if strings.Contains(out, bad) {
					t.Errorf("terminal output has %q:\n%s", bad, out)
				}
			}
			if md := readFile(t, filepath.Join(dir, "report.md")); !strings.HasPrefix(md, "# Runbook Execution Report\n") || !strings.Contains(md, s.RunID) {
				t.Errorf("--report file:\n%s", md)
			}
		})
	}
}

// At a real terminal: Ctrl-C at the gate (the terminal sends SIGINT) prints
// no final-looking outcome, but that the run was interrupted and how to resume it; the resume
// asks again.
func TestCtrlCAtTheTerminal(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	p := startPTY(t, dir, nil, "run", "demo", "--control-plane", "off")
	p.waitFor(t, "AWAITING_CONFIRMATION")
	p.waitFor(t, "> ")
	io.WriteString(p.ctl, "\x03") // Ctrl-C
	if code := p.wait(t); code != 1 {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
	out := sgrRe.ReplaceAllString(p.output(), "")
	s := readState(t, dir)
	want := "Run " + s.RunID + " was interrupted (interrupted by SIGINT during step 'confirm-rollout' (index 4); the step was stopped). It is not finished: its state is kept in .rbook/demo.state.json and the run can be resumed: rbook run demo (or end it: rbook cancel demo)."
	if !strings.Contains(out, want) || !strings.Contains(out, "Run "+s.RunID+" is not finished") {
		t.Errorf("no interruption message:\n%s", out)
	}
	for _, bad := range []string{"ended IN_PROGRESS", "IN_PROGRESS", "Outcome", "# Runbook Execution Report"} {
		if strings.Contains(out, bad) {
			t.Errorf("the interrupted run printed %q:\n%s", bad, out)
		}
	}
	if s.RunStatus != "IN_PROGRESS" || len(s.EvidencePack) != 4 {
		t.Fatalf("state %s %q", s.RunStatus, s.steps())
	}
	// The interrupted run wrote its pack so far, as its summary says; status says so too
	// rather than that the file comes only when the run ends (found trying the README as a
	// new user).
	pack := ".rbook/" + s.RunID + ".evidence.json"
	if !strings.Contains(out, "Evidence pack  "+pack+" (4 entries, JSON)") {
		t.Errorf("summary does not name the pack so far:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, pack)); err != nil {
		t.Errorf("the interrupted run's pack so far: %v", err)
	}
	if st, _ := run(t, dir, "", "status", "demo"); !strings.Contains(st, "Evidence pack: written to "+pack+" when the run ends (it holds the 4 entries so far)\n") {
		t.Errorf("status of the interrupted run:\n%s", st)
	}
	again := startPTY(t, dir, nil, "run", "demo", "--control-plane", "off")
	again.waitFor(t, "RESUMING run "+s.RunID+" from step index 4.")
	again.waitFor(t, "AWAITING_CONFIRMATION")
	again.waitFor(t, "> ")
	io.WriteString(again.ctl, "yes\n")
	if code := again.wait(t); code != 0 || readState(t, dir).steps() != demoPass {
		t.Fatalf("resume: exit %d\n%s", code, again.output())
	}
}
