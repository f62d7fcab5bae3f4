package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A reject with a redo_from the gate does not list is refused in the deciding transaction,
// naming the field and the allowed targets, and writes nothing; one it lists decides the gate
// rejected with redo_from kept (docs/push-back.md).
func TestPushBackRedoFromIsCheckedWithTheVoteAndKept(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "review")
	na.RewindTargets = []string{"build", "test"}
	a := mustCreateApproval(t, s, na)
	if !slices.Equal(a.RewindTargets, []string{"build", "test"}) || a.Iteration != 1 || a.RedoFrom != "" {
		t.Fatalf("opened gate = targets %v, iteration %d, redo_from %q; want [build test], 1, none", a.RewindTargets, a.Iteration, a.RedoFrom)
	}
	at := t0.Add(2 * time.Minute)
	for _, d := range []Decision{
		{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "bob", At: at, Reason: "again", RedoFrom: "deploy"},
		{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: at, RedoFrom: "build"},
	} {
		got, err := s.DecideApproval(ctx, d)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "redo_from") || got.Status != ApprovalPending {
			t.Fatalf("%s with redo_from %q = %+v, %v; want ErrInvalidArgument naming redo_from, gate pending", d.Verdict, d.RedoFrom, got, err)
		}
		if d.Verdict == ApprovalRejected && !strings.Contains(err.Error(), "the allowed targets are build, test") {
			t.Fatalf("refusal %q does not name the allowed targets", err)
		}
	}
	if got, err := s.GetApproval(ctx, "a1"); err != nil || got.Status != ApprovalPending || len(got.Votes) != 0 {
		t.Fatalf("after the refusals = %+v, %v; want pending with no vote", got, err)
	}
	done, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "bob", At: at, Reason: "add tests", RedoFrom: "build"})
	if err != nil || done.Status != ApprovalRejected || done.RedoFrom != "build" || done.Reason != "add tests" {
		t.Fatalf("push-back = %+v, %v; want rejected, redo_from build, reason kept", done, err)
	}
	if got, err := s.GetApproval(ctx, "a1"); err != nil || got.RedoFrom != "build" {
		t.Fatalf("GetApproval redo_from = %q, %v; want build", got.RedoFrom, err)
	}
}

// A gate without rewind targets refuses any redo_from.
func TestPushBackOnAGateWithoutRewindTargetsIsRefused(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, newApproval("a1", "R1", "review"))
	_, err := s.DecideApproval(context.Background(), Decision{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "bob",
		At: t0.Add(2 * time.Minute), RedoFrom: "build"})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "declares no rewind targets") {
		t.Fatalf("reject with redo_from = %v; want ErrInvalidArgument saying the gate declares none", err)
	}
}

// Once the executor recorded the push-back (gate_decided), reaching the node again opens a new
// approval, the next iteration; a plain retry before that hands the decision back.
func TestPushBackOpensTheNextIteration(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	na := newApproval("a1", "R1", "review")
	na.RewindTargets, na.RequestedAt = []string{"build"}, time.Time{} // the store's clock, as recorded_at
	mustCreateApproval(t, s, na)
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalRejected, Approver: "bob",
		RedoFrom: "build"}); err != nil {
		t.Fatal(err)
	}
	again := newApproval("a2", "R1", "review")
	again.RewindTargets = na.RewindTargets
	again.RequestedAt = time.Time{}
	// The executor died before recording the decision: the same push-back is handed back.
	if got, created, err := s.CreateApproval(ctx, again); err != nil || created || got.ApprovalID != "a1" || got.RedoFrom != "build" {
		t.Fatalf("reopen before gate_decided = %s created %v redo_from %q, %v; want a1 handed back", got.ApprovalID, created, got.RedoFrom, err)
	}
	decided := tr("R1", 1)
	decided.Kind, decided.StepName, decided.StepType, decided.At = KindGateDecided, "review", "approval", t0
	mustRecord(t, s, decided)
	got, created, err := s.CreateApproval(ctx, again)
	if err != nil || !created || got.ApprovalID != "a2" || got.Iteration != 2 || got.Status != ApprovalPending ||
		!slices.Equal(got.RewindTargets, []string{"build"}) {
		t.Fatalf("reopen after gate_decided = %+v created %v, %v; want a new pending approval a2, iteration 2", got, created, err)
	}
}
