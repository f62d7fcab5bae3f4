// Package termui is the terminal rendering the rbook CLI shares between its commands: rune
// widths (cut, pad, wrap), ANSI colours and when they are allowed, the gate box, the one-line
// step summary and its status marks. It writes nothing itself: callers print what it returns.
package termui

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// CutRunes cuts s to at most n runes (n >= 1), ending in "…" when it was longer.
func CutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// PadRunes pads s with spaces to width runes; a longer s is returned as it is.
func PadRunes(s string, width int) string {
	if pad := width - utf8.RuneCountInString(s); pad > 0 {
		return s + strings.Repeat(" ", pad)
	}
	return s
}

// Wrap breaks s at spaces into lines of at most width runes (a longer word stays whole).
func Wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// IsTerminal reports whether w is a file open on a terminal.
func IsTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// TTYs says which of a command's streams are terminals.
type TTYs struct{ Stdin, Stdout, Stderr bool }

// Terminals reports which of os.Stdin, out and errw are terminals.
func Terminals(out, errw io.Writer) TTYs {
	return TTYs{Stdin: IsTerminal(os.Stdin), Stdout: IsTerminal(out), Stderr: IsTerminal(errw)}
}

// ColorAllowed reports whether output to a stream may be coloured: only on a terminal, never
// with NO_COLOR set to anything but "" (https://no-color.org), nor with TERM=dumb.
func ColorAllowed(tty bool) bool {
	return tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// ANSI SGR codes of the text lines and the gate box.
const (
	SGRReset  = "\x1b[0m"
	SGRBold   = "\x1b[1m"
	SGRDim    = "\x1b[2m"
	SGRRed    = "\x1b[31m"
	SGRGreen  = "\x1b[32m"
	SGRYellow = "\x1b[33m"
	SGRCyan   = "\x1b[36m"
)

// SGR wraps s in the ANSI code and a reset when on is true and s is not empty; else it is s.
func SGR(on bool, code, s string) string {
	if !on || s == "" {
		return s
	}
	return code + s + SGRReset
}

// Plural is "1 one" for n == 1, else "n many" ("1 entry", "2 entries"): the counts in the
// executor's messages (the control plane's config messages use yamlerr.Plural; the executor
// does not import the control plane).
func Plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
