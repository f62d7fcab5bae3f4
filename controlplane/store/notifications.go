package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The notification outbox (migration 0014; docs/notifications.md). While it is enabled
// (EnableNotificationOutbox), every write that opens, votes on or closes a gate, or ends a
// run, writes the events it reports into notification_events in its own transaction: a
// change that rolls back reports nothing, a change that commits is reported even if the
// process dies before delivering it. The control plane's delivery loop then routes each
// event to its channels (RouteNotificationEvent: one delivery row per channel) and delivers
// each row at least once, claimed so that one replica sends it (ClaimNotificationDelivery).

// Notification event kinds (NotificationEvent.Kind; the "type" of a webhook body).
const (
	EventGateOpened    = "gate.opened"
	EventVoteCast      = "vote.cast"
	EventGateDecided   = "gate.decided"
	EventGateExpired   = "gate.expired"
	EventGateWithdrawn = "gate.withdrawn"
	EventRunFinished   = "run.finished"
	EventRunFailed     = "run.failed"
	EventRunCancelled  = "run.cancelled"
)

// EventKinds lists every notification event kind, in the order of a gate's and run's life.
var EventKinds = []string{EventGateOpened, EventVoteCast, EventGateDecided, EventGateExpired, EventGateWithdrawn,
	EventRunFinished, EventRunFailed, EventRunCancelled}

// EventData is the JSON payload of a notification event as stored (the "data" of a webhook
// body): the run it concerns with what routes match on, and the gate or the run's outcome.
type EventData struct {
	RunID string `json:"run_id"`
	// Runbook is the run's runbook or playbook name.
	Runbook string `json:"runbook"`
	// Repository ("owner/name") and Environment are the GitHub workflow run's, "" when none
	// was reported.
	Repository  string `json:"repository,omitempty"`
	Environment string `json:"environment,omitempty"`
	// StartedBy is the run's starter (the requester who is told of the decision).
	StartedBy string `json:"started_by,omitempty"`
	// GitHubActor is the login of the workflow's actor when a GitHub Actions job started the
	// run (the verified OIDC claim kept with the run; its started_by is then
	// "oidc:<repository>@<ref>"), "" otherwise: the person who started it, so the requester
	// is mailed as github:<actor> when started_by reaches nobody.
	GitHubActor string    `json:"github_actor,omitempty"`
	Gate        *GateData `json:"gate,omitempty"`
	// Status is the run's final status for run events ("succeeded", "failed", "cancelled").
	Status string `json:"status,omitempty"`
}

