package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

func newStatusCmd() *cobra.Command {
	var c common
	var output string
	var cp deliverFlags
	var markdown bool
	cmd := &cobra.Command{
		Use:   "status [RUNBOOK]",
		Short: "Show where the runbook's current or last run stands",
		Long: `Show the run recorded in the runbook's state file: its status, whether an executor
is running it right now or it was interrupted (and where a new 'rbook run' resumes), where
its evidence pack is (a final run's missing evidence pack is rebuilt from the state file),
and every step of the runbook, in runbook order, with its final status or "not run".

A final run whose last transitions never reached its control plane (its executor stopped
before they were acknowledged) has them delivered first, to the control plane the state file
names; the output says how many are still undelivered.

--report prints the Markdown run report instead ("# Runbook Execution Report", the same
as 'rbook run --report FILE' writes); -o json prints the state file's fields, "liveness",
"evidence_path" and "undelivered_transitions".

Exit codes: 0 a run was found and shown, 2 no run, an invalid runbook or an unreadable state file.`,
		Example: `  rbook status demo
  rbook status demo --report > report.md
  rbook status prod -o json | jq .liveness`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := c.runbookArg(cmd, args)
			plan, rend, err := c.loadWithReports(name)
			if err != nil {
				return err
			}
			st, err := state.Read(plan.StateFilePath)
			if errors.Is(err, state.ErrNotExist) {
				return abort("no run recorded for runbook %s yet (%s does not exist); start one with: rbook run %s", name, plan.StateFilePath, name)
			}
			if err != nil {
				return abort("%v", err)
			}
			held, holder, err := state.Probe(plan.StateFilePath)
			if err != nil {
				return abort("%v", err)
			}
			if !held {
				// A run finished elsewhere is shown as it ended, never as resumable here.
				st = statusCloseFinished(cmd.Context(), cp.url, plan, st, cmd.ErrOrStderr())
			}
			var undelivered error
			if !held && st.RunStatus.Final() && len(st.Outbox) > 0 {
				// Deliver under the lock; an executor that starts at this moment has it first
				// and delivers the outbox itself (issue 6, item 1.1).
				if lock, lerr := state.Acquire(plan.StateFilePath, "status"); lerr == nil {
					undelivered = deliverFinal(cmd.Context(), plan.StateFilePath, cp.url, cp.timeout, cmd.ErrOrStderr())
					lock.Release()
					if st, err = state.Read(plan.StateFilePath); err != nil {
						return abort("%v", err)
					}
				}
			}
			liveness := "final"
			shown := string(st.RunStatus)
			switch {
			case st.RunStatus.Final():
			case held && st.AwaitingConfirmation != nil:
				// The control plane's word for a run waiting at a gate (issue 6, item 2.3).
				shown = string(engine.StatusAwaitingConfirmation)
				liveness = fmt.Sprintf("running: an executor holds it (%s), waiting at gate '%s' since %s",
					holder.String(), st.AwaitingConfirmation.StepName, st.AwaitingConfirmation.SinceUTC)
			case held:
				liveness = "running: an executor holds it (" + holder.String() + ")"
			default:
				liveness = fmt.Sprintf("interrupted: no executor holds it; 'rbook run %s' resumes it from step index %d", name, st.LastCompletedStepIndex+1)
			}
			out := cmd.OutOrStdout()
			if output != "text" && output != "json" {
				return abort("-o/--output %q: use text or json", output)
			}
			evPath := ensureEvidence(cmd.ErrOrStderr(), plan.StateFilePath, st)
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					*state.State
					Liveness string `json:"liveness"`
					// EvidencePath is the final run's evidence pack file (issue 6, item 1.7).
					EvidencePath string `json:"evidence_path,omitempty"`
					// Undelivered counts the outbox: transitions not yet on the control plane.
					Undelivered int `json:"undelivered_transitions"`
				}{st, liveness, evPath, len(st.Outbox)})
			}
			if markdown {
				s, err := rend.RenderReport(reportData(plan, st, "", evPath))
				if err != nil {
					return abort("%v", err)
				}
				fmt.Fprint(out, s)
				return nil
			}
			fmt.Fprintf(out, "Run %s · runbook %s · %s (%s)\n", st.RunID, st.RunbookName, shown, liveness)
			if n := len(st.Outbox); n > 0 && !held { // a running executor is sending them
				fmt.Fprintf(out, "Undelivered: %d transition(s) are in the state file's outbox, not yet on the control plane %s; %s\n", n, outboxWhere(st), outboxNext(st, name, undelivered))
			}
			if !st.RunStatus.Final() {
				fmt.Fprintf(out, "Next step index: %d of %d steps\n", st.LastCompletedStepIndex+1, st.TotalSteps)
				ev := state.EvidencePath(plan.StateFilePath, st.RunID)
				if _, err := os.Stat(ev); err == nil {
					// An interrupted run's executor wrote the pack so far: it is there, and
					// "written ... when the run ends" alone would say it is not.
					fmt.Fprintf(out, "Evidence pack: written to %s when the run ends (it holds the %s so far)\n", ev, yamlerr.Plural(len(st.EvidencePack), "entry", "entries"))
				} else {
					fmt.Fprintf(out, "Evidence pack: written to %s when the run ends\n", ev)
				}
			} else if evPath != "" {
				fmt.Fprintf(out, "Evidence pack: %s\n", evPath)
			}
			if st.Interrupted != nil {
				fmt.Fprintf(out, "Interrupted at %s: %s\n", st.Interrupted.AtUTC, st.Interrupted.Reason)
			}
			if st.InFlight != nil {
				fmt.Fprintf(out, "In flight: %s step '%s' started %s, outcome not recorded\n", st.InFlight.StepType, st.InFlight.StepName, st.InFlight.StartedUTC)
			}
			v, err := newView(out, cmd.ErrOrStderr(), terminals(out, cmd.ErrOrStderr()), rend, plan, "text", "")
			if err != nil {
				return abort("%v", err)
			}
			v.color = colorAllowed(isTerminal(out)) // the step lines are text whatever stdout is
			v.statusLines(st)
			return nil
		},
	}
	c.register(cmd)
	cp.register(cmd, "")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&markdown, "report", false, "print the Markdown run report (\"# Runbook Execution Report\")")
	return cmd
}

