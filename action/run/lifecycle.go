package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// controlPlane picks the run's control plane and, when there is one, starts the run there
// under its lease before anything is recorded on it: the control-plane recorder and gate join
// the run only after StartRun granted the lease. The returned func stops an embedded control
// plane.
func (a *attempt) controlPlane(ctx context.Context, cancel context.CancelCauseFunc) (func(), error) {
	given := a.Config
	if a.opened.Resumed {
		cfg, ok, err := a.stateControlPlane(a.st, a.statePath)
		if err != nil {
			return func() {}, abort("%v", err)
		}
		if ok {
			fmt.Fprintf(a.Err, "Control plane: %s (run %s reports to it, says its state file; give --control-plane to choose another).\n", a.st.ControlPlane, a.st.RunID)
			a.Config = cfg
		}
	}
	url, embedded, stop, err := a.pickControlPlane(ctx)
	if err != nil {
		return func() {}, abort("%v", err)
	}
	a.cpURL, a.embedded = url, embedded
	a.setHints(given)
	if url == "" && a.opened.Resumed && a.Playbook == nil {
		a.Terminal.WarnLeftBehind(a.st, a.Name)
	}
	if url == "" {
		return stop, nil
	}
	c, err := a.client(url, embedded)
	if err != nil {
		return stop, abort("%v", err)
	}
	cpRec := &cpclient.Recorder{C: c, Acked: a.fileRec.Ack, Cancelled: func() { cancel(engine.CancelRequest{By: "the control plane (CancelRun)"}) }}
	started, err := a.startOnControlPlane(ctx, c)
	if errors.Is(err, errFinalThere) {
		return stop, finishedElsewhere(ctx, c, a.Plan, a.st, a.Resume != nil, a.Err)
	}
	if err != nil {
		return stop, startHalted(ctx, haltedBeforeStart(a.Terminal.StartErrorHint(err, url), a.statePath))
	}
	if err := cpRec.SendOutbox(ctx, a.st.Outbox); err != nil {
		return stop, startHalted(ctx, haltedBeforeStart(err, a.statePath))
	}
	a.cpc, a.drainCP = c, cpRec.Drain
	a.stopLease = keepLease(ctx, c, a.st.RunID, started.Lease, cancel)
	a.start.RunID = a.st.RunID
	a.start.Seq, a.start.ChainHead = continueAfter(a.st, started.LastSeq, started.ChainHead)
	if a.Playbook != nil {
		a.st.Seq, a.st.ChainHead = a.start.Seq, a.start.ChainHead // the --skip-node answers are recorded after it
	}
	a.setHints(given)
	noteCPRelink(a.Err, a.st, a.opened.Resumed, url, embedded, given.From, a.embeddedDB())
	a.st.ControlPlane, a.st.ControlPlaneEmbedded, a.fileRec.KeepOutbox = url, embedded, true
	a.recorders = append(a.recorders, cpRec)
	a.cpRec = cpRec
	return stop, nil
}

// pickControlPlane is the control plane the run reports to: the configured one, else an
// embedded one started in this process ("off" means none).
func (a *attempt) pickControlPlane(ctx context.Context) (url string, embedded bool, stop func(), err error) {
	switch a.ControlPlane {
	case "off":
		return "", false, func() {}, nil
	case "":
		start := a.Embedded.Start
		if a.Playbook != nil && a.Playbook.StartEmbedded != nil {
			start = a.Playbook.StartEmbedded
		}
		url, stop, err := start(ctx, a.Err)
		return url, true, stop, err
	}
	return a.ControlPlane, false, func() {}, nil
}

// setHints tells the terminal how to resume and end the run.
func (a *attempt) setHints(given Config) {
	if pb := a.Playbook; pb != nil {
		flag := a.Flag
		if a.cpURL != "" && !a.embedded {
			flag = a.cpURL // the resume hint names it
		}
		a.Terminal.SetHints(PlaybookResumeCmd(pb.File, a.statePath, a.Plan.Name, flag, pb.MCPConfig), PlaybookEndHint(a.st.RunID, a.statePath, a.cpURL, a.embedded))
		return
	}
	a.Terminal.SetHints(RunbookHints(a.Name, a.cpURL, a.embedded))
}

