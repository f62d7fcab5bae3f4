package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Slack's tables (migration 0017; docs/slack.md): the message posted for each gate in each
// configured Slack channel, and the interaction requests already acted on.

// SlackMessageRef is a message the control plane posted in Slack: the Slack channel id
// ("C0123ABCD") and the message's ts ("1715512345.000100"), which chat.update and threaded
// replies (thread_ts) name it by.
type SlackMessageRef struct {
	SlackChannel, TS string
}

// SlackMessage is the message notification channel posted for gate approvalID, and whether
// there is one.
func (s *Store) SlackMessage(ctx context.Context, approvalID, channel string) (SlackMessageRef, bool, error) {
	var m SlackMessageRef
	err := s.reader.QueryRowContext(ctx, `SELECT slack_channel, ts FROM slack_messages WHERE approval_id = ? AND channel = ?`,
		approvalID, channel).Scan(&m.SlackChannel, &m.TS)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("store: slack message: %w", err)
	}
	return m, true, nil
}

// SaveSlackMessage keeps m as the message notification channel posted for gate approvalID
// of run runID. The first one kept wins: it returns the message kept (m, or the one another
// replica kept first). Errors: ErrReadOnly, ErrClosed, storage errors.
func (s *Store) SaveSlackMessage(ctx context.Context, approvalID, channel, runID string, m SlackMessageRef) (SlackMessageRef, error) {
	err := s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`INSERT INTO slack_messages (approval_id, channel, run_id, slack_channel, ts, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (approval_id, channel) DO NOTHING`,
			approvalID, channel, runID, m.SlackChannel, m.TS, formatTime(s.now()))
		return err
	})
	if err != nil {
		return m, fmt.Errorf("store: save slack message: %w", err)
	}
	kept, ok, err := s.SlackMessage(ctx, approvalID, channel)
	if err != nil || !ok {
		return m, err
	}
	return kept, nil
}

// SlackMessagesOfRun lists the messages notification channel posted for the gates of run
// runID, oldest first: where the run's later events reply in a thread.
func (s *Store) SlackMessagesOfRun(ctx context.Context, runID, channel string) ([]SlackMessageRef, error) {
	return queryRows(ctx, s, "slack messages of run", `SELECT slack_channel, ts FROM slack_messages
		WHERE run_id = ? AND channel = ? ORDER BY created_at, approval_id`,
		func(row rowScanner) (SlackMessageRef, error) {
			var m SlackMessageRef
			return m, row.Scan(&m.SlackChannel, &m.TS)
		}, runID, channel)
}

// GateOpenedWaiting reports whether gate approvalID's gate.opened event is routed to channel
// and still to be delivered (neither delivered nor given up): an update of the gate's message
// must then wait for that message to be posted.
func (s *Store) GateOpenedWaiting(ctx context.Context, approvalID, channel string) (bool, error) {
	var n int
	err := s.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM notification_deliveries d
		WHERE d.event_id = ? AND d.channel = ? AND `+deliveryWaiting, EventGateOpened+":"+approvalID, channel).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: gate.opened delivery: %w", err)
	}
	return n > 0, nil
}

// RecordSlackInteraction records that the interaction request whose hash is requestHash was
// received at at, and reports whether it is the first time (false: a replay, on this replica
// or another, to be answered without acting). Records older than keep (longer than the
// signature's replay window, after which Slack's timestamp check refuses the request anyway)
// are swept in the same transaction. Errors: ErrReadOnly, ErrClosed, storage errors.
func (s *Store) RecordSlackInteraction(ctx context.Context, requestHash string, at time.Time, keep time.Duration) (bool, error) {
	var first bool
	err := s.write(ctx, func(w *writeTx) error {
		if _, err := w.execSQL(`DELETE FROM slack_interactions WHERE received_at < ?`, formatTime(at.Add(-keep))); err != nil {
			return err
		}
		res, err := w.execSQL(`INSERT INTO slack_interactions (request_hash, received_at) VALUES (?, ?)
			ON CONFLICT (request_hash) DO NOTHING`, requestHash, formatTime(at))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		first = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: record slack interaction: %w", err)
	}
	return first, nil
}
