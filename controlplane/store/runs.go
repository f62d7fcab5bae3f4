package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// OwnerIDHash is the lowercase hex SHA-256 of an executor's owner id: what the store keeps
// and compares (an owner id is a capability and never stored; docs/decisions/leases-and-fencing.md).
func OwnerIDHash(ownerID string) string {
	sum := sha256.Sum256([]byte(ownerID))
	return hex.EncodeToString(sum[:])
}

// StartRun creates the run, or resumes or takes it over under the lease rule of docs/decisions/leases-and-fencing.md
// (docs/decisions/leases-and-fencing.md), in one transaction:
//   - no run with nr.RunID: created, owned by nr.OwnerIDHash at epoch 1 (Created);
//   - the run is final: ErrRunFinal, with the run (the caller picks the next id suffix,
//     docs/decisions/run-ids.md);
//   - it is not final and nr.OwnerIDHash owns it: the epoch is bumped, the lease renewed and
//     the plan adopted (Resumed); with nr.RequireOwner, another identity gets ErrNotOwner;
//   - another owner id holds it: ErrRunOwned, unless nr.TakeOver and the lease has expired:
//     then nr takes it at the next epoch (TookOver); TakeOver of a live lease: ErrLeaseHeld.
//
// A resumed or taken-over run whose digest differs takes nr's digest and step count, and its
// pending approvals for another digest are closed as superseded (docs/decisions/approval-tokens.md).
// The returned Run is the row after the call (also with ErrRunFinal, ErrRunOwned and
// ErrLeaseHeld, so the caller can say until when the lease runs).
// Errors: ErrInvalidArgument (field named), ErrRunFinal, ErrRunOwned, ErrLeaseHeld,
// ErrNotOwner, ErrClosed, storage errors.
func (s *Store) StartRun(ctx context.Context, nr NewRun) (run Run, outcome StartOutcome, err error) {
	if err := validateNewRun(&nr); err != nil {
		return Run{}, 0, err
	}
	bindings, err := checkJSON("bindings", nr.Bindings, "{}")
	if err != nil {
		return Run{}, 0, err
	}
	if b := strings.TrimSpace(bindings); !strings.HasPrefix(b, "{") {
		// A run's first bindings are its inputs: an object (docs/playbooks.md, "Inputs and bindings").
		return Run{}, 0, fmt.Errorf("%w: bindings must be a JSON object", ErrInvalidArgument)
	}
	now := s.now()
	startedAt := nr.StartedAt
	if startedAt.IsZero() {
		startedAt = now
	}
	leaseSecs := int(nr.Lease / time.Second)
	expires := formatTime(now.Add(nr.Lease))
	err = s.write(ctx, func(w *writeTx) error {
		res, err := w.execSQL(`INSERT INTO playbook_runs
			(run_id, playbook_name, playbook_hash, bindings, status, epic_id, session_id, started_at,
			 schema_hash8, total_steps, started_by, updated_at, kind, owner, owner_id_hash, lease_epoch,
			 lease_seconds, lease_expires_at, `+githubJobColumns+`, `+runWorkflowColumns+`)
			VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO NOTHING`,
			append([]any{nr.RunID, nr.PlaybookName, nr.PlaybookHash, bindings, nullString(nr.EpicID), nullString(nr.SessionID),
				formatTime(startedAt), nr.SchemaHash8, nr.TotalSteps, nullString(nr.StartedBy), formatTime(now),
				string(nr.Kind), nr.Owner, nr.OwnerIDHash, leaseSecs, expires}, append(githubJobArgs(nr.GitHub), workflowArgs(nr.Reported)...)...)...)
		if err != nil {
			return fmt.Errorf("store: insert run: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if run, err = scanRun(w.queryRow(stmtSelectRun, nr.RunID)); err != nil {
			return fmt.Errorf("store: read run: %w", err)
		}
		if n == 1 {
			outcome = Created
			w.change.Runs = append(w.change.Runs, run)
			return w.storePlan(run.RunID, nr.PlaybookHash, nr.Plan, now)
		}
		ours := run.OwnerIDHash != "" && subtle.ConstantTimeCompare([]byte(run.OwnerIDHash), []byte(nr.OwnerIDHash)) == 1
		switch {
		case run.Status.Final():
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, run.RunID, run.Status)
		case ours && nr.RequireOwner && run.Owner != nr.Owner:
			return fmt.Errorf("%w: run %q", ErrNotOwner, run.RunID)
		case ours:
			outcome = Resumed
		case !nr.TakeOver:
			return fmt.Errorf("%w: run %q", ErrRunOwned, run.RunID)
		case now.Before(run.LeaseExpiresAt):
			return fmt.Errorf("%w: run %q", ErrLeaseHeld, run.RunID)
		default:
			outcome = TookOver
		}
		run.Owner, run.OwnerIDHash, run.LeaseEpoch = nr.Owner, nr.OwnerIDHash, run.LeaseEpoch+1
		run.LeaseSeconds, run.LeaseExpiresAt, run.UpdatedAt = leaseSecs, now.Add(nr.Lease), now
		if _, err := w.execSQL(`UPDATE playbook_runs SET owner = ?, owner_id_hash = ?, lease_epoch = ?,
			lease_seconds = ?, lease_expires_at = ?, updated_at = ? WHERE run_id = ?`,
			run.Owner, run.OwnerIDHash, run.LeaseEpoch, leaseSecs, expires, formatTime(now), run.RunID); err != nil {
			return fmt.Errorf("store: take the lease: %w", err)
		}
		if nr.Reported != nil {
			// The last StartRun's report wins: a resume in a later job reports that job.
			if _, err := w.execSQL(`UPDATE playbook_runs SET reported_repository = ?, reported_run_id = ?,
				reported_run_attempt = ?, reported_actor = ?, reported_sha = ?, reported_environment = ? WHERE run_id = ?`,
				append(workflowArgs(nr.Reported), run.RunID)...); err != nil {
				return fmt.Errorf("store: reported workflow run: %w", err)
			}
			run.Reported = nr.Reported
		}
		w.cache.forget(run.RunID)
		if err := w.storePlan(run.RunID, nr.PlaybookHash, nr.Plan, now); err != nil {
			return err
		}
		if run.PlaybookHash != nr.PlaybookHash {
			return w.adoptPlan(&run, nr.PlaybookHash, nr.TotalSteps, now)
		}
		w.change.Runs = append(w.change.Runs, run)
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrRunFinal) || errors.Is(err, ErrRunOwned) || errors.Is(err, ErrLeaseHeld) {
			return run, 0, err
		}
		return Run{}, 0, err
	}
	return run, outcome, nil
}

