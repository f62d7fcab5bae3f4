package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// CreateApproval opens a gate: a pending approval for (run, node), or an approved one when
// the policy auto-passed it. na.PlanDigest must be the run's current playbook_hash (a run
// that resumed with an edited runbook adopts the new digest in StartRun first), else
// ErrPlanDigestMismatch (docs/decisions/approval-tokens.md). There is at most one pending approval per (run, node):
//   - one with the same plan digest is returned as is, created=false (a retried
//     RequestApproval; the caller re-derives the token from the returned row, docs/decisions/approval-tokens.md);
//   - one with another plan digest (the runbook was edited and the run resumed) is closed
//     as cancelled by SourceSuperseded and a new one is created, so the old token stops
//     working (docs/decisions/approval-tokens.md: a token approves only the plan it was
//     issued for).
//
// With na.Fence set, the caller must hold the run's lease (docs/decisions/leases-and-fencing.md; ErrLeaseLost, ErrNotOwner).
// Errors: ErrNotFound (no such run), ErrRunFinal, ErrPlanDigestMismatch, ErrLeaseLost, ErrNotOwner, ErrConflict
// (approval_id or token hash already used), ErrInvalidArgument, ErrClosed, storage errors.
func (s *Store) CreateApproval(ctx context.Context, na NewApproval) (a Approval, created bool, err error) {
	if err := validateNewApproval(na); err != nil {
		return Approval{}, false, err
	}
	if na.RequestedAt.IsZero() {
		na.RequestedAt = s.now()
	}
	if !na.Deadline.IsZero() && !na.Deadline.After(na.RequestedAt) {
		return Approval{}, false, fmt.Errorf("%w: deadline must be after requested_at", ErrInvalidArgument)
	}
	err = s.write(ctx, func(w *writeTx) error {
		if na.Fence != nil {
			p, err := w.progress(na.RunID)
			if err != nil {
				return err
			}
			if err := checkFence(na.RunID, p, *na.Fence); err != nil {
				return err
			}
		}
		var status, runDigest string
		err := w.readRow(forUpdate("SELECT status, playbook_hash FROM playbook_runs WHERE run_id = ?"), na.RunID).Scan(&status, &runDigest)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: run %q", ErrNotFound, na.RunID)
		}
		if err != nil {
			return fmt.Errorf("store: read run: %w", err)
		}
		if RunStatus(status).Final() {
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, na.RunID, status)
		}
		if na.PlanDigest != runDigest {
			return fmt.Errorf("%w: run %q executes another plan digest than the approval's", ErrPlanDigestMismatch, na.RunID)
		}
		open, err := scanApproval(w.readRow(forUpdate("SELECT "+approvalColumns+
			" FROM playbook_approvals WHERE run_id = ? AND node_id = ? AND status = 'pending'"), na.RunID, na.NodeID))
		switch {
		case err == nil && open.PlanDigest == na.PlanDigest:
			a, created = open, false
			return nil
		case err == nil:
			superseded, err := w.writeApprovals(`UPDATE playbook_approvals SET status = 'cancelled',
				approved_at = ?, reason = 'superseded by a new plan digest', decided_by_source = ?
				WHERE approval_id = ? AND status = 'pending' RETURNING `+approvalColumns,
				formatTime(na.RequestedAt), SourceSuperseded, open.ApprovalID)
			if err != nil {
				return fmt.Errorf("store: supersede approval: %w", err)
			}
			w.change.Approvals = append(w.change.Approvals, superseded...)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store: read approval: %w", err)
		default:
			// No open gate: if the last one was decided and the executor never recorded that
			// decision (it died waiting), the decision stands: reopening hands it back
			// instead of asking again and losing it.
			decided, err := scanApproval(w.readRow("SELECT "+approvalColumns+
				" FROM playbook_approvals WHERE run_id = ? AND node_id = ? AND plan_digest = ?"+
				" ORDER BY requested_at DESC LIMIT 1", na.RunID, na.NodeID, na.PlanDigest))
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("store: read approval: %w", err)
			}
			// A gate its deadline closed (rejected, "timed out after …") is no person's
			// decision: a resumed run asks again, as it did for expired gates.
			if err == nil && (decided.Status == ApprovalApproved || decided.Status == ApprovalRejected) &&
				decided.DecidedBySource != SourceDeadline {
				var seen int
				if err := w.readRow(`SELECT COUNT(*) FROM run_transitions WHERE run_id = ? AND kind = ? AND step_name = ?
					AND (recorded_at IS NULL OR recorded_at >= ?)`,
					na.RunID, string(KindGateDecided), na.NodeID, formatTime(decided.RequestedAt)).Scan(&seen); err != nil {
					return fmt.Errorf("store: read transitions: %w", err)
				}
				if seen == 0 {
					a, created = decided, false
					return nil
				}
			}
		}

		initial, decidedAt, approver, reason, source := ApprovalPending, any(nil), any(nil), any(nil), any(nil)
		values := ""
		if na.AutoPassed {
			initial, decidedAt, approver, source = ApprovalApproved, formatTime(na.RequestedAt), SourcePolicy, SourcePolicy
			reason = nullString(na.Reason)
			if values, err = inputValuesText(na.InputValues); err != nil {
				return fmt.Errorf("store: input values: %w", err)
			}
		}
		var policyJSON any
		if na.Policy != nil {
			b, err := json.Marshal(na.Policy)
			if err != nil {
				return fmt.Errorf("store: policy decision: %w", err)
			}
			policyJSON = string(b)
		}
		required := max(na.ApprovalsRequired, 1)
		allowed, err := json.Marshal(append([]string{}, na.AllowedApprovers...))
		if err != nil {
			return fmt.Errorf("store: allowed approvers: %w", err)
		}
		inputs := ""
		if len(na.Inputs) > 0 {
			b, err := json.Marshal(na.Inputs)
			if err != nil {
				return fmt.Errorf("store: inputs: %w", err)
			}
			inputs = string(b)
		}
		rewind := ""
		if len(na.RewindTargets) > 0 {
			b, err := json.Marshal(na.RewindTargets)
			if err != nil {
				return fmt.Errorf("store: rewind targets: %w", err)
			}
			rewind = string(b)
		}
		// Each opening after a push-back from this node is the next iteration
		// (docs/push-back.md, "What the run does").
		var sentBack int
		if err := w.readRow(`SELECT COUNT(*) FROM playbook_approvals WHERE run_id = ? AND node_id = ? AND redo_from <> ''`,
			na.RunID, na.NodeID).Scan(&sentBack); err != nil {
			return fmt.Errorf("store: count push-backs: %w", err)
		}
		rows, err := w.writeApprovals(`INSERT INTO playbook_approvals
			(approval_id, run_id, node_id, step_index, token, status, requested_at, approved_at, approver, reason,
			 auto_passed, deadline, plan_digest, prompt, decided_by_source, on_fail,
			 approvals_required, allowed_approvers, starter_may_approve, policy_rule, `+approvalWorkflowColumns+`, policy_json, inputs_json, input_values_json,
			 rewind_targets_json, iteration)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+approvalColumns,
			append(append([]any{na.ApprovalID, na.RunID, na.NodeID, na.StepIndex, na.TokenHash, string(initial), formatTime(na.RequestedAt),
				decidedAt, approver, reason, boolInt(na.AutoPassed), nullTime(na.Deadline), na.PlanDigest, na.Prompt, source,
				na.OnFail, required, string(allowed), boolInt(na.StarterMayApprove), na.PolicyRule}, workflowArgs(na.GitHub)...), policyJSON, inputs, values, rewind, sentBack+1)...)
		if isUniqueViolation(err) {
			return fmt.Errorf("%w: approval id or token already used", ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: insert approval: %w", err)
		}
		a, created = rows[0], true
		w.change.Approvals = append(w.change.Approvals, a)
		return nil
	})
	if err != nil {
		return Approval{}, false, err
	}
	return a, created, nil
}

func validateNewApproval(na NewApproval) error {
	if err := validateWorkflowRun(na.GitHub); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v  string
		required bool
		limit    int
	}{
		{"approval_id", na.ApprovalID, true, MaxIDBytes}, {"run_id", na.RunID, true, MaxIDBytes},
		{"node_id", na.NodeID, true, MaxIDBytes}, {"plan_digest", na.PlanDigest, false, MaxIDBytes},
		{"prompt", na.Prompt, false, MaxTextBytes}, {"reason", na.Reason, false, MaxTextBytes},
	} {
		if err := checkText(f.name, f.v, f.required, f.limit); err != nil {
			return err
		}
	}
	if p := na.Policy; p != nil {
		for _, f := range []struct {
			name, v  string
			required bool
			limit    int
		}{{"policy rule", p.Rule, false, MaxIDBytes}, {"policy action", p.Action, true, MaxIDBytes}, {"policy reason", p.Reason, false, MaxTextBytes}} {
			if err := checkText(f.name, f.v, f.required, f.limit); err != nil {
				return err
			}
		}
		if p.AutoPassed != na.AutoPassed || (p.AutoPassed && p.Shadow) {
			return fmt.Errorf("%w: policy auto_passed must equal auto_passed, and a shadow decision never auto-passes", ErrInvalidArgument)
		}
	}
	if !isTokenHash(na.TokenHash) {
		return fmt.Errorf("%w: token_hash must be 64 lowercase hex characters (SHA-256)", ErrInvalidArgument)
	}
	if na.ApprovalsRequired < 0 || na.ApprovalsRequired > MaxApprovalsRequired {
		return fmt.Errorf("%w: approvals_required is %d, must be 1..%d", ErrInvalidArgument, na.ApprovalsRequired, MaxApprovalsRequired)
	}
	if len(na.AllowedApprovers) > 100 {
		return fmt.Errorf("%w: %d allowed approvers, over the limit of 100", ErrInvalidArgument, len(na.AllowedApprovers))
	}
	for _, a := range na.AllowedApprovers {
		if err := checkText("allowed approver", a, true, MaxIDBytes); err != nil {
			return err
		}
	}
	if err := checkText("policy_rule", na.PolicyRule, false, MaxTextBytes); err != nil {
		return err
	}
	if na.StepIndex < -1 {
		return fmt.Errorf("%w: step_index is %d, must be >= -1", ErrInvalidArgument, na.StepIndex)
	}
	switch na.OnFail {
	case "", "halt", "rollback", "continue":
	default:
		return fmt.Errorf("%w: on_fail %q is not halt, rollback or continue", ErrInvalidArgument, truncateText(na.OnFail, 40))
	}
	if e := gateinputs.Check(na.Inputs); e != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, e)
	}
	if len(na.RewindTargets) > MaxRewindTargets {
		return fmt.Errorf("%w: %d rewind targets, over the limit of %d", ErrInvalidArgument, len(na.RewindTargets), MaxRewindTargets)
	}
	for _, t := range na.RewindTargets {
		if err := checkText("rewind target", t, true, MaxIDBytes); err != nil {
			return err
		}
	}
	return nil
}

// truncateText shortens s to at most n bytes for an error message, on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func isTokenHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// DecideApproval decides a pending approval in one transaction with a compare-and-set
// (UPDATE … WHERE approval_id = ? AND status = 'pending'), so of any number of concurrent
// decisions exactly one wins (docs/decisions/confirm-gates.md).
//
// An approve or reject is a vote (docs/approvals.md, "Gate policy"): d.Authorize (when set) sees the gate and
// the run's starter and may refuse it, then the vote is added to approval_votes. An approve
// by an identity that already approved, or by its person (d.Person) through another identity,
// adds nothing and returns the gate as it stands, no error (docs/people.md, "Counting"); a
// reject by it replaces its approve vote (one vote per identity). The gate becomes approved
// when its approving people (Approval.ApprovedPeople) reach approvals_required (approver =
// the approving identities joined with ", " in vote order, person = their people, reason =
// this vote's);
// until then it stays pending and the returned row shows the tally. A reject rejects at once.
// Approve and reject at or after the deadline do not decide: the gate is closed as timed out
// (status rejected, decided_by_source "deadline", see ExpireDueApprovals) in the same
// transaction and the call returns ErrExpired. An approve of a gate issued for another plan
// digest than the run's current one (docs/decisions/approval-tokens.md) closes the gate as superseded and returns
// ErrPlanDigestMismatch. On ErrAlreadyDecided, ErrExpired, ErrPlanDigestMismatch and an
// Authorize refusal the returned Approval is the current row, so the caller can say why.
// Errors: ErrNotFound, ErrAlreadyDecided, ErrExpired, ErrPlanDigestMismatch, Authorize's
// errors, ErrInvalidArgument, ErrClosed, storage errors.
func (s *Store) DecideApproval(ctx context.Context, d Decision) (Approval, error) {
	switch d.Verdict {
	case ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled:
	default:
		return Approval{}, fmt.Errorf("%w: verdict %q is not approved, rejected, expired or cancelled", ErrInvalidArgument, d.Verdict)
	}
	for _, f := range []struct {
		name, v  string
		required bool
		limit    int
	}{
		{"approval_id", d.ApprovalID, true, MaxIDBytes}, {"approver", d.Approver, false, MaxIDBytes},
		{"source", d.Source, false, MaxIDBytes}, {"reason", d.Reason, false, MaxTextBytes},
		{"person", d.Person, false, MaxIDBytes},
	} {
		if err := checkText(f.name, f.v, f.required, f.limit); err != nil {
			return Approval{}, err
		}
	}
	if d.At.IsZero() {
		d.At = s.now()
	}
	at := formatTime(d.At)
	vote := d.Verdict == ApprovalApproved || d.Verdict == ApprovalRejected
	var (
		result  Approval
		outcome error // returned to the caller even though the transaction commits
	)
	err := s.write(ctx, func(w *writeTx) error {
		result, outcome = Approval{}, nil // the writer may run fn twice (see runBatch)
		// Lock the row first, then read it with its votes in a second statement: on
		// PostgreSQL (READ COMMITTED) a statement that waited for another replica's lock sees
		// that replica's row but not, in a subquery, the vote it inserted, so an M-of-N gate
		// voted on through two replicas at once would miss a vote and stay pending (docs/decisions/write-conflicts.md).
		var locked string
		err := w.readRow(forUpdate("SELECT approval_id FROM playbook_approvals WHERE approval_id = ?"), d.ApprovalID).Scan(&locked)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: approval %q", ErrNotFound, d.ApprovalID)
		}
		if err != nil {
			return fmt.Errorf("store: lock approval: %w", err)
		}
		current, err := scanApproval(w.readRow(
			"SELECT "+approvalColumns+" FROM playbook_approvals WHERE approval_id = ?", d.ApprovalID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: approval %q", ErrNotFound, d.ApprovalID)
		}
		if err != nil {
			return fmt.Errorf("store: read approval: %w", err)
		}
		if current.Status != ApprovalPending {
			result, outcome = current, ErrAlreadyDecided
			return nil
		}
		approver, reason, person, decidedValues := d.Approver, d.Reason, personName(d.Person, d.Approver), ""
		redoFrom := ""
		if vote && d.Verdict == ApprovalRejected {
			redoFrom = d.RedoFrom
		}
		if vote {
			if !current.Deadline.IsZero() && !current.Deadline.After(d.At) {
				// The deadline had passed: close the gate now.
				expired, err := expireApprovals(w, "approval_id = ?", d.ApprovalID)
				if err != nil {
					return err
				}
				if len(expired) != 1 {
					return fmt.Errorf("store: approval %q is pending but could not be closed", d.ApprovalID)
				}
				result, outcome = expired[0], ErrExpired
				w.change.Approvals = append(w.change.Approvals, expired...)
				return nil
			}
			if d.Verdict == ApprovalApproved {
				var runDigest string
				if err := w.readRow("SELECT playbook_hash FROM playbook_runs WHERE run_id = ?", current.RunID).Scan(&runDigest); err != nil {
					return fmt.Errorf("store: read run: %w", err)
				}
				if runDigest != current.PlanDigest {
					// The run moved on to another plan: this gate can never be approved.
					closed, err := w.writeApprovals(`UPDATE playbook_approvals SET status = 'cancelled', approved_at = ?,
						approver = 'system', reason = 'superseded: the run executes another plan digest', decided_by_source = ?
						WHERE approval_id = ? AND status = 'pending' RETURNING `+approvalColumns, at, SourceSuperseded, d.ApprovalID)
					if err != nil {
						return fmt.Errorf("store: supersede approval: %w", err)
					}
					if len(closed) != 1 {
						return fmt.Errorf("store: approval %q is pending but could not be closed", d.ApprovalID)
					}
					result, outcome = closed[0], ErrPlanDigestMismatch
					w.change.Approvals = append(w.change.Approvals, closed...)
					return nil
				}
			}
			if d.Authorize != nil {
				starter, err := w.runStarter(current.RunID)
				if err != nil {
					return err
				}
				if err := d.Authorize(current, starter); err != nil {
					result, outcome = current, err
					return nil
				}
			}
			if d.RedoFrom != "" {
				// Checked here, in the transaction that records the vote, so a push-back to a
				// node the gate does not list decides nothing (docs/push-back.md).
				if e := checkRedoFrom(current, d); e != nil {
					result, outcome = current, e
					return nil
				}
			}
			var values map[string]string
			if d.Verdict == ApprovalApproved && (len(current.Inputs) > 0 || len(d.InputValues) > 0) {
				// The form is checked here, in the transaction that records the vote, so an
				// invalid value decides nothing (docs/approver-inputs.md).
				v, e := gateinputs.Validate(current.Inputs, d.InputValues)
				if e != nil {
					result, outcome = current, fmt.Errorf("%w: %w", ErrInvalidArgument, e)
					return nil
				}
				values = v
			}
			valuesText, err := inputValuesText(values)
			if err != nil {
				return fmt.Errorf("store: input values: %w", err)
			}
			approvedBy, people := current.ApprovedBy(), current.ApprovedPeople()
			if d.Verdict == ApprovalApproved &&
				(slices.Contains(approvedBy, d.Approver) || slices.Contains(people, personKey(d.Person, d.Approver))) {
				result = current // a second approval by the same identity or person counts once
				return nil
			}
			// An identity has one vote per gate: a reject after its own approve replaces that
			// vote (the person changed their mind; a reject by an allowed approver rejects).
			if _, err := w.execSQL(`INSERT INTO approval_votes (approval_id, approver, verdict, reason, at, source, verified, person, input_values)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (approval_id, approver) DO UPDATE SET verdict = excluded.verdict,
				reason = excluded.reason, at = excluded.at, source = excluded.source, verified = excluded.verified,
				person = excluded.person, input_values = excluded.input_values`, d.ApprovalID, d.Approver, string(d.Verdict), d.Reason, at, d.Source,
				boolInt(d.Verified), d.Person, valuesText); err != nil {
				return fmt.Errorf("store: insert vote: %w", err)
			}
			if d.Verdict == ApprovalApproved {
				approvedBy = append(approvedBy, d.Approver)
				if len(people)+1 < max(current.ApprovalsRequired, 1) {
					tally, err := scanApproval(w.readRow(
						"SELECT "+approvalColumns+" FROM playbook_approvals WHERE approval_id = ?", d.ApprovalID))
					if err != nil {
						return fmt.Errorf("store: read approval: %w", err)
					}
					result = tally
					w.change.Approvals = append(w.change.Approvals, tally) // watchers see the tally
					return nil
				}
				approver = strings.Join(approvedBy, ", ")
				names := make([]string, 0, len(current.Votes)+1)
				for _, v := range append(current.Votes, Vote{Approver: d.Approver, Verdict: ApprovalApproved, Person: d.Person}) {
					if n := personName(v.Person, v.Approver); v.Verdict == ApprovalApproved && !slices.Contains(names, n) {
						names = append(names, n)
					}
				}
				person = strings.Join(names, ", ")
				decidedValues = valuesText
			}
		} else {
			person = "" // expired and cancelled gates are decided by no person
		}
		won, err := w.writeApprovals(`UPDATE playbook_approvals
			SET status = ?, approved_at = ?, approver = ?, reason = ?, decided_by_source = ?, person = ?, input_values_json = ?, redo_from = ?
			WHERE approval_id = ? AND status = 'pending' RETURNING `+approvalColumns,
			string(d.Verdict), at, nullString(approver), nullString(reason), nullString(d.Source), person, decidedValues, redoFrom, d.ApprovalID)
		if err != nil {
			return fmt.Errorf("store: decide approval: %w", err)
		}
		if len(won) != 1 {
			return fmt.Errorf("store: approval %q is pending but could not be decided", d.ApprovalID)
		}
		result = won[0]
		w.change.Approvals = append(w.change.Approvals, result)
		return nil
	})
	if err != nil {
		return Approval{}, err
	}
	return result, outcome
}

// checkRedoFrom refuses a Decision's RedoFrom the gate does not allow (docs/push-back.md):
// an approve with one, a gate with no rewind targets, a node it does not list. The error
// wraps ErrInvalidArgument and names the redo_from field and the allowed targets.
func checkRedoFrom(a Approval, d Decision) error {
	switch {
	case d.Verdict != ApprovalRejected:
		return fmt.Errorf("%w: redo_from: only a rejection sends a run back; approve without it", ErrInvalidArgument)
	case len(a.RewindTargets) == 0:
		return fmt.Errorf("%w: redo_from: gate %q declares no rewind targets, so it cannot send the run back; reject without redo_from, or add rewind_targets to the approval node", ErrInvalidArgument, a.NodeID)
	case !slices.Contains(a.RewindTargets, d.RedoFrom):
		return fmt.Errorf("%w: redo_from: %q is not a rewind target of gate %q; the allowed targets are %s", ErrInvalidArgument,
			truncateText(d.RedoFrom, MaxIDBytes), a.NodeID, strings.Join(a.RewindTargets, ", "))
	}
	return nil
}

// personName is how a vote's person is written in Approval.Person: the person id, else the
// identity (an identity with no person is its own person).
func personName(person, identity string) string {
	if person != "" {
		return person
	}
	return identity
}

// runStarter reads who started a run, for Decision.Authorize (docs/approvals.md, "Gate policy"): started_by
// and the GitHub actor of the OIDC job that started it (migration 0005; "" without one).
func (w *writeTx) runStarter(runID string) (RunStarter, error) {
	var startedBy, actor sql.NullString
	err := w.readRow("SELECT started_by, github_actor FROM playbook_runs WHERE run_id = ?", runID).Scan(&startedBy, &actor)
	if err != nil {
		return RunStarter{}, fmt.Errorf("store: read run: %w", err)
	}
	return RunStarter{StartedBy: startedBy.String, GitHubActor: actor.String}, nil
}

// ExpireDueApprovals closes every pending approval whose deadline is at or before now and
// returns them: status rejected, approver "system", reason "timed out after <deadline minus
// requested_at, whole seconds>" (e.g. "timed out after 5m0s"), decided_by_source "deadline",
// decided at its deadline; their tokens stop working (docs/approvals.md, "Gates decided from CI": an expired gate is
// decided rejected, never left pending). The server calls it when NextDeadline
// comes due. Errors: ErrClosed, storage errors.
func (s *Store) ExpireDueApprovals(ctx context.Context, now time.Time) ([]Approval, error) {
	var out []Approval
	err := s.write(ctx, func(w *writeTx) error {
		var err error
		out, err = expireApprovals(w, "deadline IS NOT NULL AND deadline <= ?", formatTime(now))
		w.change.Approvals = append(w.change.Approvals, out...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TimedOutReason is the reason of a gate closed by its deadline: "timed out after " and the
// time it was open, deadline minus requested_at rounded up to whole seconds ("5m0s").
func TimedOutReason(requestedAt, deadline time.Time) string {
	open := deadline.Sub(requestedAt)
	if r := open.Truncate(time.Second); r != open {
		open = r + time.Second
	}
	return "timed out after " + open.String()
}

func expireApprovals(w *writeTx, cond string, args ...any) ([]Approval, error) {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT approval_id, requested_at, deadline FROM playbook_approvals
		WHERE status = 'pending' AND `+cond, args...)
	if err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	type due struct {
		id                 string
		requested, expires time.Time
	}
	var list []due
	for rows.Next() {
		var id string
		var req, dl sql.NullString
		if err := rows.Scan(&id, &req, &dl); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: expire approvals: %w", err)
		}
		r, err1 := parseTime("requested_at", req)
		d, err2 := parseTime("deadline", dl)
		if err := errors.Join(err1, err2); err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, due{id, r, d})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: expire approvals: %w", err)
	}
	var out []Approval
	for _, d := range list {
		closed, err := w.writeApprovals(`UPDATE playbook_approvals
			SET status = 'rejected', approved_at = deadline, approver = 'system', reason = ?, decided_by_source = '`+SourceDeadline+`'
			WHERE approval_id = ? AND status = 'pending' RETURNING `+approvalColumns, TimedOutReason(d.requested, d.expires), d.id)
		if err != nil {
			return nil, fmt.Errorf("store: expire approvals: %w", err)
		}
		out = append(out, closed...)
	}
	return out, nil
}