// GateData is a gate as an event reports it.
type GateData struct {
	ApprovalID string `json:"approval_id"`
	Node       string `json:"node"`
	// Status is pending, approved, rejected, expired or cancelled.
	Status string `json:"status"`
	Prompt string `json:"prompt,omitempty"`
	// Deadline is RFC 3339 UTC, "" when the gate has none.
	Deadline string `json:"deadline,omitempty"`
	// ApprovalsRequired is the M of M-of-N (at least 1); Approvals how many distinct
	// people approved it (docs/people.md, "Counting").
	ApprovalsRequired int `json:"approvals_required"`
	Approvals         int `json:"approvals"`
	// Vote is the vote a vote.cast event reports.
	Vote *VoteData `json:"vote,omitempty"`
	// Escalation is the step a gate.escalated event reports.
	Escalation *EscalationData `json:"escalation,omitempty"`
	// DecidedBy, Channel and Reason say who closed the gate, through which channel ("rpc",
	// "github", "deadline", …) and why; empty while it is pending.
	DecidedBy string `json:"decided_by,omitempty"`
	Channel   string `json:"channel,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// ApprovalURL is the gate's page on the console. The store leaves it empty; the
	// control plane fills it from its public URL when it sends the event.
	ApprovalURL string `json:"approval_url,omitempty"`
}

// VoteData is one vote of a vote.cast event.
type VoteData struct {
	Approver string `json:"approver"`
	Verdict  string `json:"verdict"`
	Channel  string `json:"channel,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// NotificationEvent is one row of the outbox: ID is stable ("<kind>:<approval id>" for a
// gate, "vote.cast:<approval id>:<n>" for its n-th vote, "<kind>:<run id>" for a run), so
// the same change reported twice is one event, and receivers de-duplicate on it.
type NotificationEvent struct {
	ID, Kind, RunID, ApprovalID string
	Data                        EventData
	CreatedAt                   time.Time
}

// notifyOutbox is whether writes record notification events (EnableNotificationOutbox).
func (s *Store) notifyOutbox() bool { return s.notifications.Load() }

// EnableNotificationOutbox makes every later write record the notification events it
// reports (the control plane calls it when notifications are configured: without a
// consumer the outbox would only grow). With several replicas on one database, every
// replica that writes should enable it, or the events of its writes are not recorded.
func (s *Store) EnableNotificationOutbox() { s.notifications.Store(true) }

// notificationHook runs in the transaction of every write, after the request changed what
// it changed (as protectionHook does): it records the events of the gates and runs in the
// change. It costs nothing unless the outbox is enabled and the change holds a gate or a
// final run, so recording transitions stays as fast as without it.
func (w *writeTx) notificationHook(at time.Time) error {
	var events []NotificationEvent
	runs := map[string]EventData{}
	runData := func(runID string) (EventData, error) {
		if d, ok := runs[runID]; ok {
			return d, nil
		}
		d := EventData{RunID: runID}
		err := w.readRow(`SELECT playbook_name, COALESCE(started_by, ''), COALESCE(github_actor, ''),
			COALESCE(github_repository, reported_repository, ''), COALESCE(reported_environment, '')
			FROM playbook_runs WHERE run_id = ?`, runID).
			Scan(&d.Runbook, &d.StartedBy, &d.GitHubActor, &d.Repository, &d.Environment)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return d, fmt.Errorf("store: read run for notification: %w", err)
		}
		runs[runID] = d
		return d, nil
	}
	for _, a := range w.change.Approvals {
		kind, id := gateEvent(a)
		d, err := runData(a.RunID)
		if err != nil {
			return err
		}
		if a.GitHub != nil {
			d.Repository = a.GitHub.Repository
			if a.GitHub.Environment != "" {
				d.Environment = a.GitHub.Environment
			}
		}
		d.Gate = gateData(a, kind)
		events = append(events, NotificationEvent{ID: id, Kind: kind, RunID: a.RunID, ApprovalID: a.ApprovalID, Data: d})
	}
	final := func(runID string, status RunStatus) error {
		kind := runEvent(status)
		if kind == "" {
			return nil
		}
		d, err := runData(runID)
		if err != nil {
			return err
		}
		d.Status = string(status)
		events = append(events, NotificationEvent{ID: kind + ":" + runID, Kind: kind, RunID: runID, Data: d})
		return nil
	}
	for _, p := range w.change.Progress {
		if err := final(p.RunID, p.Status); err != nil {
			return err
		}
	}
	for _, r := range w.change.Runs {
		if err := final(r.RunID, r.Status); err != nil {
			return err
		}
	}
	for _, e := range events {
		payload, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("store: encode notification event: %w", err)
		}
		if _, err := w.execSQL(`INSERT INTO notification_events (event_id, kind, run_id, approval_id, payload, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING`,
			e.ID, e.Kind, e.RunID, e.ApprovalID, string(payload), formatTime(at)); err != nil {
			return fmt.Errorf("store: record notification event: %w", err)
		}
	}
	return nil
}

// Notifies reports whether change c holds anything the notification outbox records: a
// gate, a run row, or a transition that ended a run (the delivery loop wakes on these).
func (c *Change) Notifies() bool {
	if len(c.Approvals) > 0 || len(c.Runs) > 0 {
		return true
	}
	for _, p := range c.Progress {
		if runEvent(p.Status) != "" {
			return true
		}
	}
	return false
}

// gateEvent is the event kind and id that gate a, as a change left it, reports.
func gateEvent(a Approval) (kind, id string) {
	switch {
	case a.Status == ApprovalPending && len(a.Votes) == 0:
		return EventGateOpened, EventGateOpened + ":" + a.ApprovalID
	case a.Status == ApprovalPending:
		return EventVoteCast, EventVoteCast + ":" + a.ApprovalID + ":" + strconv.Itoa(len(a.Votes))
	case a.Status == ApprovalExpired || a.DecidedBySource == SourceDeadline:
		kind = EventGateExpired
	case a.Status == ApprovalApproved || a.Status == ApprovalRejected:
		kind = EventGateDecided
	default:
		kind = EventGateWithdrawn
	}
	return kind, kind + ":" + a.ApprovalID
}

