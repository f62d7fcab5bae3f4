//go:build !windows

package state

import "os"

// replaceFile renames from to to, replacing to; syncDir then makes it durable (durable is
// for Windows, which treats the two kinds of write differently).
func replaceFile(from, to string, _ bool) error { return os.Rename(from, to) }
