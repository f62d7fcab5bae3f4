//go:build unix

package procgroup

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestCancelKillsChildThatOutlivesLeader covers the path where the leader obeys SIGTERM but
// a child ignores it: Wait returns early, and the delayed group SIGKILL must still come.
func TestCancelKillsChildThatOutlivesLeader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The child inherits the ignored SIGTERM at fork, before "ready"; the leader then restores
	// the default so that SIGTERM ends it.
	cmd := Command(ctx, 100*time.Millisecond, "sh", "-c", `trap '' TERM; sleep 60 >/dev/null 2>&1 & trap - TERM; echo ready; wait`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v; want ready", line, err)
	}
	cancel()
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("Wait = %v, want the leader killed by SIGTERM", err)
	}
	if err := AwaitGone(pgid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestKillNotStarted(t *testing.T) {
	if err := Kill(nil); err != nil {
		t.Errorf("Kill(nil) = %v", err)
	}
	if err := Kill(Command(context.Background(), 0, "true")); err != nil {
		t.Errorf("Kill(unstarted) = %v", err)
	}
}

func TestDefaultGrace(t *testing.T) {
	if cmd := Command(context.Background(), 0, "true"); cmd.WaitDelay != DefaultGrace {
		t.Errorf("WaitDelay = %v, want DefaultGrace %v", cmd.WaitDelay, DefaultGrace)
	}
}