// runEvent is the event kind of a run reaching status, "" for a status that is not final.
func runEvent(status RunStatus) string {
	switch status {
	case RunSucceeded:
		return EventRunFinished
	case RunFailed:
		return EventRunFailed
	case RunCancelled:
		return EventRunCancelled
	}
	return ""
}

func gateData(a Approval, kind string) *GateData {
	g := &GateData{ApprovalID: a.ApprovalID, Node: a.NodeID, Status: string(a.Status), Prompt: a.Prompt,
		ApprovalsRequired: max(a.ApprovalsRequired, 1), Approvals: len(a.ApprovedPeople())}
	if !a.Deadline.IsZero() {
		g.Deadline = a.Deadline.UTC().Format(time.RFC3339)
	}
	if kind == EventVoteCast {
		v := a.Votes[len(a.Votes)-1]
		g.Vote = &VoteData{Approver: v.Approver, Verdict: string(v.Verdict), Channel: v.Source, Reason: v.Reason}
	}
	if a.Status != ApprovalPending {
		g.DecidedBy, g.Channel, g.Reason = a.Approver, a.DecidedBySource, a.Reason
	}
	return g
}

// eventColumns are the columns scanEvent reads, of notification_events aliased e.
const eventColumns = `e.event_id, e.kind, e.run_id, e.approval_id, e.payload, e.created_at`

// scanEvent scans eventColumns, then extra.
func scanEvent(row rowScanner, extra ...any) (NotificationEvent, error) {
	var e NotificationEvent
	var payload string
	var created sql.NullString
	if err := row.Scan(append([]any{&e.ID, &e.Kind, &e.RunID, &e.ApprovalID, &payload, &created}, extra...)...); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(payload), &e.Data); err != nil {
		return e, fmt.Errorf("store: notification event %s: payload: %w", e.ID, err)
	}
	var err error
	e.CreatedAt, err = parseTime("notification_events.created_at", created)
	return e, err
}

