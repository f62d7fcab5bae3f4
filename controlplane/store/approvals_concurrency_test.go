package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// At the store level, 50 writers record transitions concurrently while readers poll
// GetRun/ListRuns and a subscriber plays WatchRun. No call fails (so no SQLITE_BUSY or
// "database is locked" reaches a caller), every acknowledged transition is stored, in order
// per run, and the subscriber sees each run's transitions in seq order.
func TestConcurrentWritersNoBusy(t *testing.T) {
	t.Parallel()
	const writers, perRun = 50, 8
	s, _ := openTest(t)
	ctx := context.Background()
	for w := 0; w < writers; w++ {
		mustStart(t, s, newRun(fmt.Sprintf("run-%02d", w)))
	}

	var watchMu sync.Mutex
	watched := map[string][]int64{}
	unsubscribe := s.Subscribe(func(c Change) {
		watchMu.Lock()
		defer watchMu.Unlock()
		for _, x := range c.Transitions {
			watched[x.RunID] = append(watched[x.RunID], x.Seq)
		}
	})
	defer unsubscribe()

	var (
		errMu sync.Mutex
		errs  []error
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	writersDone := make(chan struct{})
	var readers sync.WaitGroup
	var reads atomic.Int64
	for r := 0; r < 2; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			// Poll like a dashboard (the case says every 50 ms; faster here to overlap more
			// writes). The ticker paces load; nothing waits on it for correctness.
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-writersDone:
					return
				case <-tick.C:
				}
				run, ts, err := s.GetRun(ctx, fmt.Sprintf("run-%02d", i%writers))
				if err != nil {
					fail(fmt.Errorf("GetRun: %w", err))
					return
				}
				// A reader sees a consistent snapshot: the run row matches its transitions.
				if int64(len(ts)) != run.LastSeq {
					fail(fmt.Errorf("GetRun %s: last_seq %d but %d transitions", run.RunID, run.LastSeq, len(ts)))
				}
				if _, err := s.ListRuns(ctx, RunFilter{PageSize: 20}); err != nil {
					fail(fmt.Errorf("ListRuns: %w", err))
					return
				}
				reads.Add(1)
			}
		}()
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(run string) {
			defer wg.Done()
			<-start
			for seq := int64(1); seq <= perRun; seq++ {
				if _, err := s.RecordTransition(ctx, tr(run, seq), fence1); err != nil {
					fail(fmt.Errorf("RecordTransition %s #%d: %w", run, seq, err))
					return
				}
			}
		}(fmt.Sprintf("run-%02d", w))
	}
	close(start)
	wg.Wait()
	close(writersDone)
	readers.Wait()

	for _, err := range errs {
		if strings.Contains(strings.ToLower(err.Error()), "locked") || strings.Contains(err.Error(), "BUSY") {
			t.Errorf("SQLITE_BUSY reached a caller: %v", err)
		} else {
			t.Error(err)
		}
	}
	if reads.Load() == 0 {
		t.Error("readers never completed a read")
	}
	for w := 0; w < writers; w++ {
		id := fmt.Sprintf("run-%02d", w)
		run, ts, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.LastSeq != perRun || len(ts) != perRun {
			t.Fatalf("%s: last_seq %d, %d transitions, want %d", id, run.LastSeq, len(ts), perRun)
		}
		for i, x := range ts {
			if sent(t, x) != tr(id, int64(i+1)) {
				t.Fatalf("%s: transition %d = %+v, want %+v", id, i, x, tr(id, int64(i+1)))
			}
		}
		watchMu.Lock()
		seqs := watched[id]
		watchMu.Unlock()
		if len(seqs) != perRun {
			t.Fatalf("%s: subscriber saw %d transitions, want %d", id, len(seqs), perRun)
		}
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("%s: subscriber saw seqs %v, not in order", id, seqs)
			}
		}
	}
	st := s.Stats()
	t.Logf("%d requests in %d commits (mean batch %.1f), %d reader rounds", st.Requests, st.Commits,
		float64(st.Requests)/float64(st.Commits), reads.Load())
}

