package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// Record implements engine.Recorder: it shows a person what the run is doing. With Markdown
// output (stdout is not a terminal) it prints a line to stderr when a step starts and the
// rendered step status to stdout when it ends; on a terminal and with -o json it prints one
// text line per finished step (see stepLine). It says nothing of an interrupted run: finish
// does, once, truthfully. Printing cannot fail the run.
func (v *view) Record(_ context.Context, t engine.Transition) error {
	if v.ci != nil {
		v.ci.Before(t)
		defer v.ci.After(t)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode != modeMarkdown {
		v.recordLine(t)
		return nil
	}
	n := len(v.plan.Steps)
	switch t.Kind {
	case engine.TransitionStepStarted:
		fmt.Fprint(v.errw, termui.StepStartedLine(t, v.plan, time.Since(v.started)))
	case engine.TransitionGateDecided:
		fmt.Fprintf(v.errw, "Gate '%s' %s\n", t.StepName, t.Message)
	case engine.TransitionStepFinished:
		if t.Evidence == nil {
			return nil
		}
		s, err := v.rend.RenderStepStatus(report.StepStatus{RunID: t.RunID, Number: t.StepIndex + 1, Count: n, Entry: *t.Evidence, Elapsed: report.HumanDuration(time.Since(v.started)), Node: v.plan.Kind == runbook.KindPlaybook})
		if err != nil {
			fmt.Fprintln(v.errw, err)
			return nil
		}
		fmt.Fprint(v.out, "\n"+s)
	case engine.TransitionRunFinished:
		fmt.Fprint(v.errw, termui.RunEndedLine(t, v.plan, v.started, v.runStart))
	}
	return nil
}

// humanNeeded says that a playbook's approval node waits for a person: the
// auto-pass policy did not pass it. It is not said at gate_opened, because a gate the policy
// passes at once never pauses the run. Markdown output: "Run … is paused at approval node
// 'x'." on stderr; a terminal (and -o json): "⏸ node x: the run is paused, waiting for a
// decision". Safe for concurrent gates.
func (v *view) humanNeeded(runID string, req engine.GateRequest) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode == modeMarkdown {
		fmt.Fprintf(v.errw, "Run %s is paused at approval node '%s'.\n", runID, steps.CleanInput(req.StepName))
		return
	}
	fmt.Fprintf(v.lines(), "⏸ node %s: the run is paused, waiting for a decision\n", termui.CutRunes(steps.CleanInput(req.StepName), termui.MaxNameColumn))
}

// recordLine is Record on a terminal (and with -o json, on stderr): one line per step.
func (v *view) recordLine(t engine.Transition) {
	playbook := v.plan.Kind == runbook.KindPlaybook
	switch t.Kind {
	case engine.TransitionStepStarted:
		v.stepStart[t.StepIndex] = t.Time
		if playbook {
			// Nodes run side by side: say when each starts, not only when it ends.
			fmt.Fprintln(v.lines(), v.dim(fmt.Sprintf("▶ node %s started (%s)", termui.CutRunes(steps.CleanInput(t.StepName), termui.MaxNameColumn), t.StepType)))
		}
	case engine.TransitionStepFinished:
		if t.Evidence == nil {
			return
		}
		var took time.Duration
		if at, ok := v.stepStart[t.StepIndex]; ok {
			took = t.Time.Sub(at)
			delete(v.stepStart, t.StepIndex)
		}
		fmt.Fprintln(v.lines(), v.stepLine(t.StepIndex+1, *t.Evidence, took, t.RollbackFor))
	case engine.TransitionRunFinished:
		if t.Evidence != nil { // the CANCEL audit entry
			fmt.Fprintln(v.lines(), v.stepLine(0, *t.Evidence, 0, ""))
		}
	}
}

// stepLine renders one finished step for a terminal (termui.StepLine) in this run's layout.
func (v *view) stepLine(number int, e engine.Evidence, took time.Duration, rollbackFor string) string {
	return termui.StepLine(v.lineStyle(), number, e, took, rollbackFor)
}

// lineStyle is the layout of this run's step lines.
func (v *view) lineStyle() termui.LineStyle {
	return termui.LineStyle{Steps: len(v.plan.Steps), Playbook: v.plan.Kind == runbook.KindPlaybook, NameWidth: v.nameWidth, Color: v.color}
}
