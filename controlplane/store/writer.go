package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// writeReq is one queued write. fn runs inside a group transaction; an error it returns
// undoes only this request (see runBatch).
type writeReq struct {
	ctx context.Context
	// run, when set, is the run whose progress fn reads (RecordTransition): on PostgreSQL
	// the writer locks and reads the progress of all of a batch's runs in one statement
	// before running it (prefetchProgress).
	run  string
	fn   func(*writeTx) error
	done chan error // buffered: the writer never blocks on a caller that gave up
}

// writeTx is what a request's fn sees: the group transaction, the change it makes and the
// writer's progress cache. fn must change rows only through exec, execSQL and
// writeApprovals (never w.tx directly), so that the writer knows whether a failed request
// left writes behind, and must set every result it reports afresh: the writer may run it
// twice (runBatch).
type writeTx struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts *writeStmts
	bound [numStmts]*sql.Stmt // stmts bound to tx, prepared once per batch
	cache *progressCache
	// objects holds the parsed bindings and iteration counts of recent runs (applyPlaybook).
	objects *objectCache

	change Change
	// wrote is set once the current request changed a row.
	wrote bool
	// staged holds the progress the current request committed to, for the cache.
	staged []RunProgress
	// progressReads counts run-row reads by RecordTransition (tests check the cache with it).
	progressReads int
	// deferOK: transition writes may be queued and written together (PostgreSQL, a batch
	// without savepoints; pgdefer.go); deferred holds them.
	deferOK  bool
	deferred pgDeferred
}

// stmt returns the prepared statement id bound to this transaction.
func (w *writeTx) stmt(id stmtID) *sql.Stmt {
	if w.bound[id] == nil {
		w.bound[id] = w.tx.StmtContext(w.ctx, w.stmts.list[id])
	}
	return w.bound[id]
}

// exec runs a prepared write statement.
func (w *writeTx) exec(id stmtID, args ...any) (sql.Result, error) {
	res, err := w.stmt(id).ExecContext(w.ctx, args...)
	if err == nil {
		w.wrote = true
	}
	return res, err
}

// queryRow runs a prepared read statement.
func (w *writeTx) queryRow(id stmtID, args ...any) *sql.Row {
	return w.stmt(id).QueryRowContext(w.ctx, args...)
}

// execSQL runs a write statement that is not prepared (the rare writes).
func (w *writeTx) execSQL(query string, args ...any) (sql.Result, error) {
	res, err := w.tx.ExecContext(w.ctx, query, args...)
	if err == nil {
		w.wrote = true
	}
	return res, err
}

// readRow runs a read statement that is not prepared.
func (w *writeTx) readRow(query string, args ...any) *sql.Row {
	return w.tx.QueryRowContext(w.ctx, query, args...)
}

// writeApprovals runs an INSERT or UPDATE … RETURNING approvalColumns. RETURNING lists
// every row changed, so none returned means nothing was written.
func (w *writeTx) writeApprovals(query string, args ...any) ([]Approval, error) {
	out, err := queryApprovals(w.ctx, w.tx, query, args...)
	if err == nil && len(out) > 0 {
		w.wrote = true
	}
	return out, err
}

// write queues fn for the writer goroutine and waits for its commit. If ctx ends first the
// call returns ctx.Err(), and the write may still commit: callers retry idempotently.
func (s *Store) write(ctx context.Context, fn func(*writeTx) error) error {
	return s.writeFor(ctx, "", fn)
}

