package store

import (
	"context"
	"fmt"
	"time"
)

// DefaultNotificationRetention is how long delivered and given-up notification rows are
// kept when the notification config sets no retention (docs/notifications.md, "Retention").
const DefaultNotificationRetention = 30 * 24 * time.Hour

// SweptNotifications counts the rows one SweepNotifications call deleted.
type SweptNotifications struct {
	Deliveries, Events int
}

// SweepNotifications deletes, in one transaction, at most limit notification deliveries
// that were delivered or given up before before, then at most limit events created before
// before that were routed and have no delivery left (docs/notifications.md, "Retention").
// Nothing pending is deleted: a delivery still to be tried, an event not yet routed, and
// every row about a gate that still waits (its gate.opened event times its escalation,
// and its escalation events keep each step from firing twice). Errors: ErrReadOnly,
// ErrClosed, storage errors.
func (s *Store) SweepNotifications(ctx context.Context, before time.Time, limit int) (SweptNotifications, error) {
	var n SweptNotifications
	if limit <= 0 {
		return n, nil
	}
	cut := formatTime(before)
	err := s.write(ctx, func(w *writeTx) error {
		n = SweptNotifications{}
		res, err := w.execSQL(`DELETE FROM notification_deliveries WHERE (event_id, channel) IN (
			SELECT d.event_id, d.channel FROM notification_deliveries d JOIN notification_events e ON e.event_id = d.event_id
			WHERE ((d.delivered_at IS NOT NULL AND d.delivered_at < ?) OR (d.given_up_at IS NOT NULL AND d.given_up_at < ?))
			AND NOT EXISTS (SELECT 1 FROM playbook_approvals a WHERE a.approval_id = e.approval_id AND a.status = 'pending')
			LIMIT ?)`, cut, cut, limit)
		if err != nil {
			return fmt.Errorf("store: sweep notification deliveries: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: sweep notification deliveries: %w", err)
		}
		n.Deliveries = int(k)
		res, err = w.execSQL(`DELETE FROM notification_events WHERE event_id IN (
			SELECT e.event_id FROM notification_events e
			WHERE e.routed_at IS NOT NULL AND e.created_at < ?
			AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.event_id = e.event_id)
			AND NOT EXISTS (SELECT 1 FROM playbook_approvals a WHERE a.approval_id = e.approval_id AND a.status = 'pending')
			LIMIT ?)`, cut, limit)
		if err != nil {
			return fmt.Errorf("store: sweep notification events: %w", err)
		}
		if k, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: sweep notification events: %w", err)
		}
		n.Events = int(k)
		return nil
	})
	if err != nil {
		return SweptNotifications{}, err
	}
	return n, nil
}
