package run

// Pause mode and `rbook resume` (docs/approvals.md, "Pause mode"): in pause mode a confirm
// gate costs no runner while it waits. The executor records AWAITING_CONFIRMATION, opens the
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

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// The gate modes of --gate-mode / $RBOOK_GATE_MODE / the Action input gate-mode
// (docs/approvals.md, "Pause mode").
const (
	// GateModeWait: a confirm gate waits in the executor until it is decided (the default).
	GateModeWait = "wait"
	// GateModePause: at a confirm gate the executor opens the approval and ends; `rbook
	// resume` continues the run once it is approved.
	GateModePause = "pause"
)

// maxWorkflowRunField caps each field of the reported workflow run (bytes), as the control
// plane does (GitHubWorkflowRun: at most 512 bytes each); a longer value is not reported.
const maxWorkflowRunField = 512

// ResolveGateMode is the gate mode from flag (--gate-mode), else $RBOOK_GATE_MODE, else wait. Pause
// mode needs a control plane that outlives the job: "--control-plane off" and the embedded
// control plane (gone when this process ends) are refused before anything runs.
func (c *Config) ResolveGateMode(flag string) (string, error) {
	mode, from := flag, "--gate-mode"
	if mode == "" {
		mode, from = os.Getenv("RBOOK_GATE_MODE"), "RBOOK_GATE_MODE"
	}
	switch mode {
	case "", GateModeWait:
		return GateModeWait, nil
	case GateModePause:
	default:
		return "", fmt.Errorf("%s %q is not a gate mode: use wait or pause", from, mode)
	}
	switch u, src := c.ControlPlane, c.From; u {
	case "off":
		return "", fmt.Errorf("--gate-mode pause needs a control plane, but %s is off: the paused run's gate is decided there and 'rbook resume' rebuilds the run from it; give --control-plane URL", src)
	case "":
		return "", fmt.Errorf("--gate-mode pause needs a control plane that outlives this job, and none was given (the embedded one ends with this process): give --control-plane URL or set RBOOK_CONTROL_PLANE")
	}
	return GateModePause, nil
}

// GitHubEnvironment is flag (--github-environment), else $RBOOK_GITHUB_ENVIRONMENT.
func GitHubEnvironment(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("RBOOK_GITHUB_ENVIRONMENT")
}

// ReportedWorkflowRun is the GitHub Actions workflow run this executor runs in, from the
// runner's environment (GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_ACTOR,
// GITHUB_SHA), with the gates' environment; nil outside a runner (no
// GITHUB_REPOSITORY) or when a field is over maxWorkflowRunField. Reported, not verified.
func ReportedWorkflowRun(environment string) *rbookv1.GitHubWorkflowRun {
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

// maxResumeScan is how many of the runbook's newest runs `rbook resume` without --run-id
// looks at for one paused at a gate.
const maxResumeScan = 50

// prepareResume finds the paused run on the control plane and checks that it may continue
// : the run is unfinished, of this runbook, with this plan digest, its last
// transition opened a gate, and that gate's approval is decided (approved, rejected or
// timed out). With no state file at statePath it writes one rebuilt from the control plane's
// record; with one it must hold the same unfinished run. Nothing changes on the control
// plane. Errors (exitError): pending (exit 2), withdrawn (exit 1), refusals (exit 2).
func (c *Config) prepareResume(ctx context.Context, runID string, plan *runbook.Plan, statePath string, errw io.Writer) (*cpclient.DecidedGate, error) {
	local, readErr := state.ReadCurrent(statePath)
	if readErr != nil {
		local = nil
	}
	// The state file's separate control plane, as for a resumed run (controlPlane says which
	// one it uses); the configured one was checked when it was resolved.
	cfg, _, err := c.stateControlPlane(local, statePath)
	if err != nil {
		return nil, abort("%v", err)
	}
	if u := cfg.ControlPlane; u == "" || u == "off" {
		return nil, abort("rbook resume continues a run from the control plane it reports to, and %s names none: give --control-plane URL or set RBOOK_CONTROL_PLANE", cfg.From)
	}
	cl, err := c.client(cfg.ControlPlane, false)
	if err != nil {
		return nil, abort("%v", err)
	}
	if readErr != nil && !errors.Is(readErr, state.ErrNotExist) {
		return nil, abort("%v", readErr)
	}
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
		run, trs, err = findPausedRun(ctx, cl, plan.Name)
	} else {
		run, trs, err = cpGetRun(ctx, cl, runID)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case run.GetName() != plan.Name:
		return nil, abort("run %s is of runbook %q, not %q", run.GetRunId(), run.GetName(), plan.Name)
	case IsFinal(run.GetStatus()):
		if local != nil && local.RunID == run.GetRunId() {
			// This folder's copy was left unfinished: it takes the control plane's record.
			if _, err := closeFinishedElsewhere(ctx, cl, statePath, local, errw); err != nil {
				return nil, abort("run %s is final on the control plane %s, but %s could not take its record: %v", run.GetRunId(), cl.URL, statePath, err)
			}
		}
		return nil, &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("run %s is already %s on the control plane %s; there is nothing to resume", run.GetRunId(), run.GetStatus(), cl.URL)}
	case run.GetContentHash() != plan.ContentHash:
		return nil, abort("the runbook changed since run %s paused: its plan digest is %s on the control plane and %s here (%s); resume with the runbook the run started with", run.GetRunId(), run.GetContentHash(), plan.ContentHash, plan.Path)
	}
	last := trs[len(trs)-1]
	if last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED {
		return nil, abort("run %s is not paused at a gate (its last transition, seq %d, is %v); an executor that stopped elsewhere continues with 'rbook run %s --take-over' and its state file", run.GetRunId(), last.GetSeq(), last.GetKind(), plan.Name)
	}
	a, err := gateApproval(ctx, cl, run.GetRunId(), int(last.GetStepIndex()), plan.ContentHash)
	if err != nil {
		return nil, err
	}
	gate := &cpclient.DecidedGate{Approval: a, StepIndex: int(last.GetStepIndex())}
	switch a.GetStatus() {
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING:
		return nil, abort("gate '%s' of run %s is still pending (approval %s): nothing was changed. Decide it (rbook approve %s --control-plane %s), then run rbook resume again", last.GetStepName(), run.GetRunId(), a.GetApprovalId(), a.GetApprovalId(), cl.URL)
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED:
		return nil, &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("gate '%s' of run %s was withdrawn (approval %s cancelled by %s: %s): nothing was changed", last.GetStepName(), run.GetRunId(), a.GetApprovalId(), a.GetApprover(), a.GetReason())}
	}
	gate.Decision, gate.Err = cpclient.DecisionOf(a)
	sayDecision(errw, gate, last.GetStepName(), run.GetRunId())
	if local == nil {
		if err := rebuildStateFile(plan, statePath, run, trs, cl.URL, errw); err != nil {
			return nil, err
		}
	}
	return gate, nil
}

