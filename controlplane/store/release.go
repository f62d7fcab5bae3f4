package store

import (
	"context"
	"fmt"
)

// ReleaseLease ends the lease f holds on the run now (pause mode, issue 8 item 4; RPC
// RenewLeaseRequest.release): lease_expires_at becomes the store's clock, so another executor
// may take the run over at once (StartRun with TakeOver, at the next epoch) instead of
// waiting for the lease to lapse. The owner and epoch are kept: until a take-over the
// releasing executor may still resume its run (StartRun with its owner id), and after one
// every write of its epoch fails with ErrLeaseLost. Returns the run's progress with the new
// LeaseExpiresAt. Errors: ErrNotFound, ErrLeaseLost, ErrNotOwner, ErrRunFinal, ErrClosed,
// storage errors.
func (s *Store) ReleaseLease(ctx context.Context, runID string, f Fence) (RunProgress, error) {
	var out RunProgress
	err := s.write(ctx, func(w *writeTx) error {
		p, err := w.progress(runID)
		if err != nil {
			return err
		}
		if err := checkFence(runID, p, f); err != nil {
			return err
		}
		if p.Status.Final() {
			return fmt.Errorf("%w: run %q is %s", ErrRunFinal, runID, p.Status)
		}
		p.LeaseExpiresAt = s.now()
		if _, err := w.execSQL(`UPDATE playbook_runs SET lease_expires_at = ? WHERE run_id = ?`,
			formatTime(p.LeaseExpiresAt), runID); err != nil {
			return fmt.Errorf("store: release lease: %w", err)
		}
		w.staged = append(w.staged, p)
		out = p
		return nil
	})
	return out, err
}