// controlPlaneGate is the control plane's gate of the run, with the terminal gate as its
// local source (in a runner, as the runner output allows: RunnerGates.Local).
func (a *attempt) controlPlaneGate(c *cpclient.Client, cpRec *cpclient.Recorder) engine.Gate {
	var local engine.Gate = a.tg
	if r := a.Terminal.Runner(); r != nil {
		local = r.Local(a.tg, a.tg, a.interactive, a.noInput)
	}
	g := &cpclient.Gate{C: c, Local: local, Who: a.who, Cancelled: cpRec.Cancelled, Drain: cpRec.Drain,
		Notice: func(m string) { fmt.Fprintln(a.Err, m) }, GitHub: ReportedWorkflowRun(GitHubEnvironment(a.GitHubEnv))}
	if a.Playbook != nil {
		g.Announce = playbookAnnouncer(a.Err, a.cpURL, a.embedded)
		return &cpclient.HumanNoticeGate{Human: a.human, CP: g}
	}
	g.Announce = announcer(a.Err, a.cpURL, a.embedded)
	g.Pause = a.GateMode == GateModePause
	g.Opened, g.Progress = a.Terminal.VoteNotices()
	return g
}

// human tells the terminal that an approval node waits for a person.
func (a *attempt) human(req engine.GateRequest) { a.Terminal.HumanNeeded(a.st.RunID, req) }

// composeGates is the one place the run's gate chain is built, innermost first: the terminal
// gate; with a control plane, the control plane's gate with the terminal as its local source
// (controlPlaneGate), without one the terminal alone, after a playbook's auto-pass policy;
// the resumed run's decided gate; the runner output's wrapper (RunnerGates.Gate); and the
// trace's gate span last (tracing.go).
func (a *attempt) composeGates() {
	var g engine.Gate = a.tg
	if a.cpRec != nil {
		g = a.controlPlaneGate(a.cpc, a.cpRec)
	} else {
		a.tg.NoAnswer = a.noInput // the terminal is the only source, and it cannot answer
		if pb := a.Playbook; pb != nil {
			g = &steps.PolicyGate{Evaluate: pb.Policy, Shadow: pb.Shadow, Next: a.tg, Human: a.human}
		}
	}
	if a.resumed != nil {
		a.resumed.Next = g
		g = a.resumed
	}
	if r := a.Terminal.Runner(); r != nil {
		g = r.Gate(g, cpclient.GateOf(g), a.cpURL, a.embedded)
	}
	a.gate = a.trace.gate(g)
}

// engine is the run's engine: its plan, executors, gate and recorders (the state file first,
// then the trace's, the control plane's, then the terminal's).
func (a *attempt) engine() *engine.Engine {
	eng := newEngine(a.Plan, append(slices.Clone(a.recorders), a.Terminal), withExecutors(a.Executors), withGate(a.gate))
	if pb := a.Playbook; pb != nil {
		eng.Recorders = append(eng.Recorders, HandlerLines{W: a.Terminal.Lines()})
		eng.Concurrency, eng.WorkDir = pb.Concurrency, "."
		// "cancel" typed at an approval node's terminal prompt cancels the run once confirmed
		// (without it the gate would only ask again).
		eng.ConfirmCancel = steps.ConfirmCancel(a.lines, a.Err, func(string) string {
			return fmt.Sprintf("Cancel playbook run %s? It ends cancelled and no further node starts.", a.st.RunID)
		})
		return eng
	}
	// Prompts go to stderr so `rbook run demo > report.md` still shows them to the person.
	eng.Prompt = GatePrompt(a.Renderer)
	eng.ConfirmCancel = steps.ConfirmCancel(a.lines, a.Err, func(deploy string) string {
		s, err := a.Renderer.RenderCancelPrompt(a.st.RunID, deploy)
		if err != nil {
			return err.Error()
		}
		return a.Terminal.CancelPrompt(s)
	})
	return eng
}

