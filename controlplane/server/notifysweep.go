package server

import (
	"context"
	"errors"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/store"
)

// The retention sweep's bounds (docs/notifications.md, "Retention"): a sweep deletes at
// most NotifySweepBatches batches of NotifySweepBatch rows of each table, so one sweep holds
// the database's writer briefly; a sweep that filled its batches runs again after
// NotifySweepAgain, else after NotifySweepEvery.
const (
	NotifySweepBatch   = 500
	NotifySweepBatches = 10
	NotifySweepAgain   = time.Minute
	NotifySweepEvery   = time.Hour
)

// sweeper is when the notifier's next retention sweep is due (zero: at its first pass).
type sweeper struct {
	next time.Time
}

// sweepOld deletes the delivered and given-up notification rows older than the config's
// retention (store.SweepNotifications: nothing pending, nothing about a gate that waits),
// when a sweep is due, and returns when the next one is. A failed sweep is logged and
// tried again at the next interval.
func (n *notifier) sweepOld(ctx context.Context) time.Time {
	now := time.Now()
	if now.Before(n.sweep.next) {
		return n.sweep.next
	}
	keep := n.cfg.Retention
	if keep <= 0 {
		keep = store.DefaultNotificationRetention
	}
	var total store.SweptNotifications
	full := false
	for range NotifySweepBatches {
		got, err := n.s.st.SweepNotifications(ctx, now.Add(-keep), NotifySweepBatch)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, store.ErrClosed) {
				n.log.Error("deleting old notifications failed", "err", err)
			}
			full = false
			break
		}
		total.Deliveries += got.Deliveries
		total.Events += got.Events
		if full = got.Deliveries == NotifySweepBatch || got.Events == NotifySweepBatch; !full {
			break
		}
	}
	if total.Deliveries+total.Events > 0 {
		n.log.Info("old notifications deleted", "deliveries", total.Deliveries, "events", total.Events, "retention", keep.String())
	}
	n.sweep.next = now.Add(NotifySweepEvery)
	if full {
		n.sweep.next = now.Add(NotifySweepAgain)
	}
	return n.sweep.next
}
