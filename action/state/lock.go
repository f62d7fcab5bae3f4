package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
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

// HeldError is returned by Acquire when another live executor holds the run (docs/runbooks.md, "State, resume and crashes").
type HeldError struct {
	Path   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the run in %s is held by another executor (%s); wait for it to finish or stop it first", e.Path, e.Holder)
}

// LockRetryWindow is how long Acquire keeps trying a lock that is taken before it reports
// *HeldError: Probe takes a shared lock for an instant to see whether the run is held, and an
// executor that starts at that instant must not take the prober for an executor. A real
// holder keeps the lock for the whole run, so the window only delays the refusal of a second
// executor on the same run (docs/runbooks.md, "State, resume and crashes") by this much.
const LockRetryWindow = 250 * time.Millisecond

// lockRetryDelay is the pause between two tries within LockRetryWindow.
const lockRetryDelay = 5 * time.Millisecond

// Lock is an exclusive lock on "<state file>.lock", taken with github.com/gofrs/flock
// (flock(2) on unix, LockFileEx on Windows: one module for every OS). The operating system
// drops it when the holder dies, even by kill -9, so a dead executor never blocks a resume.
// The holder's record (Holder, JSON) is written into the lock file at recordOffset once the
// lock is taken, and cleared on Release; a record left by a killed holder is stale and is
// never read while the lock is free.
type Lock struct {
	fl        *flock.Flock
	f         *os.File // the same file, for writing the holder record
	statePath string
	// since is when the lock was taken; RemoveStaleTemps removes only older temp files.
	since time.Time
	// madeFile says this Acquire created the lock file, and madeDirs lists the folders it
	// created for it, outermost first: Discard removes them when nothing was recorded.
	madeFile bool
	madeDirs []string
}

// LockPath is the lock file guarding the state file at statePath.
func LockPath(statePath string) string { return statePath + ".lock" }

// tryLock takes fl (exclusive, or shared when shared is true) without blocking, trying again
// for up to LockRetryWindow while it is taken. It reports false when it is still taken.
func tryLock(fl *flock.Flock, shared bool) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), LockRetryWindow)
	defer cancel()
	try := fl.TryLockContext
	if shared {
		try = fl.TryRLockContext
	}
	ok, err := try(ctx, lockRetryDelay)
	if errors.Is(err, context.DeadlineExceeded) {
		return false, nil
	}
	return ok, err
}

// Acquire takes the lock for statePath for role ("run", "cancel", "rollback"), waiting at
// most LockRetryWindow. It returns *HeldError, naming the holder from its record, when
// another process holds it, and records this process as the holder. A lock file that cannot
// be created is the specification's not-writable abort. A state path through a symbolic link, or a
// lock file that is one (or, on Windows, another reparse point), is refused with a
// *SymlinkError (CheckPath).
func Acquire(statePath, role string) (*Lock, error) {
	if err := CheckPath(statePath); err != nil {
		return nil, err
	}
	p := LockPath(statePath)
	var madeDirs []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		madeDirs = append([]string{d}, madeDirs...)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, &NotWritableError{Err: err}
	}
	for attempt := 0; ; attempt++ {
		l, err := acquireFile(statePath, p, role)
		if errors.Is(err, errLockFileReplaced) && attempt < 10 {
			continue
		}
		if l != nil {
			l.madeDirs = madeDirs
		}
		return l, err
	}
}

// errLockFileReplaced: the lock file was removed or replaced (Discard) between its opening
// and its locking, so the lock taken guards nothing; Acquire tries again.
var errLockFileReplaced = errors.New("the lock file was replaced while it was being locked")

