//go:build !windows

package atomicfile

// syncDirUnsupported: every error of a folder's fsync counts on this system.
func syncDirUnsupported(error) bool { return false }
