//go:build windows

package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobs maps each started Command (*exec.Cmd) to its Job Object handle (windows.Handle).
// The handle is kept open for rbook's life: the job is created with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so when rbook exits, even when it is killed, the
// system closes the handle and kills whatever is left of the tree (Pdeathsig's counterpart).
var jobs sync.Map

// Command returns an unstarted *exec.Cmd for name and args that Start runs in a new Job
// Object. When ctx ends, the whole job (the command and every process it started) is
// terminated; Windows has no SIGTERM, so there is no graceful stage. WaitDelay is grace, so
// Wait returns within about grace of ctx ending even when something still holds the
// command's output pipes open. grace <= 0 means DefaultGrace.
//
// The command is created suspended (so it cannot start a child before it is in the job):
// it must be started with Start, never with cmd.Start.
func Command(ctx context.Context, grace time.Duration, name string, args ...string) *exec.Cmd {
	if grace <= 0 {
		grace = DefaultGrace
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP}
	cmd.Cancel = func() error { return Kill(cmd) }
	cmd.WaitDelay = grace
	return cmd
}

// Start starts cmd (built by Command) suspended, puts it in a new kill-on-close Job Object,
// then lets it run. When the job cannot be set up, the process is killed and the error,
// naming the step that failed, is returned.
func Start(cmd *exec.Cmd) error {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return fmt.Errorf("create a job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return fmt.Errorf("set up the job object: %w", err)
	}
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return err
	}
	pid := uint32(cmd.Process.Pid)
	fail := func(what string, err error) error {
		_ = cmd.Process.Kill()
		windows.CloseHandle(job)
		return fmt.Errorf("%s (pid %d): %w", what, pid, err)
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fail("open the process", err)
	}
	err = windows.AssignProcessToJobObject(job, proc)
	windows.CloseHandle(proc)
	if err != nil {
		return fail("put the process in its job object", err)
	}
	jobs.Store(cmd, job)
	if err := resumeThreads(pid); err != nil {
		return fail("resume the process", err)
	}
	return nil
}

// resumeThreads resumes the threads of the suspended process pid (a new process has one).
func resumeThreads(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return err
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return err
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return err
	}
	if resumed == 0 {
		return errors.New("no thread of the process was found")
	}
	return nil
}

// Kill terminates the Job Object of cmd, which must have been built by Command and started
// with Start: the command and every process it started. It returns nil when the command never
// started, and TerminateJobObject's error otherwise.
func Kill(cmd *exec.Cmd) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	job, ok := jobs.Load(cmd)
	if !ok {
		err := cmd.Process.Kill()
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return err
	}
	return windows.TerminateJobObject(job.(windows.Handle), 1)
}

// AwaitGone waits until process pid (a Command's leader) has exited, for at most within. It
// returns nil when the process is gone (or cannot be opened because it no longer exists) and
// an error naming the process when it still runs at the deadline.
func AwaitGone(pid int, within time.Duration) error {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return nil // no such process
	}
	defer windows.CloseHandle(h)
	ev, err := windows.WaitForSingleObject(h, uint32(within/time.Millisecond))
	if err != nil {
		return err
	}
	if ev == uint32(windows.WAIT_TIMEOUT) {
		return fmt.Errorf("process %d still exists %v later", pid, within)
	}
	return nil
}
