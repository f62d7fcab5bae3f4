package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A run_interrupted transition withdraws the run's pending approvals in the
// same transaction (cancelled, decided_by_source "interrupted"), publishes them, leaves other
// runs' gates alone, and a decision afterwards gets ErrAlreadyDecided with the withdrawn row.
// A resumed run that opens the gate again gets a new approval.
func TestInterruptWithdrawsPendingApprovals(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	a := mustCreateApproval(t, s, newApproval("a1", "R1", "approve"))
	other := mustCreateApproval(t, s, newApproval("a2", "R2", "approve"))
	mustRecord(t, s, tr("R1", 1))
	seen, unsubscribe := subscribe(s)
	defer unsubscribe()
	mustRecord(t, s, Transition{RunID: "R1", Seq: 2, Kind: KindRunInterrupted, At: t0.Add(time.Minute), StepIndex: 2,
		StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress, Message: "interrupted by SIGTERM"})

	got, err := s.GetApproval(ctx, a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ApprovalCancelled || got.DecidedBySource != SourceInterrupted || got.Reason != interruptedReason || got.Approver != "system" {
		t.Fatalf("after run_interrupted: %+v", got)
	}
	if o, _ := s.GetApproval(ctx, other.ApprovalID); o.Status != ApprovalPending {
		t.Fatalf("another run's gate was touched: %+v", o)
	}
	published := 0
	for _, ch := range seen.snapshot() {
		for _, ap := range ch.Approvals {
			if ap.ApprovalID == a.ApprovalID && ap.Status == ApprovalCancelled {
				published++
			}
		}
	}
	if published != 1 {
		t.Fatalf("withdrawn approval published %d times: %+v", published, seen.snapshot())
	}
	cur, err := s.DecideApproval(ctx, Decision{ApprovalID: a.ApprovalID, Verdict: ApprovalApproved, Approver: "bob", Source: "rpc"})
	if !errors.Is(err, ErrAlreadyDecided) || cur.DecidedBySource != SourceInterrupted {
		t.Fatalf("approve after withdrawal = %+v, %v; want ErrAlreadyDecided with the withdrawn row", cur, err)
	}
	// The resumed run opens the gate again: a new pending approval, not the withdrawn one.
	na := newApproval("a3", "R1", "approve")
	na.TokenHash = hash("token-a3")
	again, created, err := s.CreateApproval(ctx, na)
	if err != nil || !created || again.ApprovalID != "a3" || again.Status != ApprovalPending {
		t.Fatalf("reopened gate = %+v created %v, %v", again, created, err)
	}
}