// writeFor is write for a request that reads run's progress first (see writeReq.run).
func (s *Store) writeFor(ctx context.Context, run string, fn func(*writeTx) error) error {
	if s.readOnly {
		return ErrReadOnly
	}
	req := &writeReq{ctx: ctx, run: run, fn: fn, done: make(chan error, 1)}
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

// defaultLingerFastCommit is the slowest previous commit after which the writer still
// lingers: a slower one means the disk, not the arrival of requests, bounds throughput, and
// waiting would only add latency.
const defaultLingerFastCommit = 5 * time.Millisecond

// writeLoop is the one writer: it takes the first queued request, adds whatever else is
// queued (up to maxBatch) and commits them together. While it waits on the fsync of one
// batch, the next batch queues up, so throughput grows with the number of writers.
//
// Over RPC the writers just answered need a round trip before their next request arrives,
// so right after a commit the queue holds only part of them and a batch taken at once
// commits half a cohort. When fewer requests are queued than the previous batch held and
// that batch committed quickly, the loop therefore lingers up to cfg.linger for the others
// (stopping as soon as the previous size is reached): fewer, larger commits, each fsync and
// WAL write shared by more requests, and fewer, larger socket writes on both sides.
func (s *Store) writeLoop() {
	defer close(s.done)
	batch := make([]*writeReq, 0, s.cfg.maxBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	prevSize, lastCommit := 0, time.Duration(0)
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
		batch = s.fill(append(batch[:0], first))
		if s.cfg.linger > 0 && len(batch) < prevSize && lastCommit <= s.cfg.lingerFastCommit {
			batch = s.linger(batch, prevSize, timer)
		}
		lastCommit = s.runBatch(batch)
		prevSize = len(batch)
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

// linger waits up to cfg.linger for batch to reach want requests (or maxBatch); Close ends
// the wait at once.
func (s *Store) linger(batch []*writeReq, want int, timer *time.Timer) []*writeReq {
	s.lingers.Add(1)
	if s.cfg.onLinger != nil {
		s.cfg.onLinger()
	}
	want = min(want, s.cfg.maxBatch)
	timer.Reset(s.cfg.linger)
	defer timer.Stop()
	for len(batch) < want {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		case <-timer.C:
			return batch
		case <-s.closing:
			return batch
		}
	}
	return batch
}

// runBatch executes batch in one transaction, commits, publishes the committed change and
// then answers every request. It returns how long the COMMIT took (0 when there was none).
//
// A request that fails undoes only itself. The batch first runs without savepoints: a
// request that fails before changing anything (a refused seq, an unknown run) needs none.
// If a request fails after it changed a row, or with a storage error, the transaction is
// rolled back and the batch runs again with each request inside its own SAVEPOINT, so the
// common case pays two statements less per request.
func (s *Store) runBatch(batch []*writeReq) time.Duration {
	results := make([]error, len(batch))
	s.requests.Add(uint64(len(batch)))
	safe, uniqueRetry := false, true
	var took time.Duration
	for try := 0; ; try++ {
		outcome, t, cause := s.attempt(batch, results, safe, uniqueRetry)
		took = t
		if outcome == attemptRetry {
			s.safeRetries.Add(1)
			clear(results)
			safe = true
			continue
		}
		if outcome == attemptConflict {
			clear(results)
			if pgCode(cause) == "23505" {
				uniqueRetry = false
			}
			if try < maxConflictRetries {
				s.conflictRetries.Add(1)
				time.Sleep(conflictBackoff(try))
				continue
			}
			for i := range results {
				results[i] = fmt.Errorf("store: write batch gave up after %d retries: %w", try, cause)
			}
		}
		break
	}
	for i, r := range batch {
		r.done <- results[i]
	}
	return took
}

// maxConflictRetries bounds how often one batch is run again after a PostgreSQL
// serialization failure, deadlock or concurrent unique violation (docs/decisions/write-conflicts.md); past it every
// request of the batch gets the error.
const maxConflictRetries = 8

// conflictBackoff is the wait before conflict retry try (0-based): 1 ms doubling, at most
// 64 ms, so two replicas that deadlocked do not collide again at once.
func conflictBackoff(try int) time.Duration {
	return time.Millisecond << min(try, 6)
}

// attemptOutcome is how one execution of a batch ended.
type attemptOutcome int

const (
	attemptDone  attemptOutcome = iota // committed, or failed as a whole; results are final
	attemptRetry                       // rolled back; run again with savepoints
	// attemptConflict: rolled back after a PostgreSQL conflict with another replica's
	// transaction (isPGRetryable); run the whole batch again after a back-off.
	attemptConflict
)

// attempt runs batch once (with a savepoint per request when safe) and fills results. On
// attemptConflict it also returns the conflict's error.
//
// On PostgreSQL a statement that fails aborts the whole transaction, unlike SQLite's; so
// when a request's statements hit a server error (pgConnector.serverErrors moved) and the
// batch runs without savepoints, the batch is rolled back and run again with them, even if
// the request turned the error into a refusal (a unique violation into ErrConflict).
func (s *Store) attempt(batch []*writeReq, results []error, safe, uniqueRetry bool) (attemptOutcome, time.Duration, error) {
	ctx := context.Background() // one caller's cancel must not interrupt the others' statements
	failAll := func(cause error, committed []bool) (attemptOutcome, time.Duration, error) {
		for i := range batch {
			if committed == nil || committed[i] || results[i] == nil {
				results[i] = cause
			}
		}
		return attemptDone, 0, nil
	}
	pg := s.dialect == dialectPostgres
	conflict := func(tx *sql.Tx, cause error) (attemptOutcome, time.Duration, error) {
		_ = tx.Rollback()
		s.cache.abort()
		return attemptConflict, 0, cause
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return failAll(fmt.Errorf("store: begin transaction: %w", err), nil)
	}
	w := &writeTx{ctx: ctx, tx: tx, stmts: s.stmts, cache: &s.cache, objects: &s.objects, deferOK: pg && !safe}
	if err := s.cache.begin(w, s.dialect); err != nil {
		_ = tx.Rollback()
		return failAll(fmt.Errorf("store: write batch aborted: %w", err), nil)
	}
	if pg {
		if err := w.prefetchProgress(batch); err != nil {
			if isPGRetryable(err, false) {
				return conflict(tx, err)
			}
			_ = tx.Rollback()
			return failAll(fmt.Errorf("store: write batch aborted: %w", err), nil)
		}
	}
	var change Change
	committed := make([]bool, len(batch))
	var fatal error
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if safe {
			s.savepoints.Add(1)
			if _, err := w.exec(stmtSavepoint); err != nil {
				fatal = err
				break
			}
		}
		if w.deferOK && r.run == "" {
			// A request other than a transition may read or write the queued rows.
			if err := w.flushDeferred(); err != nil {
				_ = tx.Rollback()
				s.cache.abort()
				return attemptRetry, 0, nil
			}
		}
		w.change, w.wrote, w.staged = Change{}, false, w.staged[:0]
		var serverErrors uint64
		if pg {
			serverErrors = s.pgWriter.serverErrors.Load()
		}
		err := r.fn(w)
		if err == nil {
			// Bindings and verdicts of protection rules commit with the gate change that
			// caused them (docs/approvals.md, "Approve in GitHub"; protection.go).
			err = w.protectionHook(s.now())
		}
		if err == nil && s.notifyOutbox() && w.change.Notifies() {
			// Notification events commit with the change they report (notifications.go).
			err = w.notificationHook(s.now())
		}
		if pg && err != nil && isPGRetryable(err, uniqueRetry) {
			return conflict(tx, err)
		}
		if pg && !safe && s.pgWriter.serverErrors.Load() != serverErrors {
			_ = tx.Rollback()
			s.cache.abort()
			return attemptRetry, 0, nil
		}
		if err != nil && !safe {
			if w.wrote || !isRequestError(err) {
				_ = tx.Rollback()
				s.cache.abort()
				return attemptRetry, 0, nil
			}
			results[i] = err
			continue
		}
		if err != nil {
			results[i] = err
			if _, rbErr := w.exec(stmtRollbackTo); rbErr != nil {
				fatal = rbErr
				break
			}
		}
		if safe {
			if _, err := w.exec(stmtRelease); err != nil {
				fatal = err
				break
			}
		}
		if err != nil {
			continue
		}
		committed[i] = true
		change.append(w.change)
		s.cache.stage(w.staged)
	}
	if fatal == nil && w.deferOK {
		if err := w.flushDeferred(); err != nil {
			// Which request's row failed is not known here: run the batch again with a
			// savepoint per request and nothing deferred.
			_ = tx.Rollback()
			s.cache.abort()
			return attemptRetry, 0, nil
		}
	}
	if fatal == nil && pg && !change.empty() {
		// Delivered to every replica's listener on COMMIT, in commit order (docs/decisions/change-fanout.md).
		fatal = w.notifyChange(s.origin, change)
	}
	if pg && fatal != nil && isPGRetryable(fatal, uniqueRetry) {
		return conflict(tx, fatal)
	}
	if fatal != nil {
		_ = tx.Rollback()
		s.cache.abort()
		return failAll(fmt.Errorf("store: write batch aborted: %w", fatal), committed)
	}
	began := time.Now()
	if err := tx.Commit(); err != nil {
		if pg && isPGRetryable(err, uniqueRetry) {
			s.cache.abort()
			return attemptConflict, 0, err
		}
		s.failedCommits.Add(1)
		s.cache.abort()
		// A COMMIT that failed with SQLITE_BUSY leaves the transaction open on the
		// connection; end it so the next batch can begin. "no transaction" is fine here.
		_, _ = s.writer.ExecContext(ctx, "ROLLBACK")
		return failAll(fmt.Errorf("store: commit: %w", err), committed)
	}
	took := time.Since(began)
	s.cache.commit()
	s.commits.Add(1)
	s.commitNanos.Add(int64(took))
	s.progressReads.Add(uint64(w.progressReads))
	s.publish(change)
	return attemptDone, took, nil
}

// isRequestError reports whether err is one of the store's own refusals, which a request
// returns after reads only: it leaves the transaction as it found it.
func isRequestError(err error) bool {
	for _, sentinel := range []error{ErrNotFound, ErrAlreadyDecided, ErrConflict, ErrOutOfOrder, ErrRunFinal,
		ErrSelfApproval, ErrInvalidArgument, ErrPlanDigestMismatch} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// maxCachedRuns bounds the progress cache; past it the cache starts over (a run not in it
// costs one indexed read).
const maxCachedRuns = 4096

// progressCache keeps the progress columns of recently written runs, so RecordTransition
// does not read its run row back before every insert. It holds committed data only: a
// batch's updates are staged and applied after its COMMIT, and dropped when the batch rolls
// back. Another connection's commit (a second server on the same file) changes PRAGMA
// data_version, which is checked at the start of every batch and empties the cache. Only
// the writer goroutine uses it.
type progressCache struct {
	runs    map[string]RunProgress
	staged  map[string]RunProgress
	version int64
	known   bool // version has been read
}

// begin validates the cache against PRAGMA data_version inside a batch's transaction. On
// PostgreSQL nothing tells this replica that another one wrote a run, so the cache starts
// empty in every batch and each run's row is read (FOR UPDATE) once per batch (docs/decisions/write-conflicts.md).
func (c *progressCache) begin(w *writeTx, d dialect) error {
	if d == dialectPostgres {
		if c.runs == nil {
			c.runs, c.staged = map[string]RunProgress{}, map[string]RunProgress{}
		}
		clear(c.runs)
		clear(c.staged)
		return nil
	}
	var v int64
	if err := w.queryRow(stmtDataVersion).Scan(&v); err != nil {
		return fmt.Errorf("read data_version: %w", err)
	}
	if !c.known || v != c.version {
		clear(c.runs)
		c.version, c.known = v, true
	}
	if c.runs == nil {
		c.runs, c.staged = map[string]RunProgress{}, map[string]RunProgress{}
	}
	clear(c.staged)
	return nil
}

// lookup returns the run's progress as this batch left it, or as last committed.
func (c *progressCache) lookup(runID string) (RunProgress, bool) {
	if p, ok := c.staged[runID]; ok {
		return p, true
	}
	p, ok := c.runs[runID]
	return p, ok
}

// stage records what a successful request wrote.
func (c *progressCache) stage(ps []RunProgress) {
	for _, p := range ps {
		c.staged[p.RunID] = p
	}
}

// forget drops a run whose row changed in a way the cache does not follow (CancelRun).
// Dropping is always safe: the next transition reads the row.
func (c *progressCache) forget(runID string) {
	delete(c.staged, runID)
	delete(c.runs, runID)
}

func (c *progressCache) commit() {
	if len(c.runs)+len(c.staged) > maxCachedRuns {
		clear(c.runs)
	}
	for id, p := range c.staged {
		c.runs[id] = p
	}
	clear(c.staged)
}

func (c *progressCache) abort() { clear(c.staged) }

// stmtID indexes the writer's prepared statements.
type stmtID int

const (
	stmtSavepoint stmtID = iota
	stmtRelease
	stmtRollbackTo
	stmtDataVersion
	stmtSelectRun
	stmtSelectRunProgress
	stmtSelectTransition
	stmtInsertTransition
	stmtUpdateRunProgress
	stmtUpdateRunStatus
	// stmtInsertTransitionPG is PostgreSQL only: the transition's INSERT and the run's
	// progress UPDATE in one statement (a data-modifying CTE), one round trip instead of two.
	stmtInsertTransitionPG
	// A playbook run's node state, written with each of its transitions (applyPlaybook).
	stmtSelectPlaybookBindings
	stmtUpdateActiveNodes
	stmtUpdatePlaybookNodes
	numStmts
)

var writeSQL = [numStmts]string{
	stmtSavepoint:         "SAVEPOINT request",
	stmtRelease:           "RELEASE request",
	stmtRollbackTo:        "ROLLBACK TO request",
	stmtDataVersion:       "PRAGMA data_version",
	stmtSelectRun:         forUpdate("SELECT " + runColumns + " FROM playbook_runs WHERE run_id = ?"),
	stmtSelectRunProgress: forUpdate("SELECT " + progressColumns + " FROM playbook_runs WHERE run_id = ?"),
	stmtSelectTransition:  "SELECT " + transitionColumns + " FROM run_transitions WHERE run_id = ? AND seq = ?",
	stmtInsertTransition:  insertTransitionSQL,
	stmtUpdateRunProgress: updateRunProgressSQL,
	stmtUpdateRunStatus:   updateRunStatusSQL,
	// The update's placeholders follow the insert's (pgRewrite numbers them in text order).
	stmtInsertTransitionPG:     "WITH inserted AS (" + insertTransitionSQL + ") " + updateRunProgressSQL,
	stmtSelectPlaybookBindings: "SELECT bindings, iteration_counts FROM playbook_runs WHERE run_id = ?",
	stmtUpdateActiveNodes:      "UPDATE playbook_runs SET active_nodes = ? WHERE run_id = ?",
	stmtUpdatePlaybookNodes:    "UPDATE playbook_runs SET active_nodes = ?, bindings = ?, iteration_counts = ? WHERE run_id = ?",
}

// pgOnlyStmts are prepared on PostgreSQL only (SQLite has no INSERT inside WITH).
var pgOnlyStmts = map[stmtID]bool{stmtInsertTransitionPG: true}

// writeStmts are prepared once on the writer connection and bound to each batch's tx.
type writeStmts struct{ list [numStmts]*sql.Stmt }

func prepareWriteStmts(ctx context.Context, db *sql.DB, d dialect) (*writeStmts, error) {
	ws := &writeStmts{}
	for i, q := range writeSQL {
		if pgOnlyStmts[stmtID(i)] && d != dialectPostgres {
			continue
		}
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

// prefetchSQL locks and reads the progress of a batch's runs in run_id order (PostgreSQL).
var prefetchSQL = forUpdate("SELECT run_id, " + progressColumns + " FROM playbook_runs WHERE run_id = ANY(?) ORDER BY run_id")

// prefetchProgress (PostgreSQL) locks the rows of the runs batch's requests name
// (writeReq.run) with one SELECT … FOR UPDATE, in run_id order, and puts their progress in
// the batch's cache: one round trip per batch instead of one per request, and two replicas
// lock a batch's runs in the same order (fewer deadlocks). The rows stay locked until the
// batch commits, so the cached progress is current for the whole batch (docs/decisions/write-conflicts.md).
func (w *writeTx) prefetchProgress(batch []*writeReq) error {
	ids := make([]string, 0, len(batch))
	seen := make(map[string]bool, len(batch))
	for _, r := range batch {
		if r.run != "" && !seen[r.run] && r.ctx.Err() == nil {
			seen[r.run] = true
			ids = append(ids, r.run)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := w.tx.QueryContext(w.ctx, prefetchSQL, ids)
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		p, err := scanProgress(prefixScanner{rows, &id})
		if err != nil {
			return fmt.Errorf("read runs: %w", err)
		}
		p.RunID = id
		w.cache.runs[id] = p
		w.progressReads++
	}
	return rows.Err()
}

// prefixScanner scans one leading column into first, then the rest as the wrapped scanner's
// caller asks.
type prefixScanner struct {
	rows  *sql.Rows
	first any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.rows.Scan(append([]any{p.first}, dest...)...)
}
