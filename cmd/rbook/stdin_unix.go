//go:build unix

package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// pipeGoneEmpty reports whether the pipe f has no writer left and nothing in it, without
// reading: poll(2) says POLLHUP without POLLIN.
func pipeGoneEmpty(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Poll(fds, 0)
	}
	return err == nil && n == 1 && fds[0].Revents&unix.POLLHUP != 0 && fds[0].Revents&unix.POLLIN == 0
}
