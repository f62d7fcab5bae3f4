package main

// Pause mode and `rbook resume` (issue 8, item 4; DESIGN D14): in pause mode a confirm gate
// costs no runner while it waits. The executor records AWAITING_CONFIRMATION, opens the
// approval, makes sure the control plane holds every transition, releases its lease and ends
// (exit 0, outputs paused=true and approval-id). `rbook resume` continues the same run later,
// on any machine and from an empty folder: it rebuilds the state file from the control
// plane's record, checks the gate was approved, takes the run over at the next epoch (so the
// paused executor can never write again) and runs the steps after the gate.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The gate modes of --gate-mode / $RBOOK_GATE_MODE / the Action input gate-mode (DESIGN D14).
const (
	// gateModeWait: a confirm gate waits in the executor until it is decided (the default).
	gateModeWait = "wait"
	// gateModePause: at a confirm gate the executor opens the approval and ends; `rbook
	// resume` continues the run once it is approved.
	gateModePause = "pause"
)

// maxWorkflowRunField caps each field of the reported workflow run (bytes), as the control
// plane does (GitHubWorkflowRun: at most 512 bytes each); a longer value is not reported.
const maxWorkflowRunField = 512

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

// resolveGateMode is the gate mode from the flag, else $RBOOK_GATE_MODE, else wait. Pause
// mode needs a control plane that outlives the job: "--control-plane off" and the embedded
// control plane (gone when this process ends) are refused before anything runs.
func (f *runFlags) resolveGateMode() (string, error) {
	mode, from := f.gateMode, "--gate-mode"
	if mode == "" {
		mode, from = os.Getenv("RBOOK_GATE_MODE"), "RBOOK_GATE_MODE"
	}
	switch mode {
	case "", gateModeWait:
		return gateModeWait, nil
	case gateModePause:
	default:
		return "", fmt.Errorf("%s %q is not a gate mode: use wait or pause", from, mode)
	}
	switch u, src := cpURLFrom(f.controlPlane); u {
	case "off":
		return "", fmt.Errorf("--gate-mode pause needs a control plane, but %s is off: the paused run's gate is decided there and 'rbook resume' rebuilds the run from it; give --control-plane URL", src)
	case "":
		return "", fmt.Errorf("--gate-mode pause needs a control plane that outlives this job, and none was given (the embedded one ends with this process): give --control-plane URL or set RBOOK_CONTROL_PLANE")
	}
	return gateModePause, nil
}

// githubEnvironment is --github-environment, else $RBOOK_GITHUB_ENVIRONMENT.
func (f *runFlags) githubEnvironment() string {
	if f.githubEnv != "" {
		return f.githubEnv
	}
	return os.Getenv("RBOOK_GITHUB_ENVIRONMENT")
}

// reportedWorkflowRun is the GitHub Actions workflow run this executor runs in, from the
// runner's environment (GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_ACTOR,
// GITHUB_SHA; issue 8, Interface), with the gates' environment; nil outside a runner (no
// GITHUB_REPOSITORY) or when a field is over maxWorkflowRunField. Reported, not verified.
func reportedWorkflowRun(environment string) *rbookv1.GitHubWorkflowRun {
	w := &rbookv1.GitHubWorkflowRun{
		Repository: os.Getenv("GITHUB_REPOSITORY"), RunId: os.Getenv("GITHUB_RUN_ID"), RunAttempt: os.Getenv("GITHUB_RUN_ATTEMPT"),
		Actor: os.Getenv("GITHUB_ACTOR"), Sha: os.Getenv("GITHUB_SHA"), Environment: environment,
	}
	if w.Repository == "" {
		return nil
	}
	for _, v := range []string{w.Repository, w.RunId, w.RunAttempt, w.Actor, w.Sha, w.Environment} {
		if len(v) > maxWorkflowRunField {
			return nil
		}
	}
	return w
}

