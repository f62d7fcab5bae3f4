package store

import (
	"context"
	"time"
)

// ReleaseLease ends the lease f holds on the run now (pause mode, docs/approvals.md, "Pause mode"; RPC
// RenewLeaseRequest.release): lease_expires_at becomes the store's clock, so another executor
// may take the run over at once (StartRun with TakeOver, at the next epoch) instead of
// waiting for the lease to lapse. The owner and epoch are kept: until a take-over the
// releasing executor may still resume its run (StartRun with its owner id), and after one
// every write of its epoch fails with ErrLeaseLost. Returns the run's progress with the new
// LeaseExpiresAt. Errors: ErrNotFound, ErrLeaseLost, ErrNotOwner, ErrRunFinal, ErrClosed,
// storage errors.
func (s *Store) ReleaseLease(ctx context.Context, runID string, f Fence) (RunProgress, error) {
	return s.setLeaseExpiry(ctx, runID, f, "release lease", func(_ RunProgress, now time.Time) time.Time { return now })
}
