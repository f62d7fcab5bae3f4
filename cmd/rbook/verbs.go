package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/report"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/internal/termui"
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
			cfg := deliveryConfig(cp.url, cp.timeout)
			stat, err := cfg.Status(cmd.Context(), plan, name, cmd.ErrOrStderr())
			if err != nil {
				return fromRun(err)
			}
			return printStatus(cmd, cfg, plan, rend, name, stat, output, markdown)
		},
	}
	c.register(cmd)
	cp.register(cmd, "")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&markdown, "report", false, "print the Markdown run report (\"# Runbook Execution Report\")")
	return cmd
}

// printStatus prints stat, the run of plan's state file: as JSON (-o json), the Markdown
// report (--report), or lines and the steps.
func printStatus(cmd *cobra.Command, cfg *pipeline.Config, plan *runbook.Plan, rend *report.Renderer, name string, stat *pipeline.Status, output string, markdown bool) error {
	st, held, liveness, shown, undelivered := stat.State, stat.Held, stat.Liveness, stat.Shown, stat.Undelivered
	out := cmd.OutOrStdout()
	if output != "text" && output != "json" {
		return abort("-o/--output %q: use text or json", output)
	}
	evPath := pipeline.EnsureEvidence(cmd.ErrOrStderr(), plan.StateFilePath, st)
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*state.State
			Liveness string `json:"liveness"`
			// EvidencePath is the final run's evidence pack file.
			EvidencePath string `json:"evidence_path,omitempty"`
			// Undelivered counts the outbox: transitions not yet on the control plane.
			Undelivered int `json:"undelivered_transitions"`
		}{st, liveness, evPath, len(st.Outbox)})
	}
	if markdown {
		s, err := rend.RenderReport(termui.ReportData(plan, st, "", evPath))
		if err != nil {
			return abort("%v", err)
		}
		fmt.Fprint(out, s)
		return nil
	}
	outbox := ""
	if len(st.Outbox) > 0 && !held { // a running executor is sending them
		outbox = cfg.OutboxWhere(st) + "; " + pipeline.OutboxNext(st, name, undelivered)
	}
	termui.StatusHeader(out, st, shown, liveness, outbox, evPath, state.EvidencePath(plan.StateFilePath, st.RunID))
	v, err := newView(out, cmd.ErrOrStderr(), terminals(out, cmd.ErrOrStderr()), rend, plan, "text", "")
	if err != nil {
		return abort("%v", err)
	}
	v.color = termui.ColorAllowed(termui.IsTerminal(out)) // the step lines are text whatever stdout is
	v.statusLines(st)
	return nil
}

// deliverFlags are the flags of the verbs that deliver a state file's outbox (status, cancel).
type deliverFlags struct {
	url     string
	timeout time.Duration
}

func (d *deliverFlags) register(cmd *cobra.Command, extra string) {
	cmd.Flags().StringVar(&d.url, "control-plane", "", "control plane for undelivered transitions when the state file names none: a URL, or several separated by commas (default $RBOOK_CONTROL_PLANE, else the embedded one)"+extra)
	cmd.Flags().DurationVar(&d.timeout, "control-plane-timeout", pipeline.VerbDeliverTimeout, "give up delivering undelivered transitions after this long")
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
			return fromRun(pipeline.Rollback(cmd.Context(), verbOptions(cmd, plan, rend, name)))
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
			st, err := pipeline.ReadExisting(plan.StateFilePath, name)
			if err != nil {
				return err
			}
			if st.RunStatus.Final() {
				msg := fmt.Sprintf("run %s is already %s; there is nothing to cancel", st.RunID, st.RunStatus)
				if err := deliveryConfig(cp.url, cp.timeout).CancelFinal(cmd.Context(), plan.StateFilePath, name, st, cmd.ErrOrStderr()); err != nil {
					return abort("%s.\n%v", msg, err)
				}
				if evPath := pipeline.EnsureEvidence(cmd.ErrOrStderr(), plan.StateFilePath, st); evPath != "" {
					msg += ". Its evidence pack: " + evPath
				}
				return abort("%s", msg)
			}
			out := cmd.OutOrStdout()
			prompt, err := rend.RenderCancelPrompt(st.RunID, st.LastDeployName)
			if err != nil {
				return abort("%v", err)
			}
			ok, err := steps.ConfirmCancel(steps.NewLines(os.Stdin), out, func(string) string { return termui.PromptFor(out, prompt) })(cmd.Context(), st.LastDeployName)
			if err != nil || !ok {
				return &exitError{code: exitFailed, msg: "Cancel not confirmed; nothing was changed."}
			}
			cfg := deliveryConfig(cp.url, cp.timeout)
			return fromRun(cfg.Cancel(cmd.Context(), verbOptions(cmd, plan, rend, name), currentUser(), signalCancel))
		},
	}
	c.register(cmd)
	cp.register(cmd, `; "off" cancels in the state file only`)
	return cmd
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

// verbOptions are the pipeline's options of a verb that ends a recorded run: its view prints
// the lines and the report as text.
func verbOptions(cmd *cobra.Command, plan *runbook.Plan, rend *report.Renderer, name string) pipeline.VerbOptions {
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	return pipeline.VerbOptions{Plan: plan, Name: name, Out: out, Err: errw, View: func() (pipeline.Reporter, error) {
		v, err := newView(out, errw, terminals(out, errw), rend, plan, "text", "")
		return verbView{v}, err
	}}
}

// verbView is the view as the pipeline's Reporter.
type verbView struct{ *view }

func (v verbView) SetRunStart(startedUTC string) { v.setRunStart(startedUTC) }
func (v verbView) ShowReport(st *state.State, msg, evPath string) error {
	return v.showReport(st, msg, evPath)
}
func (v verbView) OnTerminal() bool { return v.mode == modeTerminal }