// finishPaused ends a run that paused at a gate (issue 8, item 4): every transition reaches
// the control plane (else the run halts, exit 2, as any undelivered run), the lease is
// released so `rbook resume` takes the run over at once, the state file is synced, and the
// run ends with exit 0, printing how to continue and, in a runner, the outputs run-id,
// status (IN_PROGRESS), paused=true and approval-id.
func finishPaused(ctx context.Context, v *view, errw io.Writer, name string, st *state.State, fileRec *state.FileRecorder,
	drainCP func(context.Context) error, c *cpclient.Client, stopLease func(), pe *cpclient.PausedError) error {
	dctx, stopDrain := drainContext(ctx)
	err := drainCP(dctx)
	stopDrain()
	if err == nil {
		err = fileRec.Sync()
	}
	if err != nil {
		v.halted(st, err)
		return &exitError{code: exitAborted, msg: fmt.Sprintf("%v\nRun %s halted at its gate before the control plane held every transition; run the same command again to resume.", err, st.RunID)}
	}
	stopLease()
	if err := c.ReleaseLease(context.WithoutCancel(ctx), st.RunID); err != nil {
		fmt.Fprintf(errw, "warning: the lease of run %s was not released (%v): 'rbook resume' can take the run over once it expires.\n", st.RunID, err)
	}
	msg := fmt.Sprintf("Run %s paused at gate '%s' (step %d of %d): approval %s is open on the control plane %s.\n"+
		"Decide it (rbook approve %s --control-plane %s), then continue the run from any folder with:\n  rbook resume %s --run-id %s --control-plane %s",
		st.RunID, pe.StepName, pe.StepIndex+1, st.TotalSteps, pe.ApprovalID, c.URL, pe.ApprovalID, c.URL, name, st.RunID, c.URL)
	if pe.ApprovalURL != "" {
		msg += "\nThe gate's page: " + pe.ApprovalURL
	}
	if v.mode == modeJSON {
		v.printJSON(st, msg, "", exitCompleted)
	}
	fmt.Fprintln(errw, msg)
	v.ci.publishPaused(st, pe)
	return nil
}

// publishPaused writes the outputs of a paused run (issue 8, item 4): run-id, status
// (IN_PROGRESS), paused=true and approval-id, with the heredoc writer, and a job summary
// line. Nil-safe (outside a runner nothing is written).
func (c *ciOutput) publishPaused(st *state.State, pe *cpclient.PausedError) {
	if c == nil {
		return
	}
	c.log.Close()
	md := fmt.Sprintf("\n### rbook: run %s paused at gate %s\n\nApproval `%s` is open on %s; a later job continues the run with `verb: resume` once it is approved.\n",
		st.RunID, mdCode(pe.StepName), pe.ApprovalID, c.cpURL)
	if pe.ApprovalURL != "" {
		md += "\nDecide it on its page: " + mdCell(pe.ApprovalURL) + "\n"
	}
	if _, err := github.AppendSummary(os.Getenv("GITHUB_STEP_SUMMARY"), md); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	outs := []github.Output{{Name: "run-id", Value: st.RunID}, {Name: "status", Value: string(st.RunStatus)},
		{Name: "paused", Value: "true"}, {Name: "approval-id", Value: pe.ApprovalID}}
	if pe.ApprovalURL != "" {
		outs = append(outs, github.Output{Name: "approval-url", Value: pe.ApprovalURL})
	}
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		if err := github.WriteFileCommand(p, outs); err != nil {
			fmt.Fprintf(os.Stderr, "warning: the step outputs were not written: %v\n", err)
		}
	}
}

func newResumeCmd() *cobra.Command {
	var f runFlags
	var runID string
	cmd := &cobra.Command{
		Use:   "resume [RUNBOOK]",
		Short: "Continue a run that paused at a gate, from any folder: rbook resume demo --control-plane URL",
		Long: `Continue a run that 'rbook run --gate-mode pause' left at a confirm gate (issue 8; DESIGN D14).

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
  rbook resume demo --run-id RBOOK-20261201-demo-2e8ae9b8 --control-plane https://rbook.example.internal`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.resume = &resumeTarget{runID: runID}
			return runRunbook(cmd, f.runbookArg(cmd, args), f, nil)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&runID, "run-id", "", "the paused run (default: the newest unfinished run of RUNBOOK paused at a gate)")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "control plane URL the paused run reports to, or several separated by commas (replicas) (default $RBOOK_CONTROL_PLANE)")
	addExecutorFlags(cmd, &f)
	return cmd
}

// resumeTarget is what `rbook resume` was asked to continue.
type resumeTarget struct {
	// runID is --run-id ("" for the newest paused run of the runbook).
	runID string
}

// resumedGate is the paused run's gate as the control plane decided it (prepareResume).
type resumedGate struct {
	// approval is the gate's decided approval as the control plane holds it.
	approval   *rbookv1.Approval
	approvalID string
	stepIndex  int
	decision   engine.Decision
	// err is the decision's error: context.DeadlineExceeded (wrapped) for a gate its
	// deadline closed.
	err error
}

