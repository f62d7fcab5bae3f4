package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// noInputReason says why standard input can certainly never deliver a gate's answer, or
// returns "" when it might (a terminal, a pipe or file with data or a live writer, a socket).
// Certain is: a closed descriptor, /dev/null (the Action runs rbook with </dev/null), a
// regular file read to its end, and a pipe whose writers are gone with nothing left in it
// (a CI runner's closed stdin). It reads nothing from f (docs/approvals.md, "Gates decided from CI").
func noInputReason(f *os.File) string {
	if term.IsTerminal(int(f.Fd())) {
		return ""
	}
	info, err := f.Stat()
	if err != nil {
		return "standard input is closed"
	}
	switch mode := info.Mode(); {
	case mode&os.ModeCharDevice != 0:
		if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(info, null) {
			return "standard input is " + os.DevNull
		}
	case mode.IsRegular():
		if pos, err := f.Seek(0, io.SeekCurrent); err == nil && pos >= info.Size() {
			return "standard input is an empty file"
		}
	case mode&os.ModeNamedPipe != 0:
		if pipeGoneEmpty(f) {
			return "standard input is closed (its writer is gone and it holds no input)"
		}
	}
	return ""
}
