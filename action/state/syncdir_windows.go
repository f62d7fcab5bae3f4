//go:build windows

package state

import (
	"os"

	"golang.org/x/sys/windows"
)

// replaceFile renames from to to, replacing to, and, when durable, returns only once the rename is on disk
// (MoveFileEx with MOVEFILE_WRITE_THROUGH): on Windows that flag, not a folder fsync, is what
// makes a rename survive a crash (syncDir). Errors are *os.LinkError, as os.Rename's.
func replaceFile(from, to string, durable bool) error {
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	flags := uint32(windows.MOVEFILE_REPLACE_EXISTING)
	if durable {
		flags |= windows.MOVEFILE_WRITE_THROUGH
	}
	if err := windows.MoveFileEx(f, t, flags); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// syncDir does nothing on Windows. A folder's handle from os.Open is read-only, and
// FlushFileBuffers needs write access, so the unix sequence fails every write with "Access is
// denied". Instead the rename of a write is made durable by replaceFile (write-through), and
// the hard link of writeFileExclusive is left to NTFS's metadata journal, as no unprivileged
// process can flush a folder (docs/decisions/durability.md gives the unix sequence).
func syncDir(string) error { return nil }
