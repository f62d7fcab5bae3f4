package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// The retention tests' times: runs that ended at old are past a 90-day retention at t0
// (cutoff), runs that ended at recent are not.
var (
	cutoff = t0.Add(-90 * 24 * time.Hour)
	old    = t0.Add(-100 * 24 * time.Hour)
	recent = t0.Add(-24 * time.Hour)
)

// finish records run's final transition seq with status at end.
func finish(t testing.TB, s *Store, run string, seq int64, status ExecStatus, end time.Time) {
	t.Helper()
	mustRecord(t, s, Transition{RunID: run, Seq: seq, Kind: KindRunFinished, At: end, StepIndex: -1, RunStatus: status,
		Message: "finished " + string(status)})
}

// remainingRuns lists every run id left in the database, sorted.
func remainingRuns(t testing.TB, s *Store) []string {
	t.Helper()
	return queryStrings(t, s, `SELECT run_id FROM playbook_runs ORDER BY run_id`)
}

// queryStrings runs a query of one text column on the reader pool and returns its values.
func queryStrings(t testing.TB, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.reader.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pruneAll runs PruneRuns passes of limit runs until one is not full, and returns every run
// pruned.
func pruneAll(t testing.TB, s *Store, limit int, export func(context.Context, RunRecord) error) []string {
	t.Helper()
	var all []string
	opts := PruneOptions{Before: cutoff, Limit: limit, Export: export}
	for {
		res, err := s.PruneRuns(context.Background(), opts)
		if err != nil {
			t.Fatalf("PruneRuns: %v", err)
		}
		all = append(all, res.Pruned...)
		if !res.More {
			return all
		}
		opts.After = res.Next
	}
}

func TestPrunesExactlyTheRunsItShouldUnderConcurrentWrites(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	var want []string // the runs that must stay
	keep := func(id string) { want = append(want, id) }
	// Finished runs of each final status, old and recent.
	for _, st := range []ExecStatus{ExecCompleted, ExecFailed, ExecCancelled} {
		for i := range 4 {
			oldID, recentID := fmt.Sprintf("old-%s-%d", st, i), fmt.Sprintf("recent-%s-%d", st, i)
			mustStart(t, s, newRun(oldID))
			mustRecord(t, s, tr(oldID, 1))
			finish(t, s, oldID, 2, st, old.Add(time.Duration(i)*time.Minute))
			mustStart(t, s, newRun(recentID))
			mustRecord(t, s, tr(recentID, 1))
			finish(t, s, recentID, 2, st, recent)
			keep(recentID)
		}
	}
	// An old failed run whose gate still waits: never pruned.
	mustStart(t, s, newRun("old-failed-open-gate"))
	mustRecord(t, s, tr("old-failed-open-gate", 1))
	mustCreateApproval(t, s, newApproval("gate-open", "old-failed-open-gate", "deploy"))
	finish(t, s, "old-failed-open-gate", 2, ExecFailed, old)
	keep("old-failed-open-gate")
	// An old succeeded run whose gate was decided: pruned with its approval and votes.
	mustStart(t, s, newRun("old-decided-gate"))
	mustRecord(t, s, tr("old-decided-gate", 1))
	mustCreateApproval(t, s, newApproval("gate-decided", "old-decided-gate", "deploy"))
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "gate-decided", Verdict: ApprovalApproved, Approver: "bob", At: old}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, "old-decided-gate", 2, ExecCompleted, old)
	// A paused run (its gate is open) and running runs that started long ago: not final.
	mustStart(t, s, newRun("paused"))
	mustRecord(t, s, Transition{RunID: "paused", Seq: 1, Kind: KindGateOpened, At: old, StepIndex: 0, StepName: "confirm",
		StepType: "confirm", RunStatus: ExecInProgress})
	keep("paused")
	const writers = 4
	for w := range writers {
		id := fmt.Sprintf("running-%d", w)
		nr := newRun(id)
		nr.StartedAt = old
		mustStart(t, s, nr)
		mustRecord(t, s, Transition{RunID: id, Seq: 1, Kind: KindStepStarted, At: old, StepIndex: 0, StepName: "s",
			StepType: "check", RunStatus: ExecInProgress})
		keep(id)
	}

	// Writers record transitions on the running runs and start and finish new runs while
	// the pruner deletes in batches of three.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	var mu sync.Mutex
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("running-%d", w)
			for seq := int64(2); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				x := tr(id, seq)
				x.StepIndex = int(seq % 4)
				if _, err := s.RecordTransition(ctx, x, fence1); err != nil {
					errs <- fmt.Errorf("record %s #%d: %w", id, seq, err)
					return
				}
				if seq%5 == 0 {
					nid := fmt.Sprintf("new-%d-%d", w, seq)
					if _, _, err := s.StartRun(ctx, newRun(nid)); err != nil {
						errs <- err
						return
					}
					if _, err := s.RecordTransition(ctx, Transition{RunID: nid, Seq: 1, Kind: KindRunFinished, At: recent,
						StepIndex: -1, RunStatus: ExecCompleted}, fence1); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					keep(nid)
					mu.Unlock()
				}
			}
		}()
	}
	pruned := pruneAll(t, s, 3, nil)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	wantPruned := []string{"old-decided-gate"}
	for _, st := range []ExecStatus{ExecCompleted, ExecFailed, ExecCancelled} {
		for i := range 4 {
			wantPruned = append(wantPruned, fmt.Sprintf("old-%s-%d", st, i))
		}
	}
	sort.Strings(wantPruned)
	sort.Strings(pruned)
	if !slices.Equal(pruned, wantPruned) {
		t.Errorf("pruned %v\nwant     %v", pruned, wantPruned)
	}
	sort.Strings(want)
	if got := remainingRuns(t, s); !slices.Equal(got, want) {
		t.Errorf("runs left %v\nwant      %v", got, want)
	}
	// The gate of the kept run still waits; the pruned gate is gone.
	if a, err := s.GetApproval(ctx, "gate-open"); err != nil || a.Status != ApprovalPending {
		t.Errorf("gate-open = %v, %v; want it pending", a.Status, err)
	}
	if _, err := s.GetApproval(ctx, "gate-decided"); !errors.Is(err, ErrNotFound) {
		t.Errorf("gate-decided after the prune: %v, want ErrNotFound", err)
	}
	// A second pass finds nothing.
	if again := pruneAll(t, s, 3, nil); len(again) != 0 {
		t.Errorf("second pass pruned %v", again)
	}
}

