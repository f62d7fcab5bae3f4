package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Holder describes the executor that holds a run's lock; it is written into the lock file.
type Holder struct {
	PID      int    `json:"pid"`
	Host     string `json:"host"`
	SinceUTC string `json:"since_utc"`
	Command  string `json:"command"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s since %s", h.PID, h.Host, h.SinceUTC)
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
	f *os.File
}

// LockPath is the lock file guarding the state file at statePath.
func LockPath(statePath string) string { return statePath + ".lock" }

// Acquire takes the lock for statePath without waiting. It returns *HeldError when a live
// process holds it, and records this process as the holder.
func Acquire(statePath string) (*Lock, error) {
	p := LockPath(statePath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			h, _ := readHolder(p)
			return nil, &HeldError{Path: statePath, Holder: h}
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, SinceUTC: time.Now().UTC().Format(time.RFC3339), Command: filepath.Base(os.Args[0])}
	data, _ := json.Marshal(h)
	if err := f.Truncate(0); err == nil {
		f.WriteAt(data, 0)
	}
	return &Lock{f: f}, nil
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

// Probe reports whether a live executor holds the lock for statePath, and who.
func Probe(statePath string) (held bool, h Holder, err error) {
	l, err := Acquire(statePath)
	var he *HeldError
	if errors.As(err, &he) {
		return true, he.Holder, nil
	}
	if err != nil {
		return false, Holder{}, err
	}
	return false, Holder{}, l.Release()
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