// run says how the run starts, runs the engine and ends the run.
func (a *attempt) run(ctx context.Context) error {
	st, plan := a.st, a.Plan
	eng := a.engine()
	if a.Playbook != nil && len(a.opened.SkipNodes) > 0 {
		// The operator's --skip-node answers are recorded first, by every recorder, as the
		// engine records a node a when branch skipped; the engine then goes on after them.
		seq, head, err := recordSkippedNodes(ctx, append(slices.Clone(a.recorders), a.Terminal), plan, st, a.opened.SkipNodes, a.who)
		if err != nil {
			return abort("%v", err)
		}
		a.start.Seq, a.start.ChainHead, a.start.Evidence = seq, head, st.EvidencePack
	}
	if a.opened.Resumed && a.Playbook == nil {
		// Said once the control plane took the run: a run it holds as final is not resumed.
		fmt.Fprintf(a.Terminal.Lines(), "RESUMING run %s from step index %d.\n", st.RunID, a.opened.StartIndex)
	}
	if pb := a.Playbook; pb != nil {
		fmt.Fprintf(a.Err, "Run %s · playbook %s (%s) · %d nodes · state %s\n", st.RunID, plan.Name, pb.File, len(plan.Steps), a.statePath)
	} else {
		fmt.Fprintf(a.Err, "Run %s · runbook %s (%s) · %d steps · state %s\n", st.RunID, plan.Name, plan.Path, len(plan.Steps), a.statePath)
		if a.start.RollbackFor == "" {
			a.Terminal.WarnUnanswerable(plan, a.start.Index, a.noInput, a.cpURL)
		}
	}
	if err := a.opened.KeepPrevious(); err != nil {
		return abort("%v", err)
	}
	if a.GateMode == GateModePause {
		pauseNote(a.Err, plan, a.start.Index)
	}
	if a.opened.PrevPath != "" && !a.opened.Resumed {
		// Only now is the file there.
		fmt.Fprintf(a.Err, "The previous run is final; its state is kept as %s.\n", a.opened.PrevPath)
	}
	res, err := eng.Run(ctx, a.start)
	if pe := (*cpclient.PausedError)(nil); errors.As(err, &pe) && a.cpc != nil {
		return a.finishPaused(ctx, pe)
	}
	return a.end(ctx, res, err)
}

// end ends a run after eng.Run returned res and err: the control-plane recorder is drained
// (for at most SignalDrainGrace after a signal), the state file synced, and the report
// finished. Transitions a signal kept from the control plane stay in the outbox, and one line
// says that Again sends them first. Any other error halts the run: exit 2, resumable by
// running the same command again — unless the run is final in its journal, when the message
// says the next run finishes its files and starts a new one.
func (a *attempt) end(ctx context.Context, res engine.Result, err error) error {
	st, fileRec := a.st, a.fileRec
	if err == nil {
		dctx, stopDrain := drainContext(ctx)
		err = a.drainCP(dctx)
		stopDrain()
		var ue *cpclient.UnreachableError
		if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.As(err, &ue)) {
			// A signal stopped the run: it ends now, and what the control plane has not taken
			// in time waits in the outbox for the next run. A refusal (E_LEASE_LOST, …) still
			// halts.
			fmt.Fprintf(a.Err, "%d transition(s) of run %s have not reached the control plane (%v); they are kept in the state file's outbox and the next '%s' sends them first.\n", fileRec.Unacked(), st.RunID, err, a.Again)
			err = nil
		}
	}
	if err == nil {
		err = fileRec.Sync()
	}
	if err != nil {
		a.Terminal.Halted(st, err)
		if st.RunStatus.Final() && fileRec.Recorded() {
			// The run is over in its journal: running again does not resume it but finishes
			// its files (state.ReadRecovered, the final outbox) and then starts a new run.
			return &ExitError{Code: ExitAborted, Msg: fmt.Sprintf("%v\nRun %s ended %s and its journal %s holds every transition, but what is above was not done. "+
				"Once it is fixed, the next '%s' writes the run's state file and evidence pack from the journal and sends the control plane what it lacks, then starts a NEW run.",
				err, st.RunID, st.RunStatus, state.JournalPath(fileRec.Path, st.RunID), a.Again)}
		}
		return &ExitError{Code: ExitAborted, Msg: fmt.Sprintf("%v\nRun %s halted; everything recorded is in %s. Run the same command again to resume.", err, st.RunID, fileRec.Path)}
	}
	evPath := WriteEvidence(a.Err, a.Plan, st)
	if evPath != "" {
		a.Terminal.Attested(writeAttestation(ctx, a.cpc, a.statePath, st, evPath, a.Err))
	}
	return a.Terminal.Finish(a.Name, st, res, evPath)
}

