package store

import (
	"context"
	"errors"
	"fmt"
)

// Limits of one RecordTransitions batch (docs/decisions/durability.md; proto RecordTransitionsRequest),
// checked before anything is written.
const (
	// MaxBatchTransitions caps the transitions of one batch.
	MaxBatchTransitions = 1000
	// MaxBatchBytes caps a batch's size (bytes), counted as the sum of TransitionBytes: 4 MiB,
	// the server's request limit (server.DefaultMaxMessageBytes), so no batch the server can
	// receive is refused by the store for its size alone.
	MaxBatchBytes = 4 << 20
)

// TransitionBytes is the size a transition counts for MaxBatchBytes (bytes): the length of
// its text fields (run id, kind, names, message, evidence input, source input and output)
// plus 64 for its numbers and times.
func TransitionBytes(t Transition) int {
	n := 64 + len(t.RunID) + len(t.Kind) + len(t.StepName) + len(t.StepType) + len(t.RunStatus) +
		len(t.LastDeployName) + len(t.RollbackFor) + len(t.Message)
	if ev := t.Evidence; ev != nil {
		n += len(ev.StepName) + len(ev.Type) + len(ev.Output) + len(ev.Status)
		if ev.Input != nil {
			n += len(*ev.Input)
		}
		if ev.SourceInput != nil {
			n += len(*ev.SourceInput)
		}
	}
	return n
}

// BatchResult is what RecordTransitions did with a batch.
type BatchResult struct {
	// AckedSeq is the run's last_seq after the call: every seq up to it is stored (seqs are
	// stored without gaps), so the caller may drop them from its outbox. 0 when the run could
	// not be read or the caller may not learn it (ErrLeaseLost, ErrNotOwner before anything
	// of the batch was stored).
	AckedSeq int64
	// Stored is how many transitions of the batch this call stored.
	Stored int
	// Duplicates is how many transitions of the batch were already stored with the same
	// content (skipped, as RecordTransition's Duplicate).
	Duplicates int
	// Progress is the run's progress after the last transition stored or skipped (zero when
	// none was).
	Progress RunProgress
	// Failed is the transition the error is about (zero when the error is not about one).
	Failed Transition
}

// RecordTransitions stores a batch of one run's transitions, seq ascending by one, in ONE
// write request of the group-commit writer (one transaction, one fsync; docs/decisions/durability.md).
// Each transition is validated and applied exactly as RecordTransition does (the same
// recordOne: playbook projection, approval hooks, lease renewal, watcher changes in seq
// order); a transition already stored with the same content is skipped and counted in
// Duplicates.
//
// The longest valid prefix of the batch is stored. When transition k is refused
// (ErrConflict, ErrOutOfOrder, ErrRunFinal, ErrLeaseLost, ErrNotOwner), transitions before
// k stay stored and the call returns the BatchResult (AckedSeq, Failed = k) together with
// k's error; the caller resends from AckedSeq+1. A storage error stores nothing of the
// batch and returns a zero BatchResult.
//
// Errors: ErrInvalidArgument (an empty batch, more than MaxBatchTransitions or
// MaxBatchBytes, two run ids, seqs not consecutive, or a transition RecordTransition would
// refuse as invalid: nothing is stored), ErrNotFound, the refusals above, ErrClosed, storage
// errors.
func (s *Store) RecordTransitions(ctx context.Context, ts []Transition, f Fence) (BatchResult, error) {
	batch, statuses, err := validateBatch(ts)
	if err != nil {
		return BatchResult{}, err
	}
	var res BatchResult
	var refused error
	err = s.writeFor(ctx, batch[0].RunID, func(w *writeTx) error {
		res, refused = BatchResult{}, nil // the writer may run this twice
		run, err := w.progress(batch[0].RunID)
		if err != nil {
			return err
		}
		wrote := w.wrote
		for i, t := range batch {
			w.wrote = false
			var one RecordResult
			err := s.recordOne(w, run, t, statuses[i], f, &one)
			if err != nil {
				if w.wrote || !batchRefusal(err) {
					return err // a storage error: the writer undoes the whole request
				}
				w.wrote = wrote
				res.Failed, refused = t, err
				break
			}
			wrote = wrote || w.wrote
			run = one.Progress
			res.Progress = run
			if one.Duplicate {
				res.Duplicates++
			} else {
				res.Stored++
			}
		}
		w.wrote = wrote
		res.AckedSeq = run.LastSeq
		if refused != nil && res.Stored+res.Duplicates == 0 {
			if errors.Is(refused, ErrLeaseLost) || errors.Is(refused, ErrNotOwner) {
				res.AckedSeq = 0 // no answer about another's run
			}
			return refused // nothing written: the request fails without a retry
		}
		return nil
	})
	if err != nil {
		if refused != nil && errors.Is(err, refused) {
			return res, err
		}
		return BatchResult{}, err
	}
	return res, refused
}

// validateBatch checks the limits of RecordTransitions and validates each transition as
// RecordTransition does; it returns normalised copies and each one's run status.
func validateBatch(ts []Transition) ([]Transition, []RunStatus, error) {
	if len(ts) == 0 {
		return nil, nil, fmt.Errorf("%w: the batch holds no transition", ErrInvalidArgument)
	}
	if len(ts) > MaxBatchTransitions {
		return nil, nil, fmt.Errorf("%w: the batch holds %d transitions, at most %d are allowed",
			ErrInvalidArgument, len(ts), MaxBatchTransitions)
	}
	out := make([]Transition, len(ts))
	statuses := make([]RunStatus, len(ts))
	size := 0
	for i, t := range ts {
		if size += TransitionBytes(t); size > MaxBatchBytes {
			return nil, nil, fmt.Errorf("%w: the batch exceeds %d bytes at transition %d (seq %d)",
				ErrInvalidArgument, MaxBatchBytes, i, t.Seq)
		}
		if err := validateTransition(&t); err != nil {
			return nil, nil, fmt.Errorf("transition %d (seq %d) of the batch: %w", i, t.Seq, err)
		}
		st, err := RunStatusOf(t.RunStatus, t.Kind)
		if err != nil {
			return nil, nil, fmt.Errorf("transition %d (seq %d) of the batch: %w", i, t.Seq, err)
		}
		if i > 0 {
			if t.RunID != out[0].RunID {
				return nil, nil, fmt.Errorf("%w: transition %d of the batch is of run %q, the batch is of run %q",
					ErrInvalidArgument, i, truncateText(t.RunID, 80), truncateText(out[0].RunID, 80))
			}
			if t.Seq != out[i-1].Seq+1 {
				return nil, nil, fmt.Errorf("%w: transition %d of the batch has seq %d after seq %d; seqs must be consecutive",
					ErrInvalidArgument, i, t.Seq, out[i-1].Seq)
			}
		}
		out[i], statuses[i] = t, st
	}
	return out, statuses, nil
}

// batchRefusal reports whether err is a per-transition refusal of recordOne, which comes
// before anything is written: the batch keeps the prefix stored before it.
func batchRefusal(err error) bool {
	return isRequestError(err) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotOwner)
}
