package main

// The flags of the verbs that run steps, and `rbook resume`: the pause-mode protocol itself is
// action/run's (docs/approvals.md, "Pause mode").

import (
	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
)

// addGateFlags registers --gate-mode and --github-environment (run and resume).
func addGateFlags(cmd *cobra.Command, f *runFlags) {
	cmd.Flags().StringVar(&f.gateMode, "gate-mode", "", "wait: a confirm gate waits in this process; pause: open the gate on the control plane and end (exit 0, continue with 'rbook resume') (default $RBOOK_GATE_MODE, else wait)")
	cmd.Flags().StringVar(&f.githubEnv, "github-environment", "", "GitHub environment the run's gates are bound to, reported with each gate (default $RBOOK_GITHUB_ENVIRONMENT)")
}

// addExecutorFlags registers the flags `rbook run` and `rbook resume` share: the MCP config,
// the control plane's timeout, credentials and lease, the report and output format, and the
// gate flags (addGateFlags).
func addExecutorFlags(cmd *cobra.Command, f *runFlags) {
	addSharedExecutorFlags(cmd, f, "mcpServers JSON for check steps (default <dir>/<RUNBOOK>.mcp.json)")
	addGateFlags(cmd, f)
}

// addSharedExecutorFlags registers the executor flags every verb that runs steps shares
// (rbook run, rbook resume, rbook playbook run): --mcp-config (described by mcpHelp), the
// control plane's timeout, credentials and lease, --report and -o.
func addSharedExecutorFlags(cmd *cobra.Command, f *runFlags, mcpHelp string) {
	cmd.Flags().StringVar(&f.mcpConfig, "mcp-config", "", mcpHelp)
	cmd.Flags().DurationVar(&f.cpTimeout, "control-plane-timeout", cpclient.DefaultDeadline, "halt the run when the control plane stays unreachable this long")
	addControlPlaneAuthFlags(cmd)
	cmd.Flags().DurationVar(&f.lease, "control-plane-lease", cpclient.DefaultLease, "how long the run's lease outlives this executor if it dies (5s..1h); renewed every third of it")
	cmd.Flags().StringVar(&f.report, "report", "", "also write the Markdown report (\"# Runbook Execution Report\") to this file")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text (lines on a terminal, Markdown otherwise) or json")
}

func newResumeCmd() *cobra.Command {
	var f runFlags
	var runID string
	cmd := &cobra.Command{
		Use:   "resume [RUNBOOK]",
		Short: "Continue a run that paused at a gate, from any folder: rbook resume demo --control-plane URL",
		Long: `Continue a run that 'rbook run --gate-mode pause' left at a confirm gate (docs/approvals.md, "Pause mode").

The run is found on the control plane: --run-id ID, else the newest unfinished run of
RUNBOOK whose last transition opened a gate. Its plan digest must equal the local
runbook's (else the runbook changed and nothing happens). The gate must be decided:
  approved                 the run continues after the gate;
  rejected, timed out      recorded as 'rbook run' would (FAIL or TIMED_OUT, on_fail applies);
  pending                  nothing changes; exit 2 (decide it, then resume again);
  withdrawn (cancelled)    nothing changes; exit 1.
No state file is needed: without one, it is rebuilt from the control plane's record (every
transition is there). With one of the same run in the folder, that one is used. The resume
takes the run's lease over at the next epoch, so the paused executor can never write again.

` + exitCodesHelp,
		Example: `  rbook run demo --gate-mode pause --control-plane http://127.0.0.1:7070   # ends at the gate, exit 0
  rbook approve a-… --control-plane http://127.0.0.1:7070
  rbook resume demo --control-plane http://127.0.0.1:7070                     # from any folder
  rbook resume demo --run-id RBOOK-20261201-demo-150d2498 --control-plane https://rbook.example.internal`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.resume = &runID
			return runRunbook(cmd, f.runbookArg(cmd, args), f, nil)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&runID, "run-id", "", "the paused run (default: the newest unfinished run of RUNBOOK paused at a gate)")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "control plane URL the paused run reports to, or several separated by commas (replicas) (default $RBOOK_CONTROL_PLANE)")
	addExecutorFlags(cmd, &f)
	return cmd
}
