package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

func newStatusCmd() *cobra.Command {
	var c common
	var output string
	cmd := &cobra.Command{
		Use:   "status [RUNBOOK]",
		Short: "Show where the runbook's current or last run stands",
		Long: `Show the run recorded in the runbook's state file: its status, whether an executor
is running it right now or it was interrupted (and where a new 'rbook run' resumes), and
its report so far.

Exit codes: 0 a run was found and shown, 2 no run, an invalid runbook or an unreadable state file.`,
		Example: `  rbook status demo
  rbook status prod -o json | jq .liveness`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := runbookArg(args)
			plan, err := c.loadPlan(name)
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
			liveness := "final"
			switch {
			case st.RunStatus.Final():
			case held:
				liveness = "running: an executor holds it (" + holder.String() + ")"
			default:
				liveness = fmt.Sprintf("interrupted: no executor holds it; 'rbook run %s' resumes it from step index %d", name, st.LastCompletedStepIndex+1)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					*state.State
					Liveness string `json:"liveness"`
				}{st, liveness})
			}
			fmt.Fprintf(out, "Run %s · runbook %s · %s (%s)\n", st.RunID, st.RunbookName, st.RunStatus, liveness)
			if !st.RunStatus.Final() {
				fmt.Fprintf(out, "Next step index: %d of %d steps\n", st.LastCompletedStepIndex+1, st.TotalSteps)
			}
			if st.Interrupted != nil {
				fmt.Fprintf(out, "Interrupted at %s: %s\n", st.Interrupted.AtUTC, st.Interrupted.Reason)
			}
			if st.InFlight != nil {
				fmt.Fprintf(out, "In flight: %s step '%s' started %s, outcome not recorded\n", st.InFlight.StepType, st.InFlight.StepName, st.InFlight.StartedUTC)
			}
			rend, err := report.New(c.templates)
			if err != nil {
				return abort("%v", err)
			}
			_, err = printReport(out, rend, plan, st, "", "")
			return err
		},
	}
	c.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
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
			name := runbookArg(args)
			plan, rend, err := c.loadWithReports(name)
			if err != nil {
				return err
			}
			lock, err := state.Acquire(plan.StateFilePath, "rollback")
			if err != nil {
				return abort("%v", err)
			}
			defer lock.Release()
			st, err := readExisting(plan.StateFilePath, name)
			if err != nil {
				return err
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			before := len(st.EvidencePack)
			eng := &engine.Engine{Plan: plan, Executors: simulatedExecutors(), Recorders: []engine.Recorder{&state.FileRecorder{Path: plan.StateFilePath, State: st}, newProgress(out, errw, rend, plan)}}
			res, err := eng.Rollback(cmd.Context(), startOf(st), st.RunStatus)
			if err != nil {
				return abort("%v", err)
			}
			if _, err := printReport(out, rend, plan, st, res.Message, writeEvidence(errw, plan, st)); err != nil {
				return abort("%v", err)
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
	cmd := &cobra.Command{
		Use:   "cancel [RUNBOOK]",
		Short: "Cancel the runbook's unfinished run (asks to confirm the deployment)",
		Long: `Cancel the recorded run: shows the cancel prompt for the last
deployment and waits for you to type yes. In v1 the cancel is simulated (WOULD CANCEL …).
The CANCEL audit entry becomes the last evidence entry and the run ends CANCELLED. When an
executor is running it right now (on this machine), it is told to stop and records the cancel itself.

Exit codes: 3 the run was cancelled, 1 you did not confirm, 2 nothing to cancel (no run, or
it is already final), an invalid runbook or held state.`,
		Example: `  rbook cancel demo                    # then type yes to confirm the deployment
  echo yes | rbook cancel prod`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := runbookArg(args)
			plan, rend, err := c.loadWithReports(name)
			if err != nil {
				return err
			}
			st, err := readExisting(plan.StateFilePath, name)
			if err != nil {
				return err
			}
			if st.RunStatus.Final() {
				return abort("run %s is already %s; there is nothing to cancel", st.RunID, st.RunStatus)
			}
			out := cmd.OutOrStdout()
			prompt, err := rend.RenderCancelPrompt(st.RunID, st.LastDeployName)
			if err != nil {
				return abort("%v", err)
			}
			ok, err := steps.ConfirmCancel(steps.NewLines(os.Stdin), out, func(string) string { return prompt })(cmd.Context(), st.LastDeployName)
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
			eng := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{&state.FileRecorder{Path: plan.StateFilePath, State: st}, newProgress(out, cmd.ErrOrStderr(), rend, plan)}}
			res, err := eng.Cancel(cmd.Context(), startOf(st), who)
			if err != nil {
				return abort("%v", err)
			}
			if _, err := printReport(out, rend, plan, st, res.Message, writeEvidence(cmd.ErrOrStderr(), plan, st)); err != nil {
				return abort("%v", err)
			}
			return &exitError{code: exitCancelled}
		},
	}
	c.register(cmd)
	return cmd
}

// cancelLive asks the executor holding the run to cancel it: a request file, then SIGUSR1,
// then it waits (on the lock, not by polling) until the executor lets go.
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
	if err := syscall.Kill(h.PID, syscall.SIGUSR1); err != nil {
		os.Remove(cancelRequestPath(statePath))
		return abort("cannot signal the executor (%s): %v", h, err)
	}
	fmt.Fprintf(out, "Asked the executor (%s) to cancel; waiting for it to record the cancel…\n", h)
	f, err := os.Open(state.LockPath(statePath))
	if err != nil {
		return abort("%v", err)
	}
	defer f.Close()
	got := make(chan error, 1)
	go func() { got <- unix.Flock(int(f.Fd()), unix.LOCK_SH) }()
	select {
	case err := <-got:
		if err != nil {
			return abort("%v", err)
		}
	case <-time.After(30 * time.Second):
		return abort("the executor (%s) did not finish within 30s; check it with: rbook status", h)
	case <-ctx.Done():
		return ctx.Err()
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
