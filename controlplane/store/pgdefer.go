package store

import (
	"fmt"
	"strings"
)

// Deferred transition writes (PostgreSQL; docs/decisions/store-dialects.md). A SQLite statement is a
// function call; a PostgreSQL one is a network round trip plus the server's per-statement
// work, and one writer connection executing two statements per transition tops out far
// below the group-commit rate. So in a batch run without savepoints the common transition
// (a runbook run whose status does not change) queues its INSERT and its run-row UPDATE,
// and the batch writes them all with two statements over unnest()ed arrays: before any
// request that may read or write those rows differently (one not marked writeReq.run, a
// replay's read of a stored transition) and before COMMIT. A failed flush rolls the batch
// back and runs it again with savepoints, where nothing is deferred (writer.go, attempt).

// pgDeferred is what a batch has queued.
type pgDeferred struct {
	rows     [][]any        // transitionArgs of each queued transition, in order
	progress map[string]int // run_id -> index in updates
	updates  [][]any        // the progress UPDATE's arguments per run (last one wins)
}

func (d *pgDeferred) empty() bool { return len(d.rows) == 0 && len(d.updates) == 0 }

// deferTransition queues t's insert and its run's progress update (args as
// stmtUpdateRunProgress takes them, run_id last).
func (w *writeTx) deferTransition(ins []any, upd []any) {
	d := &w.deferred
	d.rows = append(d.rows, ins)
	runID := upd[len(upd)-1].(string)
	if d.progress == nil {
		d.progress = map[string]int{}
	}
	if i, ok := d.progress[runID]; ok {
		d.updates[i] = upd
	} else {
		d.progress[runID] = len(d.updates)
		d.updates = append(d.updates, upd)
	}
	w.wrote = true
}

// transitionIntColumns are the BIGINT columns of transitionColumns (seq, step_index); the
// rest are TEXT.
var transitionIntColumns = map[int]bool{1: true, 3: true}

// pgFlushInsertSQL and pgFlushUpdateSQL write the queued rows (PostgreSQL only).
var (
	pgFlushInsertSQL = func() string {
		n := len(strings.Split(transitionColumns, ","))
		casts := make([]string, n)
		for i := range casts {
			casts[i] = "?::text[]"
			if transitionIntColumns[i] {
				casts[i] = "?::bigint[]"
			}
		}
		return "INSERT INTO run_transitions (" + transitionColumns + ") SELECT * FROM unnest(" + strings.Join(casts, ", ") + ")"
	}()
	pgFlushUpdateSQL = `UPDATE playbook_runs AS r SET current_node = v.current_node, last_completed_step_index = v.lci,
	last_deploy_name = v.last_deploy, last_seq = v.last_seq, updated_at = v.updated_at, lease_expires_at = v.lease_expires
	FROM unnest(?::text[], ?::bigint[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[])
	AS v(current_node, lci, last_deploy, last_seq, updated_at, lease_expires, run_id) WHERE r.run_id = v.run_id`
	// pgFlushUpdateInts are the BIGINT arguments of pgFlushUpdateSQL (lci, last_seq).
	pgFlushUpdateInts = map[int]bool{1: true, 3: true}
)

// flushDeferred writes what the batch queued, if anything.
func (w *writeTx) flushDeferred() error {
	d := &w.deferred
	if d.empty() {
		return nil
	}
	if len(d.rows) > 0 {
		if _, err := w.tx.ExecContext(w.ctx, pgFlushInsertSQL, columnArrays(d.rows, transitionIntColumns)...); err != nil {
			return fmt.Errorf("store: insert transitions: %w", err)
		}
	}
	if len(d.updates) > 0 {
		res, err := w.tx.ExecContext(w.ctx, pgFlushUpdateSQL, columnArrays(d.updates, pgFlushUpdateInts)...)
		if err != nil {
			return fmt.Errorf("store: update runs: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(d.updates) {
			return fmt.Errorf("store: update runs: %d of %d rows updated (%v)", n, len(d.updates), err)
		}
	}
	d.rows, d.updates = d.rows[:0], d.updates[:0]
	clear(d.progress)
	return nil
}

// columnArrays turns rows of arguments into one array per column: []int64 for the columns
// in ints, []*string (nil = NULL) for the others.
func columnArrays(rows [][]any, ints map[int]bool) []any {
	cols := len(rows[0])
	out := make([]any, cols)
	for c := 0; c < cols; c++ {
		if ints[c] {
			a := make([]int64, len(rows))
			for i, r := range rows {
				switch v := r[c].(type) {
				case int:
					a[i] = int64(v)
				case int64:
					a[i] = v
				default:
					panic(fmt.Sprintf("store: column %d: %T is not an integer", c, v))
				}
			}
			out[c] = a
			continue
		}
		a := make([]*string, len(rows))
		for i, r := range rows {
			switch v := r[c].(type) {
			case nil:
			case string:
				a[i] = &v
			default:
				panic(fmt.Sprintf("store: column %d: %T is not text", c, v))
			}
		}
		out[c] = a
	}
	return out
}
