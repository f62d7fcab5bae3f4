package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// movableClock is a test clock a test moves forward by hand.
type movableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

func (c *movableClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The lease with a fencing epoch: another owner id never
// adopts a live run, take-over waits for the lease to expire and bumps the epoch, and from
// then on the old owner cannot write, replay, renew or open a gate.
func TestLeaseAndFencingEpoch(t *testing.T) {
	t.Parallel()
	clock := &movableClock{now: t0}
	s, _ := openTest(t, WithClock(clock.Now))
	ctx := context.Background()
	const run = "RBOOK-20260512-demo-a1b2c3d4"
	a := newRun(run)
	mustStart(t, s, a)
	mustRecord(t, s, tr(run, 1))

	b := newRun(run)
	b.OwnerIDHash, b.Owner = OwnerIDHash("owner-b-0123456789"), "bob"
	if got, _, err := s.StartRun(ctx, b); !errors.Is(err, ErrRunOwned) || got.LeaseEpoch != 1 || got.Owner != "alice" {
		t.Fatalf("a fresh executor's StartRun of a live run = %+v, %v; want ErrRunOwned and the run as it is", got, err)
	}
	b.TakeOver = true
	if _, _, err := s.StartRun(ctx, b); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("take-over of a live lease = %v, want ErrLeaseHeld", err)
	}
	// A renews (RecordTransition renews too); the lease runs DefaultLease from the renewal.
	clock.Advance(DefaultLease / 2)
	p, err := s.RenewLease(ctx, run, fence1)
	if err != nil || p.LeaseEpoch != 1 || p.LeaseExpiresAt.Sub(clock.Now()) > DefaultLease {
		t.Fatalf("RenewLease = %+v, %v", p, err)
	}
	clock.Advance(DefaultLease - time.Second)
	if _, _, err := s.StartRun(ctx, b); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("take-over one second before the renewed lease ends = %v, want ErrLeaseHeld", err)
	}
	clock.Advance(2 * time.Second)
	took, outcome, err := s.StartRun(ctx, b)
	if err != nil || outcome != TookOver || took.LeaseEpoch != 2 || took.Owner != "bob" || took.LastSeq != 1 {
		t.Fatalf("take-over after expiry = %+v, %v, %v; want TookOver at epoch 2 owned by bob", took, outcome, err)
	}

	// The zombie (A at epoch 1) can do nothing any more, and nothing changes.
	zombieGate := newApproval("a-zombie", run, "approve")
	zombieGate.Fence = &fence1
	zombieGate.PlanDigest = a.PlaybookHash
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"transition", func() error { _, err := s.RecordTransition(ctx, tr(run, 2), fence1); return err }},
		{"replay", func() error { _, err := s.RecordTransition(ctx, tr(run, 1), fence1); return err }},
		{"renewal", func() error { _, err := s.RenewLease(ctx, run, fence1); return err }},
		{"gate", func() error { _, _, err := s.CreateApproval(ctx, zombieGate); return err }},
	} {
		if err := c.call(); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("zombie %s = %v, want ErrLeaseLost", c.name, err)
		}
	}
	if _, ts, _ := s.GetRun(ctx, run); len(ts) != 1 {
		t.Fatalf("%d transitions stored, want 1", len(ts))
	}

	// The new owner writes at epoch 2; the same owner id with epoch 1 is stale too.
	fb := Fence{OwnerIDHash: b.OwnerIDHash, Epoch: 2}
	if _, err := s.RecordTransition(ctx, tr(run, 2), Fence{OwnerIDHash: b.OwnerIDHash, Epoch: 1}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale epoch of the new owner = %v, want ErrLeaseLost", err)
	}
	if res, err := s.RecordTransition(ctx, tr(run, 2), fb); err != nil || res.Progress.LastSeq != 2 {
		t.Fatalf("new owner's transition = %+v, %v", res, err)
	}
	// A replay by the owner id with an older epoch is fine (outbox delivery after a restart).
	b.TakeOver = false
	if _, outcome, err := s.StartRun(ctx, b); err != nil || outcome != Resumed {
		t.Fatalf("resume by the owner = %v, %v", outcome, err)
	}
	if res, err := s.RecordTransition(ctx, tr(run, 2), fb); err != nil || !res.Duplicate {
		t.Fatalf("replay at the older epoch = %+v, %v; want a duplicate", res, err)
	}
	if _, err := s.RecordTransition(ctx, tr(run, 3), fb); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("new transition at the older epoch = %v, want ErrLeaseLost", err)
	}
}