// finishPaused ends a run that paused at a gate (docs/approvals.md, "Pause mode"): every
// transition reaches the control plane (else the run halts, exit 2, as any undelivered run),
// the lease is released so `rbook resume` takes the run over at once, the state file is
// synced, and the run ends with exit 0, printing how to continue (and, in a runner, the
// outputs).
func (a *attempt) finishPaused(ctx context.Context, pe *cpclient.PausedError) error {
	st, c := a.st, a.cpc
	dctx, stopDrain := drainContext(ctx)
	err := a.drainCP(dctx)
	stopDrain()
	if err == nil {
		err = a.fileRec.Sync()
	}
	if err != nil {
		a.Terminal.Halted(st, err)
		return &ExitError{Code: ExitAborted, Msg: fmt.Sprintf("%v\nRun %s halted at its gate before the control plane held every transition; run the same command again to resume.", err, st.RunID)}
	}
	a.stopLease()
	if err := c.ReleaseLease(context.WithoutCancel(ctx), st.RunID); err != nil {
		fmt.Fprintf(a.Err, "warning: the lease of run %s was not released (%v): 'rbook resume' can take the run over once it expires.\n", st.RunID, err)
	}
	msg := fmt.Sprintf("Run %s paused at gate '%s' (step %d of %d): approval %s is open on the control plane %s.\n"+
		"Decide it (rbook approve %s --control-plane %s), then continue the run from any folder with:\n  rbook resume %s --run-id %s --control-plane %s",
		st.RunID, pe.StepName, pe.StepIndex+1, st.TotalSteps, pe.ApprovalID, c.URL, pe.ApprovalID, c.URL, a.Name, st.RunID, c.URL)
	if pe.ApprovalURL != "" {
		msg += "\nThe gate's page: " + pe.ApprovalURL
	}
	a.Terminal.Paused(st, msg, pe, a.cpURL)
	return nil
}

// continueAfter is the seq and chain head the next transition of st's run follows: the state
// file's, or the control plane's (cpSeq, cpHead) when it holds more, as it may when the
// state file did not write every transition (docs/evidence-chain.md).
func continueAfter(st *state.State, cpSeq int64, cpHead string) (int64, string) {
	if cpSeq > st.Seq {
		return cpSeq, cpHead
	}
	return st.Seq, st.ChainHead
}

// keepLease renews the lease of run runID (lease long) on c until the returned func is called
// or ctx ends; a lost lease cancels the run, saying another executor owns it now.
func keepLease(ctx context.Context, c *cpclient.Client, runID string, lease time.Duration, cancel context.CancelCauseFunc) func() {
	leaseCtx, endLease := context.WithCancel(ctx)
	go c.KeepLease(leaseCtx, runID, lease, func(err error) {
		cancel(fmt.Errorf("%v; another executor owns the run now, so this one stops", err))
	})
	return endLease
}

// recordSkippedNodes records each --skip-node answer as a SKIPPED step_finished of that node,
// through every recorder, and returns the last seq and its hash, the chain head the engine
// goes on from. The output starts with
// engine.WhenSkippedPrefix ("skipped: when resumed, by …"): a node skipped that way counts as
// done for its dependants, which is what "go on after it" means (the runbook rule of
// --step-index past a step in unknown state); its output is no binding.
func recordSkippedNodes(ctx context.Context, recorders []engine.Recorder, plan *runbook.Plan, st *state.State, ids []string, who string) (int64, string, error) {
	seq, head := st.Seq, st.ChainHead
	for _, id := range ids {
		idx := slices.IndexFunc(plan.Steps, func(s runbook.Step) bool { return s.Name == id })
		if idx < 0 {
			return seq, head, fmt.Errorf("--skip-node %s: the playbook has no such node", id)
		}
		s := plan.Steps[idx]
		seq++
		now := time.Now().UTC()
		ev := engine.Evidence{StepName: s.Name, Type: string(s.Type), Output: fmt.Sprintf("%sresumed, by %s with --skip-node: its outcome was never recorded, so it may or may not have taken effect; check it by hand", engine.WhenSkippedPrefix, who),
			Status: engine.StatusSkipped, TimestampUTC: engine.FormatTime(now)}
		t := engine.Transition{RunID: st.RunID, Seq: seq, Kind: engine.TransitionStepFinished, Time: now, StepIndex: idx, StepName: s.Name, StepType: string(s.Type), Evidence: &ev, RunStatus: engine.RunInProgress}
		t.Seal(engine.ChainPrev(seq-1, head))
		head = t.Hash
		for _, r := range recorders {
			if err := r.Record(context.WithoutCancel(ctx), t); err != nil {
				return seq, head, err
			}
		}
	}
	return seq, head, nil
}
