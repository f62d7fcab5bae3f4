package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The change fan-out between two Stores on one PostgreSQL database
// (pglisten.go, docs/decisions/change-fanout.md). These tests always run on PostgreSQL
// (skipped with docs/decisions/postgres-tests.md's message
// without RBOOK_TEST_POSTGRES_URL), whatever RBOOK_TEST_STORE says.

// openReplicas opens two Stores, A and B, on one fresh PostgreSQL database, sharing a clock.
func openReplicas(t *testing.T) (a, b *Store, dsn string) {
	t.Helper()
	dsn = newPGDatabase(t)
	clock := &testClock{}
	open := func() *Store {
		s, err := Open(context.Background(), dsn, WithClock(clock.now))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	return open(), open(), dsn
}

// feed collects the changes a Store publishes and wakes waiters on each one.
type feed struct {
	mu      sync.Mutex
	all     []Change
	changed chan struct{}
}

func follow(s *Store) *feed {
	f := &feed{changed: make(chan struct{})}
	s.Subscribe(func(c Change) {
		f.mu.Lock()
		f.all = append(f.all, c)
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
	})
	return f
}

// await waits (up to 20 s, woken by each published change) until ok holds for everything
// published so far.
func (f *feed) await(t *testing.T, what string, ok func([]Change) bool) []Change {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		all, ch := append([]Change(nil), f.all...), f.changed
		f.mu.Unlock()
		if ok(all) {
			return all
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("never published %s; got %d changes: %s", what, len(all), summary(all))
		}
	}
}

// summary names what each change holds (run#seq transitions, run rows, approval states).
func summary(all []Change) string {
	var b []string
	for _, c := range all {
		var parts []string
		for _, x := range c.Transitions {
			parts = append(parts, fmt.Sprintf("%s#%d", x.RunID, x.Seq))
		}
		for _, r := range c.Runs {
			parts = append(parts, "row:"+r.RunID)
		}
		for _, a := range c.Approvals {
			parts = append(parts, a.ApprovalID+":"+string(a.Status))
		}
		b = append(b, "{"+strings.Join(parts, " ")+"}")
	}
	return strings.Join(b, " ")
}

// seqsOf lists the seqs of run's transitions in the order they were published.
func seqsOf(all []Change, run string) []int64 {
	var out []int64
	for _, c := range all {
		for _, x := range c.Transitions {
			if x.RunID == run {
				out = append(out, x.Seq)
			}
		}
	}
	return out
}

