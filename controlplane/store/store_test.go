package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A path that needs URI escaping must still name one file.
	dir := filepath.Join(t.TempDir(), "with space?and#hash%")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rbook.db")
	if testOnPostgres() {
		path = testDSN(t, "")
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	mustStart(t, s, newRun("R1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(path); err != nil && !testOnPostgres() {
		t.Fatalf("database file not at the given path: %v", err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	defer s.Close()
	var versions int
	if err := s.reader.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&versions); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(s.dialect)
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d (one per migration, applied once)", versions, len(ms))
	}
	if _, _, err := s.GetRun(ctx, "R1"); err != nil {
		t.Fatalf("run written before reopen: %v", err)
	}
}

func TestOpenPragmasAndReadOnlyPool(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	if testOnPostgres() {
		// PostgreSQL: one writer connection, and a reader pool whose sessions are read-only.
		var ro string
		if err := s.reader.QueryRowContext(ctx, "SHOW default_transaction_read_only").Scan(&ro); err != nil || ro != "on" {
			t.Errorf("reader default_transaction_read_only = %q, %v; want on", ro, err)
		}
		var wro string
		if err := s.writer.QueryRowContext(ctx, "SHOW default_transaction_read_only").Scan(&wro); err != nil || wro != "off" {
			t.Errorf("writer default_transaction_read_only = %q, %v; want off", wro, err)
		}
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000"} {
		if testOnPostgres() {
			break // SQLite's pragmas
		}
		var got string
		if err := s.writer.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("writer PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
	if got := s.writer.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer MaxOpenConnections = %d, want 1", got)
	}
	if _, err := s.reader.ExecContext(ctx, "INSERT INTO schema_migrations VALUES (99, 'x', 'y')"); err == nil {
		t.Error("reader pool accepted a write")
	}
}

func TestOpenRefusesNewerSchemaAndMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := openTest(t)
	if _, err := s.writer.ExecContext(ctx, "INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 'now')"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema = %v, want ErrInvalidArgument naming the version", err)
	}
	for _, p := range []string{"", ":memory:"} {
		if _, err := Open(ctx, p); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", p, err)
		}
	}
}

func TestSchemaKeepsSeedColumns(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	want := map[string][]string{
		// docs/spec/playbooks.md, "Table playbook_runs" and "Table playbook_approvals", in its
		// order
		"playbook_runs": {"run_id", "playbook_name", "playbook_hash", "current_node", "bindings", "error_context",
			"status", "iteration_counts", "epic_id", "session_id", "started_at", "completed_at"},
		"playbook_approvals": {"approval_id", "run_id", "node_id", "token", "requested_at", "approved_at", "approver",
			"reason", "status", "auto_passed"},
		"run_transitions": {"run_id", "seq", "kind", "step_index", "step_name", "step_type", "status", "input",
			"output"},
	}
	for table, cols := range want {
		q := "SELECT name FROM pragma_table_info(?) ORDER BY cid"
		if testOnPostgres() {
			q = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position"
		}
		rows, err := s.reader.Query(q, table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
		rows.Close()
		if len(got) < len(cols) || strings.Join(got[:len(cols)], ",") != strings.Join(cols, ",") {
			t.Errorf("%s columns = %v, want to start with %v", table, got, cols)
		}
	}
}

func TestTransitionsAreAppendOnly(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustRecord(t, s, tr("R1", 1))
	for _, q := range []string{"UPDATE run_transitions SET message = 'x'", "DELETE FROM run_transitions"} {
		_, err := s.writer.Exec(q)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v, want the append-only trigger", q, err)
		}
	}
}

