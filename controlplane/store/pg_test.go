package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// openPGPair opens two Stores (two replicas) on one fresh PostgreSQL database.
func openPGPair(t *testing.T) (a, b *Store, dsn string) {
	t.Helper()
	dsn = newPGDatabase(t)
	ctx := context.Background()
	for _, p := range []**Store{&a, &b} {
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		*p = s
	}
	return a, b, dsn
}

// Two Opens at once on a fresh database both succeed, and each
// migration is applied once.
func TestPGConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dsn := newPGDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stores, errs := make([]*Store, 2), make([]error, 2)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(ctx, dsn)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ms, err := loadMigrations(dialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := stores[0].reader.QueryContext(ctx, "SELECT version, name FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s", v, name))
	}
	var want []string
	for _, m := range ms {
		want = append(want, fmt.Sprintf("%d %s", m.version, m.name))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("schema_migrations = %v, want each of %v once", got, want)
	}
	sqliteMs, _ := loadMigrations(dialectSQLite)
	for i := range sqliteMs {
		if sqliteMs[i].name != ms[i].name {
			t.Errorf("migration %d: SQLite %s, PostgreSQL %s: both dialects list the same migrations", i+1, sqliteMs[i].name, ms[i].name)
		}
	}
	if len(sqliteMs) != len(ms) {
		t.Errorf("%d SQLite migrations, %d PostgreSQL ones", len(sqliteMs), len(ms))
	}
	// Both stores work on the one database.
	mustStart(t, stores[0], newRun("R1"))
	if _, _, err := stores[1].GetRun(ctx, "R1"); err != nil {
		t.Fatalf("replica B reads replica A's run: %v", err)
	}
}

// OpenReadOnly on a postgres DSN reads, refuses writes (ErrReadOnly, and
// the server refuses its sessions' writes too), and refuses a schema that is not this
// rbook's.
func TestPGReadOnlyStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := newPGDatabase(t)
	w, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustStart(t, w, newRun("R1"))
	mustRecord(t, w, tr("R1", 1))
	ro, err := OpenReadOnly(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() = false")
	}
	if _, ts, err := ro.GetRun(ctx, "R1"); err != nil || len(ts) != 1 {
		t.Fatalf("GetRun on the read-only store = %d transitions, %v", len(ts), err)
	}
	if _, err := ro.RecordTransition(ctx, tr("R1", 2), fence1); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write on the read-only store = %v, want ErrReadOnly", err)
	}
	if _, err := ro.reader.ExecContext(ctx, "DELETE FROM github_deliveries"); pgCode(err) != "25006" {
		t.Fatalf("a raw write on the read-only pool = %v, want SQLSTATE 25006 (read-only transaction)", err)
	}
	// Mid-write by the writer: the read-only store sees every commit.
	mustRecord(t, w, tr("R1", 2))
	if _, ts, _ := ro.GetRun(ctx, "R1"); len(ts) != 2 {
		t.Fatalf("read-only store sees %d transitions after the writer's commit, want 2", len(ts))
	}

	older := newPGDatabase(t)
	downgradeToSchema1(t, ctx, older)
	if _, err := OpenReadOnly(ctx, older); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "older") {
		t.Fatalf("OpenReadOnly of an older schema = %v, want ErrInvalidArgument naming it older", err)
	}
	empty := newPGDatabase(t)
	if _, err := OpenReadOnly(ctx, empty); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "not an rbook") {
		t.Fatalf("OpenReadOnly of an empty database = %v, want ErrInvalidArgument", err)
	}
}

