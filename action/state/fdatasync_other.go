//go:build !linux

package state

import "os"

// fdatasync is File.Sync where the system has no fdatasync(2) in golang.org/x/sys/unix (or
// none that is cheaper than fsync): the journal's append is durable all the same.
func fdatasync(f *os.File) error { return f.Sync() }