// One bad request in a group commit fails alone; the others commit in the same transaction.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	insert := func(id string) func(*writeTx) error {
		return func(w *writeTx) error {
			_, err := w.execSQL("INSERT INTO playbook_runs (run_id, playbook_name, playbook_hash, started_at, updated_at) VALUES (?, 'p', 'h', ?, ?)", id, formatTime(t0), formatTime(t0))
			return err
		}
	}
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	batch := []*writeReq{
		{ctx: context.Background(), fn: insert("A"), done: make(chan error, 1)},
		// Writes, then fails: its savepoint must roll back its own insert only.
		{ctx: context.Background(), fn: func(w *writeTx) error {
			if err := insert("B")(w); err != nil {
				return err
			}
			return boom
		}, done: make(chan error, 1)},
		{ctx: context.Background(), fn: insert("A"), done: make(chan error, 1)}, // duplicate key
		{ctx: cancelled, fn: insert("D"), done: make(chan error, 1)},
		{ctx: context.Background(), fn: insert("C"), done: make(chan error, 1)},
	}
	before := s.Stats()
	// The writer goroutine is idle (nothing queued), and the writer pool has one connection,
	// so running a batch here is what the goroutine would do.
	s.runBatch(batch)
	var errs []error
	for _, r := range batch {
		errs = append(errs, <-r.done)
	}
	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("good requests failed: %v", errs)
	}
	if !errors.Is(errs[1], boom) || errs[2] == nil || !errors.Is(errs[3], context.Canceled) {
		t.Fatalf("bad requests: %v", errs)
	}
	after := s.Stats()
	if after.Commits-before.Commits != 1 || after.Requests-before.Requests != 5 {
		t.Fatalf("stats %+v -> %+v, want one commit of five requests", before, after)
	}
	for id, want := range map[string]bool{"A": true, "B": false, "C": true, "D": false} {
		_, _, err := s.GetRun(context.Background(), id)
		if got := err == nil; got != want {
			t.Errorf("run %s exists = %v (%v), want %v", id, got, err, want)
		}
	}
}

func TestClosedStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartRun(context.Background(), newRun("R1")); !errors.Is(err, ErrClosed) {
		t.Fatalf("StartRun after Close = %v, want ErrClosed", err)
	}
}

func TestCancelledContextDoesNotWrite(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.StartRun(ctx, newRun("R1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("StartRun with a cancelled context = %v", err)
	}
	if _, _, err := s.GetRun(context.Background(), "R1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun = %v, want ErrNotFound", err)
	}
}

func TestSubscribeSeesCommitsUntilUnsubscribed(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	got, unsubscribe := subscribe(s)
	mustStart(t, s, newRun("R1"))
	mustRecord(t, s, tr("R1", 1))
	mustRecord(t, s, tr("R1", 1)) // duplicate: changes nothing, publishes nothing
	if _, err := s.RecordTransition(context.Background(), tr("R1", 5), fence1); !errors.Is(err, ErrOutOfOrder) {
		t.Fatal(err)
	}
	unsubscribe()
	mustRecord(t, s, tr("R1", 2))

	all := got.snapshot()
	if len(all) != 2 {
		t.Fatalf("got %d changes, want 2 (start, transition 1): %+v", len(all), all)
	}
	if len(all[0].Runs) != 1 || all[0].Runs[0].RunID != "R1" || len(all[0].Transitions) != 0 {
		t.Errorf("first change = %+v, want the created run", all[0])
	}
	if len(all[1].Transitions) != 1 || all[1].Transitions[0].Seq != 1 || len(all[1].Runs) != 0 ||
		len(all[1].Progress) != 1 || all[1].Progress[0] != (RunProgress{RunID: "R1", Status: RunRunning, CurrentNode: "step-1", LastSeq: 1, LastCompletedStepIndex: -1,
		Owner: "alice", OwnerIDHash: fence1.OwnerIDHash, LeaseEpoch: 1, LeaseSeconds: 60, LeaseExpiresAt: all[1].Transitions[0].RecordedAt.Add(DefaultLease)}) {
		t.Errorf("second change = %+v, want transition 1 and the run's progress at last_seq 1", all[1])
	}
}

// Sanity check that sql.ErrNoRows never escapes as such.
func TestNotFoundIsSentinel(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	_, _, err1 := s.GetRun(ctx, "nope")
	_, err2 := s.Transitions(ctx, "nope", 1, 0)
	_, err3 := s.GetApproval(ctx, "nope")
	_, err4 := s.GetApprovalByTokenHash(ctx, hash("nope"))
	_, err5 := s.RecordTransition(ctx, tr("nope", 1), fence1)
	_, err6 := s.CancelRun(ctx, "nope", "bob", "", t0)
	for i, err := range []error{err1, err2, err3, err4, err5, err6} {
		if !errors.Is(err, ErrNotFound) || errors.Is(err, sql.ErrNoRows) {
			t.Errorf("call %d: err = %v, want ErrNotFound only", i+1, err)
		}
	}
}

