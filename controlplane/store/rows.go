package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// timeLayout is RFC 3339 in UTC with a fixed nine-digit fraction. RFC3339Nano drops
// trailing zeros, which breaks text ordering ("…05Z" sorts after "…05.5Z"); a fixed width
// keeps text order equal to time order for keyset paging and deadline comparisons.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// nullString stores "" as NULL (the specification's optional columns).
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func parseTime(column string, s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: column %s holds %q, not an RFC 3339 time", column, s.String)
	}
	return t.UTC(), nil
}

// checkText enforces the byte limits, UTF-8 and the absence of NUL bytes on a request
// field. A NUL byte (U+0000) is refused on both dialects alike: PostgreSQL's TEXT cannot
// store it (SQLSTATE 22021, a storage error), and both databases must give the same answer
// (docs/decisions/store-dialects.md).
func checkText(field, v string, required bool, limit int) error {
	switch {
	case required && v == "":
		return fmt.Errorf("%w: %s is required", ErrInvalidArgument, field)
	case len(v) > limit:
		return fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrInvalidArgument, field, len(v), limit)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	}
	if i := strings.IndexByte(v, 0); i >= 0 {
		return fmt.Errorf("%w: %s holds a NUL byte (U+0000) at byte %d, which cannot be stored", ErrInvalidArgument, field, i)
	}
	return nil
}

// jsonTextProblem reports what in valid JSON text v PostgreSQL's jsonb refuses, which the
// CHECK constraint of a JSON column (docs/decisions/schema-migrations.md) would turn into a storage error: a \u0000
// escape, or a \uD800..\uDFFF escape that is not a high surrogate followed by a low one.
// "" when there is none. v must be valid JSON (backslashes occur only inside strings).
func jsonTextProblem(v []byte) string {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(v) || v[i] != '\\' || v[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(v[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if i+1 < len(v) && v[i+1] != 'u' {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
		case r == 0:
			return `a \u0000 escape (NUL)`
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf(`a \u%04x escape not followed by a low surrogate`, r)
			}
			i += 6
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Sprintf(`a \u%04x escape (a low surrogate without a high one)`, r)
		}
		i += 5
	}
	return ""
}

// checkJSON validates an optional JSON object column; empty means def.
func checkJSON(field string, v json.RawMessage, def string) (string, error) {
	if len(v) == 0 {
		return def, nil
	}
	if len(v) > MaxTextBytes {
		return "", fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrInvalidArgument, field, len(v), MaxTextBytes)
	}
	if !json.Valid(v) {
		return "", fmt.Errorf("%w: %s is not valid JSON", ErrInvalidArgument, field)
	}
	if p := jsonTextProblem(v); p != "" {
		return "", fmt.Errorf("%w: %s holds %s, which cannot be stored", ErrInvalidArgument, field, p)
	}
	return string(v), nil
}

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

const runColumns = `run_id, playbook_name, playbook_hash, current_node, bindings, error_context, status,
	iteration_counts, epic_id, session_id, started_at, completed_at, schema_hash8, total_steps,
	last_completed_step_index, last_deploy_name, started_by, last_seq, updated_at, cancelled_by, cancel_reason,
	kind, owner, owner_id_hash, lease_epoch, lease_seconds, lease_expires_at, active_nodes, ` + githubJobColumns + `, ` + runWorkflowColumns

func scanRun(r rowScanner) (Run, error) {
	var (
		run                                             Run
		currentNode, errorContext, epicID, sessionID    sql.NullString
		completedAt, lastDeploy, startedBy, cancelledBy sql.NullString
		cancelReason, startedAt, updatedAt, leaseExp    sql.NullString
		bindings, iterationCounts, status, kind, active string
		job                                             githubJobScan
		reported                                        workflowScan
	)
	err := r.Scan(append([]any{&run.RunID, &run.PlaybookName, &run.PlaybookHash, &currentNode, &bindings, &errorContext,
		&status, &iterationCounts, &epicID, &sessionID, &startedAt, &completedAt, &run.SchemaHash8,
		&run.TotalSteps, &run.LastCompletedStepIndex, &lastDeploy, &startedBy, &run.LastSeq, &updatedAt,
		&cancelledBy, &cancelReason, &kind, &run.Owner, &run.OwnerIDHash, &run.LeaseEpoch, &run.LeaseSeconds, &leaseExp, &active}, append(job.dests(), reported.dests()...)...)...)
	if err != nil {
		return Run{}, err
	}
	run.GitHub = job.job()
	run.Reported = reported.run()
	run.Kind = RunKind(kind)
	if run.Kind == KindPlaybook {
		list, err := parseActive(active)
		if err != nil {
			return Run{}, err
		}
		run.ActiveNodes = activeNames(list)
	}
	if run.LeaseExpiresAt, err = parseTime("lease_expires_at", leaseExp); err != nil {
		return Run{}, err
	}
	run.CurrentNode = currentNode.String
	run.Bindings = json.RawMessage(bindings)
	if errorContext.Valid {
		run.ErrorContext = json.RawMessage(errorContext.String)
	}
	run.Status = RunStatus(status)
	run.IterationCounts = json.RawMessage(iterationCounts)
	run.EpicID, run.SessionID = epicID.String, sessionID.String
	run.LastDeployName, run.StartedBy = lastDeploy.String, startedBy.String
	run.CancelledBy, run.CancelReason = cancelledBy.String, cancelReason.String
	if run.StartedAt, err = parseTime("started_at", startedAt); err != nil {
		return Run{}, err
	}
	if run.CompletedAt, err = parseTime("completed_at", completedAt); err != nil {
		return Run{}, err
	}
	if run.UpdatedAt, err = parseTime("updated_at", updatedAt); err != nil {
		return Run{}, err
	}
	return run, nil
}

