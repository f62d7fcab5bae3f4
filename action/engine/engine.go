package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// DefaultGrace is how long the engine waits, after a step's deadline, for an executor that
// has not returned before it records TIMED_OUT and moves on without it.
const DefaultGrace = 2 * time.Second

// MaxOutputBytes caps one evidence entry's output (64 KiB). A larger output is cut at a
// UTF-8 boundary and says how long it was, so one chatty step cannot make the state file
// unreadable (state.MaxFileBytes) or the report unusable.
const MaxOutputBytes = 64 << 10

// Interrupted is the cancel cause the caller gives the run context when a signal arrives
// (SIGINT, SIGTERM, SIGHUP): the run stops with one final record (docs/runbooks.md, "State, resume and crashes").
type Interrupted struct{ Signal string }

func (i Interrupted) Error() string { return "interrupted by " + i.Signal }

// CancelRequest is the cancel cause for a cancel that was already confirmed elsewhere (the
// cancel verb from another terminal, CancelRun on the control plane): the engine writes the
// CANCEL audit entry without asking again (docs/spec/runbooks.md, "Step 8").
type CancelRequest struct {
	// By is who confirmed the cancel.
	By string
}

func (c CancelRequest) Error() string { return "cancel requested by " + c.By }

// RollbackVerb is Transition.RollbackFor when the compensation was asked for with the
// rollback verb rather than by a failed step's on_fail.
const RollbackVerb = "rbook rollback"

// Specification strings of the v1 simulation (docs/spec/runbooks.md, "Step 5" and "Step 8").
const (
	cancelAuditOutput = "Cancel confirmed by user. cancel_arm_template_deployment called (or simulated in v1)."
	rollbackOnlyNote  = "not run: a rollback step runs only when a later step fails with on_fail: rollback, or with rbook rollback"
)

// Engine walks a Plan. Executors maps check, deploy and rollback to their executors; Gate
// decides confirm steps. Every transition goes to every Recorder, in order; a recorder error
// stops the run.
type Engine struct {
	Plan      *runbook.Plan
	Executors map[runbook.StepType]Executor
	Gate      Gate
	Recorders []Recorder
	// Prompt renders the AWAITING_CONFIRMATION status of a confirm step (docs/spec/runbooks.md, "Step 5", "confirm").
	Prompt func(step runbook.Step, run RunContext) string
	// ConfirmCancel asks the user to confirm cancelling the given deployment (docs/spec/runbooks.md, "Step 8");
	// nil means a cancel typed at a gate is refused and the gate asks again.
	ConfirmCancel func(ctx context.Context, lastDeployName string) (bool, error)
	// Now is the clock (UTC); nil means time.Now.
	Now func() time.Time
	// Grace overrides DefaultGrace when positive.
	Grace time.Duration
	// Concurrency is how many playbook nodes may execute at once (rbook playbook run
	// --concurrency); 0 means DefaultConcurrency. Runbook chains run one step at a time.
	Concurrency int
	// WorkDir is the run's working folder: a playbook fact "file:PATH" with a relative PATH
	// is looked up under it ("" means the process's working directory; docs/spec/playbooks.md, "Error handlers").
	WorkDir string
}

// DefaultConcurrency is Engine.Concurrency when unset (docs/decisions/playbooks-on-one-engine.md).
const DefaultConcurrency = 4

