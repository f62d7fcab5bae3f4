//go:build windows

package procgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// helperEnv makes the re-executed test binary one of the processes of a test's tree:
//
//	sleep   waits to be killed
//	tree    starts a "sleep" child the plain way (exec.Command), prints the child's pid, waits
//	parent  starts a "tree" with Command and Start, prints "<tree pid> <its child's pid>", waits
const helperEnv = "RBOOK_PROCGROUP_TEST_HELPER"

// exitTimeout bounds how long a test waits for a killed process to be gone before it fails.
const exitTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "sleep":
	case "tree":
		child := helper("sleep")
		if err := child.Start(); err != nil {
			fail(err)
		}
		fmt.Println(child.Process.Pid)
	case "parent":
		tree := Command(context.Background(), 0, os.Args[0], "-test.run=^$")
		tree.Env = append(os.Environ(), helperEnv+"=tree")
		out, err := tree.StdoutPipe()
		if err != nil {
			fail(err)
		}
		if err := Start(tree); err != nil {
			fail(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			fail(err)
		}
		fmt.Println(tree.Process.Pid, strings.TrimSpace(line))
	default:
		fail(fmt.Errorf("unknown %s %q", helperEnv, os.Getenv(helperEnv)))
	}
	time.Sleep(time.Hour) // until the test kills this process
	os.Exit(0)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "procgroup test helper:", err)
	os.Exit(2)
}

// helper is the test binary re-executed as the helper role.
func helper(role string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	cmd.Stderr = os.Stderr
	return cmd
}

// readPids reads one line of space-separated pids from r.
func readPids(t *testing.T, r io.Reader, want int) []int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the helper's pids: %v", err)
	}
	fields := strings.Fields(line)
	if len(fields) != want {
		t.Fatalf("helper printed %q, want %d pids", line, want)
	}
	pids := make([]int, want)
	for i, f := range fields {
		if pids[i], err = strconv.Atoi(f); err != nil {
			t.Fatalf("helper printed %q: %v", line, err)
		}
	}
	return pids
}

// watch opens process pid so that its exit can be awaited and its exit code read even after
// it is gone (the handle keeps the process object). The process is terminated at cleanup
// should the test fail before it is gone.
func watch(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		t.Fatalf("open process %d: %v", pid, err)
	}
	t.Cleanup(func() {
		_ = windows.TerminateProcess(h, 99)
		windows.CloseHandle(h)
	})
	return h
}

// exitCode waits for the process behind h to exit and returns its exit code; the test fails
// when it still runs after exitTimeout.
func exitCode(t *testing.T, h windows.Handle, what string) uint32 {
	t.Helper()
	ev, err := windows.WaitForSingleObject(h, uint32(exitTimeout/time.Millisecond))
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	if ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("%s still runs %v after its tree was killed", what, exitTimeout)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		t.Fatalf("exit code of %s: %v", what, err)
	}
	return code
}

// startTree starts a "tree" helper with Command and Start, and returns it with the pid of
// the child it started.
func startTree(t *testing.T, ctx context.Context) (*exec.Cmd, int) {
	t.Helper()
	cmd := Command(ctx, 0, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=tree")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = Kill(cmd); _ = cmd.Wait() })
	return cmd, readPids(t, out, 1)[0]
}

// TestKillEndsTheCommandAndEveryProcessItStarted: Kill terminates the Job Object, so the
// child the command started the plain way (which a kill of the command alone would leave
// running) ends too, both with TerminateJobObject's exit code 1.
func TestKillEndsTheCommandAndEveryProcessItStarted(t *testing.T) {
	cmd, childPid := startTree(t, context.Background())
	leader, child := watch(t, cmd.Process.Pid), watch(t, childPid)
	if err := Kill(cmd); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if code := exitCode(t, child, "the command's child"); code != 1 {
		t.Errorf("the command's child exited with %d, want 1 (TerminateJobObject's code)", code)
	}
	if code := exitCode(t, leader, "the command"); code != 1 {
		t.Errorf("the command exited with %d, want 1", code)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("Wait = %v, want exit status 1", err)
	}
	if err := AwaitGone(childPid, exitTimeout); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledContextEndsTheWholeTree: cancelling the command's context kills its job (the
// Cancel hook is Kill), and Wait returns.
func TestCancelledContextEndsTheWholeTree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd, childPid := startTree(t, ctx)
	child := watch(t, childPid)
	cancel()
	if err := cmd.Wait(); err == nil {
		t.Fatal("Wait = nil after the context was cancelled, want the command killed")
	}
	if code := exitCode(t, child, "the command's child"); code != 1 {
		t.Errorf("the command's child exited with %d, want 1 (TerminateJobObject's code)", code)
	}
}

// TestDeathOfTheStarterEndsTheTree: when the process that started a Command dies without
// cleaning up (TerminateProcess, as Task Manager or a runner's cancel does), the system
// closes its handle on the kill-on-close Job Object, which kills the command and its child:
// neither outlives rbook.
func TestDeathOfTheStarterEndsTheTree(t *testing.T) {
	parent := helper("parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	pids := readPids(t, out, 2)
	leader, child := watch(t, pids[0]), watch(t, pids[1])
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	exitCode(t, leader, "the command of the killed starter")
	exitCode(t, child, "the child of the command of the killed starter")
}

func TestStartOfAMissingProgramFails(t *testing.T) {
	cmd := Command(context.Background(), 0, "rbook-no-such-program-anywhere")
	if err := Start(cmd); !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("Start = %v, want exec.ErrNotFound", err)
	}
	if err := Kill(cmd); err != nil {
		t.Errorf("Kill after a failed Start = %v, want nil", err)
	}
}

// TestAwaitGoneNamesAProcessThatStillRuns: with no time to wait, AwaitGone reports a live
// process by its pid, and nil once it is gone.
func TestAwaitGoneNamesAProcessThatStillRuns(t *testing.T) {
	cmd := helper("sleep")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	err := AwaitGone(pid, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("process %d still exists", pid)) {
		t.Fatalf("AwaitGone(live %d, 0) = %v, want it named as still existing", pid, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := AwaitGone(pid, exitTimeout); err != nil {
		t.Fatalf("AwaitGone after the kill: %v", err)
	}
}

// TestKillOfACommandStartedOutsideStart: a Command started with cmd.Start (no job; it stays
// suspended) is still killed by Kill, through the process alone.
func TestKillOfACommandStartedOutsideStart(t *testing.T) {
	cmd := Command(context.Background(), 0, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Kill(cmd); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("Wait = %v, want exit status 1 (Process.Kill's code)", err)
	}
}

func TestKillOfACommandNeverStartedIsNil(t *testing.T) {
	if err := Kill(nil); err != nil {
		t.Errorf("Kill(nil) = %v", err)
	}
	if err := Kill(Command(context.Background(), 0, os.Args[0])); err != nil {
		t.Errorf("Kill(unstarted) = %v", err)
	}
}

func TestCommandWaitsGraceForItsPipes(t *testing.T) {
	if cmd := Command(context.Background(), 0, os.Args[0]); cmd.WaitDelay != DefaultGrace {
		t.Errorf("WaitDelay = %v, want DefaultGrace %v", cmd.WaitDelay, DefaultGrace)
	}
	if cmd := Command(context.Background(), time.Second, os.Args[0]); cmd.WaitDelay != time.Second {
		t.Errorf("WaitDelay = %v, want the grace 1s", cmd.WaitDelay)
	}
}