func upTo(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

func approvalStates(all []Change, id string) []ApprovalStatus {
	var out []ApprovalStatus
	for _, c := range all {
		for _, a := range c.Approvals {
			if a.ApprovalID == id {
				out = append(out, a.Status)
			}
		}
	}
	return out
}

func TestListenerPublishesWhatAnotherReplicaRecorded(t *testing.T) {
	a, b, _ := openReplicas(t)
	fb := follow(b)
	ctx := context.Background()
	mustStart(t, a, newRun("r1"))
	const n = 40
	for seq := int64(1); seq <= n; seq++ {
		mustRecord(t, a, tr("r1", seq))
	}
	all := fb.await(t, "r1's 40 transitions", func(all []Change) bool { return len(seqsOf(all, "r1")) >= n })
	if got := seqsOf(all, "r1"); fmt.Sprint(got) != fmt.Sprint(upTo(n)) {
		t.Fatalf("B published r1's seqs %v, want 1..%d once each, in order", got, n)
	}
	// Every published transition carries its run's progress at that seq.
	for _, c := range all {
		for i, x := range c.Transitions {
			if p := c.Progress[i]; p.RunID != x.RunID || p.LastSeq != x.Seq || p.Status != RunRunning {
				t.Fatalf("progress of r1 #%d = %+v, want last_seq %d, running", x.Seq, p, x.Seq)
			}
		}
	}
	var sawRun bool
	for _, c := range all {
		for _, r := range c.Runs {
			sawRun = sawRun || r.RunID == "r1"
		}
	}
	if !sawRun {
		t.Fatal("B never published r1's row (its creation on A)")
	}

	// A gate opened and decided on A reaches B's subscribers, pending then approved.
	mustCreateApproval(t, a, newApproval("ap1", "r1", "approve"))
	if _, err := a.DecideApproval(ctx, Decision{ApprovalID: "ap1", Verdict: ApprovalApproved, Approver: "bob", At: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// (B reads the row when it hears of it, so it may publish the approved row alone.)
	all = fb.await(t, "ap1 approved", func(all []Change) bool {
		s := approvalStates(all, "ap1")
		return len(s) > 0 && s[len(s)-1] == ApprovalApproved
	})
	if s := approvalStates(all, "ap1"); len(s) > 2 || (len(s) == 2 && s[0] != ApprovalPending) {
		t.Fatalf("B published ap1 as %v, want [pending approved] or [approved]", s)
	}

	// B's own commits are published once, by its writer (its listener skips its origin), and
	// they raise its mark, so A's later commits for the run continue the sequence.
	res, err := b.RecordTransition(ctx, tr("r1", n+1), fence1)
	if err != nil || res.Duplicate {
		t.Fatalf("RecordTransition on B: %+v, %v", res, err)
	}
	mustRecord(t, a, tr("r1", n+2))
	all = fb.await(t, "r1 #42", func(all []Change) bool { return len(seqsOf(all, "r1")) >= n+2 })
	if got := seqsOf(all, "r1"); fmt.Sprint(got) != fmt.Sprint(upTo(n+2)) {
		t.Fatalf("B published r1's seqs %v, want 1..%d once each", got, n+2)
	}
	if got := b.fan.notices.Load(); got == 0 {
		t.Fatal("B's listener counted no notification from A")
	}
}

func TestListenerCatchesUpAfterItsConnectionIsKilled(t *testing.T) {
	a, b, dsn := openReplicas(t)
	gate := make(chan struct{})
	b.fan.reconnectGate = gate // set before the kill: the listener reads it only on reconnect
	fb := follow(b)
	mustStart(t, a, newRun("r2"))
	mustRecord(t, a, tr("r2", 1))
	fb.await(t, "r2 #1", func(all []Change) bool { return len(seqsOf(all, "r2")) == 1 })

	pid := b.fan.pid.Load()
	if pid == 0 {
		t.Fatal("B's listener has no connection")
	}
	connects, catchUps := b.fan.connects.Load(), b.fan.catchUps.Load()
	db := rawPG(t, dsn)
	var killed bool
	if err := db.QueryRowContext(context.Background(), "SELECT pg_terminate_backend($1)", int64(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	// The listener is away until the gate opens: nothing A commits now is heard.
	for seq := int64(2); seq <= 6; seq++ {
		mustRecord(t, a, tr("r2", seq))
	}
	mustCreateApproval(t, a, newApproval("ap2", "r2", "approve"))
	close(gate)

	all := fb.await(t, "r2 #2..6 and ap2 after the reconnect", func(all []Change) bool {
		return len(seqsOf(all, "r2")) >= 6 && len(approvalStates(all, "ap2")) > 0
	})
	if got := seqsOf(all, "r2"); fmt.Sprint(got) != fmt.Sprint(upTo(6)) {
		t.Fatalf("B published r2's seqs %v, want 1..6 once each, in order", got)
	}
	if b.fan.connects.Load() != connects+1 || b.fan.catchUps.Load() != catchUps+1 {
		t.Fatalf("connects %d→%d, catch-ups %d→%d: want one reconnect and one catch-up read",
			connects, b.fan.connects.Load(), catchUps, b.fan.catchUps.Load())
	}
	if b.fan.pid.Load() == pid {
		t.Fatal("the listener reports the killed backend's pid")
	}
	// And it listens again.
	mustRecord(t, a, tr("r2", 7))
	all = fb.await(t, "r2 #7", func(all []Change) bool { return len(seqsOf(all, "r2")) >= 7 })
	if got := seqsOf(all, "r2"); fmt.Sprint(got) != fmt.Sprint(upTo(7)) {
		t.Fatalf("B published r2's seqs %v, want 1..7", got)
	}
}

func TestConcurrentDecisionsOnTwoReplicasDecideOnce(t *testing.T) {
	a, b, _ := openReplicas(t)
	ctx := context.Background()
	mustStart(t, a, newRun("r3"))
	for i := range 20 {
		id := fmt.Sprintf("g%d", i)
		mustCreateApproval(t, a, newApproval(id, "r3", id))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := []ApprovalStatus{ApprovalApproved, ApprovalRejected}[j]
				_, errs[j] = s.DecideApproval(ctx, Decision{ApprovalID: id, Verdict: v, Approver: fmt.Sprintf("who%d", j), At: t0.Add(2 * time.Minute)})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrAlreadyDecided):
				t.Fatalf("%s: a losing decision got %v, want ErrAlreadyDecided", id, err)
			}
		}
		got, err := a.GetApproval(ctx, id)
		if won != 1 || err != nil || got.Status == ApprovalPending || len(got.Votes) != 1 {
			t.Fatalf("%s: %d winners, row %+v (%v): want one decision with one vote", id, won, got, err)
		}
	}
}

func TestDeadlineExpiresOnceWithBothSweepers(t *testing.T) {
	a, b, _ := openReplicas(t)
	ctx := context.Background()
	mustStart(t, a, newRun("r4"))
	for i := range 20 {
		mustCreateApproval(t, a, newApproval(fmt.Sprintf("d%d", i), "r4", fmt.Sprintf("d%d", i)))
	}
	var wg sync.WaitGroup
	got := make([][]Approval, 2)
	errs := make([]error, 2)
	for j, s := range []*Store{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); got[j], errs[j] = s.ExpireDueApprovals(ctx, t0.Add(2*time.Hour)) }()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("ExpireDueApprovals: %v / %v", errs[0], errs[1])
	}
	seen := map[string]int{}
	for _, list := range got {
		for _, x := range list {
			seen[x.ApprovalID]++
		}
	}
	if len(seen) != 20 {
		t.Fatalf("expired %d distinct gates (%v), want 20", len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("gate %s expired %d times, want once", id, n)
		}
	}
}

