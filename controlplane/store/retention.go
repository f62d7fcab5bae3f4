package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Retention (docs/backup.md, "Retention"): finished runs whose end is older than a configured
// age are deleted in bounded batches, each with every row about it, after their evidence was
// handed to an exporter. What a run owns, and so what a prune deletes, is listed in
// prunedTables; the tables that hold nothing about a run are listed in unprunedTables, and a
// test checks that every table of the schema is in exactly one of the two.

// DefaultPruneBatch is how many runs one PruneRuns call deletes at most when the caller
// gives no limit; MaxPruneBatch caps the limit, so one transaction stays short.
const (
	DefaultPruneBatch = 100
	MaxPruneBatch     = 1000
)

// pgPruneLock is the pg_try_advisory_lock key a PostgreSQL replica holds while it prunes, so
// one replica at a time selects, exports and deletes runs (the others skip that batch).
const pgPruneLock = 7234298712

// finishedRunStatuses is the SQL list of final run statuses (RunStatus.Final).
const finishedRunStatuses = `('failed', 'succeeded', 'cancelled')`

// prunable is the condition, on playbook_runs r, that a run may be pruned: final, ended
// before the cut-off (the first placeholder), no gate waiting, and no outbox work about it
// left (a notification still to deliver, a GitHub verdict or status report still to send).
var prunable = `r.status IN ` + finishedRunStatuses + ` AND r.completed_at IS NOT NULL AND r.completed_at < ?
	AND NOT EXISTS (SELECT 1 FROM playbook_approvals a WHERE a.run_id = r.run_id AND a.status = 'pending')
	AND NOT EXISTS (SELECT 1 FROM notification_events e WHERE e.run_id = r.run_id AND (e.routed_at IS NULL
		OR EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.event_id = e.event_id AND d.delivered_at IS NULL AND d.given_up_at IS NULL)))
	AND NOT EXISTS (SELECT 1 FROM github_protection_rules
		WHERE approval_id IN (SELECT a.approval_id FROM playbook_approvals a WHERE a.run_id = r.run_id) AND ` + ruleHasWork + `)`

// prunedTables are the tables a prune deletes from, children first (the foreign keys of
// migrations 0001-0022 need that order), each with the condition that selects a pruned
// run's rows, where the runs being pruned are those listed in run_prunes.
var prunedTables = []struct{ table, where string }{
	{"approval_votes", `approval_id IN (SELECT a.approval_id FROM playbook_approvals a JOIN run_prunes p ON p.run_id = a.run_id)`},
	{"github_protection_rules", `approval_id IN (SELECT a.approval_id FROM playbook_approvals a JOIN run_prunes p ON p.run_id = a.run_id)`},
	{"slack_messages", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"notification_deliveries", `event_id IN (SELECT e.event_id FROM notification_events e JOIN run_prunes p ON p.run_id = e.run_id)`},
	{"notification_events", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"run_plans", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"attestations", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"run_transitions", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"playbook_approvals", `run_id IN (SELECT run_id FROM run_prunes)`},
	{"playbook_runs", `run_id IN (SELECT run_id FROM run_prunes)`},
}

// unprunedTables are the schema's tables that hold nothing about one run, with the reason:
// a prune leaves them alone.
var unprunedTables = map[string]string{
	"schema_migrations":  "the schema's version",
	"run_prunes":         "empty outside a prune's transaction",
	"github_deliveries":  "webhook delivery ids and their claims, about no run",
	"console_sessions":   "sign-in sessions, about people",
	"slack_interactions": "hashes of Slack requests, swept after the replay window",
	"secret_checks":      "the key-check values of the approval secret, about no run",
}

// RunRecord is what a prune exports of one run before deleting it: the run row, every
// transition in seq order, every approval (with its votes), oldest request first, and the
// run's signed attestations (migration 0022).
type RunRecord struct {
	Run         Run
	Transitions []Transition
	Approvals   []Approval
	// Attestations are the run's (ApprovalID "") and its gates' attestations; none when
	// nothing was signed.
	Attestations []Attestation
}

// PruneCursor is where a pass of PruneRuns calls has got to: the end time and id of the
// last run it considered (the zero value starts at the oldest).
type PruneCursor struct {
	CompletedAt time.Time
	RunID       string
}

// PruneOptions is one PruneRuns call.
type PruneOptions struct {
	// Before: runs that ended before it may be pruned (now minus the retention age).
	Before time.Time
	// Limit is the most runs looked at and deleted (DefaultPruneBatch when 0; at most
	// MaxPruneBatch).
	Limit int
	// After continues a pass: only runs after this one (in end time, then id order).
	After PruneCursor
	// Export, when set, is given each run's record before its delete commits; an error skips
	// that run (it is not deleted, and is tried again by a later pass).
	Export func(ctx context.Context, r RunRecord) error
}