// sayDecision says on errw how the paused gate stepName of run runID was decided, and what
// the resume does with it.
func sayDecision(errw io.Writer, gate *cpclient.DecidedGate, stepName, runID string) {
	a := gate.Approval
	switch {
	case gate.Err != nil:
		fmt.Fprintf(errw, "Gate '%s' of run %s timed out (approval %s: %s); it is recorded TIMED_OUT and its on_fail (%s) applies.\n", stepName, runID, a.GetApprovalId(), a.GetReason(), a.GetOnFail())
	case gate.Decision.Verdict == engine.Rejected:
		fmt.Fprintf(errw, "Gate '%s' of run %s was rejected by %s (approval %s: %s); the run does not continue past it: the gate is recorded FAIL and its on_fail (%s) applies.\n", stepName, runID, a.GetApprover(), a.GetApprovalId(), a.GetReason(), a.GetOnFail())
	default:
		fmt.Fprintf(errw, "Gate '%s' of run %s was approved by %s (approval %s); continuing the run.\n", stepName, runID, gate.Decision.By, a.GetApprovalId())
	}
}

// rebuildStateFile writes the paused run's state file at statePath, rebuilt from the control
// plane's record (RebuildState), and says so on errw. Errors (exit 2): the record does not
// replay, the file cannot be written.
func rebuildStateFile(plan *runbook.Plan, statePath string, run *rbookv1.Run, trs []*rbookv1.Transition, cpURL string, errw io.Writer) error {
	st, err := RebuildState(plan, statePath, run, trs, cpURL)
	if err != nil {
		return abort("run %s: %v", run.GetRunId(), err)
	}
	if err := state.Write(statePath, st); err != nil {
		return abort("%v", &state.NotWritableError{Err: err})
	}
	fmt.Fprintf(errw, "Rebuilt the state file %s of run %s from the control plane %s (%d transitions).\n", statePath, st.RunID, cpURL, len(trs))
	return nil
}

// IsFinal reports whether a wire run status is final.
func IsFinal(s rbookv1.RunStatus) bool {
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
		if IsFinal(r.GetStatus()) {
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

// RebuildState is the state file of a paused run as its executor kept it, from the control
// plane's record: the fields StartRun stored (run id, runbook, plan digest,
// schema hash, step count, started_at) and every transition replayed with state.Apply, the
// FileRecorder's own logic. It differs from the paused executor's file only in what belongs
// to an executor instance: a fresh owner_id, this folder's owner_workspace, no lease_epoch
// yet (StartRun sets it), and an empty outbox (the paused executor drained it).
func RebuildState(plan *runbook.Plan, path string, run *rbookv1.Run, trs []*rbookv1.Transition, cpURL string) (*state.State, error) {
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