// maxResumeScan is how many of the runbook's newest runs `rbook resume` without --run-id
// looks at for one paused at a gate.
const maxResumeScan = 50

// prepareResume finds the paused run on the control plane and checks that it may continue
// (issue 8, item 4): the run is unfinished, of this runbook, with this plan digest, its last
// transition opened a gate, and that gate's approval is decided (approved, rejected or
// timed out). With no state file at statePath it writes one rebuilt from the control plane's
// record; with one it must hold the same unfinished run. Nothing changes on the control
// plane. Errors (exitError): pending (exit 2), withdrawn (exit 1), refusals (exit 2).
func prepareResume(ctx context.Context, f runFlags, plan *runbook.Plan, statePath string, errw io.Writer) (*resumedGate, error) {
	u, from := cpURLFrom(f.controlPlane)
	if u == "" {
		// The state file's separate control plane, as for a resumed run (issue 10, new-user
		// finding 1).
		if local, err := state.Read(statePath); err == nil && local.ControlPlane != "" && !local.ControlPlaneEmbedded {
			u, from = local.ControlPlane, "the state file "+statePath // run.go says which one it uses
		}
	}
	if u == "" || u == "off" {
		return nil, abort("rbook resume continues a run from the control plane it reports to, and %s names none: give --control-plane URL or set RBOOK_CONTROL_PLANE", from)
	}
	if err := checkCPURLs(u, from); err != nil {
		return nil, abort("%v", err)
	}
	c, err := newCPClient(u, false)
	if err != nil {
		return nil, abort("%v", err)
	}
	c.Deadline = f.cpTimeout
	local, err := state.Read(statePath)
	if err != nil && !errors.Is(err, state.ErrNotExist) {
		return nil, abort("%v", err)
	}
	runID := f.resume.runID
	if local != nil {
		switch {
		case local.RunStatus.Final():
			return nil, abort("%s holds run %s, which is %s; 'rbook resume' rebuilds the paused run's state from the control plane when there is no state file: move %s away or resume from an empty folder", statePath, local.RunID, local.RunStatus, statePath)
		case runID != "" && runID != local.RunID:
			return nil, abort("%s holds the unfinished run %s, not %s: move it away (or resume from an empty folder) to resume %s", statePath, local.RunID, runID, runID)
		}
		runID = local.RunID
	}
	var run *rbookv1.Run
	var trs []*rbookv1.Transition
	if runID == "" {
		run, trs, err = findPausedRun(ctx, c, plan.Name)
	} else {
		run, trs, err = cpGetRun(ctx, c, runID)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case run.GetName() != plan.Name:
		return nil, abort("run %s is of runbook %q, not %q", run.GetRunId(), run.GetName(), plan.Name)
	case isFinal(run.GetStatus()):
		if local != nil && local.RunID == run.GetRunId() {
			// This folder's copy was left unfinished: it takes the control plane's record.
			if _, err := closeFinishedElsewhere(ctx, c, statePath, local, errw); err != nil {
				return nil, abort("run %s is final on the control plane %s, but %s could not take its record: %v", run.GetRunId(), c.URL, statePath, err)
			}
		}
		return nil, &exitError{code: exitFailed, msg: fmt.Sprintf("run %s is already %s on the control plane %s; there is nothing to resume", run.GetRunId(), run.GetStatus(), c.URL)}
	case run.GetContentHash() != plan.ContentHash:
		return nil, abort("the runbook changed since run %s paused: its plan digest is %s on the control plane and %s here (%s); resume with the runbook the run started with", run.GetRunId(), run.GetContentHash(), plan.ContentHash, plan.Path)
	}
	last := trs[len(trs)-1]
	if last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED {
		return nil, abort("run %s is not paused at a gate (its last transition, seq %d, is %v); an executor that stopped elsewhere continues with 'rbook run %s --take-over' and its state file", run.GetRunId(), last.GetSeq(), last.GetKind(), plan.Name)
	}
	a, err := gateApproval(ctx, c, run.GetRunId(), int(last.GetStepIndex()), plan.ContentHash)
	if err != nil {
		return nil, err
	}
	gate := &resumedGate{approval: a, approvalID: a.GetApprovalId(), stepIndex: int(last.GetStepIndex())}
	switch a.GetStatus() {
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING:
		return nil, abort("gate '%s' of run %s is still pending (approval %s): nothing was changed. Decide it (rbook approve %s --control-plane %s), then run rbook resume again", last.GetStepName(), run.GetRunId(), a.GetApprovalId(), a.GetApprovalId(), c.URL)
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED:
		return nil, &exitError{code: exitFailed, msg: fmt.Sprintf("gate '%s' of run %s was withdrawn (approval %s cancelled by %s: %s): nothing was changed", last.GetStepName(), run.GetRunId(), a.GetApprovalId(), a.GetApprover(), a.GetReason())}
	}
	gate.decision, gate.err = cpclient.DecisionOf(a)
	switch {
	case gate.err != nil:
		fmt.Fprintf(errw, "Gate '%s' of run %s timed out (approval %s: %s); it is recorded TIMED_OUT and its on_fail (%s) applies.\n", last.GetStepName(), run.GetRunId(), a.GetApprovalId(), a.GetReason(), a.GetOnFail())
	case gate.decision.Verdict == engine.Rejected:
		fmt.Fprintf(errw, "Gate '%s' of run %s was rejected by %s (approval %s: %s); the run does not continue past it: the gate is recorded FAIL and its on_fail (%s) applies.\n", last.GetStepName(), run.GetRunId(), a.GetApprover(), a.GetApprovalId(), a.GetReason(), a.GetOnFail())
	default:
		fmt.Fprintf(errw, "Gate '%s' of run %s was approved by %s (approval %s); continuing the run.\n", last.GetStepName(), run.GetRunId(), gate.decision.By, a.GetApprovalId())
	}
	if local == nil {
		st, err := rebuildState(plan, statePath, run, trs, c.URL)
		if err != nil {
			return nil, abort("run %s: %v", run.GetRunId(), err)
		}
		if err := state.Write(statePath, st); err != nil {
			return nil, abort("%v", &state.NotWritableError{Err: err})
		}
		fmt.Fprintf(errw, "Rebuilt the state file %s of run %s from the control plane %s (%d transitions).\n", statePath, st.RunID, c.URL, len(trs))
	}
	return gate, nil
}