func TestLocalCommitAfterAnUnheardRemoteOneKeepsSeqOrder(t *testing.T) {
	a, b, dsn := openReplicas(t)
	gate := make(chan struct{})
	b.fan.reconnectGate = gate
	fb := follow(b)
	mustStart(t, a, newRun("r5"))
	mustRecord(t, a, tr("r5", 1))
	fb.await(t, "r5 #1", func(all []Change) bool { return len(seqsOf(all, "r5")) == 1 })
	var killed bool
	if err := rawPG(t, dsn).QueryRowContext(context.Background(), "SELECT pg_terminate_backend($1)", int64(b.fan.pid.Load())).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend: %v, %v", killed, err)
	}
	// The executor records #2 through A (B does not hear it), then moves to B for #3 and #4.
	mustRecord(t, a, tr("r5", 2))
	mustRecord(t, b, tr("r5", 3))
	mustRecord(t, b, tr("r5", 4))
	if got := seqsOf(fb.await(t, "r5 #4", func(all []Change) bool { return len(seqsOf(all, "r5")) >= 4 }), "r5"); fmt.Sprint(got) != fmt.Sprint(upTo(4)) {
		t.Fatalf("B published r5's seqs %v, want 1..4 in order (the unheard #2 before B's own #3)", got)
	}
	close(gate) // the catch-up after the reconnect finds nothing new
	mustRecord(t, a, tr("r5", 5))
	if got := seqsOf(fb.await(t, "r5 #5", func(all []Change) bool { return len(seqsOf(all, "r5")) >= 5 }), "r5"); fmt.Sprint(got) != fmt.Sprint(upTo(5)) {
		t.Fatalf("B published r5's seqs %v, want 1..5 once each", got)
	}
}