const progressColumns = `status, current_node, last_seq, last_completed_step_index, last_deploy_name, completed_at,
	owner, owner_id_hash, lease_epoch, lease_seconds, lease_expires_at, kind, active_nodes`

func scanProgress(r rowScanner) (RunProgress, error) {
	var (
		p                               RunProgress
		status                          string
		currentNode, lastDeploy, doneAt sql.NullString
		leaseExp                        sql.NullString
		kind, active                    string
	)
	if err := r.Scan(&status, &currentNode, &p.LastSeq, &p.LastCompletedStepIndex, &lastDeploy, &doneAt,
		&p.Owner, &p.OwnerIDHash, &p.LeaseEpoch, &p.LeaseSeconds, &leaseExp, &kind, &active); err != nil {
		return RunProgress{}, err
	}
	if RunKind(kind) == KindPlaybook {
		p.playbook, p.active = true, active
	}
	p.Status, p.CurrentNode, p.LastDeployName = RunStatus(status), currentNode.String, lastDeploy.String
	var err error
	if p.CompletedAt, err = parseTime("completed_at", doneAt); err != nil {
		return RunProgress{}, err
	}
	p.LeaseExpiresAt, err = parseTime("lease_expires_at", leaseExp)
	return p, err
}

const transitionColumns = `run_id, seq, kind, step_index, step_name, step_type, status, input, output,
	evidence_step_name, evidence_type, evidence_at, run_status, last_deploy_name, rollback_for, message, at,
	recorded_at, source_input, prev_hash, hash`

func scanTransition(r rowScanner) (Transition, error) {
	var (
		t                                               Transition
		kind, runStatus                                 string
		status, input, output, evName, evType, evAt, at sql.NullString
		lastDeploy, rollbackFor, recordedAt, srcInput   sql.NullString
		prevHash, hash                                  sql.NullString
	)
	err := r.Scan(&t.RunID, &t.Seq, &kind, &t.StepIndex, &t.StepName, &t.StepType, &status, &input, &output,
		&evName, &evType, &evAt, &runStatus, &lastDeploy, &rollbackFor, &t.Message, &at, &recordedAt, &srcInput,
		&prevHash, &hash)
	if err != nil {
		return Transition{}, err
	}
	t.PrevHash, t.Hash = prevHash.String, hash.String
	t.Kind, t.RunStatus = TransitionKind(kind), ExecStatus(runStatus)
	t.LastDeployName, t.RollbackFor = lastDeploy.String, rollbackFor.String
	if t.At, err = parseTime("at", at); err != nil {
		return Transition{}, err
	}
	if t.RecordedAt, err = parseTime("recorded_at", recordedAt); err != nil {
		return Transition{}, err
	}
	if status.Valid {
		ev := &Evidence{StepName: evName.String, Type: evType.String, Output: output.String, Status: StepStatus(status.String)}
		if input.Valid {
			in := input.String
			ev.Input = &in
		}
		if srcInput.Valid {
			src := srcInput.String
			ev.SourceInput = &src
		}
		if ev.At, err = parseTime("evidence_at", evAt); err != nil {
			return Transition{}, err
		}
		t.Evidence = ev
	}
	return t, nil
}

// transitionArgs are the insert arguments in transitionColumns order; recordedAt is the
// formatted t.RecordedAt (the caller has it already).
func transitionArgs(t Transition, recordedAt string) []any {
	var status, input, srcInput, output, evName, evType, evAt any
	if ev := t.Evidence; ev != nil {
		status, output, evName, evType, evAt = string(ev.Status), ev.Output, ev.StepName, ev.Type, nullTime(ev.At)
		if ev.Input != nil {
			input = *ev.Input
		}
		if ev.SourceInput != nil {
			srcInput = *ev.SourceInput
		}
	}
	return []any{t.RunID, t.Seq, string(t.Kind), t.StepIndex, t.StepName, t.StepType, status, input, output,
		evName, evType, evAt, string(t.RunStatus), nullString(t.LastDeployName), nullString(t.RollbackFor),
		t.Message, formatTime(t.At), recordedAt, srcInput, nullString(t.PrevHash), nullString(t.Hash)}
}

const insertTransitionSQL = "INSERT INTO run_transitions (" + transitionColumns +
	") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// approvalColumns are the columns scanApproval reads, the last one the gate's votes as a JSON