// A DSN's password never reaches an error.
func TestDSNPasswordRedacted(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://rbook:s3cret@127.0.0.1:1/db?sslmode=disable":     "postgres://rbook:xxxxx@127.0.0.1:1/db?sslmode=disable",
		"postgresql://u@h/db?password=s3cret&sslmode=disable":        "postgresql://u@h/db?password=xxxxx&sslmode=disable",
		"/var/lib/rbook/cp.db":                                       "/var/lib/rbook/cp.db",
		"postgres://rbook:s3cret@127.0.0.1:1/db?connect_timeout=bad": "postgres://rbook:xxxxx@127.0.0.1:1/db?connect_timeout=bad",
	} {
		if got := RedactDSN(dsn); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
	// Nothing listens on port 1: the connection error names the DSN without the password.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://rbook:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open with an unreachable server = %v; want an error without the password", err)
	}
}

// Two Stores (replicas) on one database alternate transitions of
// one run. Each must read the run as the other left it: a progress cache kept across
// batches would refuse every second transition as out of order.
func TestPGTwoStoresAlternateTransitions(t *testing.T) {
	t.Parallel()
	a, b, _ := openPGPair(t)
	ctx := context.Background()
	mustStart(t, a, newRun("R1"))
	stores := []*Store{a, b}
	for seq := int64(1); seq <= 20; seq++ {
		s := stores[seq%2]
		res, err := s.RecordTransition(ctx, tr("R1", seq), fence1)
		if err != nil || res.Duplicate || res.Progress.LastSeq != seq {
			t.Fatalf("#%d on store %d = %+v, %v; want stored with last_seq %d", seq, seq%2, res, err, seq)
		}
		// The other replica answers a replay of it as a duplicate.
		dup, err := stores[(seq+1)%2].RecordTransition(ctx, tr("R1", seq), fence1)
		if err != nil || !dup.Duplicate || dup.Progress.LastSeq != seq {
			t.Fatalf("replay of #%d on the other store = %+v, %v; want a duplicate", seq, dup, err)
		}
	}
	run, ts, err := b.GetRun(ctx, "R1")
	if err != nil || run.LastSeq != 20 || len(ts) != 20 {
		t.Fatalf("run after 20 alternating transitions: last_seq %d, %d transitions, %v", run.LastSeq, len(ts), err)
	}
	for i, x := range ts {
		if sent(t, x) != tr("R1", int64(i+1)) {
			t.Fatalf("transition %d = %+v", i+1, x)
		}
	}
}