// deliverFlags are the flags of the verbs that deliver a state file's outbox (status, cancel).
type deliverFlags struct {
	url     string
	timeout time.Duration
}

func (d *deliverFlags) register(cmd *cobra.Command, extra string) {
	cmd.Flags().StringVar(&d.url, "control-plane", "", "control plane for undelivered transitions when the state file names none: a URL, or several separated by commas (default $RBOOK_CONTROL_PLANE, else the embedded one)"+extra)
	cmd.Flags().DurationVar(&d.timeout, "control-plane-timeout", verbDeliverTimeout, "give up delivering undelivered transitions after this long")
}

// outboxWhere names the control plane a state file's outbox belongs to, for messages.
func outboxWhere(st *state.State) string {
	switch {
	case st.ControlPlaneEmbedded:
		return "(the embedded one, " + embeddedDB + ")"
	case st.ControlPlane != "":
		return st.ControlPlane
	}
	return "(none recorded)"
}

// outboxNext says what happens to an outbox next: why this delivery failed, and who sends it.
func outboxNext(st *state.State, name string, err error) string {
	why := ""
	if err != nil {
		var ue *undeliveredError
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

func newRollbackCmd() *cobra.Command {
	var c common
	cmd := &cobra.Command{
		Use:   "rollback [RUNBOOK]",
		Short: "Run the rollback step for the run's most recent deploy",
		Long: `Run the compensation for the most recent deploy of the recorded run: the first
rollback step after that deploy in the runbook (simulated in v1). An unfinished run ends
FAILED; a finished run keeps its status and gains the rollback's evidence entry.

Exit codes: 0 the rollback passed, 1 it failed or there was nothing to roll back, 2 no run,
an invalid runbook or held state.`,
		Example: `  rbook rollback demo
  rbook rollback prod --dir ops/runbooks`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := c.runbookArg(cmd, args)
			plan, rend, err := c.loadWithReports(name)
			if err != nil {
				return err
			}
			lock, err := state.Acquire(plan.StateFilePath, "rollback")
			if err != nil {
				return abort("%v", err)
			}
			defer lock.Discard() // no run to roll back: leave no lock file or folder
			st, err := readExisting(plan.StateFilePath, name)
			if err != nil {
				return err
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			v, err := newView(out, errw, terminals(out, errw), rend, plan, "text", "")
			if err != nil {
				return abort("%v", err)
			}
			if !st.RunStatus.Final() {
				// A rollback ends an unfinished run: say how long the run took. A final run
				// keeps its status and duration; "ended … after" is then this rollback's time.
				v.setRunStart(st.StartedUTC)
			}
			before := len(st.EvidencePack)
			eng := &engine.Engine{Plan: plan, Executors: simulatedExecutors(), Recorders: []engine.Recorder{&state.FileRecorder{Path: plan.StateFilePath, State: st}, v}}
			res, err := eng.Rollback(cmd.Context(), startOf(st), st.RunStatus)
			if err != nil {
				return abort("%v", err)
			}
			if err := v.showReport(st, res.Message, writeEvidence(errw, plan, st)); err != nil {
				return abort("%v", err)
			}
			if v.mode != modeTerminal && res.Message != "" {
				fmt.Fprintln(errw, res.Message) // what was rolled back, where a person looks last
			}
			if len(st.EvidencePack) > before && st.EvidencePack[len(st.EvidencePack)-1].Status == engine.StatusPass {
				return nil
			}
			return &exitError{code: exitFailed}
		},
	}
	c.register(cmd)
	return cmd
}

func newCancelCmd() *cobra.Command {
	var c common
	var cp deliverFlags
	cmd := &cobra.Command{
		Use:   "cancel [RUNBOOK]",
		Short: "Cancel the runbook's unfinished run (asks to confirm the deployment)",
		Long: `Cancel the recorded run: shows the cancel prompt for the last
deployment and waits for you to type yes. In v1 the cancel is simulated (WOULD CANCEL …).
The CANCEL audit entry becomes the last evidence entry and the run ends CANCELLED. When an
executor is running it right now (on this machine), it is told to stop and records the cancel itself.
Otherwise the cancel is recorded in the state file and then sent, with any transitions the
run's control plane has not acknowledged yet, to that control plane; if it cannot be reached
they stay in the state file's outbox and the next 'rbook status' or 'rbook run' delivers them.

Exit codes: 3 the run was cancelled, 1 you did not confirm, 2 nothing to cancel (no run, or
it is already final), an invalid runbook or held state.`,
		Example: `  rbook cancel demo                    # then type yes to confirm the deployment
  echo yes | rbook cancel prod`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := c.runbookArg(cmd, args)
			plan, rend, err := c.loadWithReports(name)
			if err != nil {
				return err
			}
			st, err := readExisting(plan.StateFilePath, name)
			if err != nil {
				return err
			}
			if st.RunStatus.Final() {
				msg := fmt.Sprintf("run %s is already %s; there is nothing to cancel", st.RunID, st.RunStatus)
				if err := cancelFinal(cmd.Context(), plan.StateFilePath, name, st, cp, cmd.ErrOrStderr()); err != nil {
					return abort("%s.\n%v", msg, err)
				}
				if evPath := ensureEvidence(cmd.ErrOrStderr(), plan.StateFilePath, st); evPath != "" {
					msg += ". Its evidence pack: " + evPath
				}
				return abort("%s", msg)
			}
			out := cmd.OutOrStdout()
			prompt, err := rend.RenderCancelPrompt(st.RunID, st.LastDeployName)
			if err != nil {
				return abort("%v", err)
			}
			ok, err := steps.ConfirmCancel(steps.NewLines(os.Stdin), out, func(string) string { return promptFor(out, prompt) })(cmd.Context(), st.LastDeployName)
			if err != nil || !ok {
				return &exitError{code: exitFailed, msg: "Cancel not confirmed; nothing was changed."}
			}
			who := currentUser()
			lock, err := state.Acquire(plan.StateFilePath, "cancel")
			var held *state.HeldError
			if errors.As(err, &held) {
				return cancelLive(cmd.Context(), plan.StateFilePath, held.Holder, who, out)
			}
			if err != nil {
				return abort("%v", err)
			}
			defer lock.Release()
			// Re-read under the lock: the run may have finished while the prompt waited.
			if st, err = readExisting(plan.StateFilePath, name); err != nil {
				return err
			}
			if st.RunStatus.Final() {
				return abort("run %s ended %s while the cancel prompt waited; nothing was cancelled", st.RunID, st.RunStatus)
			}
			// A run that reports to a control plane records the cancel there too, after the
			// last transition the control plane holds, and keeps it in its outbox until the
			// control plane has it (issue 6, item 1.1).
			start := startOf(st)
			var target *cancelTarget
			if (st.ControlPlane != "" || st.ControlPlaneEmbedded) && cp.url != "off" {
				if target, err = reachForCancel(cmd.Context(), st, cp); err != nil {
					return err
				}
				defer target.stop()
				if closed, err := closeIfFinishedAt(cmd.Context(), target.url, cp.timeout, plan.StateFilePath, st, cmd.ErrOrStderr()); err != nil {
					return abort("nothing was cancelled: %v", err)
				} else if closed != nil {
					return abort("run %s was finished elsewhere and is %s; there is nothing to cancel", closed.RunID, closed.RunStatus)
				}
				start.Seq = max(start.Seq, target.lastSeq)
			}
			v, err := newView(out, cmd.ErrOrStderr(), terminals(out, cmd.ErrOrStderr()), rend, plan, "text", "")
			if err != nil {
				return abort("%v", err)
			}
			v.setRunStart(st.StartedUTC)
			fileRec := &state.FileRecorder{Path: plan.StateFilePath, State: st, KeepOutbox: target != nil}
			eng := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{fileRec, v}}
			res, err := eng.Cancel(cmd.Context(), start, who)
			if err != nil {
				return abort("%v", err)
			}
			if target != nil {
				deliverCancel(cmd.Context(), fileRec, name, target.url, cp, cmd.ErrOrStderr())
			}
			if err := v.showReport(st, res.Message, writeEvidence(cmd.ErrOrStderr(), plan, st)); err != nil {
				return abort("%v", err)
			}
			return &exitError{code: exitCancelled}
		},
	}
	c.register(cmd)
	cp.register(cmd, `; "off" cancels in the state file only`)
	return cmd
}

