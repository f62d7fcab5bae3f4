//go:build !windows && !linux

package state

import "os"

// replaceFile renames from to to, replacing to; syncDir then makes it durable (durable is
// for Windows and Linux, which treat the two kinds of write differently).
func replaceFile(from, to string, _ bool) error { return os.Rename(from, to) }