// NextDeadline reports the earliest deadline among pending approvals (ok=false when none),
// so the server can sleep until then instead of polling. Errors: storage errors.
func (s *Store) NextDeadline(ctx context.Context) (deadline time.Time, ok bool, err error) {
	var v sql.NullString
	err = s.reader.QueryRowContext(ctx,
		"SELECT min(deadline) FROM playbook_approvals WHERE status = 'pending' AND deadline IS NOT NULL").Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: next deadline: %w", err)
	}
	deadline, err = parseTime("deadline", v)
	return deadline, v.Valid, err
}

// GetApproval returns one approval. Errors: ErrNotFound, storage errors.
func (s *Store) GetApproval(ctx context.Context, approvalID string) (Approval, error) {
	return s.getApproval(ctx, "approval_id", approvalID)
}

// GetApprovalByTokenHash returns the approval whose token hashes to tokenHash
// (approval.TokenHash). Errors: ErrNotFound (the specification's E_APPROVAL_NOT_FOUND), storage errors.
func (s *Store) GetApprovalByTokenHash(ctx context.Context, tokenHash string) (Approval, error) {
	return s.getApproval(ctx, "token", tokenHash)
}

func (s *Store) getApproval(ctx context.Context, column, v string) (Approval, error) {
	a, err := scanApproval(s.reader.QueryRowContext(ctx,
		"SELECT "+approvalColumns+" FROM playbook_approvals WHERE "+column+" = ?", v))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("store: read approval: %w", err)
	}
	return a, nil
}

