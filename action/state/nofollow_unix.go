//go:build unix

package state

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// oNoFollow makes an open fail with ELOOP when the last path component is a symbolic link
// (SymlinkError says why a state path never goes through one).
const oNoFollow = unix.O_NOFOLLOW

// journalStaysOpen is true: the journal is opened once per run (unix lets its folder be
// removed while it is open), saving an open and a close per transition.
const journalStaysOpen = true

// recordOffset is where the holder record starts in the lock file. flock(2) locks are
// advisory, so a contender can read the whole file.
const recordOffset = 0

// removeWhileLocked: Discard removes the lock file it made before releasing the lock, so no
// contender can take a lock on a file that is about to disappear.
const removeWhileLocked = true

// isLoop reports whether err is an open refused by oNoFollow.
func isLoop(err error) bool { return errors.Is(err, unix.ELOOP) }

// isLink reports whether an Lstat mode is a symbolic link (CheckPath refuses those).
func isLink(m fs.FileMode) bool { return m&fs.ModeSymlink != 0 }

// checkNotLink is done by oNoFollow at open time on unix; nothing to check first.
func checkNotLink(string) (target string, link bool) { return "", false }
