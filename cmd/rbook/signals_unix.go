//go:build unix

package main

import (
	"os"
	"syscall"
)

// runSignals are the signals an executor (docs/cli.md, "Commands"): SIGINT, SIGTERM and SIGHUP
// interrupt the run (run_interrupted), cancelSignal asks it to read a cancel request.
var runSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1}

// cancelSignal is what `rbook cancel` sends a live executor after writing its cancel request
// file: SIGUSR1, which a run does not otherwise use.
var cancelSignal os.Signal = syscall.SIGUSR1

// signalNames names the interrupting signals in the run's messages and its run_interrupted.
var signalNames = map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}

// watchCancelRequests has nothing to do on unix: `rbook cancel` signals the executor.
func watchCancelRequests(string, chan<- os.Signal, <-chan struct{}) {}

// signalCancel tells the executor pid that a cancel request waits for it: SIGUSR1.
func signalCancel(pid int) error { return syscall.Kill(pid, syscall.SIGUSR1) }
