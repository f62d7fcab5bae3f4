package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// twoOfN opens gate id of run R1 needing two distinct approvals.
func twoOfN(t *testing.T, s *Store, id string, m int) Approval {
	t.Helper()
	na := newApproval(id, "R1", "gate-"+id)
	na.ApprovalsRequired, na.AllowedApprovers, na.PolicyRule = m, []string{"alice", "group:sre"}, "gates.yaml rule 1 (line 2)"
	return mustCreateApproval(t, s, na)
}

// The captured policy and every vote are stored; a second approval by the
// same identity counts once; the M-th distinct approval opens the gate, naming every approver
// in vote order with the deciding vote's reason.
func TestStoreTalliesDistinctApprovals(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	a := twoOfN(t, s, "a1", 2)
	if a.ApprovalsRequired != 2 || len(a.AllowedApprovers) != 2 || a.AllowedApprovers[1] != "group:sre" ||
		a.StarterMayApprove || a.PolicyRule != "gates.yaml rule 1 (line 2)" || len(a.Votes) != 0 {
		t.Fatalf("opened gate = %+v, want the captured policy and no votes", a)
	}
	at := t0.Add(2 * time.Minute)
	first, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", Reason: "r1",
		Source: "rpc", At: at, Verified: true})
	if err != nil || first.Status != ApprovalPending || len(first.Votes) != 1 || first.Votes[0].Approver != "bob" ||
		!first.Votes[0].Verified || first.Votes[0].Reason != "r1" || !first.Votes[0].At.Equal(at) || first.Votes[0].Source != "rpc" {
		t.Fatalf("first approval = %+v, %v; want pending with bob's vote", first, err)
	}
	again, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", Reason: "r1 again",
		Source: "rpc", At: at.Add(time.Second), Verified: true})
	if err != nil || again.Status != ApprovalPending || len(again.Votes) != 1 {
		t.Fatalf("bob again = %+v, %v; want no error and still one vote", again, err)
	}
	done, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "unverified:carol",
		Reason: "r2", Source: "rpc", At: at.Add(2 * time.Second)})
	if err != nil || done.Status != ApprovalApproved || done.Approver != "bob, unverified:carol" || done.Reason != "r2" ||
		len(done.Votes) != 2 || done.Votes[1].Verified || !done.DecidedAt.Equal(at.Add(2*time.Second)) {
		t.Fatalf("second distinct approval = %+v, %v; want approved by \"bob, unverified:carol\" with r2", done, err)
	}
	if got, err := s.GetApproval(ctx, "a1"); err != nil || len(got.Votes) != 2 || got.Votes[0].Approver != "bob" {
		t.Fatalf("GetApproval = %+v, %v; want both votes in order", got, err)
	}
	if page, err := s.ListApprovals(ctx, ApprovalFilter{RunID: "R1"}); err != nil || len(page.Approvals) != 1 || len(page.Approvals[0].Votes) != 2 {
		t.Fatalf("ListApprovals = %+v, %v; want the votes", page, err)
	}
}

// One reject by an allowed approver rejects a gate that needs more approvals.
func TestStoreRejectRejectsAtOnce(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	twoOfN(t, s, "a1", 3)
	at := t0.Add(2 * time.Minute)
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: at}); err != nil {
		t.Fatal(err)
	}
	r, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "carol", Reason: "no", At: at})
	if err != nil || r.Status != ApprovalRejected || r.Approver != "carol" || r.Reason != "no" || len(r.Votes) != 2 ||
		r.Votes[1].Verdict != ApprovalRejected {
		t.Fatalf("reject = %+v, %v; want rejected by carol with both votes kept", r, err)
	}
}

// An Authorize refusal writes nothing.
func TestStoreAuthorizeRefusalWritesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	twoOfN(t, s, "a1", 2)
	refuse := errors.New("not allowed")
	var gate Approval
	a, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "eve", At: t0.Add(2 * time.Minute),
		Authorize: func(a Approval, _ RunStarter) error { gate = a; return refuse }})
	if !errors.Is(err, refuse) || a.Status != ApprovalPending || gate.PolicyRule != "gates.yaml rule 1 (line 2)" {
		t.Fatalf("refused vote = %+v, %v (Authorize saw %+v)", a, err, gate)
	}
	if got, _ := s.GetApproval(ctx, "a1"); len(got.Votes) != 0 || got.Status != ApprovalPending {
		t.Fatalf("after a refused vote: %+v, want no vote, pending", got)
	}
}

