package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Gauges are the counts the control plane's scrape-time metrics show (docs/metrics.md).
type Gauges struct {
	// RunsInProgress counts the runs whose stored status is running or paused, by status.
	RunsInProgress map[RunStatus]int
	// GatesWaiting counts pending approvals; OldestGateRequestedAt is the requested_at of
	// the oldest of them (zero when none is pending).
	GatesWaiting          int
	OldestGateRequestedAt time.Time
	// UndeliveredNotifications counts notification deliveries neither delivered nor given up.
	UndeliveredNotifications int
}

// Gauges reads the counts behind the control plane's gauges with three reads on the reader
// pool. Each is bounded by what it counts, not by the database's size: the runs by the
// status index's range of unfinished runs, the gates by the pending part of the approvals'
// status index, the notifications by the partial index of due deliveries. ctx bounds them
// (metrics.StateTimeout). Errors: storage errors, ErrClosed.
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	g := Gauges{RunsInProgress: map[RunStatus]int{}}
	rows, err := s.reader.QueryContext(ctx,
		"SELECT status, count(*) FROM playbook_runs WHERE status IN ('running', 'paused') GROUP BY status")
	if err != nil {
		return Gauges{}, fmt.Errorf("store: count runs in progress: %w", err)
	}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return Gauges{}, fmt.Errorf("store: count runs in progress: %w", err)
		}
		g.RunsInProgress[RunStatus(status)] = int(n)
	}
	if err := rows.Close(); err != nil {
		return Gauges{}, fmt.Errorf("store: count runs in progress: %w", err)
	}
	if err := rows.Err(); err != nil {
		return Gauges{}, fmt.Errorf("store: count runs in progress: %w", err)
	}
	var n int64
	var oldest sql.NullString
	if err := s.reader.QueryRowContext(ctx,
		"SELECT count(*), min(requested_at) FROM playbook_approvals WHERE status = 'pending'").Scan(&n, &oldest); err != nil {
		return Gauges{}, fmt.Errorf("store: count pending gates: %w", err)
	}
	g.GatesWaiting = int(n)
	if g.OldestGateRequestedAt, err = parseTime("requested_at", oldest); err != nil {
		return Gauges{}, err
	}
	if err := s.reader.QueryRowContext(ctx,
		"SELECT count(*) FROM notification_deliveries WHERE delivered_at IS NULL AND given_up_at IS NULL").Scan(&n); err != nil {
		return Gauges{}, fmt.Errorf("store: count undelivered notifications: %w", err)
	}
	g.UndeliveredNotifications = int(n)
	return g, nil
}