// queryRows runs a read query and scans every row with scan; what names the query in
// errors.
func queryRows[T any](ctx context.Context, s *Store, what, query string, scan func(row rowScanner) (T, error), args ...any) ([]T, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// UnroutedNotificationEvents lists up to limit events whose deliveries are not written yet,
// oldest first.
func (s *Store) UnroutedNotificationEvents(ctx context.Context, limit int) ([]NotificationEvent, error) {
	return queryRows(ctx, s, "unrouted notification events", `SELECT `+eventColumns+`
		FROM notification_events e WHERE e.routed_at IS NULL ORDER BY e.created_at, e.event_id LIMIT ?`,
		func(row rowScanner) (NotificationEvent, error) { return scanEvent(row) }, limit)
}

// RouteNotificationEvent writes one delivery of event eventID per channel and marks the
// event routed, in one transaction; channels that already have a delivery of it (another
// replica routed it at the same time) keep theirs. No channels marks it routed with none.
// Errors: ErrReadOnly, ErrClosed, storage errors.
func (s *Store) RouteNotificationEvent(ctx context.Context, eventID string, channels []string) error {
	return s.write(ctx, func(w *writeTx) error {
		now := formatTime(s.now())
		if err := w.insertDeliveries(eventID, channels, now); err != nil {
			return err
		}
		if _, err := w.execSQL(`UPDATE notification_events SET routed_at = ? WHERE event_id = ? AND routed_at IS NULL`, now, eventID); err != nil {
			return fmt.Errorf("store: route notification event: %w", err)
		}
		return nil
	})
}

// NotificationDelivery is one (event, channel) row of the outbox and where it stands.
type NotificationDelivery struct {
	Event   NotificationEvent
	Channel string
	// Attempts counts failed attempts; NextAttemptAt is when the loop tries again (zero:
	// now); LastError is the last failure's text.
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	// DeliveredAt is when the channel accepted it; GivenUpAt when the loop stopped trying,
	// GivenUpReason why. At most one of them is set.
	DeliveredAt, GivenUpAt time.Time
	GivenUpReason          string
	// ProviderMessageID is what the channel returned for the message ("" when nothing).
	ProviderMessageID string
}

// State is "delivered", "given_up" or "pending".
func (d NotificationDelivery) State() string {
	switch {
	case !d.DeliveredAt.IsZero():
		return "delivered"
	case !d.GivenUpAt.IsZero():
		return "given_up"
	}
	return "pending"
}

// deliveryWaiting is the condition of a delivery the loop still has to send.
const deliveryWaiting = `d.delivered_at IS NULL AND d.given_up_at IS NULL`

const deliveryColumns = eventColumns + `, d.channel, d.attempts,
	d.next_attempt_at, d.last_error, d.delivered_at, d.given_up_at, d.given_up_reason, d.provider_message_id`

func (s *Store) queryDeliveries(ctx context.Context, what, where string, args ...any) ([]NotificationDelivery, error) {
	return queryRows(ctx, s, what, `SELECT `+deliveryColumns+` FROM notification_deliveries d
		JOIN notification_events e ON e.event_id = d.event_id WHERE `+where, scanDelivery, args...)
}

func scanDelivery(row rowScanner) (NotificationDelivery, error) {
	var d NotificationDelivery
	var next, lastErr, delivered, gaveUp, reason sql.NullString
	var err error
	d.Event, err = scanEvent(row, &d.Channel, &d.Attempts, &next, &lastErr, &delivered, &gaveUp, &reason, &d.ProviderMessageID)
	if err != nil {
		return d, err
	}
	d.LastError, d.GivenUpReason = lastErr.String, reason.String
	var errs []error
	for _, t := range []struct {
		dst  *time.Time
		name string
		v    sql.NullString
	}{{&d.NextAttemptAt, "next_attempt_at", next}, {&d.DeliveredAt, "delivered_at", delivered}, {&d.GivenUpAt, "given_up_at", gaveUp}} {
		v, err := parseTime("notification_deliveries."+t.name, t.v)
		*t.dst = v
		errs = append(errs, err)
	}
	return d, errors.Join(errs...)
}

// DueNotificationDeliveries lists up to limit deliveries to channel still to send whose
// next attempt is at or before now, oldest event first (the delivery loop's work for one
// channel).
func (s *Store) DueNotificationDeliveries(ctx context.Context, now time.Time, channel string, limit int) ([]NotificationDelivery, error) {
	return s.queryDeliveries(ctx, "due notification deliveries", deliveryWaiting+
		` AND d.channel = ? AND (d.next_attempt_at IS NULL OR d.next_attempt_at <= ?) ORDER BY e.created_at, e.event_id LIMIT ?`,
		channel, formatTime(now), limit)
}

// GiveUpOtherChannels gives up, with reason, every delivery still to send to a channel not
// in channels (one removed from the configuration since it was routed), and reports how
// many. Errors: ErrReadOnly, ErrClosed, storage errors.
func (s *Store) GiveUpOtherChannels(ctx context.Context, channels []string, reason string) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *writeTx) error {
		args := []any{formatTime(s.now()), reason, reason}
		cond := "1 = 1"
		if len(channels) > 0 {
			cond = "channel NOT IN (?" + strings.Repeat(", ?", len(channels)-1) + ")"
			for _, c := range channels {
				args = append(args, c)
			}
		}
		res, err := w.execSQL(`UPDATE notification_deliveries SET given_up_at = ?, given_up_reason = ?, last_error = ?,
			next_attempt_at = NULL WHERE delivered_at IS NULL AND given_up_at IS NULL AND `+cond, args...)
		if err != nil {
			return fmt.Errorf("store: give up notifications of removed channels: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil { // fn may still run after a cancelled write: read nothing it sets
		return 0, err
	}
	return n, nil
}

// NotificationDeliveryFilter selects ListNotificationDeliveries results; zero fields do not
// filter.
type NotificationDeliveryFilter struct {
	RunID, ApprovalID string
	// State is "pending", "delivered" or "given_up".
	State string
	// Limit defaults to DefaultPageSize and is clamped to MaxPageSize.
	Limit int
}

// ListNotificationDeliveries lists deliveries, oldest event first: where each notification
// stands (what an operator reads to see a given-up delivery and why). Errors:
// ErrInvalidArgument for an unknown state, storage errors.
func (s *Store) ListNotificationDeliveries(ctx context.Context, f NotificationDeliveryFilter) ([]NotificationDelivery, error) {
	state := "1 = 1"
	switch f.State {
	case "":
	case "pending":
		state = deliveryWaiting
	case "delivered":
		state = "d.delivered_at IS NOT NULL"
	case "given_up":
		state = "d.given_up_at IS NOT NULL"
	default:
		return nil, fmt.Errorf("%w: notification delivery state %q: want pending, delivered or given_up", ErrInvalidArgument, f.State)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	return s.queryDeliveries(ctx, "list notification deliveries", state+
		` AND (? = '' OR e.run_id = ?) AND (? = '' OR e.approval_id = ?) ORDER BY e.created_at, e.event_id, d.channel LIMIT ?`,
		f.RunID, f.RunID, f.ApprovalID, f.ApprovalID, limit)
}

// NextNotificationAttempt is the earliest next attempt of a delivery waiting for a retry
// (ok=false when none is).
func (s *Store) NextNotificationAttempt(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullString
	err := s.reader.QueryRowContext(ctx, `SELECT min(d.next_attempt_at) FROM notification_deliveries d WHERE `+deliveryWaiting).Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: next notification attempt: %w", err)
	}
	t, err := parseTime("next_attempt_at", v)
	return t, v.Valid, err
}

// ClaimNotificationDelivery takes the delivery of eventID to channel for one attempt, with a
// lease that ends at until (the pattern of ClaimProtectionRule): it succeeds only when the
// delivery is still to send and no attempt is scheduled after now, and moves its next
// attempt to until, so no other replica lists it meanwhile. It returns the delivery's
// attempts so far as the claim read them. Recording the outcome (NotificationDelivered,
// NotificationAttemptFailed, GiveUpNotification) ends the claim; a replica that dies holding
// it leaves the delivery to the others once the lease has passed. Errors: ErrInvalidArgument
// for an until not after now; ErrReadOnly, ErrClosed; storage errors.
func (s *Store) ClaimNotificationDelivery(ctx context.Context, eventID, channel string, now, until time.Time) (attempts int, ok bool, err error) {
	if !until.After(now) {
		return 0, false, fmt.Errorf("%w: notification claim until %s is not after %s", ErrInvalidArgument, formatTime(until), formatTime(now))
	}
	var n int
	var claimed bool
	err = s.write(ctx, func(w *writeTx) error {
		err := w.readRow(`UPDATE notification_deliveries SET next_attempt_at = ?
			WHERE event_id = ? AND channel = ? AND delivered_at IS NULL AND given_up_at IS NULL
			AND (next_attempt_at IS NULL OR next_attempt_at <= ?) RETURNING attempts`,
			formatTime(until), eventID, channel, formatTime(now)).Scan(&n)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("store: claim notification delivery: %w", err)
		}
		w.wrote, claimed = true, true
		return nil
	})
	if err != nil { // fn may still run after a cancelled write: read nothing it sets
		return 0, false, err
	}
	return n, claimed, nil
}