// PruneResult is what one PruneRuns call did.
type PruneResult struct {
	// Pruned lists the runs deleted, oldest end first.
	Pruned []string
	// Skipped lists runs left in place: their export failed, or they changed between the
	// export and the delete (a transition recorded meanwhile).
	Skipped []string
	// ExportErrors are the export failures, one per run in Skipped whose export failed.
	ExportErrors []error
	// Next is where the next call of the same pass starts; More is whether the batch was full
	// (so more runs may be due).
	Next PruneCursor
	More bool
	// Busy: another replica held the prune lock (PostgreSQL); nothing was done.
	Busy bool
}

// pruneCandidate is a run selected for a prune with the row state its export saw.
type pruneCandidate struct {
	runID       string
	lastSeq     int64
	updatedAt   string
	completedAt string
}

// PruneRuns deletes at most opts.Limit finished runs that ended before opts.Before, in one
// transaction, with every row about them (prunedTables): never a run that is not final, has
// a gate waiting or outbox work left (prunable). With opts.Export each run's record is read
// and exported first; the delete then re-checks, for each run, that it is still prunable and
// unchanged since (same last seq and update time), and skips it otherwise. On PostgreSQL the
// call holds an advisory lock so one replica at a time prunes; another replica's call
// returns Busy. Errors: ErrInvalidArgument for a zero Before; ErrReadOnly, ErrClosed; storage
// errors. Export errors are not errors of the call: see PruneResult.Skipped.
func (s *Store) PruneRuns(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	var res PruneResult
	if s.readOnly {
		return res, ErrReadOnly
	}
	if opts.Before.IsZero() {
		return res, fmt.Errorf("%w: prune: no cut-off time", ErrInvalidArgument)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	limit = min(limit, MaxPruneBatch)
	if s.dialect == dialectPostgres {
		conn, err := s.reader.Conn(ctx)
		if err != nil {
			return res, fmt.Errorf("store: prune: %w", err)
		}
		defer conn.Close()
		var got bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", int64(pgPruneLock)).Scan(&got); err != nil {
			return res, fmt.Errorf("store: prune: take the advisory lock: %w", err)
		}
		if !got {
			res.Busy = true
			return res, nil
		}
		defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", int64(pgPruneLock)) //nolint:errcheck // the session ends with the connection's reuse otherwise
	}
	cands, err := s.pruneCandidates(ctx, opts.Before, opts.After, limit)
	if err != nil {
		return res, err
	}
	res.More = len(cands) == limit
	if n := len(cands); n > 0 {
		last := cands[n-1]
		t, err := parseTime("completed_at", sql.NullString{String: last.completedAt, Valid: true})
		if err != nil {
			return res, err
		}
		res.Next = PruneCursor{CompletedAt: t, RunID: last.runID}
	} else {
		res.Next = opts.After
	}
	keep := cands[:0:0]
	for _, c := range cands {
		if opts.Export == nil {
			keep = append(keep, c)
			continue
		}
		rec, err := s.runRecord(ctx, c.runID)
		if err == nil && (rec.Run.LastSeq != c.lastSeq || formatTime(rec.Run.UpdatedAt) != c.updatedAt) {
			c.lastSeq, c.updatedAt = rec.Run.LastSeq, formatTime(rec.Run.UpdatedAt)
		}
		if err == nil {
			err = opts.Export(ctx, rec)
		}
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Skipped = append(res.Skipped, c.runID)
			res.ExportErrors = append(res.ExportErrors, fmt.Errorf("run %s: %w", c.runID, err))
			continue
		}
		keep = append(keep, c)
	}
	if len(keep) == 0 {
		return res, nil
	}
	var pruned []string
	err = s.write(ctx, func(w *writeTx) error {
		pruned = pruned[:0]
		return w.prune(keep, formatTime(opts.Before), &pruned)
	})
	if err != nil {
		return res, err
	}
	res.Pruned = pruned
	done := map[string]bool{}
	for _, id := range pruned {
		done[id] = true
	}
	for _, c := range keep {
		if !done[c.runID] {
			res.Skipped = append(res.Skipped, c.runID)
		}
	}
	return res, nil
}