// isFinal reports whether a wire run status is final.
func isFinal(s rbookv1.RunStatus) bool {
	return s == rbookv1.RunStatus_RUN_STATUS_SUCCEEDED || s == rbookv1.RunStatus_RUN_STATUS_FAILED || s == rbookv1.RunStatus_RUN_STATUS_CANCELLED
}

// cpGetRun reads a run and every page of its transitions. Errors name the control plane.
func cpGetRun(ctx context.Context, c *cpclient.Client, runID string) (*rbookv1.Run, []*rbookv1.Transition, error) {
	var run *rbookv1.Run
	var trs []*rbookv1.Transition
	token := ""
	for {
		var resp *rbookv1.GetRunResponse
		err := c.Retry(ctx, func(ctx context.Context) error {
			var err error
			resp, err = c.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: runID, PageToken: token})
			return err
		})
		if cpclient.Code(err) == "E_RUN_NOT_FOUND" {
			return nil, nil, abort("the control plane %s has no run %s", c.URL, runID)
		}
		if err != nil {
			return nil, nil, abort("control plane %s: GetRun %s: %v", c.URL, runID, err)
		}
		run = resp.GetRun()
		trs = append(trs, resp.GetTransitions()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(trs) == 0 {
		return nil, nil, abort("run %s has no transitions on the control plane %s: it never started, so there is nothing to resume", runID, c.URL)
	}
	return run, trs, nil
}

// findPausedRun is the newest unfinished run of the runbook whose last transition opened a
// gate, among its maxResumeScan newest runs (ListRuns orders newest started first).
func findPausedRun(ctx context.Context, c *cpclient.Client, name string) (*rbookv1.Run, []*rbookv1.Transition, error) {
	var resp *rbookv1.ListRunsResponse
	err := c.Retry(ctx, func(ctx context.Context) error {
		var err error
		resp, err = c.Runs.ListRuns(ctx, &rbookv1.ListRunsRequest{Name: name, PageSize: maxResumeScan})
		return err
	})
	if err != nil {
		return nil, nil, abort("control plane %s: ListRuns: %v", c.URL, err)
	}
	for _, r := range resp.GetRuns() {
		if isFinal(r.GetStatus()) {
			continue
		}
		run, trs, err := cpGetRun(ctx, c, r.GetRunId())
		if err != nil {
			return nil, nil, err
		}
		if trs[len(trs)-1].GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED {
			return run, trs, nil
		}
	}
	return nil, nil, abort("the control plane %s has no unfinished run of runbook %s paused at a gate (among its %d newest runs); name one with --run-id", c.URL, name, maxResumeScan)
}