// acquireFile is Acquire once the lock file's folder exists.
func acquireFile(statePath, p, role string) (*Lock, error) {
	_, statErr := os.Lstat(p)
	madeFile := errors.Is(statErr, fs.ErrNotExist)
	if target, link := checkNotLink(p); link {
		return nil, &SymlinkError{StatePath: statePath, Link: p, Target: target}
	}
	const flags = os.O_RDWR | os.O_CREATE | oNoFollow
	f, err := os.OpenFile(p, flags, 0o600)
	if isLoop(err) {
		target, _ := os.Readlink(p)
		return nil, &SymlinkError{StatePath: statePath, Link: p, Target: target}
	}
	if err != nil {
		return nil, &NotWritableError{Err: err}
	}
	if info, err := f.Stat(); err == nil && info.Size() < recordOffset {
		// Where the lock covers the record's first bytes (Windows), reserve them before
		// locking, so the holder's record write below stays outside the locked range.
		f.Truncate(recordOffset)
	}
	fl := flock.New(p, flock.SetFlag(flags), flock.SetPermissions(0o600))
	ok, err := tryLock(fl, false)
	if err != nil {
		f.Close()
		if isLoop(err) { // replaced by a link since it was opened
			target, _ := os.Readlink(p)
			return nil, &SymlinkError{StatePath: statePath, Link: p, Target: target}
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if !ok {
		f.Close()
		h, _ := readHolder(p)
		return nil, &HeldError{Path: statePath, Holder: h}
	}
	if held, err1 := f.Stat(); err1 == nil {
		if now, err2 := os.Lstat(p); err2 != nil || !os.SameFile(held, now) {
			fl.Unlock()
			f.Close()
			return nil, errLockFileReplaced
		}
	}
	now := time.Now()
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, SinceUTC: now.UTC().Format(time.RFC3339), Role: role}
	data, _ := json.Marshal(h)
	if err := f.Truncate(recordOffset); err == nil {
		f.WriteAt(data, recordOffset)
	}
	return &Lock{fl: fl, f: f, statePath: statePath, since: now, madeFile: madeFile}, nil
}

// Discard is Release for a command that may have been refused: when no state file exists at
// the lock's state path (nothing was recorded), the lock file and the folders this Acquire
// created for it are removed (a folder only when it is empty), so a refused command leaves
// a folder as it found it. With a state file it is Release. An Acquire waiting on the
// removed file notices and takes a new one (errLockFileReplaced).
func (l *Lock) Discard() error {
	if l == nil || l.fl == nil {
		return nil
	}
	if _, err := os.Lstat(l.statePath); !errors.Is(err, fs.ErrNotExist) {
		return l.Release()
	}
	if l.madeFile && removeWhileLocked {
		os.Remove(LockPath(l.statePath))
	}
	err := l.Release()
	if l.madeFile && !removeWhileLocked {
		os.Remove(LockPath(l.statePath))
	}
	for i := len(l.madeDirs) - 1; i >= 0; i-- {
		if os.Remove(l.madeDirs[i]) != nil {
			break
		}
	}
	return err
}

// Release drops the lock. The lock file stays; its holder record is cleared first, so a
// contender never reads this process as the holder once the lock is free.
func (l *Lock) Release() error {
	if l == nil || l.fl == nil {
		return nil
	}
	l.f.Truncate(recordOffset)
	err := errors.Join(l.fl.Unlock(), l.f.Close()) // unlocking closes the lock's descriptor
	l.fl, l.f = nil, nil
	return err
}

// Probe reports whether a process holds the lock for statePath, and who (from the holder
// record), without /proc (which macOS and Windows lack; docs/development.md, "Windows under
// Wine"): it takes a shared lock without waiting and lets go at once. Taking it means nobody holds the run, and any holder record is stale and
// ignored; failing means a holder has it. A probe never makes an executor that starts at the
// same moment think the run is held, because Acquire tries again for LockRetryWindow, so
// `rbook status` is safe to run in a loop. The holder is Holder{} ("a process that is starting
// up") when it has locked but not yet written its record.
func Probe(statePath string) (held bool, h Holder, err error) {
	p := LockPath(statePath)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return false, Holder{}, nil
	}
	fl := flock.New(p, flock.SetFlag(os.O_RDONLY|oNoFollow))
	ok, err := fl.TryRLock()
	if errors.Is(err, fs.ErrNotExist) {
		return false, Holder{}, nil
	}
	if err != nil {
		return false, Holder{}, err
	}
	if ok {
		return false, Holder{}, fl.Unlock()
	}
	h, _ = readHolder(p)
	return true, h, nil
}

// AwaitRelease waits until nobody holds the lock for statePath (a shared lock on it can be
// taken), for at most within; `rbook cancel` uses it to wait for the executor it asked to
// cancel (docs/runbooks.md, "State, resume and crashes"). It polls every 20 ms. It returns ctx's error when ctx ends first, an
// error wrapping ErrStillLocked and naming the lock file when within passes, and the open or
// lock error otherwise.
func AwaitRelease(ctx context.Context, statePath string, within time.Duration) error {
	p := LockPath(statePath)
	fl := flock.New(p, flock.SetFlag(os.O_RDONLY|oNoFollow))
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ok, err := fl.TryRLockContext(wctx, 20*time.Millisecond)
	if ok {
		return fl.Unlock()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w %v later", p, ErrStillLocked, within)
	}
	return err
}

// ErrStillLocked is wrapped by AwaitRelease's error when the lock is still held at its deadline.
var ErrStillLocked = errors.New("still locked")

// readHolder reads the holder record from the lock file at lockPath (from recordOffset).
func readHolder(lockPath string) (Holder, error) {
	var h Holder
	f, err := os.OpenFile(lockPath, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return h, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, recordOffset, MaxHolderBytes))
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(bytes.TrimLeft(data, "\x00"), &h)
	return h, err
}

// MaxHolderBytes caps the holder record read from a lock file (4 KiB; a record is about 100
// bytes), so a lock file filled by something else is not loaded into memory.
const MaxHolderBytes = 4 << 10