// checkFence is the lease check of every executor write (docs/decisions/leases-and-fencing.md): f must carry the run's
// current owner id hash and epoch, and f.Identity (when set) its owner identity.
func checkFence(runID string, p RunProgress, f Fence) error {
	if p.OwnerIDHash == "" || subtle.ConstantTimeCompare([]byte(p.OwnerIDHash), []byte(f.OwnerIDHash)) != 1 || p.LeaseEpoch != f.Epoch {
		return fmt.Errorf("%w: run %q is at epoch %d", ErrLeaseLost, runID, p.LeaseEpoch)
	}
	if f.Identity != "" && f.Identity != p.Owner {
		return fmt.Errorf("%w: run %q", ErrNotOwner, runID)
	}
	return nil
}

// RenewLease extends the lease f holds on the run by its lease duration and returns the run's
// progress (with the new LeaseExpiresAt). A final run's lease is not renewed: ErrRunFinal.
// Errors: ErrNotFound, ErrLeaseLost, ErrNotOwner, ErrRunFinal, ErrClosed, storage errors.
func (s *Store) RenewLease(ctx context.Context, runID string, f Fence) (RunProgress, error) {
	return s.setLeaseExpiry(ctx, runID, f, "renew lease", func(p RunProgress, now time.Time) time.Time {
		return now.Add(time.Duration(p.LeaseSeconds) * time.Second)
	})
}

// setLeaseExpiry is RenewLease and ReleaseLease: under f's fence, on a run that is not final,
// it sets the lease's expiry to until(progress, now) and stages the progress for watchers.
// what names the operation in storage errors.
func (s *Store) setLeaseExpiry(ctx context.Context, runID string, f Fence, what string, until func(RunProgress, time.Time) time.Time) (RunProgress, error) {
	var out RunProgress
	err := s.write(ctx, func(w *writeTx) error {
		p, err := w.progress(runID)
		if err != nil {
			return err
		}
		if err := checkFence(runID, p, f); err != nil {
			return err
		}
		if p.Status.Final() {
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, runID, p.Status)
		}
		p.LeaseExpiresAt = until(p, s.now())
		if _, err := w.execSQL(`UPDATE playbook_runs SET lease_expires_at = ? WHERE run_id = ?`,
			formatTime(p.LeaseExpiresAt), runID); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		w.staged = append(w.staged, p)
		out = p
		return nil
	})
	return out, err
}

