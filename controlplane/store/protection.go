package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ProtectionRule is a GitHub custom deployment protection rule request (docs/approvals.md, "Approve in GitHub";
// migration 0008): one deployment, keyed by ID, of a workflow run
// and environment, bound to the rbook gate of that run and environment, with what the
// control plane owes GitHub for it (a status report, then one verdict).
type ProtectionRule struct {
	// ID is "repository/run_id/environment/deployment_id" (set by RequestProtectionRule): the
	// callback URL names the workflow run only, shared by its environments and attempts.
	ID             string
	CallbackURL    string
	DeploymentID   int64
	InstallationID int64
	// Repository is "owner/name"; RunID the workflow run id in decimal.
	Repository, RunID, Environment string
	RequestedAt                    time.Time
	// RunAttempt is the workflow run's attempt ("1", "2", …) learned from GitHub
	// (migration 0009); "" until learned, and an unlearned rule binds no gate.
	RunAttempt string
	// ApprovalID is the bound gate, "" while no gate of the run, attempt and environment exists.
	ApprovalID string
	BoundAt    time.Time
	// ReportState is ReportDue, ReportSent or ReportAbandoned.
	ReportState string
	// VerdictState is "approved" or "rejected" once the gate was decided, else "".
	VerdictState, VerdictComment string
	VerdictAt, VerdictSentAt     time.Time
	// Attempts counts failed deliveries since the last success; NextAttemptAt is when the
	// delivery loop tries again (zero: now); LastError is the last failure's text.
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	// GivenUpAt is when the delivery loop stopped trying (zero: it has not), GivenUpReason why
	// (GiveUpProtectionRule; migration 0009). A given-up rule is never due again.
	GivenUpAt     time.Time
	GivenUpReason string
}

// Status report states of a ProtectionRule.
const (
	ReportDue       = "due"
	ReportSent      = "sent"
	ReportAbandoned = "abandoned"
)

// MaxProtectionRuleError caps the stored text of a failed delivery (bytes).
const MaxProtectionRuleError = 1024

const protectionRuleColumns = `rule_id, callback_url, deployment_id, installation_id, repository, run_id, environment, requested_at,
	approval_id, bound_at, report_state, verdict_state, verdict_comment, verdict_at, verdict_sent_at,
	attempts, next_attempt_at, last_error, run_attempt, given_up_at, given_up_reason`

func scanProtectionRule(row rowScanner) (ProtectionRule, error) {
	var r ProtectionRule
	var req, approvalID, bound, state, comment, vat, vsent, next, lastErr, attempt, gaveUp, gaveUpReason sql.NullString
	if err := row.Scan(&r.ID, &r.CallbackURL, &r.DeploymentID, &r.InstallationID, &r.Repository, &r.RunID, &r.Environment, &req,
		&approvalID, &bound, &r.ReportState, &state, &comment, &vat, &vsent, &r.Attempts, &next, &lastErr, &attempt, &gaveUp, &gaveUpReason); err != nil {
		return ProtectionRule{}, err
	}
	var errs []error
	for _, t := range []struct {
		dst  *time.Time
		name string
		v    sql.NullString
	}{{&r.RequestedAt, "requested_at", req}, {&r.BoundAt, "bound_at", bound}, {&r.VerdictAt, "verdict_at", vat},
		{&r.VerdictSentAt, "verdict_sent_at", vsent}, {&r.NextAttemptAt, "next_attempt_at", next}, {&r.GivenUpAt, "given_up_at", gaveUp}} {
		v, err := parseTime(t.name, t.v)
		*t.dst = v
		errs = append(errs, err)
	}
	r.RunAttempt, r.GivenUpReason = attempt.String, gaveUpReason.String
	r.ApprovalID, r.VerdictState, r.VerdictComment, r.LastError = approvalID.String, state.String, comment.String, lastErr.String
	return r, errors.Join(errs...)
}

// RequestProtectionRule records a deployment_protection_rule "requested" delivery. The rule
// stays unbound until its workflow run attempt is known (SetProtectionRuleAttempt: the
// payload does not carry it), unless r.RunAttempt is given, when it binds at once as
// SetProtectionRuleAttempt does. A second request for the same deployment (a redelivery)
// changes nothing and returns the row as it stands. Errors: ErrInvalidArgument (empty or
// over-long fields, installation id ≤ 0), ErrReadOnly, ErrClosed, storage errors.
func (s *Store) RequestProtectionRule(ctx context.Context, r ProtectionRule) (ProtectionRule, error) {
	for _, f := range []struct{ name, v string }{{"callback_url", r.CallbackURL}, {"repository", r.Repository},
		{"run_id", r.RunID}, {"environment", r.Environment}} {
		if f.v == "" || len(f.v) > MaxWorkflowRunField*2 {
			return ProtectionRule{}, fmt.Errorf("%w: protection rule %s of %d bytes: need 1..%d", ErrInvalidArgument, f.name, len(f.v), MaxWorkflowRunField*2)
		}
	}
	if r.InstallationID <= 0 {
		return ProtectionRule{}, fmt.Errorf("%w: protection rule installation id %d: must be positive", ErrInvalidArgument, r.InstallationID)
	}
	at := r.RequestedAt
	if at.IsZero() {
		at = s.now()
	}
	id := fmt.Sprintf("%s/%s/%s/%d", r.Repository, r.RunID, r.Environment, r.DeploymentID)
	var out ProtectionRule
	err := s.write(ctx, func(w *writeTx) error {
		if _, err := w.execSQL(`INSERT INTO github_protection_rules (rule_id, callback_url, deployment_id, installation_id,
			repository, run_id, environment, requested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (rule_id) DO NOTHING`,
			id, r.CallbackURL, r.DeploymentID, r.InstallationID, r.Repository, r.RunID, r.Environment, formatTime(at)); err != nil {
			return fmt.Errorf("store: insert protection rule: %w", err)
		}
		if r.RunAttempt != "" {
			if err := w.setRuleAttempt(id, r.RunAttempt, at); err != nil {
				return err
			}
		}
		var err error
		out, err = w.protectionRule(id)
		return err
	})
	if err != nil {
		return ProtectionRule{}, err
	}
	return out, nil
}

// MaxRunAttemptBytes caps a learned run attempt (decimal digits of a positive int).
const MaxRunAttemptBytes = 10

// SetProtectionRuleAttempt records the workflow run attempt GitHub reported for rule ruleID
// (ghapp.App.RunAttempt; migration 0009) and binds the rule to the gate of its repository,
// run, attempt and environment when one was opened: the pending one, else the latest
// decided one (whose verdict is then due at once; the quick-approval pause case). A gate of
// another attempt is never bound: a re-run's deployment waits for its own gate. A rule whose
// attempt is already known changes nothing. Errors: ErrInvalidArgument (attempt not a
// positive decimal), ErrReadOnly, ErrClosed, storage errors.
func (s *Store) SetProtectionRuleAttempt(ctx context.Context, ruleID, attempt string) (ProtectionRule, error) {
	var out ProtectionRule
	err := s.write(ctx, func(w *writeTx) error {
		if err := w.setRuleAttempt(ruleID, attempt, s.now()); err != nil {
			return err
		}
		var err error
		out, err = w.protectionRule(ruleID)
		return err
	})
	if err != nil {
		return ProtectionRule{}, err
	}
	return out, nil
}

// protectionRule reads rule ruleID inside the write transaction. Errors: ErrNotFound,
// storage errors.
func (w *writeTx) protectionRule(ruleID string) (ProtectionRule, error) {
	return readProtectionRule(w.readRow(selectProtectionRule, ruleID))
}

const selectProtectionRule = `SELECT ` + protectionRuleColumns + ` FROM github_protection_rules WHERE rule_id = ?`

// readProtectionRule scans the row of selectProtectionRule. Errors: ErrNotFound, storage errors.
func readProtectionRule(row rowScanner) (ProtectionRule, error) {
	r, err := scanProtectionRule(row)
	if errors.Is(err, sql.ErrNoRows) {
		return ProtectionRule{}, ErrNotFound
	}
	if err != nil {
		return ProtectionRule{}, fmt.Errorf("store: read protection rule: %w", err)
	}
	return r, nil
}

func (w *writeTx) setRuleAttempt(ruleID, attempt string, at time.Time) error {
	if n, err := strconv.Atoi(attempt); err != nil || n < 1 || len(attempt) > MaxRunAttemptBytes || strconv.Itoa(n) != attempt {
		return fmt.Errorf("%w: protection rule run attempt %q: want a positive decimal", ErrInvalidArgument, attempt)
	}
	res, err := w.execSQL(`UPDATE github_protection_rules SET run_attempt = ?, attempts = 0, next_attempt_at = NULL, last_error = NULL
		WHERE rule_id = ? AND run_attempt IS NULL`, attempt, ruleID)
	if err != nil {
		return fmt.Errorf("store: set protection rule attempt: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	var repo, runID, env string
	if err := w.readRow(`SELECT repository, run_id, environment FROM github_protection_rules WHERE rule_id = ?`, ruleID).Scan(&repo, &runID, &env); err != nil {
		return fmt.Errorf("store: read protection rule: %w", err)
	}
	gate, err := scanApproval(w.readRow(`SELECT `+approvalColumns+` FROM playbook_approvals
		WHERE github_repository = ? AND github_run_id = ? AND github_environment = ? AND `+gateAttempt+` = ?
		AND COALESCE(decided_by_source, '') <> '`+SourceSuperseded+`'
		ORDER BY status = 'pending' DESC, requested_at DESC, approval_id DESC LIMIT 1`, repo, runID, env, attempt))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("store: read approval: %w", err)
	}
	return w.bindRules(gate, at, "rule_id = ?", ruleID)
}

// gateAttempt is a gate's workflow run attempt in SQL: a gate opened without one (an executor
// that did not report GITHUB_RUN_ATTEMPT) counts as attempt 1.
const gateAttempt = `COALESCE(NULLIF(github_run_attempt, ''), '1')`

// bindRules binds the unbound rules matching cond to gate and, when gate is decided,
// queues their verdict.
func (w *writeTx) bindRules(gate Approval, at time.Time, cond string, args ...any) error {
	if _, err := w.execSQL(`UPDATE github_protection_rules SET approval_id = ?, bound_at = ?, next_attempt_at = NULL
		WHERE approval_id IS NULL AND `+cond, append([]any{gate.ApprovalID, formatTime(at)}, args...)...); err != nil {
		return fmt.Errorf("store: bind protection rule: %w", err)
	}
	if gate.Status != ApprovalPending {
		return w.queueVerdicts(gate, at)
	}
	return nil
}

// queueVerdicts writes the verdict of decided gate a on every rule bound to it that has none.
func (w *writeTx) queueVerdicts(a Approval, at time.Time) error {
	state, comment := ProtectionVerdict(a)
	if _, err := w.execSQL(`UPDATE github_protection_rules SET verdict_state = ?, verdict_comment = ?, verdict_at = ?,
		next_attempt_at = NULL, attempts = 0 WHERE approval_id = ? AND verdict_state IS NULL`,
		state, comment, formatTime(at), a.ApprovalID); err != nil {
		return fmt.Errorf("store: queue protection rule verdict: %w", err)
	}
	return nil
}

// protectionHook runs in the transaction of every write, after the request changed its
// approvals (docs/approvals.md, "Approve in GitHub": "stored first, delivered after"): a gate opened with a GitHub
// workflow run and environment binds that run's unbound rules of the same attempt (a rule
// whose attempt is not learned yet binds later, in SetProtectionRuleAttempt); a decided gate (any channel:
// Approve/Reject, terminal, policy auto-pass, a GitHub review, the deadline, a withdrawal,
// the run's end) queues its verdict on the rules bound to it, in the same transaction as
// the decision; a superseded gate hands its rules back unbound, so the gate that replaces it
// (opened in the same request) binds them. at is the store's clock (bound_at, verdict_at).
func (w *writeTx) protectionHook(at time.Time) error {
	if len(w.change.Approvals) == 0 {
		return nil
	}
	for _, a := range w.change.Approvals {
		if a.Status != ApprovalPending && a.DecidedBySource == SourceSuperseded {
			if _, err := w.execSQL(`UPDATE github_protection_rules SET approval_id = NULL, bound_at = NULL
				WHERE approval_id = ? AND verdict_state IS NULL`, a.ApprovalID); err != nil {
				return fmt.Errorf("store: unbind protection rule: %w", err)
			}
			continue
		}
		if a.GitHub != nil && a.GitHub.Environment != "" && a.GitHub.RunID != "" {
			attempt := a.GitHub.RunAttempt
			if attempt == "" {
				attempt = "1"
			}
			if err := w.bindRules(a, at, "repository = ? AND run_id = ? AND environment = ? AND run_attempt = ?",
				a.GitHub.Repository, a.GitHub.RunID, a.GitHub.Environment, attempt); err != nil {
				return err
			}
		}
		if a.Status != ApprovalPending {
			if err := w.queueVerdicts(a, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProtectionVerdict is the protection rule verdict of decided gate a (docs/approvals.md, "Approve in GitHub"):
// "approved" with "approved by X in rbook: reason" for an approved gate; "rejected" with
// "rejected by X in rbook: reason" for a rejected one, "timed out after … in rbook: …" for a
// gate its deadline closed, and "closed in rbook: reason" for a withdrawn or cancelled one.
// The comment is not cut here; the App client cuts it to GitHub's 1024 characters.
func ProtectionVerdict(a Approval) (state, comment string) {
	by := a.Approver
	if by == "" {
		by = "unknown"
	}
	suffix := ""
	if a.Reason != "" {
		suffix = ": " + a.Reason
	}
	gate := fmt.Sprintf(" (gate %s of run %s, approval %s)", a.NodeID, a.RunID, a.ApprovalID)
	switch {
	case a.Status == ApprovalApproved:
		return "approved", "approved by " + by + " in rbook" + suffix + gate
	case a.DecidedBySource == SourceDeadline || a.Status == ApprovalExpired:
		reason := a.Reason
		if !strings.HasPrefix(reason, "timed out after ") {
			reason = TimedOutReason(a.RequestedAt, a.Deadline)
		}
		return "rejected", reason + ": nobody decided rbook" + gate + " before its deadline"
	case a.Status == ApprovalRejected:
		return "rejected", "rejected by " + by + " in rbook" + suffix + gate
	}
	return "rejected", "closed in rbook" + suffix + gate
}

// ruleHasWork is the condition of a rule the delivery loop still has to act on: bound, with a
// status report or a verdict not yet sent, or unbound with its run attempt not yet learned;
// and not given up.
const ruleHasWork = `((approval_id IS NOT NULL AND verdict_sent_at IS NULL AND (report_state = 'due' OR verdict_state IS NOT NULL))
	OR (approval_id IS NULL AND run_attempt IS NULL)) AND given_up_at IS NULL`

// queryProtectionRules runs a SELECT of protectionRuleColumns and scans every row; what names
// the query in errors.
func (s *Store) queryProtectionRules(ctx context.Context, what, query string, args ...any) ([]ProtectionRule, error) {
	return queryRows(ctx, s, what, query, scanProtectionRule, args...)
}

// DueProtectionRules lists up to limit rules whose run attempt is still to be learned, or
// bound rules with a status report or a verdict to deliver, whose next attempt is at or before now, oldest first (the delivery loop's outbox).
func (s *Store) DueProtectionRules(ctx context.Context, now time.Time, limit int) ([]ProtectionRule, error) {
	return s.queryProtectionRules(ctx, "due protection rules", `SELECT `+protectionRuleColumns+` FROM github_protection_rules
		WHERE `+ruleHasWork+` AND (next_attempt_at IS NULL OR next_attempt_at <= ?) ORDER BY requested_at, rule_id LIMIT ?`,
		formatTime(now), limit)
}

// NextProtectionRuleAttempt is the earliest next_attempt_at of a rule waiting for a retry
// (ok=false when none is).
func (s *Store) NextProtectionRuleAttempt(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullString
	err := s.reader.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM github_protection_rules WHERE `+ruleHasWork).Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: next protection rule attempt: %w", err)
	}
	t, err := parseTime("next_attempt_at", v)
	return t, v.Valid, err
}

// GetProtectionRule returns the rule ruleID (ProtectionRule.ID). Errors: ErrNotFound, storage errors.
func (s *Store) GetProtectionRule(ctx context.Context, ruleID string) (ProtectionRule, error) {
	return readProtectionRule(s.reader.QueryRowContext(ctx, selectProtectionRule, ruleID))
}

// ListProtectionRules returns the rules of a repository and workflow run, oldest first.
func (s *Store) ListProtectionRules(ctx context.Context, repository, runID string) ([]ProtectionRule, error) {
	return s.queryProtectionRules(ctx, "list protection rules", `SELECT `+protectionRuleColumns+` FROM github_protection_rules
		WHERE repository = ? AND run_id = ? ORDER BY requested_at, rule_id`, repository, runID)
}

// MarkProtectionRuleReported records the status report of rule ruleID as sent (state
// ReportSent) or given up (ReportAbandoned: it failed and the verdict is ready, which
// matters more), and clears the back-off.
func (s *Store) MarkProtectionRuleReported(ctx context.Context, ruleID, state string) error {
	if state != ReportSent && state != ReportAbandoned {
		return fmt.Errorf("%w: report state %q", ErrInvalidArgument, state)
	}
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE github_protection_rules SET report_state = ?, attempts = 0, next_attempt_at = NULL,
			last_error = NULL WHERE rule_id = ? AND report_state = 'due'`, state, ruleID)
		return err
	})
}

// MarkProtectionRuleVerdictSent records that GitHub accepted the verdict of rule ruleID.
// Only a rule with a queued verdict changes; a second call changes nothing.
func (s *Store) MarkProtectionRuleVerdictSent(ctx context.Context, ruleID string, at time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE github_protection_rules SET verdict_sent_at = ?, attempts = 0, next_attempt_at = NULL,
			last_error = NULL WHERE rule_id = ? AND verdict_state IS NOT NULL AND verdict_sent_at IS NULL`, formatTime(at), ruleID)
		return err
	})
}

// ProtectionRuleAttemptFailed records a failed delivery of rule ruleID: attempts + 1, the
// error (cut to MaxProtectionRuleError bytes) and when to try again.
func (s *Store) ProtectionRuleAttemptFailed(ctx context.Context, ruleID, errText string, next time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE github_protection_rules SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
			WHERE rule_id = ? AND verdict_sent_at IS NULL`, formatTime(next), diagnosticText(errText, MaxProtectionRuleError), ruleID)
		return err
	})
}