// Concurrent approvals of one gate through two Stores:
// exactly one decides it; and the same seq recorded through both at once is stored once,
// the other call answered as a duplicate.
func TestPGTwoStoresOneApproveWins(t *testing.T) {
	t.Parallel()
	a, b, _ := openPGPair(t)
	ctx := context.Background()
	mustStart(t, a, newRun("R1"))
	mustCreateApproval(t, a, newApproval("ap1", "R1", "approve"))
	const voters = 8
	var wg sync.WaitGroup
	results := make([]error, voters)
	decided := make([]Approval, voters)
	start := make(chan struct{})
	for i := 0; i < voters; i++ {
		s := []*Store{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			decided[i], results[i] = s.DecideApproval(ctx, Decision{ApprovalID: "ap1", Verdict: ApprovalApproved,
				Approver: fmt.Sprintf("user-%d", i), At: t0.Add(2 * time.Minute)})
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	var winner string
	for i, err := range results {
		switch {
		case err == nil:
			wins++
			winner = fmt.Sprintf("user-%d", i)
			if decided[i].Status != ApprovalApproved || decided[i].Approver != winner {
				t.Errorf("winner %d got %+v", i, decided[i])
			}
		case errors.Is(err, ErrAlreadyDecided):
		default:
			t.Errorf("approve %d: %v", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d approvals won across two stores, want exactly 1 (%v)", wins, results)
	}
	final, err := b.GetApproval(ctx, "ap1")
	if err != nil || final.Status != ApprovalApproved || final.Approver != winner || len(final.Votes) != 1 {
		t.Fatalf("stored approval = %+v, %v; want approved by %s with one vote", final, err, winner)
	}

	for seq := int64(1); seq <= 10; seq++ {
		var rs [2]RecordResult
		var es [2]error
		var wg sync.WaitGroup
		for i, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs[i], es[i] = s.RecordTransition(ctx, tr("R1", seq), fence1)
			}()
		}
		wg.Wait()
		if es[0] != nil || es[1] != nil || rs[0].Duplicate == rs[1].Duplicate {
			t.Fatalf("#%d through both stores at once = %+v %v / %+v %v; want one stored, one duplicate", seq, rs[0], es[0], rs[1], es[1])
		}
	}
	if _, ts, _ := a.GetRun(ctx, "R1"); len(ts) != 10 {
		t.Fatalf("%d transitions stored, want 10", len(ts))
	}
}

// Every committed batch that changed something
// notifies rbook_changes with {"o":origin,"r":[runs],"a":[approvals]}, delivered on
// commit; a batch that changed nothing sends none.
func TestPGNotifyOnCommit(t *testing.T) {
	t.Parallel()
	dsn := newPGDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if _, err := l.Exec(ctx, "LISTEN "+pgNotifyChannel); err != nil {
		t.Fatal(err)
	}
	next := func() map[string]any {
		t.Helper()
		n, err := l.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(n.Payload), &m); err != nil {
			t.Fatalf("payload %q: %v", n.Payload, err)
		}
		return m
	}
	if len(s.origin) != 16 {
		t.Fatalf("origin %q, want 16 hex digits", s.origin)
	}
	mustStart(t, s, newRun("R1"))
	if got, want := fmt.Sprint(next()), fmt.Sprint(map[string]any{"o": s.origin, "r": []any{"R1"}, "a": []any{}}); got != want {
		t.Fatalf("StartRun notification %s, want %s", got, want)
	}
	if _, err := s.RecordTransition(ctx, tr("R1", 1), Fence{OwnerIDHash: OwnerIDHash("someone else"), Epoch: 1}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("fenced-off write = %v", err)
	}
	mustCreateApproval(t, s, newApproval("ap1", "R1", "approve"))
	if got, want := fmt.Sprint(next()), fmt.Sprint(map[string]any{"o": s.origin, "r": []any{}, "a": []any{"ap1"}}); got != want {
		t.Fatalf("CreateApproval notification %s, want %s (the refused write sent none)", got, want)
	}

	var big Change
	for i := 0; i < 400; i++ {
		big.Runs = append(big.Runs, Run{RunID: fmt.Sprintf("run-with-a-long-identifier-%04d", i)})
	}
	if got := changePayload("abc", big); got != `{"o":"abc","all":true}` {
		t.Fatalf("payload of a change past %d bytes = %.80s…", maxNotifyPayload, got)
	}
}

// Two replicas that lock two runs in opposite orders deadlock;
// PostgreSQL aborts one transaction (40P01) and that replica runs its batch again, so both
// writes succeed.
func TestPGDeadlockRetriesTheBatch(t *testing.T) {
	t.Parallel()
	a, b, _ := openPGPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustStart(t, a, newRun("R1"))
	mustStart(t, a, newRun("R2"))
	aLocked, bLocked := make(chan struct{}), make(chan struct{})
	var aOnce, bOnce sync.Once
	lockBoth := func(first, second string, mine chan struct{}, once *sync.Once, theirs chan struct{}) func(*writeTx) error {
		return func(w *writeTx) error {
			var id string
			if err := w.readRow(forUpdate("SELECT run_id FROM playbook_runs WHERE run_id = ?"), first).Scan(&id); err != nil {
				return fmt.Errorf("lock %s: %w", first, err)
			}
			once.Do(func() { close(mine) })
			<-theirs // both hold their first lock before either asks for its second
			if err := w.readRow(forUpdate("SELECT run_id FROM playbook_runs WHERE run_id = ?"), second).Scan(&id); err != nil {
				return fmt.Errorf("lock %s: %w", second, err)
			}
			_, err := w.execSQL("UPDATE playbook_runs SET cancel_reason = ? WHERE run_id IN (?, ?)", "touched by "+first, first, second)
			return err
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = a.write(ctx, lockBoth("R1", "R2", aLocked, &aOnce, bLocked)) }()
	go func() { defer wg.Done(); errs[1] = b.write(ctx, lockBoth("R2", "R1", bLocked, &bOnce, aLocked)) }()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("writes after a deadlock = %v, %v; want both to succeed after a retry", errs[0], errs[1])
	}
	if n := a.conflictRetries.Load() + b.conflictRetries.Load(); n < 1 {
		t.Fatalf("%d conflict retries, want at least 1 (one transaction was the deadlock victim)", n)
	}
}

// A unique violation is re-run once as a possible race with
// another replica (the re-run sees the committed row and takes the idempotent path); one
// that happens again is the request's own error, not a loop.
func TestPGUniqueViolationRetriedOnce(t *testing.T) {
	t.Parallel()
	a, b, _ := openPGPair(t)
	ctx := context.Background()
	if _, err := b.RecordGitHubDelivery(ctx, GitHubDelivery{ID: "d1", Event: "ping"}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	err := a.write(ctx, func(w *writeTx) error {
		runs++
		if runs == 1 {
			// As if replica B committed d1 between this request's read and its insert.
			_, err := w.execSQL("INSERT INTO github_deliveries (delivery_id, event, action, processed_at) VALUES ('d1', 'ping', '', 'x')")
			return fmt.Errorf("store: insert delivery: %w", err)
		}
		var one int
		return w.readRow("SELECT 1 FROM github_deliveries WHERE delivery_id = 'd1'").Scan(&one) // the duplicate path
	})
	if err != nil || runs != 2 || a.conflictRetries.Load() != 1 {
		t.Fatalf("write = %v after %d runs, %d conflict retries; want success on the re-run", err, runs, a.conflictRetries.Load())
	}
	err = a.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL("INSERT INTO github_deliveries (delivery_id, event, action, processed_at) VALUES ('d1', 'ping', '', 'x')")
		return err
	})
	if !isUniqueViolation(err) || a.conflictRetries.Load() != 2 {
		t.Fatalf("a repeated unique violation = %v (%d retries); want the violation, retried once", err, a.conflictRetries.Load())
	}
}