// adoptPlan gives a resumed run its new plan digest and step count and closes the run's
// pending approvals bound to another digest, so their tokens stop working (docs/decisions/approval-tokens.md).
func (w *writeTx) adoptPlan(run *Run, digest string, totalSteps int, now time.Time) error {
	if _, err := w.execSQL(`UPDATE playbook_runs SET playbook_hash = ?, total_steps = ?, updated_at = ?
		WHERE run_id = ?`, digest, totalSteps, formatTime(now), run.RunID); err != nil {
		return fmt.Errorf("store: adopt plan digest: %w", err)
	}
	run.PlaybookHash, run.TotalSteps, run.UpdatedAt = digest, totalSteps, now
	superseded, err := w.writeApprovals(`UPDATE playbook_approvals SET status = 'cancelled', approved_at = ?,
		approver = 'system', reason = 'superseded: the run resumed with another plan digest', decided_by_source = ?
		WHERE run_id = ? AND status = 'pending' AND plan_digest <> ? RETURNING `+approvalColumns,
		formatTime(now), SourceSuperseded, run.RunID, digest)
	if err != nil {
		return fmt.Errorf("store: supersede approvals: %w", err)
	}
	w.change.Runs = append(w.change.Runs, *run)
	w.change.Approvals = append(w.change.Approvals, superseded...)
	return nil
}

func validateNewRun(nr *NewRun) error {
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"run_id", nr.RunID, true}, {"playbook_name", nr.PlaybookName, true}, {"playbook_hash", nr.PlaybookHash, true},
		{"schema_hash8", nr.SchemaHash8, false}, {"started_by", nr.StartedBy, false},
		{"epic_id", nr.EpicID, false}, {"session_id", nr.SessionID, false},
	} {
		if err := checkText(f.name, f.v, f.required, MaxIDBytes); err != nil {
			return err
		}
	}
	if err := validateGitHubJob(nr.GitHub); err != nil {
		return err
	}
	if err := validateWorkflowRun(nr.Reported); err != nil {
		return err
	}
	if nr.TotalSteps < 0 {
		return fmt.Errorf("%w: total_steps is %d, must be >= 0", ErrInvalidArgument, nr.TotalSteps)
	}
	if !isTokenHash(nr.OwnerIDHash) {
		return fmt.Errorf("%w: owner_id_hash must be 64 lowercase hex characters (OwnerIDHash)", ErrInvalidArgument)
	}
	if err := checkText("owner", nr.Owner, false, MaxIDBytes); err != nil {
		return err
	}
	switch nr.Kind {
	case "":
		nr.Kind = KindRunbook
	case KindRunbook, KindPlaybook:
	default:
		return fmt.Errorf("%w: kind %q is not runbook or playbook", ErrInvalidArgument, nr.Kind)
	}
	if len(nr.Plan) > MaxPlanBytes {
		return fmt.Errorf("%w: plan is %d bytes, over the limit of %d", ErrInvalidArgument, len(nr.Plan), MaxPlanBytes)
	}
	if nr.Lease == 0 {
		nr.Lease = DefaultLease
	}
	if nr.Lease < MinLease || nr.Lease > MaxLease {
		return fmt.Errorf("%w: lease is %s, must be %s..%s", ErrInvalidArgument, nr.Lease, MinLease, MaxLease)
	}
	return nil
}

// RecordTransition stores t and updates its run in one transaction (docs/decisions/durability.md), with
// RecordedAt set to the store's clock in that transaction. It is idempotent on (run_id,
// seq): an identical stored transition (RecordedAt aside) gives Duplicate=true and no
// change; a different one gives ErrConflict. seq must be last_seq+1, else ErrOutOfOrder, so
// gaps are refused. The run row follows t: status by RunStatusOf, current_node = step name
// (NULL when final), completed_at when final, error_context when failed,
// last_completed_step_index on step_finished, last_deploy_name, last_seq, updated_at. A run of
// kind playbook also gets the playbook projection in the same transaction (playbook.go:
// bindings, iteration_counts, active nodes as current_node, paused while any gate is open;
// error_context adds "node"), and its Change.Progress carries RunProgress.Playbook.
//
// A seq already stored with other content is ErrLeaseLost when f's epoch is stale (the
// caller lost the run to another executor with the same owner id), else ErrConflict.
// A final run keeps its one status: transitions after it (an executor winding down after
// CancelRun) are stored, but one claiming a different final status gets ErrRunFinal.
// Errors: ErrNotFound (no such run), ErrConflict, ErrOutOfOrder, ErrRunFinal,
// ErrInvalidArgument, ErrClosed, storage errors.
func (s *Store) RecordTransition(ctx context.Context, t Transition, f Fence) (RecordResult, error) {
	if err := validateTransition(&t); err != nil {
		return RecordResult{}, err
	}
	newStatus, err := RunStatusOf(t.RunStatus, t.Kind)
	if err != nil {
		return RecordResult{}, err
	}
	var res RecordResult
	err = s.writeFor(ctx, t.RunID, func(w *writeTx) error {
		run, err := w.progress(t.RunID)
		if err != nil {
			return err
		}
		return s.recordOne(w, run, t, newStatus, f, &res)
	})
	if err != nil {
		return RecordResult{}, err
	}
	return res, nil
}

