//go:build unix

package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Command returns an unstarted *exec.Cmd for name and args that runs as the leader of a new
// process group. When ctx ends, the whole group gets SIGTERM and, grace later, SIGKILL;
// WaitDelay is set to grace too, so Wait returns within about grace of ctx ending even when a
// grandchild still holds the command's stdout or stderr open. grace <= 0 means DefaultGrace.
//
// Should rbook itself die without cleaning up (kill -9), the kernel sends the leader SIGKILL
// (Pdeathsig; Linux only, other systems have no equivalent), so a stdio MCP server or step command does not outlive it. Two caveats:
// only the leader gets that signal, not the rest of its group; and Linux sends it when the OS
// thread that started the command exits, not the process. The Go runtime ends a thread only
// when a goroutine locked to it with runtime.LockOSThread returns without unlocking, so Start
// must not be called from such a goroutine (no caller in rbook does).
//
// The command does not get the terminal's foreground group, so it must not read from a TTY.
// The SIGKILL is sent to the group id unconditionally; should the group already be empty, the
// id could in theory have been reused within grace, which needs pid_max wrap-around first.
func Command(ctx context.Context, grace time.Duration, name string, args ...string) *exec.Cmd {
	if grace <= 0 {
		grace = DefaultGrace
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = groupAttr()
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		time.AfterFunc(grace, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return groupSignalError(syscall.Kill(-pgid, syscall.SIGTERM))
	}
	cmd.WaitDelay = grace
	return cmd
}

// Start starts cmd, which must have been built by Command. It is cmd.Start on unix; on
// Windows it also puts the command in its Job Object before it runs, so every caller starts a
// Command with Start.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// Kill sends SIGKILL to the process group led by cmd, which must have been built by Command
// and started. It returns nil when the command never started or the group is already gone,
// and the kill(2) error otherwise.
func Kill(cmd *exec.Cmd) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	err := groupSignalError(syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// groupSignalError maps "no such process group" to os.ErrProcessDone, which exec.Cmd.Wait
// treats as "nothing left to cancel" rather than as a failure.
func groupSignalError(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// AwaitGone waits until process group pgid no longer exists (kill(-pgid, 0) reports ESRCH),
// for at most within. Members killed with SIGKILL are reaped by init asynchronously, so a
// bounded poll every 10 ms is the only way to observe that the group is gone. It returns an
// error naming the group when it still exists at the deadline.
func AwaitGone(pgid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still exists %v later (kill -0: %v)", pgid, within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
