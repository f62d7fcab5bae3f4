package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/rbookhq/rbook-action/action/runbook"
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

// warnUnanswerableGates says, when the run starts, that a confirm gate ahead will fail at once
// because nobody can answer it: standard input can give no answer (why, from noInputReason)
// and there is no control plane to decide it on. The gate then FAILs when the run reaches it
// and its on_fail applies (docs/approvals.md, "Gates decided from CI").
func warnUnanswerableGates(w io.Writer, plan *runbook.Plan, from int, why string, controlPlane string) {
	if why == "" || controlPlane != "" {
		return
	}
	for _, s := range plan.Steps[min(max(from, 0), len(plan.Steps)):] {
		if s.Type != runbook.TypeConfirm {
			continue
		}
		fmt.Fprintf(w, "Warning: nobody can answer gate '%s' (step %d of %d): %s and there is no control plane (--control-plane off). When the run reaches it, the gate fails at once (FAIL: not confirmed) and its on_fail: %s applies. To decide gates without a terminal, pass --control-plane URL and approve with rbook approve.\n",
			s.Name, s.Index+1, len(plan.Steps), why, s.OnFail)
	}
}