// recordOne is the body RecordTransition and RecordTransitions share (docs/decisions/durability.md):
// inside the write transaction w it applies the validated transition t (newStatus is
// RunStatusOf(t)) to run, the run's progress before t, under the fence f. It stores t and
// the run row (with the playbook projection and the approval hooks), stages the change for
// watchers and the progress cache, and sets *res to the progress after t (Duplicate when t
// was already stored with the same content). Its refusals (ErrLeaseLost, ErrNotOwner,
// ErrConflict, ErrOutOfOrder, ErrRunFinal) come before anything is written; a storage error
// may come after writes.
func (s *Store) recordOne(w *writeTx, run RunProgress, t Transition, newStatus RunStatus, f Fence, res *RecordResult) error {
	var err error
	if t.Seq <= run.LastSeq {
		// A replay needs the owner id but not the current epoch: it changes nothing, and an
		// executor delivering its outbox after a restart may hold an older epoch.
		if run.OwnerIDHash == "" || subtle.ConstantTimeCompare([]byte(run.OwnerIDHash), []byte(f.OwnerIDHash)) != 1 {
			return fmt.Errorf("%w: run %q", ErrLeaseLost, t.RunID)
		}
		if f.Identity != "" && f.Identity != run.Owner {
			return fmt.Errorf("%w: run %q", ErrNotOwner, t.RunID) // no answer about another's record
		}
		if err := w.flushDeferred(); err != nil { // the stored copy may still be queued
			return err
		}
		stored, err := scanTransition(w.queryRow(stmtSelectTransition, t.RunID, t.Seq))
		if err != nil {
			return fmt.Errorf("store: read transition %d: %w", t.Seq, err)
		}
		if !sameTransition(stored, t) {
			if f.Epoch != run.LeaseEpoch {
				// Another copy of this owner resumed the run and wrote this seq: the
				// caller is the zombie (docs/decisions/leases-and-fencing.md).
				return fmt.Errorf("%w: run %q is at epoch %d", ErrLeaseLost, t.RunID, run.LeaseEpoch)
			}
			return fmt.Errorf("%w: run %q seq %d", ErrConflict, t.RunID, t.Seq)
		}
		*res = RecordResult{Duplicate: true, Progress: run}
		return nil
	}
	if err := checkFence(t.RunID, run, f); err != nil {
		return err
	}
	if t.Seq != run.LastSeq+1 {
		return fmt.Errorf("%w: run %q expects seq %d, got %d", ErrOutOfOrder, t.RunID, run.LastSeq+1, t.Seq)
	}
	if err = w.continuesChain(&run, t); err != nil {
		return err
	}
	oldStatus := run.Status
	var errCtx json.RawMessage
	var pb *PlaybookProgress
	if run.Status.Final() {
		if newStatus.Final() && newStatus != run.Status {
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, t.RunID, run.Status)
		}
	}
	if run.playbook {
		// Bindings, iteration counts, active nodes, paused-while-a-gate-is-open (playbook.go).
		wasFinal := run.Status.Final()
		if pb, err = w.applyPlaybook(&run, t, newStatus); err != nil {
			return err
		}
		if !wasFinal && newStatus.Final() {
			run.CompletedAt = t.At
			if newStatus == RunFailed {
				if errCtx, err = w.playbookErrorContext(t); err != nil {
					return err
				}
			}
		}
	} else if !run.Status.Final() {
		run.Status = newStatus
		if newStatus.Final() {
			run.CurrentNode, run.CompletedAt = "", t.At
		} else if t.StepName != "" {
			run.CurrentNode = t.StepName
		}
		if newStatus == RunFailed {
			errCtx = errorContext(t)
		}
	}
	if t.Kind == KindStepFinished && t.StepIndex >= 0 {
		run.LastCompletedStepIndex = t.StepIndex
	}
	if t.LastDeployName != "" {
		run.LastDeployName = t.LastDeployName
	}
	run.LastSeq, run.ChainHead, run.chainKnown = t.Seq, t.Hash, true
	t.RecordedAt = s.now()
	updatedAt := formatTime(t.RecordedAt)
	run.LeaseExpiresAt = t.RecordedAt.Add(time.Duration(run.LeaseSeconds) * time.Second)
	leaseExpires := formatTime(run.LeaseExpiresAt)

	deferIt := run.Status == oldStatus && w.deferOK && !run.playbook && t.Kind != KindRunInterrupted
	if !deferIt && w.deferOK {
		// This write goes straight to the run row: what the batch queued for it must land
		// first, or the flush at COMMIT would put an older last_seq back (docs/decisions/write-conflicts.md;
		// a test of a deferred transition followed by a status change covers it).
		if err := w.flushDeferred(); err != nil {
			return err
		}
	}
	if deferIt {
		// Written with the batch's other transitions in two statements (pgdefer.go).
		w.deferTransition(transitionArgs(t, updatedAt), []any{nullString(run.CurrentNode), run.LastCompletedStepIndex,
			nullString(run.LastDeployName), run.LastSeq, updatedAt, leaseExpires, run.RunID})
	} else if run.Status == oldStatus && s.dialect == dialectPostgres {
		// One round trip for both writes of the common case (writer.go, stmtInsertTransitionPG).
		_, err = w.exec(stmtInsertTransitionPG, append(transitionArgs(t, updatedAt), nullString(run.CurrentNode),
			run.LastCompletedStepIndex, nullString(run.LastDeployName), run.LastSeq, updatedAt, leaseExpires, run.RunID)...)
		if err != nil {
			return fmt.Errorf("store: insert transition: %w", err)
		}
	} else if _, err = w.exec(stmtInsertTransition, transitionArgs(t, updatedAt)...); err != nil {
		return fmt.Errorf("store: insert transition: %w", err)
	} else if run.Status == oldStatus {
		// Most transitions: leave status alone so its index is not rewritten.
		_, err = w.exec(stmtUpdateRunProgress, nullString(run.CurrentNode), run.LastCompletedStepIndex,
			nullString(run.LastDeployName), run.LastSeq, updatedAt, leaseExpires, run.RunID)
	} else {
		// Only a run that just became failed has an error context; others keep NULL.
		var ec any
		if errCtx != nil {
			ec = string(errCtx)
		}
		_, err = w.exec(stmtUpdateRunStatus, string(run.Status), nullTime(run.CompletedAt), ec,
			nullString(run.CurrentNode), run.LastCompletedStepIndex, nullString(run.LastDeployName), run.LastSeq,
			updatedAt, leaseExpires, run.RunID)
	}
	if err != nil {
		return fmt.Errorf("store: update run: %w", err)
	}
	if t.Kind == KindRunInterrupted && !run.Status.Final() {
		// The executor that waited at the gate is gone: withdraw the run's pending
		// approvals in this transaction, so nobody approves a dead job (docs/action.md, "The post step").
		withdrawn, err := w.writeApprovals(`UPDATE playbook_approvals SET status = 'cancelled', approved_at = ?,
			approver = 'system', reason = ?, decided_by_source = ?
			WHERE run_id = ? AND status = 'pending' RETURNING `+approvalColumns,
			updatedAt, interruptedReason, SourceInterrupted, t.RunID)
		if err != nil {
			return fmt.Errorf("store: withdraw approvals: %w", err)
		}
		w.change.Approvals = append(w.change.Approvals, withdrawn...)
	}
	*res = RecordResult{Progress: run}
	w.change.Transitions = append(w.change.Transitions, t)
	published := run
	published.Playbook = pb      // watchers get the projection; the cache does not keep it
	published.chainKnown = false // the writer's own bookkeeping
	published.BecameFinal = !oldStatus.Final() && run.Status.Final()
	w.change.Progress = append(w.change.Progress, published)
	w.staged = append(w.staged, run)
	return nil
}