// Text compares in byte order on PostgreSQL as on SQLite (every
// TEXT column is COLLATE "C"), so run lists order ids alike whatever the database's
// default collation.
func TestTextOrderIsBytewise(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	checkBytewiseListOrder(t, s)
	if testOnPostgres() {
		// A database whose default collation is not byte order (ICU en-US ignores
		// punctuation and case at first): the columns' own COLLATE "C" decides.
		dsn := newPGDatabaseWith(t, `TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`)
		us, err := Open(context.Background(), dsn, WithClock((&testClock{}).now))
		if err != nil {
			t.Fatal(err)
		}
		defer us.Close()
		checkBytewiseListOrder(t, us)
	}
}

func checkBytewiseListOrder(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	ids := []string{"run-a", "RUN-b", "run_c", "run-B", "run.d"}
	for _, id := range ids {
		nr := newRun(id)
		nr.StartedAt = t0 // one start time: the run_id breaks the tie
		mustStart(t, s, nr)
	}
	page, err := s.ListRuns(ctx, RunFilter{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for {
		for _, r := range page.Runs {
			got = append(got, r.RunID)
		}
		if page.NextPageToken == "" {
			break
		}
		if page, err = s.ListRuns(ctx, RunFilter{PageSize: 2, PageToken: page.NextPageToken}); err != nil {
			t.Fatal(err)
		}
	}
	// Descending byte order: lowercase after uppercase, '_' (0x5f) after '.' and '-'.
	if want := "run_c,run.d,run-a,run-B,RUN-b"; strings.Join(got, ",") != want {
		t.Fatalf("runs in list order = %v, want %s", got, want)
	}
}

// recordReq is RecordTransition's write request, for tests that build a batch by hand.
func recordReq(s *Store, x Transition, res *RecordResult) *writeReq {
	return &writeReq{ctx: context.Background(), run: x.RunID, done: make(chan error, 1), fn: func(w *writeTx) error {
		run, err := w.progress(x.RunID)
		if err != nil {
			return err
		}
		st, err := RunStatusOf(x.RunStatus, x.Kind)
		if err != nil {
			return err
		}
		return s.recordOne(w, run, x, st, fence1, res)
	}}
}

// runBatchNow runs batch on the (idle) writer and returns each request's result.
func runBatchNow(s *Store, batch ...*writeReq) []error {
	s.runBatch(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = <-r.done
	}
	return errs
}

// Deferred writes (pgdefer.go): transitions queued in a batch are written before a
// request that may touch the same rows (here a raw insert of the same seq, then CancelRun),
// and a flush that fails (the queued seq was taken behind the store's back) re-runs the
// batch with savepoints so that only the failing request fails. Same results on SQLite,
// where nothing is queued.
func TestDeferredTransitionsFlushAndIsolate(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	var r1, r2 RecordResult
	sneak := &writeReq{ctx: context.Background(), done: make(chan error, 1), fn: func(w *writeTx) error {
		// Seq 1 of R1 stored without the run row knowing (as a buggy peer would).
		_, err := w.execSQL(`INSERT INTO run_transitions (run_id, seq, kind, step_index, step_name, step_type, run_status, at)
			VALUES ('R1', 1, 'step_started', 0, 'x', 'check', 'IN_PROGRESS', ?)`, formatTime(t0))
		return err
	}}
	errs := runBatchNow(s, sneak, recordReq(s, tr("R1", 1), &r1), recordReq(s, tr("R2", 1), &r2))
	if errs[0] != nil || !isUniqueViolation(errs[1]) || errs[2] != nil {
		t.Fatalf("results %v; want the raw insert and R2 #1 stored, R1 #1 refused by its unique key", errs)
	}
	if testOnPostgres() && (s.Stats().SafeRetries != 1 || s.conflictRetries.Load() != 1) {
		t.Fatalf("%d safe retries, %d conflict retries; want 1 and 1 (failed flush, then the unique key re-run once)",
			s.Stats().SafeRetries, s.conflictRetries.Load())
	}
	if _, ts, _ := s.GetRun(context.Background(), "R2"); len(ts) != 1 || r2.Progress.LastSeq != 1 {
		t.Fatalf("R2 has %d transitions (%+v), want 1", len(ts), r2)
	}
	if run, _, _ := s.GetRun(context.Background(), "R1"); run.LastSeq != 0 {
		t.Fatalf("R1 last_seq = %d, want 0 (its transition failed)", run.LastSeq)
	}

	// A queued transition, then CancelRun of the same run in the same batch: the cancel sees
	// the transition stored and its own update is not overwritten by the queued one.
	var r3 RecordResult
	cancel := &writeReq{ctx: context.Background(), done: make(chan error, 1), fn: func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE playbook_runs SET status = 'cancelled', current_node = NULL WHERE run_id = 'R2' AND last_seq = 2`)
		return err
	}}
	errs = runBatchNow(s, recordReq(s, tr("R2", 2), &r3), cancel)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("results %v", errs)
	}
	run, ts, err := s.GetRun(context.Background(), "R2")
	if err != nil || len(ts) != 2 || run.LastSeq != 2 || run.Status != RunCancelled || run.CurrentNode != "" {
		t.Fatalf("R2 = status %s, current_node %q, last_seq %d, %d transitions, %v; want cancelled after #2",
			run.Status, run.CurrentNode, run.LastSeq, len(ts), err)
	}
}
