package termui

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// GateLines writes one line per decided gate of a run's terminal summary: who decided
// it, through which channel and why, as the report's "Gate decisions" table says it.
func GateLines(w io.Writer, gates []report.GateRow) {
	for _, g := range gates {
		what := string(g.Status)
		if g.Verdict != "" {
			// A confirm step answered at the terminal records only the answer typed, so
			// its row has no By: the line says "approved via terminal", not "by  via".
			what = g.Verdict
			if g.By != "" {
				what += " by " + g.By
			}
			if g.Via != "" {
				what += " via " + g.Via
			}
		}
		if g.Reason != "" {
			what += ": " + g.Reason
		}
		fmt.Fprintf(w, "  Gate '%s'  %s\n", g.Name, what)
	}
}

// PromptFor is a rendered Markdown prompt (the cancel prompt, prompts/cancel.prompt.md) as
// it should reach w: unchanged when w is no terminal (a log, a file, a pipe read by a
// program), else as text (MarkdownText), so a person at a terminal does not read "##" and
// backticks.
func PromptFor(w io.Writer, md string) string {
	if !IsTerminal(w) {
		return md
	}
	return MarkdownText(md)
}

// MarkdownText turns the little Markdown a prompt uses into text: a heading's "#" marks,
// code backticks and "**" emphasis are dropped, and a "- " list item is indented as a bullet.
func MarkdownText(md string) string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		l = strings.TrimLeft(l, "#")
		if l != lines[i] {
			l = strings.TrimPrefix(l, " ")
		}
		if rest, ok := strings.CutPrefix(l, "- "); ok {
			l = "  • " + rest
		}
		lines[i] = strings.NewReplacer("`", "", "**", "").Replace(l)
	}
	return strings.Join(lines, "\n")
}

// WarnUnanswerableGates says, when the run starts, that a confirm gate ahead will fail at once
// because nobody can answer it: standard input can give no answer (why, as cmd/rbook's noInputReason says)
// and there is no control plane to decide it on. The gate then FAILs when the run reaches it
// and its on_fail applies (docs/approvals.md, "Gates decided from CI").
func WarnUnanswerableGates(w io.Writer, plan *runbook.Plan, from int, why string, controlPlane string) {
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

// WarnControlPlaneLeftBehind warns, on resuming run st with no control plane (--control-plane
// off or RBOOK_CONTROL_PLANE=off), when st's state file says the run reports to one: that
// control plane's record keeps the run in progress and never gets this run's transitions
// (a person who turned it off for one resume would not know). It names the URL and the command that resumes with it.
// embeddedDB is the embedded control plane's database path. Nothing for a run that never reported to a control plane.
func WarnControlPlaneLeftBehind(w io.Writer, st *state.State, runbookName, embeddedDB string) {
	if st.ControlPlane == "" {
		return
	}
	resume := "rbook run " + runbookName + " --control-plane " + st.ControlPlane
	where := "the control plane " + st.ControlPlane
	if st.ControlPlaneEmbedded {
		resume = "rbook run " + runbookName + ", with RBOOK_CONTROL_PLANE unset"
		where = "the embedded control plane (" + embeddedDB + ")"
	}
	fmt.Fprintf(w, "Warning: run %s reports to %s, but this resume runs with the control plane off: its record there will not get "+
		"this run's transitions and keeps the run in progress. To keep it in step, stop now (Ctrl-C) and resume with: %s\n",
		st.RunID, where, resume)
}

// StatusHeader writes the head of `rbook status` for st: the run, its runbook, the shown status
// and liveness; outbox, when not "", is where the undelivered transitions should go and what
// to do ("the control plane X; …"); then, for an unfinished run, the next step and where its
// evidence pack (evidence: the pack's path) will be written, or, for a final one, evPath;
// then the interruption and the step in flight, when there are any.
func StatusHeader(out io.Writer, st *state.State, shown, liveness, outbox, evPath, evidence string) {
	fmt.Fprintf(out, "Run %s · runbook %s · %s (%s)\n", st.RunID, st.RunbookName, shown, liveness)
	if outbox != "" {
		fmt.Fprintf(out, "Undelivered: %d transition(s) are in the state file's outbox, not yet on the control plane %s\n", len(st.Outbox), outbox)
	}
	if !st.RunStatus.Final() {
		fmt.Fprintf(out, "Next step index: %d of %d steps\n", st.LastCompletedStepIndex+1, st.TotalSteps)
		if _, err := os.Stat(evidence); err == nil {
			// An interrupted run's executor wrote the pack so far: it is there, and
			// "written ... when the run ends" alone would say it is not.
			fmt.Fprintf(out, "Evidence pack: written to %s when the run ends (it holds the %s so far)\n", evidence, Plural(len(st.EvidencePack), "entry", "entries"))
		} else {
			fmt.Fprintf(out, "Evidence pack: written to %s when the run ends\n", evidence)
		}
	} else if evPath != "" {
		fmt.Fprintf(out, "Evidence pack: %s\n", evPath)
	}
	if st.ChainHead != "" {
		fmt.Fprintf(out, "Chain head: %s (transition %d; docs/evidence-chain.md)\n", st.ChainHead, st.Seq)
	}
	if st.Interrupted != nil {
		fmt.Fprintf(out, "Interrupted at %s: %s\n", st.Interrupted.AtUTC, st.Interrupted.Reason)
	}
	if st.InFlight != nil {
		fmt.Fprintf(out, "In flight: %s step '%s' started %s, outcome not recorded\n", st.InFlight.StepType, st.InFlight.StepName, st.InFlight.StartedUTC)
	}
}
