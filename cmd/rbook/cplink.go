package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rbookhq/rbook-action/action/state"
)

// stateCPFlag is the --control-plane value a run uses when it resumes (issue 10, new-user
// finding 1): the flag as given, except that with neither --control-plane nor
// $RBOOK_CONTROL_PLANE a resumed run whose state file names a separate control plane (one
// URL or a list of replicas, not the embedded one) reports to that control plane again, and
// one line on errw says so. Before, such a resume started an embedded control plane, whose
// record lacked the run's earlier transitions (E_SEQ_GAP at every attempt), and overwrote
// the state file's link. st is the opened state; resumed is state.Opened.Resumed.
func stateCPFlag(flag string, resumed bool, st *state.State, errw io.Writer) string {
	if flag != "" || os.Getenv("RBOOK_CONTROL_PLANE") != "" || !resumed || st == nil || st.ControlPlane == "" || st.ControlPlaneEmbedded {
		return flag
	}
	fmt.Fprintf(errw, "Control plane: %s (run %s reports to it, says its state file; give --control-plane to choose another).\n", st.ControlPlane, st.RunID)
	return st.ControlPlane
}

// noteCPRelink says, on errw, when a resumed run is about to report to another control plane
// than the one its state file names, before the state file's link is rewritten (issue 10,
// new-user finding 1: a link is never replaced silently). cpURL and embedded are the control
// plane the run now uses; from names where it came from. Nothing when the run is fresh, when
// the state file names no control plane, or when both are the same (an embedded control
// plane's URL changes at every start: embedded to embedded is the same one).
func noteCPRelink(errw io.Writer, st *state.State, resumed bool, cpURL string, embedded bool, from string) {
	if !resumed || st == nil || (st.ControlPlane == "" && !st.ControlPlaneEmbedded) {
		return
	}
	if embedded == st.ControlPlaneEmbedded && (embedded || cpURL == st.ControlPlane) {
		return
	}
	old := st.ControlPlane
	if st.ControlPlaneEmbedded {
		old = "the embedded control plane (" + embeddedDB + ")"
	}
	now := cpURL + " (from " + from + ")"
	if embedded {
		now = "the embedded control plane (" + embeddedDB + ", no --control-plane or RBOOK_CONTROL_PLANE given)"
	}
	fmt.Fprintf(errw, "Note: run %s reported to %s; it now reports to %s, and its state file records that. "+
		"A control plane without the run's earlier transitions refuses the next one (E_SEQ_GAP): to go back, stop now (Ctrl-C) and resume with --control-plane %s.\n",
		st.RunID, old, now, cpHint(st))
}

// cpHint is the --control-plane value that reaches st's recorded control plane, for hints:
// its URL list, or "" (leave the flag out) for the embedded one.
func cpHint(st *state.State) string {
	if st.ControlPlaneEmbedded {
		return `"" (leave the flag out)`
	}
	return shellQuote(st.ControlPlane)
}

// runbookHints are the resume and cancel commands an interrupted runbook run prints (issue
// 10, new-user finding 1): "rbook run NAME" and "rbook cancel NAME", with
// "--control-plane LIST" when the run reports to a separate control plane (cpURL, not
// embedded), so the command printed is the one that reaches it.
func runbookHints(name, cpURL string, embedded bool) (resume, cancel string) {
	resume, cancel = "rbook run "+name, "rbook cancel "+name
	if cpURL != "" && !embedded {
		resume += " --control-plane " + shellQuote(cpURL)
		cancel += " --control-plane " + shellQuote(cpURL)
	}
	return resume, cancel
}

// stateFileLinks lists, for messages of the commands that read history, the separate
// control planes this folder's state files (.rbook/*.state.json) say their runs report to:
// "RUN_ID → URLS (FILE)", sorted. The embedded control plane and unreadable files are left
// out (issue 10, new-user finding 1: 'rbook runs' read the stale embedded database while the
// state file named the replicas A,B).
func stateFileLinks() []string {
	files, _ := filepath.Glob(filepath.Join(".rbook", "*.state.json"))
	var out []string
	for _, f := range files {
		st, err := state.Read(f)
		if err != nil || st.ControlPlane == "" || st.ControlPlaneEmbedded {
			continue
		}
		out = append(out, fmt.Sprintf("run %s reports to %s (%s)", st.RunID, st.ControlPlane, f))
	}
	sort.Strings(out)
	return out
}

// stateLinksNote is one sentence naming stateFileLinks for a history read from the local
// database, or "" when there are none.
func stateLinksNote() string {
	links := stateFileLinks()
	if len(links) == 0 {
		return ""
	}
	return " This folder's state files name another control plane: " + strings.Join(links, "; ") +
		"; pass --control-plane with that URL list to see it there."
}
