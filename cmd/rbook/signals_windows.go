//go:build windows

package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	pipeline "github.com/rbookhq/rbook-action/action/run"
	"golang.org/x/sys/windows"
)

// runSignals are the signals an executor handles on Windows: Ctrl-C and
// Ctrl-Break arrive as os.Interrupt (SIGINT), closing the console, log-off and shut-down as
// SIGTERM; both interrupt the run (run_interrupted). Windows has no SIGUSR1 or SIGHUP.
var runSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// cancelRequested is the pseudo-signal watchCancelRequests delivers when a cancel request
// file appears: Windows has no SIGUSR1 for `rbook cancel` to send.
type cancelRequested struct{}

func (cancelRequested) String() string { return "cancel request" }
func (cancelRequested) Signal()        {}

// cancelSignal is what the executor's signal loop takes as "read the cancel request".
var cancelSignal os.Signal = cancelRequested{}

// signalNames names the interrupting signals in the run's messages and its run_interrupted.
var signalNames = map[os.Signal]string{os.Interrupt: "SIGINT", syscall.SIGTERM: "SIGTERM"}

// cancelPollInterval is how often a Windows executor looks for a cancel request file.
const cancelPollInterval = 200 * time.Millisecond

// watchCancelRequests delivers cancelSignal on ch whenever the cancel request file of
// statePath exists, until done is closed (Windows has no SIGUSR1, so the executor polls for the file).
func watchCancelRequests(statePath string, ch chan<- os.Signal, done <-chan struct{}) {
	go func() {
		t := time.NewTicker(cancelPollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := os.Stat(pipeline.CancelRequestPath(statePath)); err == nil {
					select {
					case ch <- cancelSignal:
					default:
					}
				}
			}
		}
	}()
}

// signalCancel checks that the executor pid still runs; it finds the cancel request file by
// itself (watchCancelRequests).
func signalCancel(pid int) error {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return err
	}
	if code != 259 { // STILL_ACTIVE
		return fmt.Errorf("process %d has exited", pid)
	}
	return nil
}