// At the store level, one gate, 50 concurrent decisions (approve and reject mixed,
// as from two approvers and retries): exactly one wins, every other call gets
// ErrAlreadyDecided, and the stored decision is the winner's.
func TestConcurrentDecisionsExactlyOneWins(t *testing.T) {
	t.Parallel()
	for round := 0; round < 2; round++ {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			s, _ := openTest(t)
			ctx := context.Background()
			mustStart(t, s, newRun("R1"))
			mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
			var published atomic.Int64
			s.Subscribe(func(c Change) { published.Add(int64(len(c.Approvals))) })

			const n = 50
			type result struct {
				who string
				v   ApprovalStatus
				a   Approval
				err error
			}
			results := make(chan result, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					v := ApprovalApproved
					if i%2 == 1 {
						v = ApprovalRejected
					}
					who := fmt.Sprintf("approver-%d", i)
					<-start
					a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: v, Approver: who, Source: "rpc", At: t0.Add(time.Minute)})
					results <- result{who, v, a, err}
				}(i)
			}
			close(start)
			wg.Wait()
			close(results)

			var winners []result
			for r := range results {
				switch {
				case r.err == nil:
					winners = append(winners, r)
				case !errors.Is(r.err, ErrAlreadyDecided) || errors.Is(r.err, ErrExpired):
					t.Errorf("%s: err = %v, want ErrAlreadyDecided", r.who, r.err)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("%d decisions won, want exactly 1", len(winners))
			}
			w := winners[0]
			stored, err := s.GetApproval(ctx, "a1")
			if err != nil || stored.Status != w.v || stored.Approver != w.who {
				t.Fatalf("stored %+v, %v; want the winner's %s by %s", stored, err, w.v, w.who)
			}
			if published.Load() != 1 {
				t.Fatalf("%d approval changes published, want 1", published.Load())
			}
		})
	}
}