// A database written by the first schema (migration 0001 only) opens, migrates to the latest
// version, keeps its rows, and reads them with the new columns' defaults: on_fail "" and no
// recorded_at.
func TestOpenMigratesAVersion1Database(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, d := testDSN(t, "v1.db"), dialectSQLite
	if testOnPostgres() {
		d = dialectPostgres
	}
	ms, err := loadMigrations(d)
	if err != nil || len(ms) < 2 {
		t.Fatalf("migrations: %d, %v", len(ms), err)
	}
	var old *sql.DB
	if d == dialectPostgres {
		old, _, err = openPGPool(path, false)
	} else {
		old, err = sql.Open("sqlite", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	at := formatTime(t0)
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT`,
		ms[0].sql,
		`INSERT INTO schema_migrations VALUES (1, '` + ms[0].name + `', '` + at + `')`,
		`INSERT INTO playbook_runs (run_id, playbook_name, playbook_hash, started_at, updated_at, last_seq)
		 VALUES ('R1', 'demo', '` + hash("plan-R1") + `', '` + at + `', '` + at + `', 1)`,
		`INSERT INTO run_transitions (run_id, seq, kind, step_index, step_name, step_type, run_status, at)
		 VALUES ('R1', 1, 'run_started', -1, '', '', 'IN_PROGRESS', '` + at + `')`,
		`INSERT INTO playbook_approvals (approval_id, run_id, node_id, token, requested_at, plan_digest)
		 VALUES ('a1', 'R1', 'approve', '` + hash("token-a1") + `', '` + at + `', '` + hash("plan-R1") + `')`,
	} {
		if _, err := old.ExecContext(ctx, q); err != nil {
			t.Fatalf("building the version-1 database: %v\n%s", err, q)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path, WithClock((&testClock{}).now))
	if err != nil {
		t.Fatalf("Open of a version-1 database: %v", err)
	}
	defer s.Close()
	var version int
	if err := s.reader.QueryRowContext(ctx, "SELECT max(version) FROM schema_migrations").Scan(&version); err != nil || version != len(ms) {
		t.Fatalf("schema version %d (%v), want %d", version, err, len(ms))
	}
	_, ts, err := s.GetRun(ctx, "R1")
	if err != nil || len(ts) != 1 || !ts[0].RecordedAt.IsZero() {
		t.Fatalf("old transition = %+v, %v; want one, without recorded_at", ts, err)
	}
	if a, err := s.GetApproval(ctx, "a1"); err != nil || a.OnFail != "" || a.Status != ApprovalPending {
		t.Fatalf("old approval = %+v, %v; want pending with on_fail \"\"", a, err)
	}
	// A run from before the lease has no owner: it is written again only after a take-over.
	if _, err := s.RecordTransition(ctx, tr("R1", 2), fence1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a write to an unowned migrated run = %v, want ErrLeaseLost", err)
	}
	take := newRun("R1")
	take.TakeOver = true
	if _, outcome, err := s.StartRun(ctx, take); err != nil || outcome != TookOver {
		t.Fatalf("take-over of the migrated run = %v, %v", outcome, err)
	}
	res := mustRecord(t, s, tr("R1", 2))
	if res.Progress.LastSeq != 2 {
		t.Fatalf("a new transition on the migrated run: %+v", res)
	}
	if _, ts, _ := s.GetRun(ctx, "R1"); len(ts) != 2 || ts[1].RecordedAt.IsZero() {
		t.Fatalf("new transition = %+v, want recorded_at set", ts)
	}
	if _, err := s.writer.ExecContext(ctx, "UPDATE playbook_approvals SET on_fail = 'retry'"); err == nil {
		t.Fatal("on_fail accepted a word outside halt, rollback, continue")
	}
}