// Start says where a run begins: a fresh run at index 0, or a resumed one.
type Start struct {
	RunID string
	// Seq is the last transition sequence number already recorded (0 for a fresh run).
	Seq int64
	// ChainHead is the hash of transition Seq, the head the run's hash chain continues from
	// (docs/evidence-chain.md). With Seq 0 it is ignored: the chain starts at
	// evidencechain.Genesis. Empty with Seq > 0 means the run was recorded without the chain
	// (by an older executor) and stays so.
	ChainHead string
	// Index is the first step to run (0-based).
	Index int
	// Fresh emits run_started first.
	Fresh bool
	// RollbackFor, when set, means a compensation is still owed: the engine runs it and ends.
	RollbackFor string
	// SkipOwedRollback, with RollbackFor, records the owed rollback step SKIPPED (its first
	// attempt's outcome is unknown and the operator chose to go on after it) and ends the run
	// as the compensation would, without running the rollback again (docs/runbooks.md, "State, resume and crashes").
	SkipOwedRollback bool
	// Evidence is the evidence pack recorded so far (used to find the most recent deploy).
	Evidence       []Evidence
	LastDeployName string
	// SkipFrom and SkipReason record an operator's --step-index jump: steps SkipFrom..Index-1
	// get a SKIPPED entry saying SkipReason, so a skipped gate is never silent.
	SkipFrom   int
	SkipReason string
	// Bindings are a playbook run's validated inputs (runbook.ValidatePlaybookInputs), the
	// first bindings at the top level (docs/playbooks.md, "Inputs and bindings"). The engine copies them. A resumed
	// playbook run passes the same inputs again with Seq and every Evidence entry recorded so
	// far: the engine rebuilds node states, node outputs and iteration counts from the
	// evidence (see dag.go). A node started but never finished has no entry and runs again:
	// the caller must refuse (or have the operator decide) before resuming with a
	// side-effecting node in flight, as it does for deploy steps. Nil for runbooks.
	Bindings map[string]any
}

// Result is how a run ended.
type Result struct {
	Status RunStatus
	// Message says why a run did not complete ("step 'x' failed; on_fail: halt").
	Message string
}

type run struct {
	e            *Engine
	skipRollback bool // Start.SkipOwedRollback
	id           string
	seq          int64
	head         string // the hash of transition seq; "" for a run without the chain
	evidence     []Evidence
	lastDep      string
	// cancelAt names the playbook nodes a cancel stopped the run at (the approval node it was
	// typed at, or the nodes that were running); notRun records a cancelled playbook's
	// unstarted nodes (set by the DAG policy).
	cancelAt []string
	notRun   func(ctx context.Context, why string) error
	// unflushed says emit appended to a GroupRecorder since the last flush.
	unflushed bool
}

// Run executes the plan from st (docs/spec/runbooks.md, "Step 5" and the on_fail table) and returns how the run
// ended. The error is non-nil only when a Recorder failed: the run's fate is then unknown to
// its records, and the caller must say so.
func (e *Engine) Run(ctx context.Context, st Start) (res Result, err error) {
	r := e.newRun(st)
	defer func() { res, err = r.done(ctx, res, err) }()
	if st.Fresh {
		if err := r.emit(ctx, Transition{Kind: TransitionRunStarted, StepIndex: -1, RunStatus: RunInProgress}); err != nil {
			return Result{}, err
		}
	}
	if e.Plan.Kind == runbook.KindPlaybook {
		return r.schedule(ctx, newDAG(r, st), e.concurrency())
	}
	if st.RollbackFor != "" {
		r.skipRollback = st.SkipOwedRollback
		return r.compensate(ctx, st.RollbackFor, RunFailed)
	}
	steps := e.Plan.Steps
	if st.SkipReason != "" {
		for i := max(st.SkipFrom, 0); i < st.Index && i < len(steps); i++ {
			if err := r.finish(ctx, steps[i], Outcome{Status: StatusSkipped, Output: st.SkipReason}, RunInProgress, ""); err != nil {
				return Result{}, err
			}
		}
	}
	return r.schedule(ctx, &chain{r: r, i: st.Index}, 1)
}