// ListApprovals returns one page of approvals, newest first, filtered by status and run.
// Errors: ErrInvalidArgument (bad status, or a page token from another listing), storage errors.
func (s *Store) ListApprovals(ctx context.Context, f ApprovalFilter) (ApprovalPage, error) {
	if f.Status != "" && !f.Status.valid() {
		return ApprovalPage{}, fmt.Errorf("%w: status %q is not an approval status", ErrInvalidArgument, f.Status)
	}
	size := pageSize(f.PageSize)
	scope := "approvals\x00" + string(f.Status) + "\x00" + f.RunID
	var where []string
	var args []any
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	if f.RunID != "" {
		where, args = append(where, "run_id = ?"), append(args, f.RunID)
	}
	if f.PageToken != "" {
		key, err := decodePageToken(f.PageToken, scope)
		if err != nil {
			return ApprovalPage{}, err
		}
		where = append(where, "(requested_at < ? OR (requested_at = ? AND approval_id < ?))")
		args = append(args, key.At, key.At, key.ID)
	}
	q := "SELECT " + approvalColumns + " FROM playbook_approvals"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY requested_at DESC, approval_id DESC LIMIT ?"
	args = append(args, size+1)
	list, err := queryApprovals(ctx, s.reader, q, args...)
	if err != nil {
		return ApprovalPage{}, fmt.Errorf("store: list approvals: %w", err)
	}
	page := ApprovalPage{Approvals: list}
	if len(list) > size {
		page.Approvals = list[:size]
		last := list[size-1]
		page.NextPageToken = encodePageToken(scope, pageKey{At: formatTime(last.RequestedAt), ID: last.ApprovalID})
	}
	return page, nil
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryApprovals(ctx context.Context, q querier, query string, args ...any) ([]Approval, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
