//go:build windows

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/internal/wine"
	"golang.org/x/sys/windows"
)

// signalsHelperEnv makes the re-executed test binary an executor's signal handling alone:
// it runs handleSignals, prints "ready", and prints the cause that ends its context.
const signalsHelperEnv = "RBOOK_SIGNALS_TEST_HELPER"

// eventTimeout bounds how long a test waits for the event it synchronises on before failing.
const eventTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(signalsHelperEnv) != "handle" {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := handleSignals(ctx, cancel, filepath.Join(os.TempDir(), "rbook-signals-helper.state.json"), os.Stderr)
	defer stop()
	fmt.Println("ready")
	select {
	case <-ctx.Done():
		fmt.Println(context.Cause(ctx))
	case <-time.After(eventTimeout):
		fmt.Println("no signal")
	}
}

// TestCancelRequestFileCancelsTheRun: Windows has no SIGUSR1, so the executor polls for the
// cancel request file `rbook cancel` writes (watchCancelRequests); finding it cancels the run
// with the request's author and removes the file.
func TestCancelRequestFileCancelsTheRun(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "demo.state.json")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var errw bytes.Buffer
	stop := handleSignals(ctx, cancel, statePath, &errw)
	defer stop()

	req, err := json.Marshal(pipeline.CancelRequest{By: "alice", RequestedUTC: "2026-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pipeline.CancelRequestPath(statePath), req, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(eventTimeout):
		t.Fatalf("the run was not cancelled %v after the cancel request file appeared", eventTimeout)
	}
	if got, want := context.Cause(ctx), error(engine.CancelRequest{By: "alice"}); !errors.Is(got, want) {
		t.Errorf("cause = %#v, want %#v", got, want)
	}
	if got := errw.String(); got != "Cancel requested by alice: cancelling the run…\n" {
		t.Errorf("the executor said %q", got)
	}
	if _, err := os.Stat(pipeline.CancelRequestPath(statePath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cancel request file is still there (%v), want it consumed", err)
	}
}

// TestSignalCancelChecksTheExecutorRuns: `rbook cancel` on Windows only checks that the
// executor's process still runs (it finds the request file itself): a live one is nil, an
// exited one is named, one that never existed is an error.
func TestSignalCancelChecksTheExecutorRuns(t *testing.T) {
	if err := signalCancel(os.Getpid()); err != nil {
		t.Errorf("signalCancel(this process) = %v, want nil", err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Hold the process object so its pid stays its own after it exits.
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	err = signalCancel(pid)
	if want := fmt.Sprintf("process %d has exited", pid); err == nil || err.Error() != want {
		t.Errorf("signalCancel(exited) = %v, want %q", err, want)
	}
}

// TestCtrlBreakInterruptsTheRun: Ctrl-Break sent to an executor's process group reaches
// handleSignals as os.Interrupt, and the run ends interrupted by SIGINT.
func TestCtrlBreakInterruptsTheRun(t *testing.T) {
	wine.Skip(t, "GenerateConsoleCtrlEvent fails (invalid handle) in Wine's console without a display, so no control event can be sent")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalsHelperEnv+"=handle")
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("helper said %q (%v), want ready", lines.Text(), lines.Err())
	}
	if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(cmd.Process.Pid)); err != nil {
		t.Fatalf("GenerateConsoleCtrlEvent: %v", err)
	}
	if !lines.Scan() {
		t.Fatalf("helper ended without a cause: %v", lines.Err())
	}
	if got, want := strings.TrimSpace(lines.Text()), (engine.Interrupted{Signal: "SIGINT"}).Error(); got != want {
		t.Errorf("helper's run ended with %q, want %q", got, want)
	}
}
