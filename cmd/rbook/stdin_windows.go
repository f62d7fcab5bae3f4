//go:build windows

package main

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// peekNamedPipe is kernel32's PeekNamedPipe, which golang.org/x/sys/windows does not wrap.
var peekNamedPipe = windows.NewLazySystemDLL("kernel32.dll").NewProc("PeekNamedPipe")

// pipeGoneEmpty reports whether the pipe f has no writer left and nothing in it, without
// reading: PeekNamedPipe fails with ERROR_BROKEN_PIPE only when the write
// end is closed and no data is left. Any other answer means input might still come.
func pipeGoneEmpty(f *os.File) bool {
	if peekNamedPipe.Find() != nil {
		return false
	}
	var avail uint32
	r, _, err := peekNamedPipe.Call(f.Fd(), 0, 0, 0, uintptr(unsafe.Pointer(&avail)), 0)
	return r == 0 && errors.Is(err, windows.ERROR_BROKEN_PIPE)
}