// Executors write only their own runs: with an identity in the fence, or
// RequireOwner on StartRun, another identity is refused even with the owner id.
func TestOwnerIdentity(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("R1")
	nr.Owner = "token:e1"
	mustStart(t, s, nr)
	if _, err := s.RecordTransition(ctx, tr("R1", 1), Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 1, Identity: "token:e2"}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("e2 writing e1's run = %v, want ErrNotOwner", err)
	}
	na := newApproval("a1", "R1", "approve")
	na.Fence = &Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 1, Identity: "token:e2"}
	if _, _, err := s.CreateApproval(ctx, na); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("e2 opening e1's gate = %v, want ErrNotOwner", err)
	}
	steal := nr
	steal.Owner, steal.RequireOwner = "token:e2", true
	if _, _, err := s.StartRun(ctx, steal); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("e2 resuming e1's run with its owner id = %v, want ErrNotOwner", err)
	}
	if _, err := s.RecordTransition(ctx, tr("R1", 1), Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 1, Identity: "token:e1"}); err != nil {
		t.Fatalf("e1 writing its own run: %v", err)
	}
	if run, _, _ := s.GetRun(ctx, "R1"); run.Owner != "token:e1" || run.LastSeq != 1 {
		t.Fatalf("run = %+v", run)
	}
}

// A stale epoch is E_LEASE_LOST even for a seq already stored: two copies of one state file share
// an owner id; when one resumes (epoch 2) and writes seq 2, the other, still at epoch 1, sending
// its own different seq 2 is a zombie — the answer is ErrLeaseLost ("another executor resumed the
// run"), not ErrConflict, which would tell it that its own record is inconsistent. An identical
// replay at the old epoch stays a harmless duplicate (an outbox delivered after a restart).
func TestStaleEpochReplayIsLeaseLost(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	const run = "RBOOK-20260512-demo-a1b2c3d4"
	mustStart(t, s, newRun(run))
	mustRecord(t, s, tr(run, 1))
	if got, outcome, err := s.StartRun(ctx, newRun(run)); err != nil || outcome != Resumed || got.LeaseEpoch != 2 {
		t.Fatalf("resume by the same owner id = %+v, %v, %v", got, outcome, err)
	}
	fence2 := Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 2}
	if _, err := s.RecordTransition(ctx, tr(run, 2), fence2); err != nil {
		t.Fatal(err)
	}
	other := tr(run, 2)
	other.StepName = "another-step"
	if _, err := s.RecordTransition(ctx, other, fence1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a different seq 2 at the stale epoch = %v, want ErrLeaseLost", err)
	}
	if res, err := s.RecordTransition(ctx, tr(run, 1), fence1); err != nil || !res.Duplicate {
		t.Fatalf("an identical replay at the stale epoch = %+v, %v; want a duplicate", res, err)
	}
	if _, err := s.RecordTransition(ctx, other, fence2); !errors.Is(err, ErrConflict) {
		t.Fatalf("a different seq 2 at the current epoch = %v, want ErrConflict", err)
	}
}

// Another executor identity gets nothing back from a run it does not own, not even a
// replay's answer: e2 presenting e1's owner id for a seq
// e1 stored gets ErrNotOwner, not Duplicate (or ErrConflict for other content), so it cannot
// probe e1's record through RecordTransition.
func TestForeignIdentityReplayIsRefused(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	nr := newRun("R1")
	nr.Owner = "token:e1"
	mustStart(t, s, nr)
	e1 := Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 1, Identity: "token:e1"}
	e2 := Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 1, Identity: "token:e2"}
	if _, err := s.RecordTransition(ctx, tr("R1", 1), e1); err != nil {
		t.Fatal(err)
	}
	if res, err := s.RecordTransition(ctx, tr("R1", 1), e2); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("e2 replaying e1's seq 1 = %+v, %v; want ErrNotOwner", res, err)
	}
	other := tr("R1", 1)
	other.StepName = "probe"
	if _, err := s.RecordTransition(ctx, other, e2); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("e2 probing e1's seq 1 = %v; want ErrNotOwner", err)
	}
	if res, err := s.RecordTransition(ctx, tr("R1", 1), e1); err != nil || !res.Duplicate {
		t.Fatalf("e1's own replay = %+v, %v; want a duplicate", res, err)
	}
}
