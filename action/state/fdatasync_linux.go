//go:build linux

package state

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data (and the size that reaches it) durable without flushing the
// metadata a read does not need (modification time): the journal's one sync per transition.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
