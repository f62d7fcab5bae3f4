package run

// A run finished elsewhere: a run paused in one folder can be resumed to its end from another
// (`rbook resume` in another job), and of two concurrent resumes one loses. The control
// plane's record of such a run is final and no executor can add to it, so the state file left
// behind takes that record (state.CloseFromRecord): `rbook status` then shows the true status,
// and `rbook run` starts a new run, keeping the finished one as its .prev-<run_id> file.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// errFinalThere is the error startOnControlPlane returns when the control plane refuses to
// resume a run because it is final there: the run was finished elsewhere.
var errFinalThere = errors.New("the run is final on the control plane")

// errStartAgain asks Run to start again: the unfinished run of the state file was
// closed with the control plane's record, so the same command now starts a new run.
var errStartAgain = errors.New("start again: the previous run was finished elsewhere")

// FinishedElsewhereCheck bounds how long `rbook status` and `rbook github post` wait for the
// control plane's answer to whether an unfinished run was finished elsewhere; without one
// they go on with the state file as it is.
const FinishedElsewhereCheck = 3 * time.Second

// closeFinishedElsewhere asks the control plane c for local's run, unfinished in the state
// file at statePath; when the control plane records it final (another executor finished
// it), the state file takes that record (its status, transitions and evidence; the evidence
// pack file first) and a line on errw says so. It returns the closed state, or nil when the
// run is not final there. The caller holds the state file's lock. Errors: the control
// plane's (cpGetRun), a record that does not replay, the write's.
func closeFinishedElsewhere(ctx context.Context, c *cpclient.Client, statePath string, local *state.State, errw io.Writer) (*state.State, error) {
	run, trs, err := cpGetRun(ctx, c, local.RunID)
	if err != nil {
		return nil, err
	}
	if !IsFinal(run.GetStatus()) {
		return nil, nil
	}
	rec := &state.State{
		RunID: run.GetRunId(), RunbookName: local.RunbookName, RunStatus: engine.RunInProgress,
		LastCompletedStepIndex: -1, TotalSteps: int(run.GetTotalSteps()), EvidencePack: []engine.Evidence{},
		StartedUTC: local.StartedUTC, SchemaHash8: local.SchemaHash8, RunbookHash: run.GetContentHash(),
		Kind: local.Kind, PlaybookPath: local.PlaybookPath, Inputs: local.Inputs, EpicID: local.EpicID, SessionID: local.SessionID,
	}
	if local.Kind == state.KindPlaybook {
		rec.Bindings, rec.IterationCounts = map[string]any{}, map[string]int{}
		for k, v := range local.Inputs {
			rec.Bindings[k] = v
		}
	}
	if err := replayRecord(rec, trs); err != nil {
		return nil, fmt.Errorf("run %s on the control plane %s: %v", local.RunID, c.URL, err)
	}
	if !rec.RunStatus.Final() {
		// Final without a run_finished transition (a CancelRun the executor never saw).
		// isFinal held above, so the wire status is SUCCEEDED, FAILED or CANCELLED.
		rec.RunStatus, _ = cpclient.RunStatusFromProto(run.GetStatus())
		rec.CompletedUTC = engine.FormatTime(run.GetUpdatedAt().AsTime())
	}
	dropped := len(local.Outbox)
	if err := state.CloseFromRecord(statePath, local, rec); err != nil {
		return nil, err
	}
	fmt.Fprintf(errw, "Run %s was finished elsewhere: the control plane %s records it %s, so this folder's state file %s now says %s too (its transitions and evidence taken from the control plane).\n",
		rec.RunID, c.URL, rec.RunStatus, statePath, rec.RunStatus)
	if dropped > 0 {
		fmt.Fprintf(errw, "%d transition(s) this folder had not delivered were dropped: the control plane's record of the run is final and takes no more.\n", dropped)
	}
	return rec, nil
}

// CloseIfFinishedAt is closeFinishedElsewhere against the control plane at url (calls bounded
// by c.Timeout), for a verb that holds no client yet (status, cancel). Embedded control planes
// are skipped: a run of this folder's embedded control plane cannot be finished elsewhere.
func (c *Config) CloseIfFinishedAt(ctx context.Context, url string, statePath string, local *state.State, errw io.Writer) (*state.State, error) {
	if url == "" || url == "off" || local.ControlPlaneEmbedded || local.RunStatus.Final() {
		return nil, nil
	}
	cl, err := c.client(url, false)
	if err != nil {
		return nil, err
	}
	return closeFinishedElsewhere(ctx, cl, statePath, local, errw)
}

// StatusCloseFinished is `rbook status`'s look at the control plane of an unfinished run no
// executor holds: when the run is final there, the state file is closed with that record
// (under the lock; an executor that starts at this moment has the lock and decides itself)
// and the closed state returned; otherwise st. A control plane that does not answer within
// FinishedElsewhereCheck leaves st as it is, and a line says so.
func (c *Config) StatusCloseFinished(ctx context.Context, plan *runbook.Plan, st *state.State, errw io.Writer) *state.State {
	url := st.ControlPlane
	if c.ControlPlane != "" {
		url = c.ControlPlane
	}
	if st.ControlPlane == "" || st.ControlPlaneEmbedded || url == "off" || st.RunStatus.Final() {
		return st
	}
	lock, err := state.Acquire(plan.StateFilePath, "status")
	if err != nil {
		return st
	}
	defer lock.Release()
	cur, err := state.ReadRecovered(plan.StateFilePath)
	if err != nil || cur.RunID != st.RunID || cur.RunStatus.Final() {
		return st
	}
	quick := *c
	quick.Timeout = FinishedElsewhereCheck
	closed, err := quick.CloseIfFinishedAt(ctx, url, plan.StateFilePath, cur, errw)
	if err != nil {
		fmt.Fprintf(errw, "note: could not ask the control plane %s whether run %s was finished elsewhere (%v); showing the state file.\n", url, st.RunID, err)
		return st
	}
	if closed == nil {
		return st
	}
	return closed
}

// finishedElsewhere is what `rbook run` and `rbook resume` do when the control plane refused
// to resume the state file's run st because it is final there: the state file takes the
// control plane's record (closeFinishedElsewhere; the caller holds the lock), then `rbook run`
// starts a new run (errStartAgain) and `rbook resume` says there is nothing to resume (exit 1).
func finishedElsewhere(ctx context.Context, c *cpclient.Client, plan *runbook.Plan, st *state.State, resume bool, errw io.Writer) error {
	closed, err := closeFinishedElsewhere(ctx, c, plan.StateFilePath, st, errw)
	if err != nil {
		return startHalted(ctx, fmt.Errorf("run %s is final on the control plane %s, but this folder's state file could not take its record: %v", st.RunID, c.URL, err))
	}
	if closed == nil { // not final after all: the refusal was for another reason
		return startHalted(ctx, fmt.Errorf("the control plane %s refused to resume run %s as final, but its record of the run is unfinished; run the same command again", c.URL, st.RunID))
	}
	if resume {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("run %s is already %s; there is nothing to resume", closed.RunID, closed.RunStatus)}
	}
	return errStartAgain
}