// continuedFailures names the steps that failed under on_fail: continue, so a COMPLETED run
// never hides them.
func (r *run) continuedFailures() string {
	var names []string
	for _, e := range r.evidence {
		if e.Status == StatusFail || e.Status == StatusTimedOut {
			names = append(names, fmt.Sprintf("'%s' (%s)", e.StepName, e.Status))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("completed, but %d step(s) failed and the run went on (on_fail: continue): %s", len(names), strings.Join(names, ", "))
}

// Rollback runs the compensation for the run's most recent deploy (the rollback verb,
// docs/decisions/rollback-compensation.md). An unfinished run ends FAILED; a final run keeps its status and gains the entry.
func (e *Engine) Rollback(ctx context.Context, st Start, current RunStatus) (Result, error) {
	r := e.newRun(st)
	final := RunFailed
	if current.Final() {
		final = current
	}
	res, err := r.compensate(ctx, RollbackVerb, final)
	return r.done(ctx, res, err)
}

// Cancel writes the CANCEL audit entry and ends the run CANCELLED (docs/spec/runbooks.md, "Step 8"). The
// caller has already had the cancel confirmed by the user.
func (e *Engine) Cancel(ctx context.Context, st Start, by string) (Result, error) {
	r := e.newRun(st)
	res, err := r.cancel(ctx, by)
	return r.done(ctx, res, err)
}

// ChainPrev is the prev_hash of the transition after seq, whose hash is head:
// evidencechain.Genesis after seq 0, else head ("" for a run recorded without the chain,
// which Seal then leaves so; docs/evidence-chain.md).
func ChainPrev(seq int64, head string) string {
	if seq == 0 {
		return evidencechain.Genesis
	}
	return head
}

// newRun picks the run up where st says it stands.
func (e *Engine) newRun(st Start) *run {
	return &run{e: e, id: st.RunID, seq: st.Seq, head: ChainPrev(st.Seq, st.ChainHead), evidence: append([]Evidence(nil), st.Evidence...), lastDep: st.LastDeployName}
}

func (r *run) now() time.Time {
	if r.e.Now != nil {
		return r.e.Now().UTC()
	}
	return time.Now().UTC()
}

// emit records t with the next sequence number, sealed as the next link of the run's hash
// chain (the one place a run's transitions are sealed; docs/evidence-chain.md). Recording
// ignores the run's cancellation: the final record after a signal must still be written.
func (r *run) emit(ctx context.Context, t Transition) error {
	r.seq++
	t.Seq, t.RunID, t.Time = r.seq, r.id, r.now()
	if t.LastDeployName == "" {
		t.LastDeployName = r.lastDep
	}
	t.Seal(r.head)
	r.head = t.Hash
	rctx := context.WithoutCancel(ctx)
	for _, rec := range r.e.Recorders {
		var err error
		if g, ok := rec.(GroupRecorder); ok {
			err = g.Append(rctx, t)
			r.unflushed = true
		} else {
			err = rec.Record(rctx, t)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// flush makes what emit appended durable and published (GroupRecorder.Flush, in the
// recorders' order: the state file's journal before the control plane's sender). The
// scheduler calls it before a step runs, before a gate waits, before it blocks, and Run
// when it returns, so a step's start and the previous step's finish share one flush.
func (r *run) flush(ctx context.Context) error {
	if !r.unflushed {
		return nil
	}
	r.unflushed = false
	rctx := context.WithoutCancel(ctx)
	for _, rec := range r.e.Recorders {
		if g, ok := rec.(GroupRecorder); ok {
			if err := g.Flush(rctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// done flushes what the run appended as an entry point (Run, Rollback, Cancel) returns: the
// run's last records are durable when it returns. A failed flush is the run's error when it
// had none.
func (r *run) done(ctx context.Context, res Result, err error) (Result, error) {
	if ferr := r.flush(ctx); err == nil && ferr != nil {
		return Result{}, ferr
	}
	return res, err
}

// emitFlushed is emit and flush: for a transition something waits on at once (a gate's).
func (r *run) emitFlushed(ctx context.Context, t Transition) error {
	if err := r.emit(ctx, t); err != nil {
		return err
	}
	return r.flush(ctx)
}

func (r *run) finish(ctx context.Context, step runbook.Step, out Outcome, status RunStatus, rollbackFor string) error {
	ev := Evidence{StepName: step.Name, Type: string(step.Type), Input: step.Input, Output: capOutput(out.Output), Status: out.Status, TimestampUTC: FormatTime(r.now())}
	if out.input != nil && (step.Input == nil || *out.input != *step.Input) {
		ev.Input, ev.SourceInput = out.input, step.Input
	}
	if step.Type == runbook.TypeConfirm {
		in := "user-confirmation"
		ev.Input = &in
	}
	r.evidence = append(r.evidence, ev)
	return r.emit(ctx, Transition{Kind: TransitionStepFinished, StepIndex: step.Index, StepName: step.Name, StepType: string(step.Type), Evidence: &ev, RunStatus: status, RollbackFor: rollbackFor})
}

func (r *run) end(ctx context.Context, status RunStatus, msg string, audit *Evidence) (Result, error) {
	if audit != nil {
		r.evidence = append(r.evidence, *audit)
	}
	err := r.emit(ctx, Transition{Kind: TransitionRunFinished, StepIndex: -1, RunStatus: status, Message: msg, Evidence: audit})
	return Result{Status: status, Message: msg}, err
}

// stopped reports whether the run context ended (signal or confirmed cancel) and, if so,
// writes the one final record. steps are the steps that were running, if any. An interrupted
// run stays IN_PROGRESS: an interrupted step has no outcome, so a resume runs it again (a
// side-effecting one stays in flight and needs the operator's --step-index).
func (r *run) stopped(ctx context.Context, steps []runbook.Step) (Result, bool, error) {
	if ctx.Err() == nil {
		return Result{}, false, nil
	}
	cause := context.Cause(ctx)
	var cr CancelRequest
	if errors.As(cause, &cr) {
		if len(r.cancelAt) == 0 {
			for _, s := range steps {
				r.cancelAt = append(r.cancelAt, s.Name)
			}
		}
		res, err := r.cancel(ctx, cr.By)
		return res, true, err
	}
	msg := cause.Error()
	t := Transition{Kind: TransitionRunInterrupted, StepIndex: -1, RunStatus: RunInProgress}
	if len(steps) == 1 {
		t.StepIndex, t.StepName, t.StepType = steps[0].Index, steps[0].Name, string(steps[0].Type)
	}
	if len(steps) > 0 {
		msg = interruptMessage(msg, steps)
	}
	t.Message = msg
	err := r.emit(ctx, t)
	return Result{Status: RunInProgress, Message: msg}, true, err
}

// runContext is the step's RunContext; only the scheduler goroutine calls it.
func (r *run) runContext(step runbook.Step) RunContext {
	return RunContext{RunID: r.id, Plan: r.e.Plan, LastDeployName: r.lastDep, StepNumber: step.Index + 1, StepCount: len(r.e.Plan.Steps)}
}

func (e *Engine) concurrency() int {
	if e.Concurrency > 0 {
		return e.Concurrency
	}
	return DefaultConcurrency
}

func (r *run) grace() time.Duration {
	if r.e.Grace > 0 {
		return r.e.Grace
	}
	return DefaultGrace
}

// execute runs a check, deploy or rollback step under its timeout (docs/spec/runbooks.md, "Step 5", docs/decisions/step-timeouts.md).
// The outcome carries the input the executor ran with (InputRewriter), whatever the outcome.
// rc is the step's RunContext, taken by the scheduler goroutine before the step started.
func (r *run) execute(ctx context.Context, step runbook.Step, rc RunContext) Outcome {
	ex, ok := r.e.Executors[step.Type]
	if !ok {
		return Outcome{Status: StatusFail, Output: fmt.Sprintf("no executor for step type %q", step.Type)}
	}
	out := r.executeWith(ctx, ex, step, rc)
	if rw, ok := ex.(InputRewriter); ok {
		out.input = rw.RunInput(step, rc)
	}
	return out
}

func (r *run) executeWith(ctx context.Context, ex Executor, step runbook.Step, rc RunContext) Outcome {
	limit := time.Duration(step.TimeoutSeconds) * time.Second
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan Outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- panicOutcome("executor", v)
			}
		}()
		done <- ex.Execute(sctx, step, rc)
	}()
	var out Outcome
	select {
	case out = <-done:
	case <-sctx.Done():
		select {
		case out = <-done:
		case <-time.After(r.grace()):
		}
	}
	if ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) && out.Status != StatusPass {
		note := fmt.Sprintf("timed out after max_timeout_seconds=%d; the step was stopped and not retried", step.TimeoutSeconds)
		if out.Output != "" {
			note += ": " + out.Output
		}
		return Outcome{Status: StatusTimedOut, Output: note}
	}
	if out.Status == "" {
		out = Outcome{Status: StatusFail, Output: "the executor returned no status"}
	}
	return out
}

// panicOutcome is the FAIL outcome of a step whose executor (what names it) panicked with v:
// the step fails and its failure handling applies, instead of the panic ending rbook and
// leaving every step running beside it in unknown state (a bug in one executor must not
// lose the run's record).
func panicOutcome(what string, v any) Outcome {
	return Outcome{Status: StatusFail, Output: fmt.Sprintf("the %s panicked: %v", what, v)}
}

// confirm opens a gate and waits for a decision (docs/spec/runbooks.md, "Step 5", "confirm"; docs/decisions/confirm-gates.md).
// The gate asks for the step's approver-input form, if it declares one, and the output is
// then confirmFormOutput's.
func (r *run) confirm(ctx context.Context, step runbook.Step, rc RunContext, emit emitFunc) Outcome {
	if r.e.Gate == nil {
		return Outcome{Status: StatusFail, Output: "no gate is configured to decide confirm steps"}
	}
	limit := time.Duration(step.TimeoutSeconds) * time.Second
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	deadline, _ := sctx.Deadline()
	req := GateRequest{RunID: r.id, StepIndex: step.Index, StepName: step.Name, StepCount: len(r.e.Plan.Steps), Deadline: deadline, PlanDigest: r.e.Plan.ContentHash, OnFail: string(step.OnFail),
		Inputs: step.Form}
	if r.e.Prompt != nil {
		req.Prompt = r.e.Prompt(step, rc)
	}
	return r.await(ctx, sctx, step, rc, req, emit, func(d Decision, msg string) Outcome {
		output := d.Input
		if output == "" {
			output = msg
		}
		if len(step.Form) > 0 {
			output = confirmFormOutput(step, d)
		}
		if d.Verdict == Approved {
			return Outcome{Status: StatusPass, Output: output}
		}
		return Outcome{Status: StatusFail, Output: output}
	})
}

// confirmFormOutput is the evidence output of a confirm step that declares an approver-input
// form: the decision as a JSON object, {approved, by, via, reason, inputs}, the shape of an
// approval node's output plus the channel, so the values are kept with the decision
// (docs/approver-inputs.md, "Runbook confirm steps"). An approval lists every declared
// field, "" when it has no value; a rejection takes no values and has no inputs.
func confirmFormOutput(step runbook.Step, d Decision) string {
	v := map[string]any{"approved": d.Verdict == Approved, "by": d.By, "via": d.Source, "reason": d.Reason}
	if d.Verdict == Approved {
		in := map[string]string{}
		for _, f := range step.Form {
			in[f.Name] = d.InputValues[f.Name]
		}
		v["inputs"] = in
	}
	b, _ := json.Marshal(v) // strings, maps of strings and a bool
	return string(b)
}

// await opens the gate req (gate_opened), waits for its decision under sctx (the step's
// deadline) and records it (gate_decided); decided turns an approval or a rejection into the
// step's outcome. The error rules are the confirm step's (docs/spec/runbooks.md, "Step 5"):
// ErrGateUnresolved and any gate failure halt the run resumable, the deadline is TIMED_OUT,
// ErrNoAnswer is FAIL, a confirmed cancel starts the cancel flow (docs/spec/runbooks.md, "Step 8"). Playbook
// approval nodes use it the same way (docs/playbooks.md, "Approval nodes").
func (r *run) await(ctx, sctx context.Context, step runbook.Step, rc RunContext, req GateRequest, emit emitFunc, decided func(d Decision, msg string) Outcome) Outcome {
	for {
		if err := emit(ctx, Transition{Kind: TransitionGateOpened, StepIndex: step.Index, StepName: step.Name, StepType: string(step.Type), RunStatus: RunInProgress}); err != nil {
			return Outcome{halt: err}
		}
		d, err := r.e.Gate.Await(sctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return Outcome{Status: StatusFail, Output: context.Cause(ctx).Error()}
			}
			if errors.Is(err, ErrGateUnresolved) {
				return Outcome{halt: fmt.Errorf("gate '%s' could not wait for a decision: %w", step.Name, err)}
			}
			if errors.Is(sctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
				return Outcome{Status: StatusTimedOut, Output: fmt.Sprintf("no decision within max_timeout_seconds=%d; the gate was closed", step.TimeoutSeconds)}
			}
			if errors.Is(err, ErrNoAnswer) {
				return Outcome{Status: StatusFail, Output: "not confirmed: " + err.Error()}
			}
			// The gate could not be kept (control plane unreachable, refused): that is no
			// decision, so on_fail must not run. The run halts, resumable.
			return Outcome{halt: fmt.Errorf("gate '%s' could not wait for a decision: %w", step.Name, err)}
		}
		msg := gateDecidedMessage(d)
		if err := emit(ctx, Transition{Kind: TransitionGateDecided, StepIndex: step.Index, StepName: step.Name, StepType: string(step.Type), RunStatus: RunInProgress, Message: msg}); err != nil {
			return Outcome{halt: err}
		}
		if d.Verdict == Cancelled {
			if r.e.Plan.Kind == runbook.KindPlaybook && r.e.ConfirmCancel == nil {
				// A playbook has no deployment to confirm cancelling: "cancel" typed at an
				// approval node ends the run CANCELLED (docs/playbooks.md).
				return Outcome{Cancel: true, Output: d.By}
			}
			if r.e.ConfirmCancel != nil {
				ok, err := r.e.ConfirmCancel(sctx, rc.LastDeployName)
				if err == nil && ok {
					output := d.Input
					if output == "" {
						output = msg
					}
					if r.e.Plan.Kind == runbook.KindPlaybook {
						output = d.By // a playbook's cancel entry names who cancelled
					}
					return Outcome{Cancel: true, Output: output}
				}
			}
			// Cancel not confirmed: "abort cancel, resume normal flow" (docs/spec/runbooks.md, "Step 8").
			continue
		}
		return decided(d, msg)
	}
}

// gateDecidedMessage is gate_decided's message: "<verdict> by <who> via <source>[: reason]"
// and the policy's note (policyNote). A gate the auto-pass policy passed (docs/decisions/auto-pass-policy.md)
// says it once — "auto-passed by policy rule <rule>: <reason>" — rather than the policy's
// reason twice (once as the decision's reason, once in the note).
func gateDecidedMessage(d Decision) string {
	if p := d.Policy; p != nil && p.AutoPassed && !p.Shadow && d.Verdict == Approved && d.Source == "policy" {
		return strings.TrimPrefix(policyNote(p), "; ")
	}
	msg := fmt.Sprintf("%s by %s via %s", verdictWord(d.Verdict), d.By, d.Source)
	if d.Verdict == Rejected && d.RedoFrom != "" {
		msg = fmt.Sprintf("sent back to '%s' by %s via %s", d.RedoFrom, d.By, d.Source)
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg + policyNote(d.Policy)
}

// policyNote is what gate_decided's message adds about the auto-pass policy (docs/playbooks.md, "Approval nodes"):
// "" when no policy ran.
func policyNote(p *PolicyDecision) string {
	if p == nil {
		return ""
	}
	rule := p.Rule
	if rule == "" {
		rule = "(no rule matched)"
	}
	switch {
	case p.Shadow && p.Action != "require-human":
		return fmt.Sprintf("; policy (shadow) would %s by rule %s: %s", p.Action, rule, p.Reason)
	case p.Shadow:
		return "; policy (shadow): would leave it to a person " + policyWhy(p)
	case p.AutoPassed:
		return fmt.Sprintf("; auto-passed by policy rule %s: %s", rule, p.Reason)
	}
	return "; policy: a person decides " + policyWhy(p)
}

// policyWhy is the parenthesis that says why the policy left a gate to a person, in one
// clause: "(no auto-pass rule matched)", "(rule git-push: git push needs a human)", or
// "(rule x failed to evaluate: …)" (one clear sentence a person can act on, not
// "require-human by rule (no rule matched): no auto-pass rule matched: a human decides").
func policyWhy(p *PolicyDecision) string {
	if p.Rule == "" {
		return "(no auto-pass rule matched)"
	}
	why := strings.Replace(p.Reason, ", so a human decides", "", 1)
	if strings.HasPrefix(why, "rule "+p.Rule+" ") {
		return "(" + why + ")"
	}
	return fmt.Sprintf("(rule %s: %s)", p.Rule, why)
}

func verdictWord(v Verdict) string {
	switch v {
	case Approved:
		return "approved"
	case Rejected:
		return "rejected"
	case Cancelled:
		return "cancel requested"
	}
	return "undecided"
}

// cancel writes the specification's CANCEL audit entry last and ends the run CANCELLED (docs/spec/runbooks.md, "Step 8").
// A playbook run's entry is playbookCancel's.
func (r *run) cancel(ctx context.Context, by string) (Result, error) {
	if r.e.Plan.Kind == runbook.KindPlaybook {
		return r.playbookCancel(ctx, by, r.cancelAt)
	}
	var input *string
	if r.lastDep != "" {
		d := r.lastDep
		input = &d
	}
	audit := Evidence{StepName: "CANCEL", Type: "cancel", Input: input, Output: cancelAuditOutput, Status: StatusPass, TimestampUTC: FormatTime(r.now())}
	msg := "WOULD CANCEL (NOT EXECUTED in v1) — deployment: " + r.lastDep
	if r.lastDep == "" {
		msg = "WOULD CANCEL (NOT EXECUTED in v1) — deployment: (none: no deploy step has run)"
	}
	res, err := r.end(ctx, RunCancelled, msg+"; cancel confirmed by "+by, &audit)
	return res, err
}

// PlaybookCancelStepName and PlaybookCancelType name a cancelled playbook run's audit entry
// (docs/playbooks.md): the runbook's CANCEL entry, without the specification's deployment text (a
// playbook has no deployment).
const (
	PlaybookCancelStepName = "CANCEL"
	PlaybookCancelType     = "cancel"
)

// playbookCancel ends a playbook run CANCELLED: its unstarted nodes are recorded SKIPPED
// ("not run: the run was cancelled …"), then the CANCEL audit entry with output "cancelled by
// <who> at node '<id>'" (or "… while no node was running"), which is also the run's message.
func (r *run) playbookCancel(ctx context.Context, by string, at []string) (Result, error) {
	var where string
	switch len(at) {
	case 0:
		where = "while no node was running"
	case 1:
		where = fmt.Sprintf("at node '%s'", at[0])
	default:
		where = fmt.Sprintf("at nodes '%s'", strings.Join(at, "', '"))
	}
	msg := fmt.Sprintf("cancelled by %s %s", by, where)
	if r.notRun != nil {
		if err := r.notRun(ctx, NotRunPrefix+"the run was cancelled "+where); err != nil {
			return Result{}, err
		}
	}
	audit := Evidence{StepName: PlaybookCancelStepName, Type: PlaybookCancelType, Output: msg, Status: StatusPass, TimestampUTC: FormatTime(r.now())}
	return r.end(ctx, RunCancelled, msg, &audit)
}

// compensate runs the rollback step that belongs to the most recent deploy (the specification's on_fail
// rollback; docs/decisions/rollback-compensation.md) and ends the run with final.
func (r *run) compensate(ctx context.Context, reason string, final RunStatus) (Result, error) {
	plan := r.e.Plan
	deployIdx, depPos := -1, -1
	for i := len(r.evidence) - 1; i >= 0 && deployIdx < 0; i-- {
		ev := r.evidence[i]
		if ev.Type != string(runbook.TypeDeploy) || ev.Status != StatusPass {
			continue
		}
		for _, s := range plan.Steps {
			if s.Name == ev.StepName {
				deployIdx, depPos = s.Index, i
			}
		}
	}
	if deployIdx < 0 {
		return r.end(ctx, final, fmt.Sprintf("rollback (%s): no deploy step has run, nothing to roll back", reason), nil)
	}
	for _, ev := range r.evidence[depPos+1:] {
		if ev.Type == string(runbook.TypeRollback) && ev.Status == StatusPass {
			return r.end(ctx, final, fmt.Sprintf("deploy '%s' was already rolled back by '%s' at %s; nothing to do", r.evidence[depPos].StepName, ev.StepName, ev.TimestampUTC), nil)
		}
	}
	deploy := plan.Steps[deployIdx]
	var rb *runbook.Step
	for i := deployIdx + 1; i < len(plan.Steps); i++ {
		if plan.Steps[i].Type == runbook.TypeRollback {
			rb = &plan.Steps[i]
			break
		}
	}
	if rb == nil {
		out := Outcome{Status: StatusFail, Output: fmt.Sprintf("deploy step '%s' has no rollback step after it in %s; nothing was rolled back", deploy.Name, plan.Path)}
		noRB := deploy
		noRB.Type, noRB.Input = runbook.TypeRollback, nil
		if err := r.finish(ctx, noRB, out, final, reason); err != nil {
			return Result{}, err
		}
		return r.end(ctx, final, out.Output, nil)
	}
	if r.skipRollback {
		out := Outcome{Status: StatusSkipped, Output: "skipped by the operator (--step-index past it): its first attempt's outcome was never recorded; check the target by hand"}
		if err := r.finish(ctx, *rb, out, final, reason); err != nil {
			return Result{}, err
		}
		return r.end(ctx, final, fmt.Sprintf("rollback '%s' of deploy '%s' skipped by the operator after %s", rb.Name, deploy.Name, reason), nil)
	}
	if err := r.emit(ctx, Transition{Kind: TransitionStepStarted, StepIndex: rb.Index, StepName: rb.Name, StepType: string(rb.Type), RunStatus: RunInProgress, RollbackFor: reason}); err != nil {
		return Result{}, err
	}
	if err := r.flush(ctx); err != nil { // the rollback's start is durable before it runs
		return Result{}, err
	}
	out := r.execute(ctx, *rb, r.runContext(*rb))
	if err := r.finish(ctx, *rb, out, final, reason); err != nil {
		return Result{}, err
	}
	return r.end(ctx, final, fmt.Sprintf("rolled back deploy '%s' with '%s' (%s) after %s", deploy.Name, rb.Name, out.Status, reason), nil)
}

// capOutput cuts s to MaxOutputBytes at a UTF-8 boundary and says so.
func capOutput(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	cut := MaxOutputBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n…[output truncated: %d bytes in all; rbook keeps the first %d]", len(s), MaxOutputBytes)
}
