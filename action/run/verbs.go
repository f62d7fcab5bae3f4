package run

// The verbs that end a recorded run: `rbook rollback` and `rbook cancel`.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// CancelRequest is what `rbook cancel` leaves for a live executor before signalling it.
type CancelRequest struct {
	By           string `json:"by"`
	RequestedUTC string `json:"requested_utc"`
}

// CancelRequestPath is where `rbook cancel` leaves a CancelRequest for the executor of the
// state file at statePath.
func CancelRequestPath(statePath string) string { return statePath + ".cancel" }

// OutboxWhere names the control plane a state file's outbox belongs to, for messages.
func (c *Config) OutboxWhere(st *state.State) string {
	switch {
	case st.ControlPlaneEmbedded:
		return "(the embedded one, " + c.embeddedDB() + ")"
	case st.ControlPlane != "":
		return st.ControlPlane
	}
	return "(none recorded)"
}

// OutboxNext says what happens to an outbox next: why this delivery failed, and who sends it.
func OutboxNext(st *state.State, name string, err error) string {
	why := ""
	if err != nil {
		var ue *UndeliveredError
		if errors.As(err, &ue) {
			err = ue.Err
		}
		why = fmt.Sprintf("delivering them failed (%v); ", err)
	}
	if st.RunStatus.Final() {
		return why + fmt.Sprintf("'rbook status %s' or 'rbook run %s' delivers them once the control plane is reachable (a new run does not start before)", name, name)
	}
	return why + fmt.Sprintf("'rbook run %s' sends them first when it resumes the run", name)
}

// CancelFinal delivers the outbox a final run's executor left undelivered: `rbook cancel` on a final run has nothing to cancel, but delivers first. It returns
// why transitions are left, and what happens to them next.
func (c *Config) CancelFinal(ctx context.Context, statePath, name string, st *state.State, errw io.Writer) error {
	if len(st.Outbox) == 0 {
		return nil
	}
	h, err := c.hold(ctx, statePath, verb{role: "cancel", name: name, deliverFirst: true,
		lockErr: func(err error) error {
			return fmt.Errorf("its %d undelivered transition(s) were not sent: %v", len(st.Outbox), err)
		},
		undelivered: func(err error) error { return fmt.Errorf("%v\n%s", err, OutboxNext(st, name, nil)) },
	}, errw)
	if err != nil {
		return err
	}
	h.release()
	return nil
}

// cancelTarget is the control plane a cancel is recorded on.
type cancelTarget struct {
	url     string
	lastSeq int64
	head    string // the hash of transition lastSeq on the control plane
	stop    func()
}

// reachForCancel finds the control plane st's run reports to and the last seq it holds. A
// cancel whose seq the control plane's record does not fit could never be delivered, so when
// it cannot be read the cancel is refused (exit 2), saying how to cancel in the state file
// only.
func (c *Config) reachForCancel(ctx context.Context, st *state.State) (*cancelTarget, error) {
	url, stop, err := c.OutboxTarget(ctx, st)
	if err == nil {
		var cl *cpclient.Client
		if cl, err = c.client(url, st.ControlPlaneEmbedded); err != nil {
			stop()
			return nil, abort("%v", err)
		}
		var last int64
		var head string
		if last, head, err = cl.LastLink(ctx, st.RunID); err == nil {
			return &cancelTarget{url: url, lastSeq: last, head: head, stop: stop}, nil
		}
		stop()
	}
	return nil, abort("nothing was cancelled: run %s reports to the control plane %s, which must record the cancel too, and it could not be reached (%v). "+
		"Try again when it is back, or pass --control-plane off to cancel in the state file only (the control plane then keeps showing the run unfinished).", st.RunID, c.OutboxWhere(st), err)
}

// deliverCancel sends a cancelled run's outbox (the cancel and anything unsent before it) to
// the control plane at url; when that fails the cancel stands and the outbox waits for the
// next status or run, which the message says.
func (c *Config) deliverCancel(ctx context.Context, fileRec *state.FileRecorder, name, url string, errw io.Writer) {
	st := fileRec.State
	if _, err := c.Deliver(ctx, fileRec, url); err != nil {
		fmt.Fprintf(errw, "The cancel is recorded in the state file, but %d transition(s) have not reached the control plane %s (%v); %s.\n", fileRec.Unacked(), c.OutboxWhere(st), err, OutboxNext(st, name, nil))
	}
}

