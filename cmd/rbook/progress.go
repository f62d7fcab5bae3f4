package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// progress is the Recorder that shows a person what the run is doing: a line when a step
// starts (step n of N, its timeout), the rendered step status when it ends (seed Step 9.1),
// and the run's closing message.
type progress struct {
	out, errw io.Writer
	rend      *report.Renderer
	plan      *runbook.Plan
	started   time.Time
}

func newProgress(out, errw io.Writer, rend *report.Renderer, plan *runbook.Plan) *progress {
	return &progress{out: out, errw: errw, rend: rend, plan: plan, started: time.Now()}
}

// Record implements engine.Recorder; printing cannot fail the run.
func (p *progress) Record(_ context.Context, t engine.Transition) error {
	n := len(p.plan.Steps)
	switch t.Kind {
	case engine.TransitionStepStarted:
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
			timeout = p.plan.Steps[t.StepIndex].TimeoutSeconds
		}
		fmt.Fprintf(p.errw, "\n▶ step %d/%d (index %d) · %s '%s'%s · timeout %ds · elapsed %s\n", t.StepIndex+1, n, t.StepIndex, t.StepType, t.StepName, what, timeout, report.HumanDuration(time.Since(p.started)))
	case engine.TransitionGateDecided:
		fmt.Fprintf(p.errw, "Gate '%s' %s\n", t.StepName, t.Message)
	case engine.TransitionStepFinished:
		if t.Evidence == nil {
			return nil
		}
		s, err := p.rend.RenderStepStatus(report.StepStatus{RunID: t.RunID, Number: t.StepIndex + 1, Count: n, Entry: *t.Evidence, Elapsed: report.HumanDuration(time.Since(p.started))})
		if err != nil {
			fmt.Fprintln(p.errw, err)
			return nil
		}
		fmt.Fprint(p.out, "\n"+s)
	case engine.TransitionRunFinished, engine.TransitionRunInterrupted:
		fmt.Fprintf(p.errw, "Run %s ended %s after %s.\n", t.RunID, t.RunStatus, report.HumanDuration(time.Since(p.started)))
	}
	return nil
}