// cancelFinal delivers the outbox a final run's executor left undelivered (issue 6, item
// 1.1): `rbook cancel` on a final run has nothing to cancel, but delivers first. It returns
// why transitions are left, and what happens to them next.
func cancelFinal(ctx context.Context, statePath, name string, st *state.State, cp deliverFlags, errw io.Writer) error {
	if len(st.Outbox) == 0 {
		return nil
	}
	lock, err := state.Acquire(statePath, "cancel")
	if err != nil {
		return fmt.Errorf("its %d undelivered transition(s) were not sent: %v", len(st.Outbox), err)
	}
	defer lock.Release()
	if err := deliverFinal(ctx, statePath, cp.url, cp.timeout, errw); err != nil {
		return fmt.Errorf("%v\n%s", err, outboxNext(st, name, nil))
	}
	return nil
}

// cancelTarget is the control plane a cancel is recorded on.
type cancelTarget struct {
	url     string
	lastSeq int64
	stop    func()
}

// reachForCancel finds the control plane st's run reports to and the last seq it holds. A
// cancel whose seq the control plane's record does not fit could never be delivered, so when
// it cannot be read the cancel is refused (exit 2), saying how to cancel in the state file
// only.
func reachForCancel(ctx context.Context, st *state.State, cp deliverFlags) (*cancelTarget, error) {
	url, stop, err := outboxTarget(ctx, st, cp.url)
	if err == nil {
		var c *cpclient.Client
		if c, err = newCPClient(url, st.ControlPlaneEmbedded); err != nil {
			stop()
			return nil, abort("%v", err)
		}
		c.Deadline = cp.timeout
		var last int64
		if last, err = c.LastSeq(ctx, st.RunID); err == nil {
			return &cancelTarget{url: url, lastSeq: last, stop: stop}, nil
		}
		stop()
	}
	return nil, abort("nothing was cancelled: run %s reports to the control plane %s, which must record the cancel too, and it could not be reached (%v). "+
		"Try again when it is back, or pass --control-plane off to cancel in the state file only (the control plane then keeps showing the run unfinished).", st.RunID, outboxWhere(st), err)
}