// seedEveryRunTable writes, for run id (finished long ago with a decided gate), a row in
// every table of prunedTables.
func seedEveryRunTable(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	mustStart(t, s, newRun(id))
	mustRecord(t, s, tr(id, 1))
	gate := "gate-" + id
	mustCreateApproval(t, s, newApproval(gate, id, "deploy"))
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: gate, Verdict: ApprovalApproved, Approver: "bob", At: old}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, id, 2, ExecCompleted, old)
	at := formatTime(old)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO run_plans (run_id, content_hash, plan, stored_at) VALUES (?, ?, ?, ?)`, []any{id, hash(id), []byte("plan"), at}},
		{`INSERT INTO attestations (run_id, approval_id, key_id, envelope, created_at) VALUES (?, '', ?, '{}', ?)`, []any{id, hash(id), at}},
		{`INSERT INTO notification_events (event_id, kind, run_id, approval_id, payload, created_at, routed_at) VALUES (?, 'run.finished', ?, ?, '{}', ?, ?)`,
			[]any{"ev-" + id, id, gate, at, at}},
		{`INSERT INTO notification_deliveries (event_id, channel, created_at, delivered_at) VALUES (?, 'hook', ?, ?)`, []any{"ev-" + id, at, at}},
		{`INSERT INTO slack_messages (approval_id, channel, run_id, slack_channel, ts, created_at) VALUES (?, 'ops', ?, 'C1', '1.2', ?)`,
			[]any{gate, id, at}},
		{`INSERT INTO github_protection_rules (rule_id, callback_url, installation_id, repository, run_id, environment, requested_at,
			approval_id, bound_at, report_state, verdict_state, verdict_at, verdict_sent_at, run_attempt)
			VALUES (?, 'https://example.invalid/cb', 1, 'o/r', '7', 'prod', ?, ?, ?, 'sent', 'approved', ?, ?, '1')`,
			[]any{"rule-" + id, at, gate, at, at, at}},
	} {
		if _, err := s.writer.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("seed %s: %v", q.sql, err)
		}
	}
}

// rowsAbout counts, for each table of prunedTables, the rows about run id (and its gate).
func rowsAbout(t *testing.T, s *Store, id string) map[string]int {
	t.Helper()
	gate := "gate-" + id
	out := map[string]int{}
	for _, q := range []struct{ table, where string }{
		{"approval_votes", "approval_id = ?"},
		{"github_protection_rules", "approval_id = ?"},
		{"slack_messages", "approval_id = ?"},
		{"notification_deliveries", "event_id = 'ev-' || ?"},
		{"notification_events", "approval_id = ?"},
		{"run_plans", "run_id = substr(?, 6)"},
		{"attestations", "run_id = substr(?, 6)"},
		{"run_transitions", "run_id = substr(?, 6)"},
		{"playbook_approvals", "approval_id = ?"},
		{"playbook_runs", "run_id = substr(?, 6)"},
	} {
		arg := gate
		if q.table == "notification_deliveries" {
			arg = id
		}
		var n int
		if err := s.reader.QueryRowContext(context.Background(), `SELECT count(*) FROM `+q.table+` WHERE `+q.where, arg).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", q.table, err)
		}
		out[q.table] = n
	}
	if len(out) != len(prunedTables) {
		t.Fatalf("rowsAbout counts %d tables, prunedTables lists %d: count the new one here", len(out), len(prunedTables))
	}
	return out
}

func TestPruneDeletesEveryRowAboutTheRunAndNothingElse(t *testing.T) {
	s, _ := openTest(t)
	seedEveryRunTable(t, s, "doomed")
	seedEveryRunTable(t, s, "spared")
	// spared ended after the cut-off: move its end.
	if _, err := s.writer.ExecContext(context.Background(), `UPDATE playbook_runs SET completed_at = ? WHERE run_id = 'spared'`, formatTime(recent)); err != nil {
		t.Fatal(err)
	}
	for table, n := range rowsAbout(t, s, "doomed") {
		if n == 0 {
			t.Fatalf("seed wrote no %s row", table)
		}
	}
	before := rowsAbout(t, s, "spared")
	if got := pruneAll(t, s, 10, nil); !slices.Equal(got, []string{"doomed"}) {
		t.Fatalf("pruned %v, want [doomed]", got)
	}
	for table, n := range rowsAbout(t, s, "doomed") {
		if n != 0 {
			t.Errorf("%s still has %d rows about the pruned run", table, n)
		}
	}
	if after := rowsAbout(t, s, "spared"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("rows about the kept run changed: %v, was %v", after, before)
	}
	var marks int
	if err := s.reader.QueryRow(`SELECT count(*) FROM run_prunes`).Scan(&marks); err != nil || marks != 0 {
		t.Errorf("run_prunes holds %d rows after the prune (%v)", marks, err)
	}
}

func TestTransitionsStayAppendOnlyOutsideAPrune(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("r"))
	mustRecord(t, s, tr("r", 1))
	finish(t, s, "r", 2, ExecCompleted, old)
	if _, err := s.writer.ExecContext(context.Background(), `DELETE FROM run_transitions WHERE run_id = 'r'`); err == nil {
		t.Fatal("deleting a transition outside a prune succeeded")
	}
}

func TestPruneKeepsRunsWithOutboxWorkLeft(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	seedEveryRunTable(t, s, "undelivered")
	if _, err := s.writer.ExecContext(ctx, `UPDATE notification_deliveries SET delivered_at = NULL WHERE event_id = 'ev-undelivered'`); err != nil {
		t.Fatal(err)
	}
	seedEveryRunTable(t, s, "unsent")
	if _, err := s.writer.ExecContext(ctx, `UPDATE github_protection_rules SET verdict_sent_at = NULL WHERE rule_id = 'rule-unsent'`); err != nil {
		t.Fatal(err)
	}
	if got := pruneAll(t, s, 10, nil); len(got) != 0 {
		t.Fatalf("pruned %v, want none: each has outbox work left", got)
	}
}

func TestPruneExportsEachRunBeforeDeletingItAndKeepsOnesWhoseExportFailed(t *testing.T) {
	s, _ := openTest(t)
	seedEveryRunTable(t, s, "a")
	seedEveryRunTable(t, s, "b")
	var got []RunRecord
	export := func(_ context.Context, r RunRecord) error {
		// The run is still there while it is exported.
		if _, err := s.Run(context.Background(), r.Run.RunID); err != nil {
			t.Errorf("run %s missing during its export: %v", r.Run.RunID, err)
		}
		if r.Run.RunID == "b" {
			return errors.New("disk full")
		}
		got = append(got, r)
		return nil
	}
	res, err := s.PruneRuns(context.Background(), PruneOptions{Before: cutoff, Export: export})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Pruned, []string{"a"}) || !slices.Equal(res.Skipped, []string{"b"}) || len(res.ExportErrors) != 1 {
		t.Fatalf("pruned %v skipped %v errors %v; want a pruned, b skipped with one error", res.Pruned, res.Skipped, res.ExportErrors)
	}
	if len(got) != 1 {
		t.Fatalf("exported %d records, want 1", len(got))
	}
	r := got[0]
	if r.Run.RunID != "a" || r.Run.Status != RunSucceeded || len(r.Transitions) != 2 || r.Transitions[1].Kind != KindRunFinished {
		t.Errorf("record run %s %s with %d transitions, want a succeeded with 2 ending run_finished", r.Run.RunID, r.Run.Status, len(r.Transitions))
	}
	if len(r.Approvals) != 1 || r.Approvals[0].ApprovalID != "gate-a" || len(r.Approvals[0].Votes) != 1 || r.Approvals[0].Votes[0].Approver != "bob" {
		t.Errorf("record approvals %+v, want gate-a with bob's vote", r.Approvals)
	}
	if left := remainingRuns(t, s); !slices.Equal(left, []string{"b"}) {
		t.Errorf("runs left %v, want [b]", left)
	}
}

// schemaTables lists the database's tables and, for each, its columns.
func schemaTables(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	ctx := context.Background()
	q := `SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`
	if s.dialect == dialectPostgres {
		q = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`
	}
	rows, err := s.reader.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], col)
	}
	return out
}

