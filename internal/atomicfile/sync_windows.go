//go:build windows

package atomicfile

// syncDirUnsupported: Windows cannot flush a folder handle (FlushFileBuffers refuses one);
// NTFS journals the rename itself.
func syncDirUnsupported(error) bool { return true }
