package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// MaxPlanBytes caps a stored run plan (NewRun.Plan): the wire contract's 1 MiB for the whole
// plan (run.proto, RunPlan) plus room for the encoding's field overhead.
const MaxPlanBytes = 1<<20 + 64<<10

// storePlan keeps plan, the encoded plan of runID's digest contentHash, in the writer's
// transaction: a StartRun with the same digest replaces it (the executor's latest copy).
// A nil plan stores nothing (an executor that sends none).
func (w *writeTx) storePlan(runID, contentHash string, plan []byte, now time.Time) error {
	if plan == nil {
		return nil
	}
	if _, err := w.execSQL(`INSERT INTO run_plans (run_id, content_hash, plan, stored_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (run_id, content_hash) DO UPDATE SET plan = excluded.plan, stored_at = excluded.stored_at`,
		runID, contentHash, plan, formatTime(now)); err != nil {
		return fmt.Errorf("store: store the run's plan: %w", err)
	}
	return nil
}

// RunPlan returns the encoded plan stored for runID at plan digest contentHash (NewRun.Plan),
// or nil when the executor sent none for that digest. Errors: storage errors.
func (s *Store) RunPlan(ctx context.Context, runID, contentHash string) ([]byte, error) {
	var plan []byte
	err := s.reader.QueryRowContext(ctx, "SELECT plan FROM run_plans WHERE run_id = ? AND content_hash = ?",
		runID, contentHash).Scan(&plan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read the run's plan: %w", err)
	}
	return plan, nil
}
