package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/github/runner"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// printGateLines writes one line per decided gate of a run's terminal summary: who decided
// it, through which channel and why, as the report's "Gate decisions" table says it.
func printGateLines(w io.Writer, gates []report.GateRow) {
	for _, g := range gates {
		what := string(g.Status)
		if g.Verdict != "" {
			what = fmt.Sprintf("%s by %s via %s", g.Verdict, g.By, g.Via)
		}
		if g.Reason != "" {
			what += ": " + g.Reason
		}
		fmt.Fprintf(w, "  Gate '%s'  %s\n", g.Name, what)
	}
}

// gateVoteNotices are a control-plane gate's Opened and Progress for a run outside a runner
// (a runner's output sets its own, ci_output.go): when the gate opens and needs more than one
// approval (an M-of-N gate policy), one line says how many and from whom; each vote that
// arrives while it waits gets a line with who voted, how, why, and where the tally stands.
// Names and reasons come from approvers, so control characters are replaced.
func gateVoteNotices(errw io.Writer) (opened func(*rbookv1.Approval, string, time.Time), progress func(*rbookv1.Approval)) {
	opened = func(a *rbookv1.Approval, _ string, _ time.Time) {
		if a.GetApprovalsRequired() > 1 {
			fmt.Fprintf(errw, "Gate '%s' needs %s.\n", steps.CleanInput(a.GetStepName()), runner.NeedsText(a))
		}
	}
	progress = func(a *rbookv1.Approval) {
		votes := a.GetVotes()
		if len(votes) == 0 {
			return
		}
		v := votes[len(votes)-1]
		verdict := "approved"
		if v.GetVerdict() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
			verdict = "rejected"
		}
		line := fmt.Sprintf("Vote: %s %s", steps.CleanInput(v.GetApprover()), verdict)
		if r := v.GetReason(); r != "" {
			line += " (" + steps.CleanInput(r) + ")"
		}
		fmt.Fprintf(errw, "%s · %s\n", line, runner.ProgressText(steps.CleanInput(a.GetStepName()), a))
	}
	return opened, progress
}

// promptFor is a rendered Markdown prompt (the cancel prompt, prompts/cancel.prompt.md) as
// it should reach w: unchanged when w is no terminal (a log, a file, a pipe read by a
// program), else as text (markdownText), so a person at a terminal does not read "##" and
// backticks.
func promptFor(w io.Writer, md string) string {
	if !termui.IsTerminal(w) {
		return md
	}
	return markdownText(md)
}

// markdownText turns the little Markdown a prompt uses into text: a heading's "#" marks,
// code backticks and "**" emphasis are dropped, and a "- " list item is indented as a bullet.
func markdownText(md string) string {
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