// GiveUpProtectionRule stops the delivery loop trying rule ruleID: given_up_at = at, the
// reason (cut to MaxProtectionRuleError bytes) kept; a rule whose verdict GitHub already has
// changes nothing. The gate's decision in rbook is untouched.
func (s *Store) GiveUpProtectionRule(ctx context.Context, ruleID, reason string, at time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE github_protection_rules SET given_up_at = ?, given_up_reason = ?, next_attempt_at = NULL
			WHERE rule_id = ? AND verdict_sent_at IS NULL AND given_up_at IS NULL`, formatTime(at), diagnosticText(reason, MaxProtectionRuleError), ruleID)
		return err
	})
}

// PendingGitHubGates lists the pending gates opened with repository, workflow run, attempt
// and environment (migration 0007's index), oldest first: those a deployment_review of that
// run attempt and environment decides (docs/approvals.md, "Approve in GitHub"). attempt "" matches every attempt; a
// gate opened without one counts as attempt 1 (gateAttempt), so a review of a re-run never
// decides a gate an earlier attempt left pending (a re-run must not inherit an earlier
// attempt's verdict).
func (s *Store) PendingGitHubGates(ctx context.Context, repository, runID, attempt, environment string) ([]Approval, error) {
	list, err := queryApprovals(ctx, s.reader, `SELECT `+approvalColumns+` FROM playbook_approvals
		WHERE github_repository = ? AND github_run_id = ? AND github_environment = ? AND status = 'pending'
		AND (? = '' OR `+gateAttempt+` = ?)
		ORDER BY requested_at, approval_id`, repository, runID, environment, attempt, attempt)
	if err != nil {
		return nil, fmt.Errorf("store: pending github gates: %w", err)
	}
	return list, nil
}

// GitHubRunTrace is what the store holds of one GitHub workflow run and environment, for
// telling a deployment_review that rbook has not caught up with (its gate is not open yet)
// from one that concerns no rbook gate at all (GitHubTrace).
type GitHubRunTrace struct {
	// Gates are the gates bound to the run and environment, of every attempt and status.
	Gates []Approval
	// WaitingRules is how many deployment_protection_rule requests of the run and
	// environment still wait for a verdict (none yet, not given up).
	WaitingRules int
	// OpenRuns is how many rbook runs that are not final reported this workflow run and
	// environment when they started (their gates may still open).
	OpenRuns int
}

// GitHubTrace returns what the store holds of workflow run runID of repository in
// environment ("" means every environment).
func (s *Store) GitHubTrace(ctx context.Context, repository, runID, environment string) (GitHubRunTrace, error) {
	var t GitHubRunTrace
	gates, err := queryApprovals(ctx, s.reader, `SELECT `+approvalColumns+` FROM playbook_approvals
		WHERE github_repository = ? AND github_run_id = ? AND (? = '' OR github_environment = ?)
		ORDER BY requested_at, approval_id`, repository, runID, environment, environment)
	if err != nil {
		return t, fmt.Errorf("store: github gates of a workflow run: %w", err)
	}
	t.Gates = gates
	if err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM github_protection_rules
		WHERE repository = ? AND run_id = ? AND (? = '' OR environment = ?) AND verdict_state IS NULL AND given_up_at IS NULL`,
		repository, runID, environment, environment).Scan(&t.WaitingRules); err != nil {
		return t, fmt.Errorf("store: protection rules of a workflow run: %w", err)
	}
	if err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM playbook_runs
		WHERE reported_repository = ? AND reported_run_id = ? AND (? = '' OR reported_environment = ?)
		AND status IN ('`+string(RunRunning)+`', '`+string(RunPaused)+`')`, repository, runID, environment, environment).Scan(&t.OpenRuns); err != nil {
		return t, fmt.Errorf("store: rbook runs of a workflow run: %w", err)
	}
	return t, nil
}

// diagnosticText is s made storable in both dialects and cut to at most n bytes (plus "…"),
// for texts the control plane itself keeps about a failed delivery (an HTTP error, a
// reason): invalid UTF-8 and NUL bytes, which PostgreSQL's TEXT refuses (SQLSTATE 22021, so
// the attempt and its back-off would not be recorded), become U+FFFD (docs/decisions/store-dialects.md: the same
// answer from both databases).
func diagnosticText(s string, n int) string {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	return truncateText(s, n)
}