func TestTwoOfNVotesOnTwoReplicasBothCount(t *testing.T) {
	a, b, _ := openReplicas(t)
	ctx := context.Background()
	mustStart(t, a, newRun("r6"))
	for i := range 10 {
		id := fmt.Sprintf("m%d", i)
		na := newApproval(id, "r6", id)
		na.ApprovalsRequired = 2
		mustCreateApproval(t, a, na)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = s.DecideApproval(ctx, Decision{ApprovalID: id, Verdict: ApprovalApproved, Approver: fmt.Sprintf("voter%d", j), At: t0.Add(2 * time.Minute)})
			}()
		}
		wg.Wait()
		got, err := b.GetApproval(ctx, id)
		if errs[0] != nil || errs[1] != nil || err != nil || got.Status != ApprovalApproved || len(got.Votes) != 2 {
			t.Fatalf("%s: votes through A and B: %v / %v; row %s with %d votes (%v): want approved with both votes",
				id, errs[0], errs[1], got.Status, len(got.Votes), err)
		}
	}
}

// A batch whose first transition is written deferred (pgdefer.go) and whose next one changes
// the run's status (a gate opens) must leave the run at the later seq (it once ended in
// E_SEQ_GAP after the demo's gate).
func TestDeferredTransitionThenStatusChangeKeepsLastSeq(t *testing.T) {
	a, _, _ := openReplicas(t)
	ctx := context.Background()
	mustStart(t, a, newRun("r7"))
	mustRecord(t, a, tr("r7", 1))
	gateOpened := tr("r7", 3)
	gateOpened.Kind = KindGateOpened
	if _, err := a.RecordTransitions(ctx, []Transition{tr("r7", 2), gateOpened}, fence1); err != nil {
		t.Fatalf("RecordTransitions: %v", err)
	}
	run, err := a.Run(ctx, "r7")
	if err != nil || run.LastSeq != 3 || run.Status != RunPaused {
		t.Fatalf("run after #2 and a gate_opened #3: last_seq %d, %s (%v); want 3, paused", run.LastSeq, run.Status, err)
	}
	mustRecord(t, a, tr("r7", 4))
}

// A gap longer than one page of transitions (MaxTransitionsPage) is filled whole: B's local
// commit after A recorded 1,100 transitions B did not hear publishes all of them first, in
// order (fillGaps reads page after page; before, it stopped after the first page and
// watchers on B never saw seqs 1,002..1,101).
func TestLocalCommitAfterAGapLongerThanAPageKeepsSeqOrder(t *testing.T) {
	a, b, dsn := openReplicas(t)
	ctx := context.Background()
	gate := make(chan struct{})
	b.fan.reconnectGate = gate
	fb := follow(b)
	mustStart(t, a, newRun("r8"))
	mustRecord(t, a, tr("r8", 1))
	fb.await(t, "r8 #1", func(all []Change) bool { return len(seqsOf(all, "r8")) == 1 })
	var killed bool
	if err := rawPG(t, dsn).QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", int64(b.fan.pid.Load())).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend: %v, %v", killed, err)
	}
	const gap = MaxTransitionsPage + 100
	for from := int64(2); from <= gap+1; from += MaxBatchTransitions {
		if _, err := a.RecordTransitions(ctx, batchOf("r8", from, min(from+MaxBatchTransitions-1, gap+1)), fence1); err != nil {
			t.Fatalf("RecordTransitions from %d on A: %v", from, err)
		}
	}
	mustRecord(t, b, tr("r8", gap+2))
	all := fb.await(t, "r8 up to B's own commit", func(all []Change) bool { return len(seqsOf(all, "r8")) >= gap+2 })
	if got := seqsOf(all, "r8"); fmt.Sprint(got) != fmt.Sprint(upTo(gap+2)) {
		t.Fatalf("B published %d seqs of r8 (first %v…), want 1..%d once each, in order", len(got), got[:min(len(got), 5)], gap+2)
	}
	close(gate)
}

