package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
)

// writeReq is one queued write. fn runs inside its own SAVEPOINT of a group transaction;
// returning an error rolls back only this request.
type writeReq struct {
	ctx  context.Context
	fn   func(*writeTx) error
	done chan error // buffered: the writer never blocks on a caller that gave up
}

// writeTx is what a request's fn sees: the group transaction and the change it makes.
type writeTx struct {
	ctx    context.Context
	tx     *sql.Tx
	stmts  *writeStmts
	bound  [numStmts]*sql.Stmt // stmts bound to tx, prepared once per batch
	change Change
}

// stmt returns the prepared statement id bound to this transaction.
func (w *writeTx) stmt(id stmtID) *sql.Stmt {
	if w.bound[id] == nil {
		w.bound[id] = w.tx.StmtContext(w.ctx, w.stmts.list[id])
	}
	return w.bound[id]
}

func (w *writeTx) exec(id stmtID, args ...any) (sql.Result, error) {
	return w.stmt(id).ExecContext(w.ctx, args...)
}

func (w *writeTx) queryRow(id stmtID, args ...any) *sql.Row {
	return w.stmt(id).QueryRowContext(w.ctx, args...)
}

// write queues fn for the writer goroutine and waits for its commit. If ctx ends first the
// call returns ctx.Err(), and the write may still commit: callers retry idempotently.
func (s *Store) write(ctx context.Context, fn func(*writeTx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.queue <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLoop is the one writer: it takes the first queued request, adds whatever else is
// queued (up to maxBatch) and commits them together. While it waits on the fsync of one
// batch, the next batch queues up, so throughput grows with the number of writers.
func (s *Store) writeLoop() {
	defer close(s.done)
	batch := make([]*writeReq, 0, s.cfg.maxBatch)
	for {
		var first *writeReq
		select {
		case first = <-s.queue:
		case <-s.closing:
			// Close holds no sender any more: drain what is queued, then stop.
			for {
				select {
				case first = <-s.queue:
					s.runBatch(s.fill(append(batch[:0], first)))
				default:
					return
				}
			}
		}
		s.runBatch(s.fill(append(batch[:0], first)))
		// Let the writers just answered run and queue their next request, so they join the
		// next batch instead of forming a second, alternating cohort (half-size batches).
		runtime.Gosched()
	}
}

// fill adds queued requests to batch without waiting.
func (s *Store) fill(batch []*writeReq) []*writeReq {
	for len(batch) < s.cfg.maxBatch {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// runBatch executes batch in one transaction, each request in its own savepoint, commits,
// publishes the committed change and then answers every request.
func (s *Store) runBatch(batch []*writeReq) {
	ctx := context.Background() // one caller's cancel must not interrupt the others' statements
	results := make([]error, len(batch))
	answer := func() {
		for i, r := range batch {
			r.done <- results[i]
		}
	}
	s.requests.Add(uint64(len(batch)))

	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		for i := range results {
			results[i] = fmt.Errorf("store: begin transaction: %w", err)
		}
		answer()
		return
	}
	w := &writeTx{ctx: ctx, tx: tx, stmts: s.stmts}
	var change Change
	committed := make([]bool, len(batch))
	var fatal error
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := w.exec(stmtSavepoint); err != nil {
			fatal = err
			break
		}
		w.change = Change{}
		if err := r.fn(w); err != nil {
			results[i] = err
			if _, rbErr := w.exec(stmtRollbackTo); rbErr != nil {
				fatal = rbErr
				break
			}
			if _, relErr := w.exec(stmtRelease); relErr != nil {
				fatal = relErr
				break
			}
			continue
		}
		if _, err := w.exec(stmtRelease); err != nil {
			fatal = err
			break
		}
		committed[i] = true
		change.append(w.change)
	}
	failAll := func(cause error) {
		for i := range batch {
			if committed[i] || results[i] == nil {
				results[i] = cause
			}
		}
	}
	if fatal != nil {
		_ = tx.Rollback()
		failAll(fmt.Errorf("store: write batch aborted: %w", fatal))
		answer()
		return
	}
	if err := tx.Commit(); err != nil {
		s.failedCommits.Add(1)
		// A COMMIT that failed with SQLITE_BUSY leaves the transaction open on the
		// connection; end it so the next batch can begin. "no transaction" is fine here.
		_, _ = s.writer.ExecContext(ctx, "ROLLBACK")
		failAll(fmt.Errorf("store: commit: %w", err))
		answer()
		return
	}
	s.commits.Add(1)
	s.publish(change)
	answer()
}

// stmtID indexes the writer's prepared statements.
type stmtID int

const (
	stmtSavepoint stmtID = iota
	stmtRelease
	stmtRollbackTo
	stmtSelectRun
	stmtSelectRunProgress
	stmtSelectTransition
	stmtInsertTransition
	stmtUpdateRunProgress
	stmtUpdateRunStatus
	numStmts
)

var writeSQL = [numStmts]string{
	stmtSavepoint:         "SAVEPOINT request",
	stmtRelease:           "RELEASE request",
	stmtRollbackTo:        "ROLLBACK TO request",
	stmtSelectRun:         "SELECT " + runColumns + " FROM playbook_runs WHERE run_id = ?",
	stmtSelectRunProgress: "SELECT " + progressColumns + " FROM playbook_runs WHERE run_id = ?",
	stmtSelectTransition:  "SELECT " + transitionColumns + " FROM run_transitions WHERE run_id = ? AND seq = ?",
	stmtInsertTransition:  insertTransitionSQL,
	stmtUpdateRunProgress: updateRunProgressSQL,
	stmtUpdateRunStatus:   updateRunStatusSQL,
}

// writeStmts are prepared once on the writer connection and bound to each batch's tx.
type writeStmts struct{ list [numStmts]*sql.Stmt }

func prepareWriteStmts(ctx context.Context, db *sql.DB) (*writeStmts, error) {
	ws := &writeStmts{}
	for i, q := range writeSQL {
		if q == "" {
			_ = ws.close()
			return nil, fmt.Errorf("store: statement %d has no SQL", i)
		}
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			_ = ws.close()
			return nil, fmt.Errorf("store: prepare %q: %w", q, err)
		}
		ws.list[i] = st
	}
	return ws, nil
}

func (ws *writeStmts) close() error {
	var errs []error
	for _, st := range ws.list {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
