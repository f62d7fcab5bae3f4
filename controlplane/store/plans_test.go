package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// The plan an executor sends is stored with the run's start and bound to its digest: another
// digest has none until a resume with that digest stores its own; a resume with the same
// digest replaces it.
func TestRunPlanIsStoredWithTheRunAndBoundToItsDigest(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("r-plan")
	nr.Plan = []byte("plan one")
	mustStart(t, s, nr)
	assertPlan := func(digest string, want []byte) {
		t.Helper()
		got, err := s.RunPlan(ctx, "r-plan", digest)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("RunPlan(%s…) = %q, %v; want %q", digest[:8], got, err, want)
		}
	}
	assertPlan(nr.PlaybookHash, []byte("plan one"))
	edited := hash("edited")
	assertPlan(edited, nil)

	resume := nr
	resume.PlaybookHash, resume.Plan = edited, []byte("plan two")
	if _, outcome, err := s.StartRun(ctx, resume); err != nil || outcome != Resumed {
		t.Fatalf("resume with another digest: %v, %v", outcome, err)
	}
	assertPlan(edited, []byte("plan two"))
	assertPlan(nr.PlaybookHash, []byte("plan one")) // kept, but not the run's digest any more

	resume.Plan = []byte("plan two, again")
	if _, _, err := s.StartRun(ctx, resume); err != nil {
		t.Fatal(err)
	}
	assertPlan(edited, []byte("plan two, again"))

	resume.Plan = nil // an executor that sends none leaves the stored plan alone
	if _, _, err := s.StartRun(ctx, resume); err != nil {
		t.Fatal(err)
	}
	assertPlan(edited, []byte("plan two, again"))
}

// A StartRun the store refuses stores no plan: the plan is written in the same transaction.
func TestRefusedStartRunStoresNoPlan(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("r-owned")
	mustStart(t, s, nr)
	other := nr
	other.OwnerIDHash, other.PlaybookHash, other.Plan = OwnerIDHash("another-owner-0123456789"), hash("other"), []byte("intruder")
	if _, _, err := s.StartRun(ctx, other); !errors.Is(err, ErrRunOwned) {
		t.Fatalf("StartRun by another owner: %v, want ErrRunOwned", err)
	}
	if got, err := s.RunPlan(ctx, "r-owned", hash("other")); err != nil || got != nil {
		t.Fatalf("RunPlan after a refused StartRun = %q, %v; want none", got, err)
	}
}

// A plan over MaxPlanBytes is refused before anything is written, naming the field.
func TestStartRunRefusesAPlanOverMaxPlanBytes(t *testing.T) {
	s, _ := openTest(t)
	nr := newRun("r-big")
	nr.Plan = make([]byte, MaxPlanBytes+1)
	_, _, err := s.StartRun(context.Background(), nr)
	if !errors.Is(err, ErrInvalidArgument) || !bytes.Contains([]byte(err.Error()), []byte("plan is")) {
		t.Fatalf("StartRun with a %d-byte plan: %v, want ErrInvalidArgument naming plan", len(nr.Plan), err)
	}
	if _, err := s.Run(context.Background(), "r-big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused run was created: %v", err)
	}
}