// attestCancel writes the attestation the control plane at url signed of the run a cancel
// ended, beside its state file, as a run's end does (writeAttestation; docs/attestations.md),
// and says where on errw. Any failure is a note: the cancel stands.
func (c *Config) attestCancel(ctx context.Context, url string, st *state.State, statePath, evPath string, errw io.Writer) {
	cl, err := c.client(url, st.ControlPlaneEmbedded)
	if err != nil {
		fmt.Fprintf(errw, "note: the control plane's attestation of run %s was not fetched (%v).\n", st.RunID, err)
		return
	}
	if a := writeAttestation(ctx, cl, statePath, st, evPath, errw); a.Path != "" {
		fmt.Fprintf(errw, "Attestation: %s (signed by key %s)\n", a.Path, a.KeyID)
	}
}

// cancelLive asks the executor holding the run to cancel it: a request file, then SIGUSR1
// (on Windows the executor polls for the file; signals_windows.go), then it waits until the
// executor lets go of the lock (state.AwaitRelease).
func cancelLive(ctx context.Context, statePath string, h state.Holder, who string, out io.Writer, signal func(pid int) error) error {
	host, _ := os.Hostname()
	if h.Role != "run" {
		return abort("the run is held by %s, not by an executor; try again when it is done", h)
	}
	if h.PID <= 0 || h.Host != host {
		return abort("the run is held by %s, which is not a process on this machine; stop it there", h)
	}
	data, _ := json.Marshal(CancelRequest{By: who, RequestedUTC: engine.FormatTime(time.Now())})
	if err := state.WriteFileAtomic(CancelRequestPath(statePath), data); err != nil {
		return abort("%v", err)
	}
	if err := signal(h.PID); err != nil {
		os.Remove(CancelRequestPath(statePath))
		return abort("cannot signal the executor (%s): %v", h, err)
	}
	fmt.Fprintf(out, "Asked the executor (%s) to cancel; waiting for it to record the cancel…\n", h)
	if err := state.AwaitRelease(ctx, statePath, 30*time.Second); err != nil {
		if errors.Is(err, state.ErrStillLocked) {
			return abort("the executor (%s) did not finish within 30s; check it with: rbook status", h)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return abort("%v", err)
	}
	st, err := state.ReadCurrent(statePath)
	if err != nil {
		return abort("%v", err)
	}
	if st.RunStatus != engine.RunCancelled {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("the executor stopped, but run %s is %s", st.RunID, st.RunStatus)}
	}
	fmt.Fprintf(out, "Run %s is CANCELLED.\n", st.RunID)
	return &ExitError{Code: ExitCancelled}
}

// EnsureEvidence rebuilds a final run's missing evidence pack file from its state file
// , saying so on errw, and returns the file's path: "" when the run is not
// final, or when the file is missing and could not be written (a warning says why).
func EnsureEvidence(errw io.Writer, statePath string, st *state.State) string {
	p, rebuilt, err := state.EnsureEvidence(statePath, st)
	if err != nil {
		fmt.Fprintf(errw, "warning: the evidence pack of run %s is missing and could not be rebuilt at %s: %v\n", st.RunID, p, err)
		return ""
	}
	if rebuilt {
		fmt.Fprintf(errw, "The evidence pack of run %s was missing; rebuilt it from the state file: %s\n", st.RunID, p)
	}
	return p
}

// ReadExisting is the state file at path of runbook name; a missing one is refused (exit 2),
// saying so.
// It reads without the lock (state.ReadCurrent).
func ReadExisting(path, name string) (*state.State, error) {
	return readExisting(path, name, state.ReadCurrent)
}

// StartOf is where the engine starts for the verbs that end a recorded run.
func StartOf(st *state.State) engine.Start {
	return engine.Start{RunID: st.RunID, Seq: st.Seq, ChainHead: st.ChainHead, Index: st.LastCompletedStepIndex + 1, Evidence: st.EvidencePack, LastDeployName: st.LastDeployName}
}