// A table added by a later migration must be classified: pruned with its run, or listed as
// holding nothing about one. A table with a run, approval or notification-event column must
// be pruned.
func TestEveryTableIsPrunedWithItsRunOrHoldsNoRun(t *testing.T) {
	s, _ := openTest(t)
	pruned := map[string]bool{}
	for _, p := range prunedTables {
		pruned[p.table] = true
	}
	tables := schemaTables(t, s)
	for table, cols := range tables {
		_, known := unprunedTables[table]
		switch {
		case pruned[table] && known:
			t.Errorf("%s is both pruned and listed as holding no run", table)
		case !pruned[table] && !known:
			t.Errorf("table %s is neither pruned with its run (prunedTables) nor listed as holding no run (unprunedTables): classify it in retention.go", table)
		}
		if known && table != "run_prunes" {
			for _, c := range cols {
				if c == "run_id" || c == "approval_id" || c == "event_id" {
					t.Errorf("%s has column %s but a prune leaves it alone: add it to prunedTables", table, c)
				}
			}
		}
	}
	for table := range pruned {
		if _, ok := tables[table]; !ok {
			t.Errorf("prunedTables lists %s, which the schema does not have", table)
		}
	}
	if s.dialect == dialectSQLite {
		// Every foreign key points at a pruned table from a pruned table.
		for table := range tables {
			rows, err := s.reader.Query(`SELECT "table" FROM pragma_foreign_key_list(?)`, table)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var parent string
				if err := rows.Scan(&parent); err != nil {
					t.Fatal(err)
				}
				if pruned[parent] && !pruned[table] {
					t.Errorf("%s references %s, which a prune deletes from, but is not pruned itself", table, parent)
				}
			}
			rows.Close()
		}
	}
}

