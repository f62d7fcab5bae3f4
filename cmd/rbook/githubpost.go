package main

// `rbook github post`: what the Action's post step (action/shim/post.js, `post-if: always()`)
// runs when the job ends, however it ended (pipeline.Config.Post). A final run only has its outbox
// delivered. An unfinished one — the job was cancelled, timed out, or rbook was killed — has
// its outbox delivered, a run_interrupted transition recorded (state file and control plane,
// under the run's own lease), and its pending approvals withdrawn by the control plane, so
// nobody approves a gate whose job is gone.

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// newGitHubCmd is the `rbook github` group: commands the GitHub Action runs.
func newGitHubCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Commands the rbook GitHub Action runs (post)",
		Long: `Commands the rbook GitHub Action runs itself; see 'rbook github post --help'.

Exit codes: 0 done, 2 usage or an unknown command.`,
		Example: `  rbook github post demo                # what the Action's post step runs`,
	}
	cmd.AddCommand(newGitHubPostCmd())
	return cmd
}

func newGitHubPostCmd() *cobra.Command {
	var c common
	var cp deliverFlags
	var playbook string
	cmd := &cobra.Command{
		Use:   "post [RUNBOOK | --playbook FILE]",
		Short: "End of the Action's job: deliver the outbox; an unfinished run is recorded interrupted and its approvals withdrawn",
		Long: `Run by the rbook Action's post step when the job ends, however it ended.

For the runbook's state file: a final run only has its undelivered transitions (the outbox)
sent to its control plane. A run that is not final (the job was cancelled or timed out, or
rbook was killed) has its outbox sent, a run_interrupted transition recorded in the state file
and on the control plane (under the run's own lease), and the control plane withdraws the
run's pending approvals (cancelled, decided_by_source "interrupted"), so nobody approves a
gate whose job is gone. One line is printed per withdrawn approval id (never a token). The
run stays resumable: 'rbook run RUNBOOK' (with the state file) opens the gate again.

A run the job left paused at a gate on purpose (RBOOK_GATE_MODE=pause, which the Action sets
from its gate-mode input, and the control plane's last transition opened the gate the state
file awaits) is left alone: its gate stays open for a later job's 'rbook resume'.

With --playbook FILE (the Action's playbook input) it does the same for that playbook's run
(state file .rbook/<playbook-name>.playbook.state.json): its pending approval nodes are
withdrawn, and it resumes with 'rbook playbook run FILE'.

With no state file (the job never started a run) it says so and exits 0.

Exit codes: 0 done (or nothing to do), 2 the outbox could not be delivered, the interruption
could not be recorded, or an approval is still pending.`,
		Example: `  rbook github post demo
  rbook github post prod --dir ops/runbooks --control-plane https://rbook.example.internal
  rbook github post --playbook runbooks/release.cantbook`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tgt := pipeline.PostTarget{Final: termui.RunWord}
			if playbook != "" {
				if len(args) > 0 {
					return abort("rbook github post: give RUNBOOK or --playbook FILE, not both (got %q and --playbook %s)", args[0], playbook)
				}
				plan, err := runbook.LoadPlaybook(playbook)
				if err != nil {
					// The main step reported this already and never started a run.
					fmt.Fprintf(cmd.ErrOrStderr(), "rbook github post: no run to finish: playbook %s could not be loaded: %v\n", playbook, err)
					return nil
				}
				tgt.Name, tgt.StatePath, tgt.Resume = playbook, state.DefaultPlaybookStatePath(plan.Name), "rbook playbook run "+playbook
			} else {
				name := c.runbookArg(cmd, args)
				plan, err := c.loadPlan(name)
				if err != nil {
					var ee *exitError
					if errors.As(err, &ee) {
						// The main step reported this already and never started a run.
						fmt.Fprintf(cmd.ErrOrStderr(), "rbook github post: no run to finish: runbook %s could not be loaded:\n%s\n", name, ee.msg)
						return nil
					}
					return err
				}
				tgt.Name, tgt.StatePath, tgt.Resume = name, plan.StateFilePath, "rbook run "+name
			}
			return fromRun(deliveryConfig(cp.url, cp.timeout).Post(cmd.Context(), tgt, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	c.register(cmd)
	cp.register(cmd, "")
	cmd.Flags().StringVar(&playbook, "playbook", "", "finish the run of this .cantbook playbook instead of a runbook's (the Action's playbook input)")
	return cmd
}