// interruptedReason is the reason recorded on an approval withdrawn by a run_interrupted
// transition (SourceInterrupted).
const interruptedReason = "withdrawn: the job running the run was interrupted"

// progress returns the run's progress columns from the writer's cache, else from its row.
// Errors: ErrNotFound, storage errors.
func (w *writeTx) progress(runID string) (RunProgress, error) {
	if p, ok := w.cache.lookup(runID); ok {
		return p, nil
	}
	w.progressReads++
	p, err := scanProgress(w.queryRow(stmtSelectRunProgress, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return RunProgress{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil {
		return RunProgress{}, fmt.Errorf("store: read run: %w", err)
	}
	p.RunID = runID
	return p, nil
}

// The run-row updates after a transition. SQLite rewrites an index when a column of it is
// in the SET list, so the common case leaves status out.
const (
	updateRunProgressSQL = `UPDATE playbook_runs SET current_node = ?, last_completed_step_index = ?,
	last_deploy_name = ?, last_seq = ?, updated_at = ?, lease_expires_at = ? WHERE run_id = ?`
	updateRunStatusSQL = `UPDATE playbook_runs SET status = ?, completed_at = ?, error_context = ?, current_node = ?,
	last_completed_step_index = ?, last_deploy_name = ?, last_seq = ?, updated_at = ?, lease_expires_at = ?
	WHERE run_id = ?`
)

// validateTransition checks limits and normalises times to UTC.
func validateTransition(t *Transition) error {
	if err := checkText("run_id", t.RunID, true, MaxIDBytes); err != nil {
		return err
	}
	if t.Seq < 1 {
		return fmt.Errorf("%w: seq is %d, must be >= 1", ErrInvalidArgument, t.Seq)
	}
	if t.StepIndex < -1 {
		return fmt.Errorf("%w: step_index is %d, must be >= -1", ErrInvalidArgument, t.StepIndex)
	}
	if t.At.IsZero() {
		return fmt.Errorf("%w: at (transition time) is required", ErrInvalidArgument)
	}
	t.At = t.At.UTC()
	for _, f := range []struct {
		name, v  string
		required bool
		limit    int
	}{
		{"kind", string(t.Kind), true, MaxIDBytes}, {"step_name", t.StepName, false, MaxIDBytes},
		{"step_type", t.StepType, false, MaxIDBytes}, {"last_deploy_name", t.LastDeployName, false, MaxIDBytes},
		{"rollback_for", t.RollbackFor, false, MaxIDBytes}, {"message", t.Message, false, MaxTextBytes},
	} {
		if err := checkText(f.name, f.v, f.required, f.limit); err != nil {
			return err
		}
	}
	if ev := t.Evidence; ev != nil {
		if !ev.Status.valid() {
			return fmt.Errorf("%w: evidence status %q is not PASS, FAIL, TIMED_OUT, SKIPPED or AWAITING_CONFIRMATION",
				ErrInvalidArgument, ev.Status)
		}
		input, sourceInput := "", ""
		if ev.Input != nil {
			input = *ev.Input
		}
		if ev.SourceInput != nil {
			sourceInput = *ev.SourceInput
		}
		for _, f := range []struct {
			name, v string
			limit   int
		}{
			{"evidence step_name", ev.StepName, MaxIDBytes}, {"evidence type", ev.Type, MaxIDBytes},
			{"evidence input", input, MaxTextBytes}, {"evidence source_input", sourceInput, MaxTextBytes},
			{"evidence output", ev.Output, MaxTextBytes},
		} {
			if err := checkText(f.name, f.v, false, f.limit); err != nil {
				return err
			}
		}
		cp := *ev
		cp.At = cp.At.UTC()
		t.Evidence = &cp
	}
	return nil
}

// sameTransition compares every field the caller sends; times compare by their stored text.
// RecordedAt is the store's own and is not compared.
func sameTransition(a, b Transition) bool {
	if a.RunID != b.RunID || a.Seq != b.Seq || a.Kind != b.Kind || a.StepIndex != b.StepIndex ||
		a.StepName != b.StepName || a.StepType != b.StepType || a.RunStatus != b.RunStatus ||
		a.LastDeployName != b.LastDeployName || a.RollbackFor != b.RollbackFor || a.Message != b.Message ||
		formatTime(a.At) != formatTime(b.At) || (a.Evidence == nil) != (b.Evidence == nil) ||
		a.PrevHash != b.PrevHash || a.Hash != b.Hash {
		return false
	}
	if a.Evidence == nil {
		return true
	}
	x, y := a.Evidence, b.Evidence
	return x.StepName == y.StepName && x.Type == y.Type && x.Output == y.Output && x.Status == y.Status &&
		sameText(x.Input, y.Input) && sameText(x.SourceInput, y.SourceInput) && formatTime(x.At) == formatTime(y.At)
}

// sameText compares optional text (nil is JSON null, distinct from "").
func sameText(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// MaxErrorContextMessage caps the message copied into a failed run's error_context (bytes):
// every run row of a ListRuns page carries it, so 500 rows stay far below gRPC's 4 MiB
// (docs/control-plane.md, "Limits"). The whole message stays in the transition.
const MaxErrorContextMessage = 1024

// errorContext is the specification's error_context JSON for a failed run: the failing transition.
func errorContext(t Transition) json.RawMessage {
	ec := struct {
		Seq        int64  `json:"seq"`
		Kind       string `json:"kind"`
		StepIndex  int    `json:"step_index"`
		StepName   string `json:"step_name,omitempty"`
		StepStatus string `json:"step_status,omitempty"`
		Message    string `json:"message,omitempty"`
	}{Seq: t.Seq, Kind: string(t.Kind), StepIndex: t.StepIndex, StepName: t.StepName, Message: truncateText(t.Message, MaxErrorContextMessage)}
	if t.Evidence != nil {
		ec.StepStatus = string(t.Evidence.Status)
	}
	b, _ := json.Marshal(ec) // cannot fail: strings and ints only
	return b
}

// GetRun returns the run and all its transitions in seq order, read from one snapshot.
// Errors: ErrNotFound, storage errors.
func (s *Store) GetRun(ctx context.Context, runID string) (Run, []Transition, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	run, err := scanRun(tx.QueryRowContext(ctx, "SELECT "+runColumns+" FROM playbook_runs WHERE run_id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, nil, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil {
		return Run{}, nil, fmt.Errorf("store: read run: %w", err)
	}
	ts, err := queryTransitions(ctx, tx, runID, 1, -1)
	if err != nil {
		return Run{}, nil, err
	}
	return run, ts, nil
}

// Run returns the run row alone (no transitions). Errors: ErrNotFound, storage errors.
func (s *Store) Run(ctx context.Context, runID string) (Run, error) {
	run, err := scanRun(s.reader.QueryRowContext(ctx, "SELECT "+runColumns+" FROM playbook_runs WHERE run_id = ?", runID))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil {
		return Run{}, fmt.Errorf("store: read run: %w", err)
	}
	return run, nil
}

// Transitions returns up to limit transitions of runID with seq >= fromSeq, in seq order
// (limit <= 0 or over MaxTransitionsPage means MaxTransitionsPage). WatchRun replays with it.
// Errors: ErrNotFound when the run does not exist, storage errors.
func (s *Store) Transitions(ctx context.Context, runID string, fromSeq int64, limit int) ([]Transition, error) {
	if limit <= 0 || limit > MaxTransitionsPage {
		limit = MaxTransitionsPage
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	ts, err := queryTransitions(ctx, tx, runID, fromSeq, limit)
	if err != nil || len(ts) > 0 {
		return ts, err
	}
	var one int
	err = tx.QueryRowContext(ctx, "SELECT 1 FROM playbook_runs WHERE run_id = ?", runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: run %q", ErrNotFound, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read run: %w", err)
	}
	return ts, nil
}

// queryTransitions reads runID's transitions from fromSeq on, at most limit (all when limit
// is negative: SQLite reads LIMIT -1 as no limit, PostgreSQL refuses it, so it is sent as
// the largest int64 in both dialects).
func queryTransitions(ctx context.Context, tx *sql.Tx, runID string, fromSeq int64, limit int) ([]Transition, error) {
	if limit < 0 {
		limit = math.MaxInt64
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+transitionColumns+
		" FROM run_transitions WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?", runID, fromSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("store: read transitions: %w", err)
	}
	defer rows.Close()
	ts := []Transition{}
	for rows.Next() {
		t, err := scanTransition(rows)
		if err != nil {
			return nil, fmt.Errorf("store: read transitions: %w", err)
		}
		ts = append(ts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read transitions: %w", err)
	}
	return ts, nil
}

// ListRuns returns one page of runs, newest first, filtered by status, playbook name, kind,
// repository, starter and start time (RunFilter).
// Paging is by key (started_at, run_id), so pages stay stable while runs are added.
// Errors: ErrInvalidArgument (bad status, or a page token from another listing), storage errors.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	if f.Status != "" && !f.Status.valid() {
		return RunPage{}, fmt.Errorf("%w: status %q is not a run status", ErrInvalidArgument, f.Status)
	}
	if f.Kind != "" && f.Kind != KindRunbook && f.Kind != KindPlaybook {
		return RunPage{}, fmt.Errorf("%w: kind %q is not runbook or playbook", ErrInvalidArgument, f.Kind)
	}
	size := pageSize(f.PageSize)
	scope := "runs\x00" + string(f.Status) + "\x00" + f.PlaybookName
	if f.Kind != "" {
		scope += "\x00kind=" + string(f.Kind) // tokens of listings without a kind stay valid
	}
	var where []string
	var args []any
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if f.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, string(f.Kind))
	}
	if f.PlaybookName != "" {
		where, args = append(where, "playbook_name = ?"), append(args, f.PlaybookName)
	}
	more, moreArgs, moreScope := runFilterWhere(f)
	where, args, scope = append(where, more...), append(args, moreArgs...), scope+moreScope
	if f.PageToken != "" {
		key, err := decodePageToken(f.PageToken, scope)
		if err != nil {
			return RunPage{}, err
		}
		where = append(where, "(started_at < ? OR (started_at = ? AND run_id < ?))")
		args = append(args, key.At, key.At, key.ID)
	}
	q := "SELECT " + runColumns + " FROM playbook_runs"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, run_id DESC LIMIT ?"
	args = append(args, size+1)
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return RunPage{}, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	page := RunPage{Runs: []Run{}}
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return RunPage{}, fmt.Errorf("store: list runs: %w", err)
		}
		page.Runs = append(page.Runs, run)
	}
	if err := rows.Err(); err != nil {
		return RunPage{}, fmt.Errorf("store: list runs: %w", err)
	}
	if len(page.Runs) > size {
		page.Runs = page.Runs[:size]
		last := page.Runs[size-1]
		page.NextPageToken = encodePageToken(scope, pageKey{At: formatTime(last.StartedAt), ID: last.RunID})
	}
	return page, nil
}

