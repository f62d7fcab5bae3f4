package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// ReleaseLease ends the lease now, so a take-over succeeds at once at the
// next epoch (without it: ErrLeaseHeld), and the releasing executor's fence is then lost.
func TestReleaseLeaseLetsATakeOverInAtOnce(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("r-release")
	nr.Lease = time.Hour
	run, _, err := s.StartRun(ctx, nr)
	if err != nil {
		t.Fatal(err)
	}
	old := Fence{OwnerIDHash: nr.OwnerIDHash, Epoch: run.LeaseEpoch}
	other := newRun("r-release")
	other.OwnerIDHash, other.TakeOver = OwnerIDHash("another-executor-owner-id"), true
	if _, _, err := s.StartRun(ctx, other); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("take-over of a live lease: %v, want ErrLeaseHeld", err)
	}
	if _, err := s.ReleaseLease(ctx, "r-release", Fence{OwnerIDHash: other.OwnerIDHash, Epoch: run.LeaseEpoch}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release by a non-owner: %v, want ErrLeaseLost", err)
	}
	p, err := s.ReleaseLease(ctx, "r-release", old)
	if err != nil || !p.LeaseExpiresAt.Before(run.LeaseExpiresAt.Add(-time.Minute)) {
		t.Fatalf("ReleaseLease: %v, expires %v; want now, not the hour's end %v", err, p.LeaseExpiresAt, run.LeaseExpiresAt)
	}
	took, outcome, err := s.StartRun(ctx, other)
	if err != nil || outcome != TookOver || took.LeaseEpoch != run.LeaseEpoch+1 {
		t.Fatalf("take-over after the release: %v, outcome %v, epoch %d; want TookOver at %d", err, outcome, took.LeaseEpoch, run.LeaseEpoch+1)
	}
	if _, err := s.RenewLease(ctx, "r-release", old); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the released executor renews: %v, want ErrLeaseLost", err)
	}
}

// A reported workflow run is kept on the run (the last StartRun's) and on an
// approval; a field over MaxWorkflowRunField bytes, or one without a repository, is refused.
func TestReportedWorkflowRunIsStoredAndCapped(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("r-wf")
	nr.Reported = &WorkflowRun{Repository: "octo/app", RunID: "42", RunAttempt: "1", Actor: "octocat", SHA: "abc"}
	if _, _, err := s.StartRun(ctx, nr); err != nil {
		t.Fatal(err)
	}
	nr.Reported = &WorkflowRun{Repository: "octo/app", RunID: "42", RunAttempt: "2", Actor: "octocat", SHA: "abc"}
	run, outcome, err := s.StartRun(ctx, nr)
	if err != nil || outcome != Resumed {
		t.Fatal(err, outcome)
	}
	if got, _ := s.Run(ctx, "r-wf"); got.Reported == nil || *got.Reported != *nr.Reported || *run.Reported != *nr.Reported {
		t.Fatalf("reported %v; want the last StartRun's %v", got.Reported, nr.Reported)
	}
	na := newApproval("a-wf", "r-wf", "confirm")
	na.GitHub = &WorkflowRun{Repository: "octo/app", RunID: "42", RunAttempt: "2", Environment: "production"}
	if a := mustCreateApproval(t, s, na); a.GitHub == nil || *a.GitHub != *na.GitHub {
		t.Fatalf("approval github %v, want %v", a.GitHub, na.GitHub)
	}
	if a, err := s.GetApproval(ctx, "a-wf"); err != nil || a.GitHub == nil || a.GitHub.Environment != "production" {
		t.Fatalf("approval read back: %v, %v", a.GitHub, err)
	}
	bad := newRun("r-wf-bad")
	bad.Reported = &WorkflowRun{Repository: "octo/app", Environment: strings.Repeat("e", MaxWorkflowRunField+1)}
	if _, _, err := s.StartRun(ctx, bad); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "environment") {
		t.Fatalf("over-long field: %v", err)
	}
	bad.Reported = &WorkflowRun{Repository: "octo/app", Environment: strings.Repeat("e", MaxWorkflowRunField)}
	if _, _, err := s.StartRun(ctx, bad); err != nil {
		t.Fatalf("a field of exactly MaxWorkflowRunField bytes: %v", err)
	}
	bad = newRun("r-wf-norepo")
	bad.Reported = &WorkflowRun{RunID: "42"}
	if _, _, err := s.StartRun(ctx, bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no repository: %v", err)
	}
}