// deliverCancel sends a cancelled run's outbox (the cancel and anything unsent before it) to
// the control plane at url; when that fails the cancel stands and the outbox waits for the
// next status or run, which the message says.
func deliverCancel(ctx context.Context, fileRec *state.FileRecorder, name, url string, cp deliverFlags, errw io.Writer) {
	st := fileRec.State
	if _, err := deliver(ctx, fileRec, url, cp.timeout); err != nil {
		fmt.Fprintf(errw, "The cancel is recorded in the state file, but %d transition(s) have not reached the control plane %s (%v); %s.\n", fileRec.Unacked(), outboxWhere(st), err, outboxNext(st, name, nil))
	}
}

// cancelLive asks the executor holding the run to cancel it: a request file, then SIGUSR1
// (on Windows the executor polls for the file; signals_windows.go), then it waits until the
// executor lets go of the lock (state.AwaitRelease).
func cancelLive(ctx context.Context, statePath string, h state.Holder, who string, out interface{ Write([]byte) (int, error) }) error {
	host, _ := os.Hostname()
	if h.Role != "run" {
		return abort("the run is held by %s, not by an executor; try again when it is done", h)
	}
	if h.PID <= 0 || h.Host != host {
		return abort("the run is held by %s, which is not a process on this machine; stop it there", h)
	}
	data, _ := json.Marshal(cancelRequest{By: who, RequestedUTC: engine.FormatTime(time.Now())})
	if err := state.WriteFileAtomic(cancelRequestPath(statePath), data); err != nil {
		return abort("%v", err)
	}
	if err := signalCancel(h.PID); err != nil {
		os.Remove(cancelRequestPath(statePath))
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
	st, err := state.Read(statePath)
	if err != nil {
		return abort("%v", err)
	}
	if st.RunStatus != engine.RunCancelled {
		return &exitError{code: exitFailed, msg: fmt.Sprintf("the executor stopped, but run %s is %s", st.RunID, st.RunStatus)}
	}
	fmt.Fprintf(out, "Run %s is CANCELLED.\n", st.RunID)
	return &exitError{code: exitCancelled}
}

// ensureEvidence rebuilds a final run's missing evidence pack file from its state file
// (issue 6, item 1.7), saying so on errw, and returns the file's path: "" when the run is not
// final, or when the file is missing and could not be written (a warning says why).
func ensureEvidence(errw io.Writer, statePath string, st *state.State) string {
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

func readExisting(path, name string) (*state.State, error) {
	st, err := state.Read(path)
	if errors.Is(err, state.ErrNotExist) {
		return nil, abort("no run recorded for runbook %s (%s does not exist)", name, path)
	}
	if err != nil {
		return nil, abort("%v", err)
	}
	return st, nil
}

func startOf(st *state.State) engine.Start {
	return engine.Start{RunID: st.RunID, Seq: st.Seq, Index: st.LastCompletedStepIndex + 1, Evidence: st.EvidencePack, LastDeployName: st.LastDeployName}
}

// loadWithReports loads the runbook and the report templates every verb that prints a report needs.
func (c *common) loadWithReports(name string) (*runbook.Plan, *report.Renderer, error) {
	plan, err := c.loadPlan(name)
	if err != nil {
		return nil, nil, err
	}
	rend, err := report.New(c.templates)
	if err != nil {
		return nil, nil, abort("%v", err)
	}
	return plan, rend, nil
}