// pruneCandidates lists at most limit prunable runs that ended before before and come after
// cursor after, oldest end first.
func (s *Store) pruneCandidates(ctx context.Context, before time.Time, after PruneCursor, limit int) ([]pruneCandidate, error) {
	q := `SELECT r.run_id, r.last_seq, r.updated_at, r.completed_at FROM playbook_runs r WHERE ` + prunable
	args := []any{formatTime(before)}
	if !after.CompletedAt.IsZero() {
		q += ` AND (r.completed_at > ? OR (r.completed_at = ? AND r.run_id > ?))`
		at := formatTime(after.CompletedAt)
		args = append(args, at, at, after.RunID)
	}
	q += ` ORDER BY r.completed_at, r.run_id LIMIT ?`
	args = append(args, limit)
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: prune: list runs: %w", err)
	}
	defer rows.Close()
	var out []pruneCandidate
	for rows.Next() {
		var c pruneCandidate
		if err := rows.Scan(&c.runID, &c.lastSeq, &c.updatedAt, &c.completedAt); err != nil {
			return nil, fmt.Errorf("store: prune: list runs: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: prune: list runs: %w", err)
	}
	return out, nil
}

// runRecord reads runID's RunRecord: the run, all its transitions, all its approvals, its
// attestations.
func (s *Store) runRecord(ctx context.Context, runID string) (RunRecord, error) {
	var rec RunRecord
	run, err := s.Run(ctx, runID)
	if err != nil {
		return rec, err
	}
	rec.Run = run
	for from := int64(1); ; {
		page, err := s.Transitions(ctx, runID, from, MaxPageSize)
		if err != nil {
			return rec, err
		}
		rec.Transitions = append(rec.Transitions, page...)
		if len(page) < MaxPageSize {
			break
		}
		from = page[len(page)-1].Seq + 1
	}
	f := ApprovalFilter{RunID: runID, PageSize: MaxPageSize}
	for {
		page, err := s.ListApprovals(ctx, f)
		if err != nil {
			return rec, err
		}
		rec.Approvals = append(rec.Approvals, page.Approvals...)
		if page.NextPageToken == "" {
			break
		}
		f.PageToken = page.NextPageToken
	}
	// ListApprovals is newest first; the record lists them in the order they were requested.
	for i, j := 0, len(rec.Approvals)-1; i < j; i, j = i+1, j-1 {
		rec.Approvals[i], rec.Approvals[j] = rec.Approvals[j], rec.Approvals[i]
	}
	ids := []string{""}
	for _, a := range rec.Approvals {
		ids = append(ids, a.ApprovalID)
	}
	for _, id := range ids {
		a, err := s.GetAttestation(ctx, runID, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return rec, err
		}
		rec.Attestations = append(rec.Attestations, a)
	}
	return rec, nil
}

// prune deletes the candidates that are still prunable and unchanged, and appends their ids
// to pruned. Each run row is locked first (FOR UPDATE on PostgreSQL), so a transition
// another replica records meanwhile either commits first (the run then differs and stays) or
// waits and then finds no run.
func (w *writeTx) prune(cands []pruneCandidate, before string, pruned *[]string) error {
	for _, c := range cands {
		var seq int64
		var updated string
		err := w.readRow(forUpdate(`SELECT last_seq, updated_at FROM playbook_runs WHERE run_id = ?`), c.runID).Scan(&seq, &updated)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (seq != c.lastSeq || updated != c.updatedAt)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: prune: read run %s: %w", c.runID, err)
		}
		if _, err := w.execSQL(`INSERT INTO run_prunes (run_id) SELECT r.run_id FROM playbook_runs r WHERE r.run_id = ? AND `+prunable,
			c.runID, before); err != nil {
			return fmt.Errorf("store: prune: mark run %s: %w", c.runID, err)
		}
	}
	rows, err := w.tx.QueryContext(w.ctx, `SELECT p.run_id FROM run_prunes p JOIN playbook_runs r ON r.run_id = p.run_id
		ORDER BY r.completed_at, r.run_id`)
	if err != nil {
		return fmt.Errorf("store: prune: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("store: prune: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: prune: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	for _, t := range prunedTables {
		if _, err := w.execSQL(`DELETE FROM ` + t.table + ` WHERE ` + t.where); err != nil {
			return fmt.Errorf("store: prune: delete from %s: %w", t.table, err)
		}
	}
	if _, err := w.execSQL(`DELETE FROM run_prunes`); err != nil {
		return fmt.Errorf("store: prune: %w", err)
	}
	for _, id := range ids {
		w.cache.forget(id)
	}
	*pruned = append(*pruned, ids...)
	return nil
}

// OldestRun is the start time of the oldest run kept; ok is false when there is none.
// Retention logs it after a pass. Errors: storage errors.
func (s *Store) OldestRun(ctx context.Context) (started time.Time, ok bool, err error) {
	var at sql.NullString
	if err := s.reader.QueryRowContext(ctx, `SELECT min(started_at) FROM playbook_runs`).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("store: oldest run: %w", err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	t, err := parseTime("started_at", at)
	return t, err == nil, err
}
