package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rbookhq/rbook-action/internal/evidencechain"
)

// continuesChain checks that t, the next transition of run (t.Seq is run.LastSeq+1), continues
// the run's hash chain (docs/evidence-chain.md, "Verifying a chain"): a run is chained when
// its first transition carries a hash, and then every later one must, with prev_hash the
// hash of the transition before it (the genesis for seq 1). A run whose first transition
// had no hash (an older executor) stays without the chain, and a hash cannot join it later.
// The caller has checked that t.Hash matches t's content. Errors: ErrChainBroken naming the
// seq and the reason, storage errors.
func (w *writeTx) continuesChain(run *RunProgress, t Transition) error {
	broken := func(format string, a ...any) error {
		return fmt.Errorf("%w: run %s seq %d: %s", ErrChainBroken, t.RunID, t.Seq, fmt.Sprintf(format, a...))
	}
	if (t.Hash == "") != (t.PrevHash == "") {
		return broken("prev_hash and hash come together; this transition has one without the other")
	}
	if run.LastSeq == 0 {
		if t.Hash != "" && t.PrevHash != evidencechain.Genesis {
			return broken("the first transition's prev_hash is %s, not the genesis %s", t.PrevHash, evidencechain.Genesis)
		}
		return nil
	}
	head, err := w.chainHead(run)
	if err != nil {
		return err
	}
	switch {
	case head == "" && t.Hash != "":
		return broken("the run was recorded without the hash chain (transition %d has no hash), so a chained transition cannot continue it", run.LastSeq)
	case head != "" && t.Hash == "":
		return broken("the run's transitions are hash-chained, and this one carries no hash; an executor that chains its transitions must continue the run")
	case t.PrevHash != head:
		return broken("prev_hash %s is not the hash %s of transition %d", t.PrevHash, head, run.LastSeq)
	}
	return nil
}

// chainHead returns the hash of the run's transition run.LastSeq ("" when it has none), from
// run when known, else from its row, and remembers it in run.
func (w *writeTx) chainHead(run *RunProgress) (string, error) {
	if run.chainKnown || run.LastSeq == 0 {
		return run.ChainHead, nil
	}
	var h sql.NullString
	err := w.tx.QueryRowContext(w.ctx, "SELECT hash FROM run_transitions WHERE run_id = ? AND seq = ?", run.RunID, run.LastSeq).Scan(&h)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: read the hash of transition %d: %w", run.LastSeq, err)
	}
	run.ChainHead, run.chainKnown = h.String, true
	return run.ChainHead, nil
}

// ChainHead returns the hash of the run's last transition: the head of its hash chain
// (docs/evidence-chain.md), "" when the run has no transitions or was recorded without the
// chain. Errors: storage errors (an unknown run gives "").
func (s *Store) ChainHead(ctx context.Context, runID string) (string, error) {
	var h sql.NullString
	err := s.reader.QueryRowContext(ctx, "SELECT hash FROM run_transitions WHERE run_id = ? ORDER BY seq DESC LIMIT 1", runID).Scan(&h)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: read the chain head of run %s: %w", runID, err)
	}
	return h.String, nil
}