// At the store and token level, a token is issued for (R1, gate g), its hash stored.
// Verification comes first; then one compare-and-set decides. The checks that are purely
// about the token (signature, expiry, tampered claims) are in controlplane/approval's tests.
func TestTokenReplayAndBinding(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	secret := []byte("a-test-secret-of-32-bytes-length")
	now := t0.Add(time.Minute)
	digest1 := hash("runbook v1")

	for _, id := range []string{"R1", "R2"} {
		nr := newRun(id)
		nr.PlaybookHash = digest1
		mustStart(t, s, nr)
	}
	issue := func(id, run, node, digest string) (string, NewApproval) {
		tok, err := approval.Issue(secret, approval.Claims{RunID: run, NodeID: node, IssuedAt: now,
			ExpiresAt: now.Add(time.Hour), Nonce: id, PlanDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		na := NewApproval{ApprovalID: id, RunID: run, NodeID: node, TokenHash: approval.TokenHash(tok),
			RequestedAt: now, Deadline: now.Add(time.Hour), PlanDigest: digest}
		return tok, na
	}
	tok, na := issue("apr-1", "R1", "g", digest1)
	mustCreateApproval(t, s, na)
	_, na2 := issue("apr-2", "R2", "g", digest1)
	mustCreateApproval(t, s, na2)

	// decide is what the Approve RPC does: verify, look up by hash, check the binding, CAS.
	decide := func(token string, at time.Time) (Approval, error) {
		claims, err := approval.Verify(secret, token, at)
		if err != nil {
			return Approval{}, err
		}
		a, err := s.GetApprovalByTokenHash(ctx, approval.TokenHash(token))
		if err != nil {
			return Approval{}, err
		}
		if err := claims.CheckBinding(a.RunID, a.NodeID, a.PlanDigest); err != nil {
			return Approval{}, err
		}
		return s.DecideApproval(ctx, Decision{ApprovalID: a.ApprovalID, Verdict: ApprovalApproved, Approver: "bob", Source: "rpc", At: at})
	}
	unchanged := func(id string, want ApprovalStatus) {
		t.Helper()
		if a, err := s.GetApproval(ctx, id); err != nil || a.Status != want {
			t.Fatalf("%s is %s (%v), want %s", id, a.Status, err, want)
		}
	}

	// 1. approve R1/g with T: accepted.
	if a, err := decide(tok, now.Add(time.Second)); err != nil || a.Status != ApprovalApproved || a.RunID != "R1" {
		t.Fatalf("1: first use = %+v, %v", a, err)
	}
	// 2. T again: already decided.
	if _, err := decide(tok, now.Add(2*time.Second)); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("2: replay = %v, want ErrAlreadyDecided", err)
	}
	// 3. A token for another run's gate (or one never stored) is refused and changes nothing.
	stray, err := approval.Issue(secret, approval.Claims{RunID: "R2", NodeID: "g", IssuedAt: now,
		ExpiresAt: now.Add(time.Hour), Nonce: "stray", PlanDigest: digest1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decide(stray, now.Add(3*time.Second)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("3: unknown token = %v, want ErrNotFound (E_APPROVAL_NOT_FOUND)", err)
	}
	unchanged("apr-2", ApprovalPending)
	// 4. One signature character changed, or shortened: invalid before any lookup.
	if _, err := decide(tok[:len(tok)-1], now); !errors.Is(err, approval.ErrTokenInvalid) {
		t.Fatalf("4: shortened = %v", err)
	}
	// 5. After its expiry: refused as expired, even for a pending gate.
	tokR2 := func() string { tk, _ := issue("apr-2", "R2", "g", digest1); return tk }()
	if _, err := decide(tokR2, now.Add(time.Hour)); !errors.Is(err, approval.ErrTokenExpired) {
		t.Fatalf("5: expired = %v, want ErrTokenExpired", err)
	}
	unchanged("apr-2", ApprovalPending)
	// 6. The runbook was edited and the run resumed: the run adopts the new plan digest and
	// its gate for the old one is closed in the same transaction, so the old token is refused
	// at once; the gate can only be re-requested with the new digest.
	digest2 := hash("runbook v2")
	resume := newRun("R2")
	resume.PlaybookHash = digest2
	if run, outcome, err := s.StartRun(ctx, resume); err != nil || outcome != Resumed || run.PlaybookHash != digest2 {
		t.Fatalf("6: resume with a new digest = %+v, %v, %v", run, outcome, err)
	}
	if _, err := decide(tokR2, now.Add(time.Minute)); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("6: old token after a plan change = %v, want refused", err)
	}
	unchanged("apr-2", ApprovalCancelled)
	_, stale := issue("apr-old", "R2", "g", digest1)
	if _, _, err := s.CreateApproval(ctx, stale); !errors.Is(err, ErrPlanDigestMismatch) {
		t.Fatalf("6: re-request with the old digest = %v, want ErrPlanDigestMismatch", err)
	}
	newTok, na3 := issue("apr-3", "R2", "g", digest2)
	if _, created, err := s.CreateApproval(ctx, na3); err != nil || !created {
		t.Fatalf("6: re-request with the new digest = %v, %v", created, err)
	}
	if a, err := decide(newTok, now.Add(time.Minute)); err != nil || a.PlanDigest != digest2 {
		t.Fatalf("6: new token = %+v, %v", a, err)
	}
	// 7. Garbage is refused before the store is asked.
	for _, junk := range []string{"", "random-string", strings.Repeat("x", 1<<20)} {
		if _, err := decide(junk, now); !errors.Is(err, approval.ErrTokenInvalid) {
			t.Fatalf("7: %d-byte junk = %v", len(junk), err)
		}
	}
	// The store never holds the token itself.
	var n int
	if err := s.reader.QueryRowContext(ctx, "SELECT count(*) FROM playbook_approvals WHERE token IN (?, ?)", tok, newTok).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw tokens found in the token column: %d, %v", n, err)
	}
}

// At the store level, an unanswered gate closes at its deadline and its token stops
// working; CancelRun while a gate waits closes the gate and leaves exactly one final status.
func TestDeadlineAndCancelAtGate(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	got, _ := subscribe(s)

	t.Run("deadline", func(t *testing.T) {
		mustStart(t, s, newRun("R1"))
		na := newApproval("a1", "R1", "approve")
		mustCreateApproval(t, s, na)
		expired, err := s.ExpireDueApprovals(ctx, na.Deadline)
		if err != nil || len(expired) != 1 || expired[0].Status != ApprovalRejected || expired[0].DecidedBySource != SourceDeadline ||
			expired[0].Reason != "timed out after 59m0s" {
			t.Fatalf("ExpireDueApprovals at the deadline = %+v, %v; want rejected, timed out after 59m0s", expired, err)
		}
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob",
			At: na.Deadline.Add(time.Second)}); !errors.Is(err, ErrAlreadyDecided) {
			t.Fatalf("approve after the deadline = %v, want ErrAlreadyDecided", err)
		}
	})

	t.Run("cancel while waiting", func(t *testing.T) {
		mustStart(t, s, newRun("R2"))
		mustRecord(t, s, tr("R2", 1))
		opened := tr("R2", 2)
		opened.Kind = KindGateOpened
		if res := mustRecord(t, s, opened); res.Progress.Status != RunPaused {
			t.Fatalf("run at an open gate is %s, want paused", res.Progress.Status)
		}
		mustCreateApproval(t, s, newApproval("a2", "R2", "approve"))
		before := len(got.snapshot())
		if _, err := s.CancelRun(ctx, "R2", "carol", "abort", time.Time{}); err != nil {
			t.Fatal(err)
		}
		// The waiting executor learns it from the published change (WatchApproval).
		ch := got.snapshot()[before:]
		if len(ch) != 1 || len(ch[0].Approvals) != 1 || ch[0].Approvals[0].Status != ApprovalCancelled ||
			ch[0].Runs[0].Status != RunCancelled {
			t.Fatalf("published %+v", ch)
		}
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a2", Verdict: ApprovalApproved}); !errors.Is(err, ErrAlreadyDecided) {
			t.Fatalf("token after cancel = %v, want ErrAlreadyDecided", err)
		}
		if _, err := s.CancelRun(ctx, "R2", "dave", "", time.Time{}); !errors.Is(err, ErrRunFinal) {
			t.Fatalf("second cancel = %v", err)
		}
		finished := tr("R2", 3)
		finished.Kind, finished.RunStatus = KindRunFinished, ExecCompleted
		if _, err := s.RecordTransition(ctx, finished, fence1); !errors.Is(err, ErrRunFinal) {
			t.Fatalf("COMPLETED after cancel = %v, want ErrRunFinal", err)
		}
		if run, _, _ := s.GetRun(ctx, "R2"); run.Status != RunCancelled {
			t.Fatalf("final status = %s", run.Status)
		}
	})
}
