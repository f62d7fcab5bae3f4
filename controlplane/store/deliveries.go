package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// GitHubDelivery is one GitHub webhook delivery, claimed or processed (docs/approvals.md, "GitHub App webhook";
// migration 0006; claims: docs/control-plane.md, "Two replicas on one PostgreSQL", migration 0011):
// its X-GitHub-Delivery id, the X-GitHub-Event name and the payload's action ("" when the
// event has none). The payload itself is never stored.
type GitHubDelivery struct {
	ID, Event, Action string
	// ProcessedAt is when it was recorded (RecordGitHubDelivery); zero means the store's
	// clock. ClaimGitHubDelivery always uses the store's clock.
	ProcessedAt time.Time
}

// GitHubDeliverySeen reports whether the delivery id was processed: recorded by
// RecordGitHubDelivery, or claimed by ClaimGitHubDelivery and finished by
// FinishGitHubDelivery (docs/approvals.md, "GitHub App webhook": a replayed delivery changes nothing). A claim not
// finished (its claimer may be acting, or may have died: docs/control-plane.md, "Two replicas on one PostgreSQL") is not seen.
// Errors: ErrInvalidArgument for an
// empty or over-long id; otherwise the SQLite error.
func (s *Store) GitHubDeliverySeen(ctx context.Context, id string) (bool, error) {
	if err := validateDeliveryID(id); err != nil {
		return false, err
	}
	var one int
	err := s.reader.QueryRowContext(ctx, `SELECT 1 FROM github_deliveries WHERE delivery_id = ? AND status = 'done'`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: read github delivery: %w", err)
	}
	return true, nil
}

// RecordGitHubDelivery records d as processed (done), durably before it returns. It returns
// true when d.ID was new and false when it was already recorded or claimed (the first row
// is kept as it was: a replay changes nothing). The webhook endpoint uses
// ClaimGitHubDelivery and FinishGitHubDelivery instead (docs/control-plane.md, "Two replicas on one PostgreSQL"). Errors: ErrInvalidArgument for an empty or over-long id,
// event or action (each at most MaxIDBytes); ErrReadOnly, ErrClosed; the SQLite error.
func (s *Store) RecordGitHubDelivery(ctx context.Context, d GitHubDelivery) (bool, error) {
	if err := validateDelivery(d); err != nil {
		return false, err
	}
	at := d.ProcessedAt
	if at.IsZero() {
		at = s.now()
	}
	var inserted bool
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.execSQL(`INSERT INTO github_deliveries (delivery_id, event, action, processed_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (delivery_id) DO NOTHING`, d.ID, d.Event, d.Action, formatTime(at))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		inserted = err == nil && n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	return inserted, nil
}

func validateDeliveryID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return fmt.Errorf("%w: github delivery id of %d bytes: need 1..%d", ErrInvalidArgument, len(id), MaxIDBytes)
	}
	return nil
}

// validateDelivery checks d's id, event and action (RecordGitHubDelivery, ClaimGitHubDelivery).
func validateDelivery(d GitHubDelivery) error {
	if err := validateDeliveryID(d.ID); err != nil {
		return err
	}
	if d.Event == "" || len(d.Event) > MaxIDBytes || len(d.Action) > MaxIDBytes {
		return fmt.Errorf("%w: github delivery %q: event %q / action of %d bytes: event required, each at most %d bytes",
			ErrInvalidArgument, d.ID, d.Event, len(d.Action), MaxIDBytes)
	}
	return nil
}
