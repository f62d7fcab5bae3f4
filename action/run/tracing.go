package run

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// The executor's span attributes besides telemetry's (docs/tracing.md, "Spans").
const (
	attrResumed      = attribute.Key("rbook.resumed")
	attrRunStatus    = attribute.Key("rbook.run_status")
	attrStepIndex    = attribute.Key("rbook.step.index")
	attrStepKind     = attribute.Key("rbook.step.kind")
	attrStepStatus   = attribute.Key("rbook.step.status")
	attrGateVerdict  = attribute.Key("rbook.gate.verdict")
	attrGateChannel  = attribute.Key("rbook.gate.channel")
	attrGatePaused   = attribute.Key("rbook.gate.paused")
	attrGateAutoPass = attribute.Key("rbook.gate.auto_passed")
)

// runTrace is one attempt of a run as a trace (docs/tracing.md): the root span "rbook run
// <name>", a child span "step <name>" per step built from the step's transitions (it is one
// more Recorder of the fan-out), and a span "gate <name>" per gate wait under its step's,
// built by the gate it wraps. A resumed run is a new trace with the same rbook.run_id. With
// no tracer provider installed every span is OpenTelemetry's no-op one.
type runTrace struct {
	ctx  context.Context // holds root
	root trace.Span

	mu    sync.Mutex
	runID string
	steps map[int]trace.Span // the open step spans by step index
}

// startTrace starts the attempt's root span; ctx carries it to every call the run makes
// (the control plane's RPCs join the trace). The func ends the open spans and the root with
// the run's status.
func (a *attempt) startTrace(ctx context.Context) (context.Context, func()) {
	nameAttr := telemetry.AttrRunbook
	if a.Playbook != nil {
		nameAttr = telemetry.AttrPlaybook
	}
	ctx, root := telemetry.Tracer().Start(ctx, "rbook run "+a.Plan.Name, trace.WithAttributes(
		telemetry.AttrRunID.String(a.st.RunID), nameAttr.String(a.Plan.Name), attrResumed.Bool(a.opened.Resumed)))
	a.trace = &runTrace{ctx: ctx, root: root, runID: a.st.RunID, steps: map[int]trace.Span{}}
	return ctx, func() { a.trace.end(a.st.RunID, a.st.RunStatus) }
}

// Record turns a transition into spans: step_started starts the step's span, step_finished
// ends it with the step's status (a step finished without starting, such as a skipped one,
// gets a span of no length), run_finished sets the run's status on the root. It never fails.
func (t *runTrace) Record(_ context.Context, tr engine.Transition) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr.RunID != "" && tr.RunID != t.runID {
		t.runID = tr.RunID // the control plane gave the run a new id
		t.root.SetAttributes(telemetry.AttrRunID.String(tr.RunID))
	}
	switch tr.Kind {
	case engine.TransitionStepStarted:
		if open, ok := t.steps[tr.StepIndex]; ok {
			open.End(trace.WithTimestamp(tr.Time)) // started again (push-back, a retry)
		}
		t.steps[tr.StepIndex] = t.startStep(tr)
	case engine.TransitionStepFinished:
		span, ok := t.steps[tr.StepIndex]
		if !ok {
			span = t.startStep(tr)
		}
		delete(t.steps, tr.StepIndex)
		if ev := tr.Evidence; ev != nil {
			span.SetAttributes(attrStepStatus.String(string(ev.Status)))
			if ev.Status == engine.StatusFail || ev.Status == engine.StatusTimedOut {
				span.SetStatus(codes.Error, string(ev.Status))
			}
		}
		span.End(trace.WithTimestamp(tr.Time))
	case engine.TransitionRunFinished:
		t.root.SetAttributes(attrRunStatus.String(string(tr.RunStatus)))
	}
	return nil
}

// startStep starts the span of tr's step at tr's time; mu is held.
func (t *runTrace) startStep(tr engine.Transition) trace.Span {
	_, span := telemetry.Tracer().Start(t.ctx, "step "+tr.StepName, trace.WithTimestamp(tr.Time), trace.WithAttributes(
		telemetry.AttrRunID.String(t.runID), attrStepIndex.Int(tr.StepIndex), attrStepKind.String(tr.StepType)))
	return span
}

// end ends the spans still open (a halted or interrupted run) and the root, with the run's
// final status.
func (t *runTrace) end(runID string, status engine.RunStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, span := range t.steps {
		span.SetAttributes(attrStepStatus.String("UNFINISHED"))
		span.End()
		delete(t.steps, i)
	}
	t.root.SetAttributes(telemetry.AttrRunID.String(runID), attrRunStatus.String(string(status)))
	if status == engine.RunFailed {
		t.root.SetStatus(codes.Error, string(status))
	}
	t.root.End()
}

// stepContext is the context of step index's open span, the root's when it has none.
func (t *runTrace) stepContext(index int) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if span, ok := t.steps[index]; ok {
		return trace.ContextWithSpan(t.ctx, span)
	}
	return t.ctx
}

// gate wraps g: each wait is a span "gate <name>" under its step's span, with the verdict and
// the channel that decided (and the approval id, which the control-plane client sets when it
// opens the approval).
func (t *runTrace) gate(g engine.Gate) engine.Gate { return tracedGate{t: t, next: g} }

type tracedGate struct {
	t    *runTrace
	next engine.Gate
}

// Await waits on the wrapped gate under the gate's span.
func (g tracedGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	_, span := telemetry.Tracer().Start(g.t.stepContext(req.StepIndex), "gate "+req.StepName, trace.WithAttributes(
		telemetry.AttrRunID.String(req.RunID), attrStepIndex.Int(req.StepIndex)))
	defer span.End()
	d, err := g.next.Await(trace.ContextWithSpan(ctx, span), req)
	var paused *cpclient.PausedError
	switch {
	case errors.As(err, &paused):
		span.SetAttributes(attrGatePaused.Bool(true), telemetry.AttrApprovalID.String(paused.ApprovalID))
	case err != nil:
		span.SetStatus(codes.Error, "no decision")
	default:
		span.SetAttributes(attrGateVerdict.String(verdictName(d.Verdict)), attrGateChannel.String(d.Source))
		if d.Policy != nil {
			span.SetAttributes(attrGateAutoPass.Bool(d.Policy.AutoPassed))
		}
	}
	return d, err
}

// verdictName is a verdict as a span attribute value.
func verdictName(v engine.Verdict) string {
	switch v {
	case engine.Approved:
		return "approved"
	case engine.Rejected:
		return "rejected"
	case engine.Cancelled:
		return "cancelled"
	}
	return "none"
}
