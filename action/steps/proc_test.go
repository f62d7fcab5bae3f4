//go:build unix

package steps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// groupScript ignores SIGTERM and starts two children that inherit the ignored SIGTERM: a
// plain sleep and a shell that itself runs sleep (a grandchild). It prints each child's pid,
// then "ready", and waits forever.
const groupScript = `trap '' TERM
sh -c 'sleep 60; :' >/dev/null 2>&1 &
echo "child $!"
sleep 60 >/dev/null 2>&1 &
echo "child $!"
echo ready
wait`

func TestDeadlineKillsWholeProcessGroup(t *testing.T) {
	const deadline = time.Second
	const grace = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	cmd := GroupCommand(ctx, grace, "sh", "-c", groupScript)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })

	var children []int
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "ready" {
		pid, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "child "))
		if err != nil {
			t.Fatalf("unexpected script output %q", lines.Text())
		}
		children = append(children, pid)
	}
	if ctx.Err() != nil || len(children) != 2 {
		t.Fatalf("script not ready before the %v deadline (children %v); machine too slow?", deadline, children)
	}
	for _, pid := range children {
		if got, err := syscall.Getpgid(pid); err != nil || got != pgid {
			t.Fatalf("child %d: pgid %d, err %v; want pgid %d", pid, got, err, pgid)
		}
		requireIgnoresSIGTERM(t, pid)
	}

	waitErr := cmd.Wait()
	elapsed := time.Since(start)
	if waitErr == nil {
		t.Fatal("Wait returned nil for a process killed at its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ctx.Err() = %v, want DeadlineExceeded", ctx.Err())
	}
	// Generous bound: deadline plus grace plus scheduling slack on a noisy machine.
	if limit := deadline + grace + 5*time.Second; elapsed > limit {
		t.Fatalf("Wait returned after %v, want under %v", elapsed, limit)
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, pid := range children {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d still exists after the group kill (kill -0: %v)", pid, err)
		}
	}
}

func TestKillGroup(t *testing.T) {
	cmd := GroupCommand(context.Background(), KillGrace, "sh", "-c", "trap '' TERM; sleep 60 & wait")
	if err := KillGroup(cmd); err != nil {
		t.Fatalf("KillGroup before Start = %v, want nil", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if err := KillGroup(cmd); err != nil {
		t.Fatalf("KillGroup = %v", err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("Wait returned nil for a killed process")
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := KillGroup(cmd); err != nil {
		t.Fatalf("KillGroup on a gone group = %v, want nil", err)
	}
}

// requireIgnoresSIGTERM checks via /proc that pid really ignores SIGTERM, so the test proves
// that SIGKILL, not SIGTERM, ended it.
func requireIgnoresSIGTERM(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("cannot read /proc (%v); SIGTERM disposition unchecked", err)
	}
	for line := range strings.Lines(string(status)) {
		if mask, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			if err != nil {
				t.Fatalf("pid %d: bad SigIgn %q", pid, mask)
			}
			if bits&(1<<(uint(syscall.SIGTERM)-1)) == 0 {
				t.Fatalf("pid %d does not ignore SIGTERM (SigIgn %s); the test would prove nothing", pid, strings.TrimSpace(mask))
			}
			return
		}
	}
	t.Fatalf("pid %d: no SigIgn line in /proc status", pid)
}
