package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Holder describes the executor that holds a run's lock; it is written into the lock file.
type Holder struct {
	PID      int    `json:"pid"`
	Host     string `json:"host"`
	SinceUTC string `json:"since_utc"`
	// Role is what the holder does: "run" (an executor; only it answers cancel requests),
	// "cancel" or "rollback".
	Role string `json:"role"`
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "a process that is starting up"
	}
	return fmt.Sprintf("%s, pid %d on %s since %s", h.Role, h.PID, h.Host, h.SinceUTC)
}

// HeldError is returned by Acquire when another live executor holds the run (case R05).
type HeldError struct {
	Path   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the run in %s is held by another executor (%s); wait for it to finish or stop it first", e.Path, e.Holder)
}

// Lock is an exclusive advisory lock (flock) on "<state file>.lock". The kernel drops it
// when the holder dies, even by kill -9, so a dead executor never blocks a resume.
type Lock struct {
	f         *os.File
	statePath string
	// since is when the lock was taken; RemoveStaleTemps removes only older temp files.
	since time.Time
}

// LockPath is the lock file guarding the state file at statePath.
func LockPath(statePath string) string { return statePath + ".lock" }

// Acquire takes the lock for statePath without waiting, for role ("run", "cancel",
// "rollback"). It returns *HeldError when a live process holds it, and records this process
// as the holder. A lock file that cannot be created is the seed's not-writable abort. A state
// path through a symbolic link, or a lock file that is one, is refused first with a
// *SymlinkError (CheckPath; issue 6, item 1.9).
func Acquire(statePath, role string) (*Lock, error) {
	if err := CheckPath(statePath); err != nil {
		return nil, err
	}
	p := LockPath(statePath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, &NotWritableError{Err: err}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.ELOOP) {
		target, _ := os.Readlink(p)
		return nil, &SymlinkError{StatePath: statePath, Link: p, Target: target}
	}
	if err != nil {
		return nil, &NotWritableError{Err: err}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			h, _ := readHolder(p)
			return nil, &HeldError{Path: statePath, Holder: h}
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	now := time.Now()
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, SinceUTC: now.UTC().Format(time.RFC3339), Role: role}
	data, _ := json.Marshal(h)
	if err := f.Truncate(0); err == nil {
		f.WriteAt(data, 0)
	}
	return &Lock{f: f, statePath: statePath, since: now}, nil
}

// Release drops the lock. The lock file stays; its holder record is cleared.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// Probe reports whether a live process holds the lock for statePath, and who, without
// taking the lock: a probe must never make an executor that starts at the same moment think
// the run is held (so `rbook status` is safe to run in a loop). On Linux it asks /proc/locks;
// elsewhere it checks that the recorded holder's process is alive.
func Probe(statePath string) (held bool, h Holder, err error) {
	p := LockPath(statePath)
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, Holder{}, nil
	}
	if err != nil {
		return false, Holder{}, err
	}
	h, _ = readHolder(p)
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		if pid, found, err := flockHolder(uint64(st.Dev), st.Ino); err == nil {
			if found && h.PID == 0 {
				h.PID = pid
			}
			return found, h, nil
		}
	}
	host, _ := os.Hostname()
	if h.PID <= 0 || h.Host != host {
		return h.PID > 0, h, nil
	}
	return syscall.Kill(h.PID, 0) == nil, h, nil
}

// flockHolder looks for a FLOCK on the file (dev, ino) in /proc/locks and returns its pid.
func flockHolder(dev, ino uint64) (pid int, found bool, err error) {
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false, err
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; blocked waiters have "->" first.
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			pid, _ := strconv.Atoi(f[4])
			return pid, true, nil
		}
	}
	return 0, false, nil
}

func readHolder(lockPath string) (Holder, error) {
	var h Holder
	data, err := os.ReadFile(lockPath)
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(data, &h)
	return h, err
}
