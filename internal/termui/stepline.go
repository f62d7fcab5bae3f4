package termui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
)

// MaxNameColumn caps the step-name column of the text lines (runes); longer names are cut.
const MaxNameColumn = 40

// MaxNoteRunes caps the note after a text step line (runes): the first line of the step's
// output, cut, so a long MCP response never floods the terminal.
const MaxNoteRunes = 72

// LineStyle is how a run's step lines are laid out: Steps is the plan's step count, Playbook
// says its steps are nodes, NameWidth is the name column (runes), Color paints the statuses.
type LineStyle struct {
	Steps     int
	Playbook  bool
	NameWidth int
	Color     bool
}

// StepLine renders one finished step for a terminal:
//
//	✓ step 3 of 6  deploy-app-config          deploy    PASS       12ms
//
// A playbook's line says node, with the type column as wide as "deterministic":
//
//	✓ node 2 of 9  lint           deterministic  PASS         7ms
//
// number is 1-based (0 for an entry that is no runbook step, like CANCEL). Failed, timed-out
// and skipped steps, gates and compensations get a short note; text from the step's output
// is cleaned of control characters first (steps.CleanInput), so it cannot drive the terminal.
func StepLine(ls LineStyle, number int, e engine.Evidence, took time.Duration, rollbackFor string) string {
	noun, typeWidth := "step", 8
	if ls.Playbook {
		// A playbook's nodes, and its widest node type (deterministic), keep the columns.
		noun, typeWidth = "node", len(runbook.TypeDeterministic)
	}
	where := fmt.Sprintf("%s %*d of %d", noun, len(fmt.Sprint(ls.Steps)), number, ls.Steps)
	if number == 0 {
		where = strings.Repeat(" ", len(where))
	}
	dur := ""
	if took > 0 {
		dur = report.HumanDuration(took)
	}
	note := stepNote(e, rollbackFor)
	line := fmt.Sprintf("%s %s  %s  %-*s  %s  %6s", Paint(ls.Color, e.Status, statusMark(e.Status)), where,
		PadRunes(CutRunes(steps.CleanInput(e.StepName), MaxNameColumn), ls.NameWidth), typeWidth, e.Type, Paint(ls.Color, e.Status, fmt.Sprintf("%-9s", e.Status)), dur)
	if note != "" {
		line += "  " + SGR(ls.Color, SGRDim, note)
	}
	return strings.TrimRight(line, " ")
}

// stepNote is the short note after a step line: a compensation's cause, a passed approval
// node's approver or policy rule, or the first line of a step's output when it did not pass
// (and of a gate's or cancel's), cleaned and cut to MaxNoteRunes.
func stepNote(e engine.Evidence, rollbackFor string) string {
	switch {
	case rollbackFor == engine.RollbackVerb:
		return "requested with rbook rollback"
	case rollbackFor != "" && e.Type == "rollback":
		return fmt.Sprintf("on_fail: rollback of '%s'", rollbackFor)
	case e.Type == string(runbook.TypeApproval) && e.Status == engine.StatusPass:
		return CutRunes(steps.CleanInput(approvalNote(e.Output)), MaxNoteRunes)
	case e.Status != engine.StatusPass || e.Type == "confirm" || e.Type == "cancel":
		first, _, _ := strings.Cut(strings.TrimSpace(e.Output), "\n")
		return CutRunes(steps.CleanInput(first), MaxNoteRunes)
	}
	return ""
}

// Paint colours s by the step status it shows, when color.
func Paint(color bool, status engine.StepStatus, s string) string {
	code := ""
	switch status {
	case engine.StatusPass:
		code = SGRGreen
	case engine.StatusFail:
		code = SGRRed
	case engine.StatusTimedOut:
		code = SGRYellow
	case engine.StatusSkipped, report.NotRun:
		code = SGRDim
	}
	return SGR(color && code != "", code, s)
}

// PaintRun colours text, bold, by the run status it shows, when color.
func PaintRun(color bool, s engine.RunStatus, text string) string {
	code := map[engine.RunStatus]string{engine.RunCompleted: SGRGreen, engine.RunFailed: SGRRed, engine.RunCancelled: SGRYellow, engine.RunInProgress: SGRYellow}[s]
	return SGR(color, SGRBold+code, text)
}