// A run row that keeps failing to read (here a started_at that does not parse) makes the
// listener reconnect; the catch-up after each reconnect fails on it again, and those
// reconnects back off (doubling up to listenBackoffMax) instead of repeating every
// listenBackoffMin forever.
func TestListenerBacksOffWhenItsCatchUpKeepsFailing(t *testing.T) {
	a, b, dsn := openReplicas(t)
	ctx := context.Background()
	gate := make(chan struct{})
	b.fan.reconnectGate = gate
	mustStart(t, a, newRun("r9"))
	db := rawPG(t, dsn)
	if _, err := db.ExecContext(ctx, "UPDATE playbook_runs SET started_at = 'not a time' WHERE run_id = 'r9'"); err != nil {
		t.Fatal(err)
	}
	connects := b.fan.connects.Load()
	if _, err := db.ExecContext(ctx, `SELECT pg_notify('`+pgNotifyChannel+`', '{"o":"test","r":["r9"]}')`); err != nil {
		t.Fatal(err)
	}
	// Each send returns once the listener is back at the gate: the read of r9 failed, then
	// (from the second send on) the catch-up after the reconnect failed on r9 too.
	for range 3 {
		select {
		case gate <- struct{}{}:
		case <-time.After(20 * time.Second):
			t.Fatal("the listener never came back to reconnect")
		}
	}
	if got := b.fan.connects.Load(); got < connects+2 {
		t.Fatalf("connects %d→%d, want at least the 2 reconnects before the third", connects, got)
	}
	if w := time.Duration(b.fan.lastWait.Load()); w <= listenBackoffMin {
		t.Fatalf("the third reconnect waited %s after two failed catch-ups, want more than %s (back-off)", w, listenBackoffMin)
	}
}

// A commit that lands on A between B's listener reading a run's transitions and reading its
// row leaves the row newer than the transitions read. B must still publish every transition
// no later than the final row, or a watcher (which ends at a final run) misses the last ones.
func TestListenerNeverPublishesAFinalRowAheadOfItsTransitions(t *testing.T) {
	a, b, _ := openReplicas(t)
	fb := follow(b)
	mustStart(t, a, newRun("r1"))
	for seq := int64(1); seq <= 3; seq++ {
		mustRecord(t, a, tr("r1", seq))
	}
	fb.await(t, "r1 #3", func(all []Change) bool { return len(seqsOf(all, "r1")) >= 3 })
	var once sync.Once
	testHookBetweenListenReads = func(string) {
		once.Do(func() {
			fin := tr("r1", 5)
			fin.Kind, fin.RunStatus, fin.StepName, fin.StepIndex = KindRunFinished, ExecCompleted, "", -1
			mustRecord(t, a, fin)
		})
	}
	t.Cleanup(func() { testHookBetweenListenReads = nil })
	mustRecord(t, a, tr("r1", 4))
	all := fb.await(t, "r1 #5", func(all []Change) bool { return len(seqsOf(all, "r1")) >= 5 })
	if got := seqsOf(all, "r1"); fmt.Sprint(got) != fmt.Sprint(upTo(5)) {
		t.Fatalf("B published r1's seqs %v, want 1..5 once each, in order", got)
	}
	var published int64
	for _, c := range all {
		for _, x := range c.Transitions {
			published = max(published, x.Seq)
		}
		for _, r := range c.Runs {
			if r.RunID == "r1" && r.Status.Final() && published < r.LastSeq {
				t.Fatalf("B published r1's final row (last_seq %d) when it had published transitions up to #%d: %s", r.LastSeq, published, summary(all))
			}
		}
	}
}