// NotificationDelivered records that channel accepted event eventID, with the message id it
// returned ("" when none). A delivery already delivered or given up changes nothing.
func (s *Store) NotificationDelivered(ctx context.Context, eventID, channel, providerMessageID string, at time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE notification_deliveries SET delivered_at = ?, provider_message_id = ?, next_attempt_at = NULL,
			last_error = NULL WHERE event_id = ? AND channel = ? AND delivered_at IS NULL AND given_up_at IS NULL`,
			formatTime(at), truncateText(providerMessageID, MaxIDBytes), eventID, channel)
		return err
	})
}

// NotificationAttemptFailed records a failed attempt: attempts + 1, the error (cut to
// MaxProtectionRuleError bytes) and when to try again.
func (s *Store) NotificationAttemptFailed(ctx context.Context, eventID, channel, errText string, next time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE notification_deliveries SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
			WHERE event_id = ? AND channel = ? AND delivered_at IS NULL AND given_up_at IS NULL`,
			formatTime(next), diagnosticText(errText, MaxProtectionRuleError), eventID, channel)
		return err
	})
}

// GiveUpNotification stops the loop trying the delivery: attempts + 1, given_up_at = at and
// the reason (cut to MaxProtectionRuleError bytes) kept. A delivered one changes nothing.
func (s *Store) GiveUpNotification(ctx context.Context, eventID, channel, reason string, at time.Time) error {
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE notification_deliveries SET attempts = attempts + 1, given_up_at = ?, given_up_reason = ?,
			last_error = ?, next_attempt_at = NULL
			WHERE event_id = ? AND channel = ? AND delivered_at IS NULL AND given_up_at IS NULL`,
			formatTime(at), diagnosticText(reason, MaxProtectionRuleError), diagnosticText(reason, MaxProtectionRuleError), eventID, channel)
		return err
	})
}

// GateMessageID is the provider message id channel returned for gate approvalID's
// gate.opened event ("" when it has none yet): the message a channel that updates in place
// edits as votes arrive and the gate is decided.
func (s *Store) GateMessageID(ctx context.Context, approvalID, channel string) (string, error) {
	var id string
	err := s.reader.QueryRowContext(ctx, `SELECT d.provider_message_id FROM notification_deliveries d
		WHERE d.event_id = ? AND d.channel = ?`, EventGateOpened+":"+approvalID, channel).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: gate message id: %w", err)
	}
	return id, nil
}

// EventGateEscalated is the kind of the event a route's escalation writes when a gate is
// still pending after a step's delay (docs/notifications.md, "Escalation"); its id is
// "gate.escalated:<approval id>:<step>", so each step fires once across replicas.
const EventGateEscalated = "gate.escalated"

// EscalationData says which escalation step an event is and after how long it fired.
type EscalationData struct {
	// Step counts from 1; After is the step's delay as configured ("30m").
	Step  int    `json:"step"`
	After string `json:"after"`
}

// PendingGate is a gate that is still pending, as its gate.opened event reported it, with
// how many escalation steps already fired for it.
type PendingGate struct {
	Opened    NotificationEvent
	Escalated int
}

// PendingGateOpenings lists the pending gates that have a gate.opened event, oldest first:
// the gates an escalation may still fire for.
func (s *Store) PendingGateOpenings(ctx context.Context) ([]PendingGate, error) {
	return queryRows(ctx, s, "pending gate openings", `SELECT `+eventColumns+`,
		(SELECT COUNT(*) FROM notification_events x WHERE x.approval_id = e.approval_id AND x.kind = ?)
		FROM notification_events e JOIN playbook_approvals a ON a.approval_id = e.approval_id
		WHERE e.kind = ? AND a.status = 'pending' ORDER BY e.created_at, e.event_id`,
		func(row rowScanner) (PendingGate, error) {
			var p PendingGate
			var err error
			p.Opened, err = scanEvent(row, &p.Escalated)
			return p, err
		}, EventGateEscalated, EventGateOpened)
}

// RecordEscalation writes escalation event e (kind EventGateEscalated) with one delivery per
// channel, routed, in one transaction, only while its gate is still pending and only the
// first time (the id is stable): it reports whether it wrote it. The event's gate is the
// gate's row as that transaction reads it — its tally, votes and status now, not as it
// opened (docs/notifications.md, "Escalation") — with the step of e.Data.Gate.Escalation;
// the rest of e.Data (the run) is kept. Errors: ErrReadOnly, ErrClosed, storage errors.
func (s *Store) RecordEscalation(ctx context.Context, e NotificationEvent, channels []string) (bool, error) {
	var wrote bool
	err := s.write(ctx, func(w *writeTx) error {
		a, err := scanApproval(w.readRow("SELECT "+approvalColumns+" FROM playbook_approvals WHERE approval_id = ?", e.ApprovalID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("store: read approval for escalation: %w", err)
		case a.Status != ApprovalPending:
			return nil
		}
		d := e.Data
		d.Gate = gateData(a, EventGateEscalated)
		if e.Data.Gate != nil {
			d.Gate.Escalation = e.Data.Gate.Escalation
		}
		payload, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("store: encode notification event: %w", err)
		}
		now := formatTime(s.now())
		res, err := w.execSQL(`INSERT INTO notification_events (event_id, kind, run_id, approval_id, payload, created_at, routed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING`,
			e.ID, EventGateEscalated, e.RunID, e.ApprovalID, string(payload), now, now)
		if err != nil {
			return fmt.Errorf("store: record escalation: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		wrote = true
		return w.insertDeliveries(e.ID, channels, now)
	})
	if err != nil { // fn may still run after a cancelled write: read nothing it sets
		return false, err
	}
	return wrote, nil
}

// insertDeliveries writes one delivery of eventID per channel; a channel that has one keeps it.
func (w *writeTx) insertDeliveries(eventID string, channels []string, now string) error {
	for _, c := range channels {
		if _, err := w.execSQL(`INSERT INTO notification_deliveries (event_id, channel, created_at) VALUES (?, ?, ?)
			ON CONFLICT (event_id, channel) DO NOTHING`, eventID, c, now); err != nil {
			return fmt.Errorf("store: write notification delivery: %w", err)
		}
	}
	return nil
}