func statusMark(s engine.StepStatus) string {
	switch s {
	case engine.StatusPass:
		return "✓"
	case engine.StatusFail:
		return "✗"
	case engine.StatusTimedOut:
		return "⏱"
	case engine.StatusSkipped:
		return "↷"
	case report.NotRun:
		return "·"
	}
	return "•"
}

// approvalNote is the note of a passed playbook approval node's line: who approved it, or the
// policy rule that auto-passed it, from its evidence output ({"by", "auto_passed", "rule"});
// "" when the output is not that object.
func approvalNote(output string) string {
	var o struct {
		By         string `json:"by"`
		AutoPassed bool   `json:"auto_passed"`
		Rule       string `json:"rule"`
	}
	if json.Unmarshal([]byte(output), &o) != nil {
		return ""
	}
	if o.AutoPassed {
		return "auto-passed by policy rule " + o.Rule
	}
	if o.By != "" {
		return "approved by " + o.By
	}
	return ""
}

// StepStartedLine is the Markdown output's line (on stderr) when a step starts: its position,
// type, name, why a compensation runs, its timeout and how long the run has taken (elapsed).
// A playbook's nodes have no index a person uses: "▶ node 2/9 · deterministic 'lint'".
func StepStartedLine(t engine.Transition, plan *runbook.Plan, elapsed time.Duration) string {
	n := len(plan.Steps)
	what := ""
	switch t.RollbackFor {
	case "":
	case engine.RollbackVerb:
		what = " — requested with rbook rollback"
	default:
		what = fmt.Sprintf(" — on_fail: rollback of step '%s'", t.RollbackFor)
	}
	timeout := 0
	if t.StepIndex >= 0 && t.StepIndex < n {
		timeout = plan.Steps[t.StepIndex].TimeoutSeconds
	}
	if plan.Kind == runbook.KindPlaybook {
		return fmt.Sprintf("\n▶ node %d/%d · %s '%s' · timeout %ds · elapsed %s\n", t.StepIndex+1, n, t.StepType, t.StepName, timeout, report.HumanDuration(elapsed))
	}
	return fmt.Sprintf("\n▶ step %d/%d (index %d) · %s '%s'%s · timeout %ds · elapsed %s\n", t.StepIndex+1, n, t.StepIndex, t.StepType, t.StepName, what, timeout, report.HumanDuration(elapsed))
}

// RunEndedLine is the Markdown output's line (on stderr) when the run t ends: its status in
// its kind's words and how long the run took, from runStart (its state file's start; zero
// when unknown, then from started, when this process began).
func RunEndedLine(t engine.Transition, plan *runbook.Plan, started, runStart time.Time) string {
	took := time.Since(started)
	if !runStart.IsZero() && !t.Time.IsZero() {
		took = t.Time.Sub(runStart)
	}
	word := string(t.RunStatus)
	if plan.Kind == runbook.KindPlaybook {
		word = PlaybookRunWord(t.RunStatus, false)
	}
	return fmt.Sprintf("Run %s ended %s after %s.\n", t.RunID, word, report.HumanDuration(took))
}

// StatusLines prints a recorded run's steps (report rows) as text, one line per runbook step
// in runbook order with its final status or "not run", when it ended and its earlier
// statuses (rbook status without --report).
func StatusLines(w io.Writer, rows []report.Row, ls LineStyle) {
	for _, r := range rows {
		e := engine.Evidence{StepName: r.Name, Type: r.Type, Status: r.Status}
		line := StepLine(ls, r.Number, e, 0, "")
		if r.At != "" {
			line += "  " + SGR(ls.Color, SGRDim, r.At)
		}
		if len(r.Earlier) > 0 {
			line += "  " + SGR(ls.Color, SGRDim, fmt.Sprintf("(earlier: %s)", joinStatuses(r.Earlier)))
		}
		fmt.Fprintln(w, line)
	}
}

func joinStatuses(ss []engine.StepStatus) string {
	w := make([]string, len(ss))
	for i, s := range ss {
		w[i] = string(s)
	}
	return strings.Join(w, ", ")
}