// Reporter is the output of a verb that ends a recorded run: its progress lines (a Recorder)
// and the report at the end.
type Reporter interface {
	engine.Recorder
	SetRunStart(startedUTC string)
	ShowReport(st *state.State, msg, evPath string) error
	// OnTerminal reports whether the lines go to a terminal (where the report says it all).
	OnTerminal() bool
}

// VerbOptions are what `rbook rollback` and `rbook cancel` act on: the runbook's plan and
// name, where the lines go, and the view made once the run is read.
type VerbOptions struct {
	Plan     *runbook.Plan
	Name     string
	Out, Err io.Writer
	View     func() (Reporter, error)
}

// Rollback runs the compensation for the most recent deploy of the recorded run: the first
// rollback step after that deploy (simulated). An unfinished run ends FAILED; a finished run
// keeps its status and gains the rollback's evidence entry. Errors carry the exit code: 1
// when the rollback failed or there was nothing to roll back, 2 no run or held state.
func Rollback(ctx context.Context, o VerbOptions) error {
	plan := o.Plan
	// No run to roll back: leave no lock file or folder.
	h, err := new(Config).hold(ctx, plan.StateFilePath, verb{role: "rollback", name: o.Name, read: readPresent, discard: true}, o.Err)
	if err != nil {
		return err
	}
	defer h.release()
	st := h.st
	v, err := o.View()
	if err != nil {
		return abort("%v", err)
	}
	if !st.RunStatus.Final() {
		// A rollback ends an unfinished run: say how long the run took. A final run keeps
		// its status and duration; "ended … after" is then this rollback's time.
		v.SetRunStart(st.StartedUTC)
	}
	before := len(st.EvidencePack)
	eng := newEngine(plan, []engine.Recorder{h.recorder(false), v}, withExecutors(SimulatedExecutors()))
	res, err := eng.Rollback(ctx, StartOf(st), st.RunStatus)
	if err != nil {
		return abort("%v", err)
	}
	if err := v.ShowReport(st, res.Message, WriteEvidence(o.Err, plan, st)); err != nil {
		return abort("%v", err)
	}
	if !v.OnTerminal() && res.Message != "" {
		fmt.Fprintln(o.Err, res.Message) // what was rolled back, where a person looks last
	}
	if len(st.EvidencePack) > before && st.EvidencePack[len(st.EvidencePack)-1].Status == engine.StatusPass {
		return nil
	}
	return &ExitError{Code: ExitFailed}
}

// SimulatedExecutors are the executors of the simulated step types (deploy, rollback).
func SimulatedExecutors() map[runbook.StepType]engine.Executor {
	return map[runbook.StepType]engine.Executor{runbook.TypeDeploy: steps.Simulated{}, runbook.TypeRollback: steps.Simulated{}}
}

// Cancel cancels the recorded run of o.Plan once the person confirmed it (who): an executor
// running it on this machine is asked to (a request file, then signal(pid)) and records the
// cancel itself; otherwise the cancel is recorded in the state file and then sent, with any
// transitions the run's control plane has not acknowledged, to that control plane (none with
// --control-plane off). It returns the exit: 3 cancelled, 1 not, 2 nothing to cancel.
func (c *Config) Cancel(ctx context.Context, o VerbOptions, who string, signal func(pid int) error) error {
	plan := o.Plan
	// Read again under the lock: the run may have finished while the prompt waited.
	h, err := c.hold(ctx, plan.StateFilePath, verb{role: "cancel", name: o.Name, read: readPresent, lockErr: func(err error) error {
		var busy *state.HeldError
		if errors.As(err, &busy) {
			return cancelLive(ctx, plan.StateFilePath, busy.Holder, who, o.Out, signal)
		}
		return abort("%v", err)
	}}, o.Err)
	if err != nil {
		return err
	}
	defer h.release()
	st := h.st
	if st.RunStatus.Final() {
		return abort("run %s ended %s while the cancel prompt waited; nothing was cancelled", st.RunID, st.RunStatus)
	}
	// A run that reports to a control plane records the cancel there too, after the last
	// transition the control plane holds, and keeps it in its outbox until the control plane
	// has it.
	start := StartOf(st)
	var target *cancelTarget
	if (st.ControlPlane != "" || st.ControlPlaneEmbedded) && c.Flag != "off" {
		if target, err = c.reachForCancel(ctx, st); err != nil {
			return err
		}
		defer target.stop()
		if closed, err := c.CloseIfFinishedAt(ctx, target.url, plan.StateFilePath, st, o.Err); err != nil {
			return abort("nothing was cancelled: %v", err)
		} else if closed != nil {
			return abort("run %s was finished elsewhere and is %s; there is nothing to cancel", closed.RunID, closed.RunStatus)
		}
		start.Seq, start.ChainHead = continueAfter(st, target.lastSeq, target.head)
	}
	v, err := o.View()
	if err != nil {
		return abort("%v", err)
	}
	v.SetRunStart(st.StartedUTC)
	fileRec := h.recorder(target != nil)
	eng := newEngine(plan, []engine.Recorder{fileRec, v})
	res, err := eng.Cancel(ctx, start, who)
	if err != nil {
		return abort("%v", err)
	}
	if target != nil {
		c.deliverCancel(ctx, fileRec, o.Name, target.url, o.Err)
	}
	evPath := WriteEvidence(o.Err, plan, st)
	if target != nil && evPath != "" && fileRec.Unacked() == 0 {
		c.attestCancel(ctx, target.url, st, plan.StateFilePath, evPath, o.Err)
	}
	if err := v.ShowReport(st, res.Message, evPath); err != nil {
		return abort("%v", err)
	}
	return &ExitError{Code: ExitCancelled}
}

