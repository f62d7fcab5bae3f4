//go:build linux

package state

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// replaceFile renames from to to, replacing to; for a durable write syncDir then makes it
// durable. A write that is not durable (the state file's rewrite, which the journal backs)
// exchanges the two names instead (renameat2 RENAME_EXCHANGE) and removes the replaced file
// under the temp name: a rename over an existing file makes ext4 start writing the new
// file's data out at once (its auto_da_alloc guard for programs that skip the fsync), which
// costs as much as the journal's fdatasync; the exchange is as atomic for every reader and
// leaves the data to the kernel's writeback. Where the file system cannot exchange, or to
// does not exist yet, it is a rename.
func replaceFile(from, to string, durable bool) error {
	if !durable {
		err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCHANGE)
		if err == nil {
			// from names the replaced file now; one left behind by a failed removal is
			// a stale temp file the next run removes (RemoveStaleTemps).
			_ = os.Remove(from)
			return nil
		}
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
	}
	return os.Rename(from, to)
}
