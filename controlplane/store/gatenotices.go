package store

import (
	"context"
	"database/sql"
	"time"
)

// MaxGateNotices caps the deliveries GateNotices returns for one gate (the oldest first):
// a gate's events are its opening, its votes, its escalations and its end, times the
// channels each goes to, far fewer in any configuration a person reads.
const MaxGateNotices = 100

// GateNotices is what the notification outbox holds about one gate (docs/notifications.md):
// how many escalation steps fired and when the last did, and the deliveries of its events,
// oldest event first.
type GateNotices struct {
	// Escalations counts the gate's gate.escalated events; EscalatedAt is the newest one's
	// time (zero when there is none).
	Escalations int
	EscalatedAt time.Time
	// Deliveries are one per event and channel, at most MaxGateNotices.
	Deliveries []NotificationDelivery
}

// GateNotices reads what the outbox holds about the gate approvalID: nothing (the zero
// value) for a gate with no events, or once the retention sweep removed them. Errors:
// storage errors.
func (s *Store) GateNotices(ctx context.Context, approvalID string) (GateNotices, error) {
	var g GateNotices
	rows, err := queryRows(ctx, s, "gate escalations", `SELECT COUNT(*), MAX(created_at) FROM notification_events
		WHERE approval_id = ? AND kind = ?`, func(row rowScanner) (GateNotices, error) {
		var last sql.NullString
		var n GateNotices
		if err := row.Scan(&n.Escalations, &last); err != nil {
			return n, err
		}
		var err error
		n.EscalatedAt, err = parseTime("notification_events.created_at", last)
		return n, err
	}, approvalID, EventGateEscalated)
	if err != nil {
		return g, err
	}
	if len(rows) == 1 {
		g = rows[0]
	}
	g.Deliveries, err = s.ListNotificationDeliveries(ctx, NotificationDeliveryFilter{ApprovalID: approvalID, Limit: MaxGateNotices})
	return g, err
}