// Status is where a recorded run stands, for `rbook status`.
type Status struct {
	State *state.State
	// Held is true while an executor holds the run (Holder); Shown is the status word shown
	// (AWAITING_CONFIRMATION for a run waiting at a gate); Liveness says who runs it.
	Held     bool
	Holder   state.Holder
	Shown    string
	Liveness string
	// Undelivered is why delivering a final run's outbox failed (nil: delivered or nothing to
	// deliver).
	Undelivered error
}

// Status reads the run of plan's state file: a run no executor holds that was finished
// elsewhere is shown as it ended, and a final run's outbox is delivered first (under the
// lock; an executor that starts at this moment has it first and delivers it itself). Errors
// (exit 2): no run, an unreadable state file.
func (c *Config) Status(ctx context.Context, plan *runbook.Plan, name string, errw io.Writer) (*Status, error) {
	st, err := state.ReadCurrent(plan.StateFilePath)
	if errors.Is(err, state.ErrNotExist) {
		return nil, abort("no run recorded for runbook %s yet (%s does not exist); start one with: rbook run %s", name, plan.StateFilePath, name)
	}
	if err != nil {
		return nil, abort("%v", err)
	}
	s := &Status{}
	if s.Held, s.Holder, err = state.Probe(plan.StateFilePath); err != nil {
		return nil, abort("%v", err)
	}
	if !s.Held {
		// A run finished elsewhere is shown as it ended, never as resumable here.
		st = c.StatusCloseFinished(ctx, plan, st, errw)
	}
	if !s.Held && st.RunStatus.Final() && len(st.Outbox) > 0 {
		if lock, lerr := state.Acquire(plan.StateFilePath, "status"); lerr == nil {
			s.Undelivered = c.DeliverFinal(ctx, plan.StateFilePath, errw)
			lock.Release()
			if st, err = state.ReadCurrent(plan.StateFilePath); err != nil {
				return nil, abort("%v", err)
			}
		}
	}
	s.State, s.Liveness, s.Shown = st, "final", string(st.RunStatus)
	switch {
	case st.RunStatus.Final():
	case s.Held && st.AwaitingConfirmation != nil:
		// The control plane's word for a run waiting at a gate.
		s.Shown = string(engine.StatusAwaitingConfirmation)
		s.Liveness = fmt.Sprintf("running: an executor holds it (%s), waiting at gate '%s' since %s",
			s.Holder.String(), st.AwaitingConfirmation.StepName, st.AwaitingConfirmation.SinceUTC)
	case s.Held:
		s.Liveness = "running: an executor holds it (" + s.Holder.String() + ")"
	default:
		s.Liveness = fmt.Sprintf("interrupted: no executor holds it; 'rbook run %s' resumes it from step index %d", name, st.LastCompletedStepIndex+1)
	}
	return s, nil
}