// array of [approver, verdict, reason, at, source, verified, person] in vote order (migrations 0004, 0015):
// the order the votes were stored (rowid), which is the order of the decided gate's approver
// list; "at" is when each request arrived, so concurrent votes may store out of "at" order.
// Used in SELECT … FROM playbook_approvals and in RETURNING clauses of writes to it, whose
// subquery sees the transaction's own votes.
const approvalColumns = `approval_id, run_id, node_id, step_index, token, status, requested_at, approved_at,
	approver, reason, auto_passed, deadline, plan_digest, prompt, decided_by_source, on_fail,
	approvals_required, allowed_approvers, starter_may_approve, policy_rule, person,
	` + votesSQLite + `, ` + approvalWorkflowColumns + `, policy_json, inputs_json, input_values_json,
	rewind_targets_json, redo_from, iteration`

func scanApproval(r rowScanner) (Approval, error) {
	var (
		a                                                       Approval
		status                                                  string
		requestedAt, decidedAt, approver, reason, deadline, src sql.NullString
		autoPassed, starterMay                                  int
		allowed, votes                                          string
		gh                                                      workflowScan
		policy                                                  sql.NullString
		inputs, values, rewind                                  string
	)
	err := r.Scan(append(append([]any{&a.ApprovalID, &a.RunID, &a.NodeID, &a.StepIndex, &a.TokenHash, &status, &requestedAt,
		&decidedAt, &approver, &reason, &autoPassed, &deadline, &a.PlanDigest, &a.Prompt, &src, &a.OnFail,
		&a.ApprovalsRequired, &allowed, &starterMay, &a.PolicyRule, &a.Person, &votes}, gh.dests()...), &policy, &inputs, &values, &rewind, &a.RedoFrom, &a.Iteration)...)
	if err != nil {
		return Approval{}, err
	}
	if policy.Valid {
		a.Policy = &AutoPassDecision{}
		if err := json.Unmarshal([]byte(policy.String), a.Policy); err != nil {
			return Approval{}, fmt.Errorf("store: policy_json of %s: %w", a.ApprovalID, err)
		}
	}
	if inputs != "" {
		if err := json.Unmarshal([]byte(inputs), &a.Inputs); err != nil {
			return Approval{}, fmt.Errorf("store: inputs_json of %s: %w", a.ApprovalID, err)
		}
	}
	if a.InputValues, err = parseInputValues(values); err != nil {
		return Approval{}, fmt.Errorf("store: input_values_json of %s: %w", a.ApprovalID, err)
	}
	if rewind != "" {
		if err := json.Unmarshal([]byte(rewind), &a.RewindTargets); err != nil {
			return Approval{}, fmt.Errorf("store: rewind_targets_json of %s: %w", a.ApprovalID, err)
		}
	}
	a.StarterMayApprove = starterMay == 1
	a.GitHub = gh.run()
	if err := json.Unmarshal([]byte(allowed), &a.AllowedApprovers); err != nil {
		return Approval{}, fmt.Errorf("store: allowed_approvers of %s: %w", a.ApprovalID, err)
	}
	if a.Votes, err = parseVotes(votes); err != nil {
		return Approval{}, fmt.Errorf("store: votes of %s: %w", a.ApprovalID, err)
	}
	a.Status, a.AutoPassed = ApprovalStatus(status), autoPassed == 1
	a.Approver, a.Reason, a.DecidedBySource = approver.String, reason.String, src.String
	if a.RequestedAt, err = parseTime("requested_at", requestedAt); err != nil {
		return Approval{}, err
	}
	if a.DecidedAt, err = parseTime("approved_at", decidedAt); err != nil {
		return Approval{}, err
	}
	if a.Deadline, err = parseTime("deadline", deadline); err != nil {
		return Approval{}, err
	}
	return a, nil
}

// parseVotes reads approvalColumns' votes array.
func parseVotes(text string) ([]Vote, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		return nil, err
	}
	out := make([]Vote, 0, len(rows))
	for _, r := range rows {
		if len(r) != 8 {
			return nil, fmt.Errorf("a vote has %d fields, want 8", len(r))
		}
		var v Vote
		var verdict, at, values string
		var verified int
		for i, dst := range []any{&v.Approver, &verdict, &v.Reason, &at, &v.Source, &verified, &v.Person, &values} {
			if err := json.Unmarshal(r[i], dst); err != nil {
				return nil, err
			}
		}
		var err error
		if v.InputValues, err = parseInputValues(values); err != nil {
			return nil, err
		}
		v.Verdict, v.Verified = ApprovalStatus(verdict), verified == 1
		t, err := parseTime("at", sql.NullString{String: at, Valid: true})
		if err != nil {
			return nil, err
		}
		v.At = t
		out = append(out, v)
	}
	return out, nil
}

// parseInputValues reads an input_values column (migration 0016): "" is none (nil).
func parseInputValues(text string) (map[string]string, error) {
	if text == "" {
		return nil, nil
	}
	var m map[string]string
	err := json.Unmarshal([]byte(text), &m)
	return m, err
}

// inputValuesText is the input_values column text of m: "" for none.
func inputValuesText(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}