// Distinct approvers voting at once on a 2-of-N gate end with it APPROVED
// exactly once, by exactly two votes; everyone after gets ErrAlreadyDecided.
func TestStoreConcurrentVotesDecideOnce(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	got, _ := subscribe(s)
	for round := range 20 {
		id := fmt.Sprintf("a%d", round)
		twoOfN(t, s, id, 2)
		voters := []string{"alice", "bob", "carol", "dave"}[:2+round%3]
		results := make([]Approval, len(voters))
		errs := make([]error, len(voters))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, who := range voters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = s.DecideApproval(ctx, Decision{ApprovalID: id, Verdict: ApprovalApproved, Approver: who,
					Reason: who, Source: "rpc", At: t0.Add(2 * time.Minute)})
			}()
		}
		close(start)
		wg.Wait()
		approved, pending, late := 0, 0, 0
		for i := range voters {
			switch {
			case errs[i] == nil && results[i].Status == ApprovalApproved:
				approved++
			case errs[i] == nil && results[i].Status == ApprovalPending:
				pending++
			case errors.Is(errs[i], ErrAlreadyDecided):
				late++
			default:
				t.Fatalf("round %d, %s: %+v, %v", round, voters[i], results[i], errs[i])
			}
		}
		final, err := s.GetApproval(ctx, id)
		if err != nil || approved != 1 || pending != 1 || late != len(voters)-2 || final.Status != ApprovalApproved || len(final.Votes) != 2 {
			t.Fatalf("round %d with %d voters: approved %d, pending %d, late %d; final %+v, %v", round, len(voters),
				approved, pending, late, final, err)
		}
	}
	decided := map[string]int{}
	for _, ch := range got.snapshot() {
		for _, a := range ch.Approvals {
			if a.Status == ApprovalApproved {
				decided[a.ApprovalID]++
			}
		}
	}
	for id, n := range decided {
		if n != 1 {
			t.Errorf("%s was published approved %d times, want once", id, n)
		}
	}
	if len(decided) != 20 {
		t.Errorf("%d gates were published approved, want 20", len(decided))
	}
}

// The deadline timer decides a gate rejected, "timed out after …", with
// decided_by_source "deadline", never leaving it pending.
func TestStoreExpiryRejectsTimedOut(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "approve")
	na.Deadline = na.RequestedAt.Add(5 * time.Minute)
	mustCreateApproval(t, s, na)
	out, err := s.ExpireDueApprovals(ctx, na.Deadline)
	if err != nil || len(out) != 1 || out[0].Status != ApprovalRejected || out[0].Reason != "timed out after 5m0s" ||
		out[0].DecidedBySource != SourceDeadline || out[0].Approver != "system" || !out[0].DecidedAt.Equal(na.Deadline) {
		t.Fatalf("ExpireDueApprovals = %+v, %v; want rejected \"timed out after 5m0s\" by the deadline", out, err)
	}
	if page, _ := s.ListApprovals(ctx, ApprovalFilter{Status: ApprovalPending}); len(page.Approvals) != 0 {
		t.Fatalf("pending after expiry: %+v", page.Approvals)
	}
	// A resumed run asks again: the timed-out gate is no decision to hand back.
	again := newApproval("a2", "R1", "approve")
	again.RequestedAt, again.Deadline = na.Deadline.Add(time.Second), na.Deadline.Add(time.Hour)
	if a, created, err := s.CreateApproval(ctx, again); err != nil || !created || a.ApprovalID != "a2" || a.Status != ApprovalPending {
		t.Fatalf("reopening after a timeout = %+v, created %v, %v; want a new pending gate", a, created, err)
	}
}

// The reason rounds the open time up to whole seconds: a deadline truncated to the second
// (the token's resolution) still reads as the step's timeout.
func TestTimedOutReasonRoundsUp(t *testing.T) {
	t.Parallel()
	req := t0.Add(300 * time.Millisecond)
	for _, c := range []struct {
		deadline time.Time
		want     string
	}{
		{t0.Add(5 * time.Minute), "timed out after 5m0s"},
		{req.Add(5 * time.Minute), "timed out after 5m0s"},
		{t0.Add(90 * time.Second), "timed out after 1m30s"},
	} {
		if got := TimedOutReason(req, c.deadline); got != c.want {
			t.Errorf("TimedOutReason(%s) = %q, want %q", c.deadline.Sub(req), got, c.want)
		}
	}
}

// Authorize sees the run's starter: started_by and the GitHub actor
// of the OIDC job that started it, for four-eyes against that actor.
func TestStoreAuthorizeSeesTheGitHubActor(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("R1")
	nr.GitHub = &GitHubJob{Actor: "octocat", Repository: "o/r"}
	mustStart(t, s, nr)
	twoOfN(t, s, "a1", 2)
	var seen RunStarter
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: t0.Add(2 * time.Minute),
		Authorize: func(_ Approval, st RunStarter) error { seen = st; return nil }}); err != nil {
		t.Fatal(err)
	}
	if seen != (RunStarter{StartedBy: "alice", GitHubActor: "octocat"}) {
		t.Fatalf("Authorize saw %+v, want started_by alice and actor octocat", seen)
	}
}