// runFilterWhere is ListRuns' WHERE terms, arguments and page-token scope for the filters by
// repository, starter and start time (ListRunsRequest fields 6-9). Each term can use an index
// of migration 0012 or playbook_runs_by_start; the repository expression is spelled exactly
// as the playbook_runs_by_repository index's. A listing without them keeps its old scope, so
// its page tokens stay valid.
func runFilterWhere(f RunFilter) (where []string, args []any, scope string) {
	if f.Repository != "" {
		where = append(where, "lower(coalesce(github_repository, reported_repository)) = ?")
		args = append(args, strings.ToLower(f.Repository))
		scope += "\x00repo=" + strings.ToLower(f.Repository)
	}
	if f.StartedBy != "" {
		where, args = append(where, "started_by = ?"), append(args, f.StartedBy)
		scope += "\x00by=" + f.StartedBy
	}
	if !f.StartedAfter.IsZero() {
		where, args = append(where, "started_at >= ?"), append(args, formatTime(f.StartedAfter))
		scope += "\x00after=" + formatTime(f.StartedAfter)
	}
	if !f.StartedBefore.IsZero() {
		where, args = append(where, "started_at < ?"), append(args, formatTime(f.StartedBefore))
		scope += "\x00before=" + formatTime(f.StartedBefore)
	}
	return where, args, scope
}