// gateApproval is the newest approval of the run's gate at stepIndex bound to digest.
func gateApproval(ctx context.Context, c *cpclient.Client, runID string, stepIndex int, digest string) (*rbookv1.Approval, error) {
	token := ""
	for {
		var resp *rbookv1.ListApprovalsResponse
		err := c.Retry(ctx, func(ctx context.Context) error {
			var err error
			resp, err = c.Approvals.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: runID, PageToken: token})
			return err
		})
		if err != nil {
			return nil, abort("control plane %s: ListApprovals: %v", c.URL, err)
		}
		for _, a := range resp.GetApprovals() {
			if int(a.GetStepIndex()) == stepIndex && a.GetPlanDigest() == digest {
				return a, nil
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return nil, abort("run %s waits at step index %d but the control plane %s holds no approval for that gate: the executor stopped before it opened it; continue with 'rbook run --take-over' and its state file", runID, stepIndex, c.URL)
		}
	}
}

// rebuildState is the state file of a paused run as its executor kept it, from the control
// plane's record (DESIGN D14): the fields StartRun stored (run id, runbook, plan digest,
// schema hash, step count, started_at) and every transition replayed with state.Apply, the
// FileRecorder's own logic. It differs from the paused executor's file only in what belongs
// to an executor instance: a fresh owner_id, this folder's owner_workspace, no lease_epoch
// yet (StartRun sets it), and an empty outbox (the paused executor drained it).
func rebuildState(plan *runbook.Plan, path string, run *rbookv1.Run, trs []*rbookv1.Transition, cpURL string) (*state.State, error) {
	st := &state.State{
		RunID: run.GetRunId(), RunbookName: run.GetName(), RunStatus: engine.RunInProgress,
		LastCompletedStepIndex: -1, TotalSteps: int(run.GetTotalSteps()), EvidencePack: []engine.Evidence{},
		StartedUTC: engine.FormatTime(run.GetStartedAt().AsTime()), SchemaHash8: run.GetSchemaHash8(),
		RunbookHash: run.GetContentHash(), ControlPlane: cpURL,
		OwnerID: state.NewOwnerID(), OwnerWorkspace: state.WorkspaceID(path),
	}
	if st.RunbookName != plan.Name {
		return nil, fmt.Errorf("the control plane's run is of runbook %q, not %q", st.RunbookName, plan.Name)
	}
	return st, replayRecord(st, trs)
}

// replayRecord applies the control plane's transitions trs, every one from seq 1, to st with
// state.Apply (the FileRecorder's own logic). Errors: a gap in the seqs, a transition that
// does not convert or apply.
func replayRecord(st *state.State, trs []*rbookv1.Transition) error {
	for i, p := range trs {
		if p.GetSeq() != int64(i+1) {
			return fmt.Errorf("the control plane's transitions skip from seq %d to %d", i, p.GetSeq())
		}
		t, err := cpclient.FromProto(p)
		if err != nil {
			return err
		}
		if err := state.Apply(st, t); err != nil {
			return err
		}
	}
	return nil
}

// decidedGate decides the paused gate of a resumed run with the control plane's decision
// (prepareResume) once, and hands every other gate to next. When next is the control
// plane's gate, its Decided hook is told the approval (the runner output's approval-id,
// approved-by and Gates table).
type decidedGate struct {
	g    *resumedGate
	used bool
	next engine.Gate
}

// Await implements engine.Gate.
func (d *decidedGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if !d.used && req.StepIndex == d.g.stepIndex {
		d.used = true
		if cg, ok := d.next.(*cpclient.Gate); ok && cg.Decided != nil {
			cg.Decided(d.g.approval)
		}
		return d.g.decision, d.g.err
	}
	return d.next.Await(ctx, req)
}

// pauseNote is the line a pause-mode run prints when it starts, so a reader of the log knows
// the job ends at the first pending gate.
func pauseNote(errw io.Writer, plan *runbook.Plan, from int) {
	for _, s := range plan.Steps[min(from, len(plan.Steps)):] {
		if s.Type == runbook.TypeConfirm {
			fmt.Fprintf(errw, "Gate mode pause: at gate '%s' this job opens the approval and ends; 'rbook resume %s' continues the run once it is approved.\n", s.Name, strings.TrimSpace(plan.Name))
			return
		}
	}
}