// Two PostgreSQL replicas pruning at once: one at a time holds the prune lock, so each run
// is exported exactly once and every prunable run is gone.
func TestReplicasPruningTogetherExportEachRunOnce(t *testing.T) {
	dsn := newPGDatabase(t)
	ctx := context.Background()
	var replicas [2]*Store
	for i := range replicas {
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		replicas[i] = s
	}
	const runs = 30
	for i := range runs {
		id := fmt.Sprintf("old-%02d", i)
		mustStart(t, replicas[0], newRun(id))
		finish(t, replicas[0], id, 1, ExecCompleted, old.Add(time.Duration(i)*time.Second))
	}
	var mu sync.Mutex
	exports := map[string]int{}
	export := func(_ context.Context, r RunRecord) error {
		mu.Lock()
		exports[r.Run.RunID]++
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for _, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := PruneOptions{Before: cutoff, Limit: 4, Export: export}
			for {
				res, err := s.PruneRuns(ctx, opts)
				if err != nil {
					t.Errorf("PruneRuns: %v", err)
					return
				}
				if !res.Busy && !res.More {
					return
				}
				if !res.Busy {
					opts.After = res.Next
				}
			}
		}()
	}
	wg.Wait()
	if left := remainingRuns(t, replicas[0]); len(left) != 0 {
		t.Errorf("runs left %v, want none", left)
	}
	if len(exports) != runs {
		t.Errorf("%d runs exported, want %d", len(exports), runs)
	}
	for id, n := range exports {
		if n != 1 {
			t.Errorf("%s exported %d times, want once", id, n)
		}
	}
}