// CancelRun gives a non-final run its one final status, cancelled, records who and why, and
// closes its pending approvals as cancelled in the same transaction, so their tokens stop
// working (a cancelled run's gate cannot be decided any more). Errors: ErrNotFound, ErrRunFinal (already final; nothing changes),
// ErrInvalidArgument, ErrClosed, storage errors.
func (s *Store) CancelRun(ctx context.Context, runID, by, reason string, at time.Time) (Run, error) {
	if err := checkText("run_id", runID, true, MaxIDBytes); err != nil {
		return Run{}, err
	}
	if err := checkText("cancelled_by", by, false, MaxIDBytes); err != nil {
		return Run{}, err
	}
	if err := checkText("reason", reason, false, MaxTextBytes); err != nil {
		return Run{}, err
	}
	if at.IsZero() {
		at = s.now()
	}
	var run Run
	err := s.write(ctx, func(w *writeTx) error {
		var err error
		run, err = scanRun(w.queryRow(stmtSelectRun, runID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: run %q", ErrNotFound, runID)
		}
		if err != nil {
			return fmt.Errorf("store: read run: %w", err)
		}
		if run.Status.Final() {
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, runID, run.Status)
		}
		run.Status, run.CurrentNode, run.CompletedAt, run.ActiveNodes = RunCancelled, "", at.UTC(), nil
		run.CancelledBy, run.CancelReason, run.UpdatedAt = by, reason, s.now()
		w.cache.forget(runID)
		if _, err := w.execSQL(`UPDATE playbook_runs SET status = 'cancelled', current_node = NULL, active_nodes = '[]',
			completed_at = ?, cancelled_by = ?, cancel_reason = ?, updated_at = ? WHERE run_id = ?`,
			formatTime(run.CompletedAt), nullString(by), nullString(reason), formatTime(run.UpdatedAt), runID); err != nil {
			return fmt.Errorf("store: cancel run: %w", err)
		}
		closed, err := w.writeApprovals(`UPDATE playbook_approvals SET status = 'cancelled',
			approved_at = ?, approver = ?, reason = ?, decided_by_source = ?
			WHERE run_id = ? AND status = 'pending' RETURNING `+approvalColumns,
			formatTime(at), nullString(by), nullString(reason), SourceCancelRun, runID)
		if err != nil {
			return fmt.Errorf("store: cancel approvals: %w", err)
		}
		w.change.Runs = append(w.change.Runs, run)
		w.change.Approvals = append(w.change.Approvals, closed...)
		return nil
	})
	if err != nil {
		return Run{}, err
	}
	return run, nil
}

func pageSize(n int) int {
	if n <= 0 {
		return DefaultPageSize
	}
	return min(n, MaxPageSize)
}
