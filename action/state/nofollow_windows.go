//go:build windows

package state

import (
	"io/fs"
	"os"
)

// oNoFollow is 0: Windows has no O_NOFOLLOW, so the lock and state files are checked with
// Lstat first (checkNotLink, CheckPath) and reparse points are refused (docs/development.md,
// "Windows under Wine").
const oNoFollow = 0

// journalStaysOpen is false: Windows refuses to delete or rename a file another handle has
// open without FILE_SHARE_DELETE (os.OpenFile never asks for it), so the journal is closed
// after each append and a run folder can be moved or removed between transitions, as on unix.
const journalStaysOpen = false

// recordOffset is where the holder record starts in the lock file. LockFileEx locks are
// mandatory and gofrs/flock locks byte 0, so a contender cannot read that byte while the lock
// is held: the record starts after it.
const recordOffset = 1

// removeWhileLocked is false: Windows refuses to delete a file that is open without
// FILE_SHARE_DELETE, as the held lock file is, so Discard removes the lock file it made after
// releasing the lock. The removal then fails, leaving the file, while a contender has it open.
const removeWhileLocked = false

// isLoop is always false: without O_NOFOLLOW an open never fails for a link.
func isLoop(error) bool { return false }

// isLink reports whether an Lstat mode is a symbolic link or another reparse point (a
// junction or mount point, which Go reports as ModeIrregular since Go 1.23).
func isLink(m fs.FileMode) bool { return m&(fs.ModeSymlink|fs.ModeIrregular) != 0 }

// checkNotLink reports whether path is a symbolic link or reparse point, and its target.
func checkNotLink(path string) (target string, link bool) {
	info, err := os.Lstat(path)
	if err != nil || !isLink(info.Mode()) {
		return "", false
	}
	target, _ = os.Readlink(path)
	return target, true
}
