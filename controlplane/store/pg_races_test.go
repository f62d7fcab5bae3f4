package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// race2 runs fa on a and fb on b at the same moment and returns their errors.
func race2(fa, fb func() error) (ea, eb error) {
	var wg sync.WaitGroup
	go1 := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); <-go1; ea = fa() }()
	go func() { defer wg.Done(); <-go1; eb = fb() }()
	close(go1)
	wg.Wait()
	return ea, eb
}

// TestPGTwoStoresRaces: hostile races through two Stores (two replicas) on one
// PostgreSQL database, each repeated so the writers' batches interleave differently:
// Approve against Reject of one gate (exactly one wins, the other gets ErrAlreadyDecided, and
// the stored verdict is the winner's), the same batch of seqs through both at once (stored
// once, the other a duplicate; the run row's last_seq right), the same seqs with different
// content (one stored, the other ErrConflict, nothing mixed), and StartRun of one run_id
// through both (one Created, the other Resumed at the next epoch, never two runs).
func TestPGTwoStoresRaces(t *testing.T) {
	a, b, _ := openPGPair(t)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		run := "R" + string(rune('a'+i))
		// StartRun through both at once.
		var oa, ob StartOutcome
		ea, eb := race2(func() (err error) { _, oa, err = a.StartRun(ctx, newRun(run)); return },
			func() (err error) { _, ob, err = b.StartRun(ctx, newRun(run)); return })
		if ea != nil || eb != nil || !((oa == Created && ob == Resumed) || (oa == Resumed && ob == Created)) {
			t.Fatalf("%s: StartRun through both = %v %v / %v %v; want one Created, one Resumed", run, oa, ea, ob, eb)
		}
		f := Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 2}

		// The same five seqs through both at once: one stores them, the other answers duplicates.
		batch := []Transition{tr(run, 1), tr(run, 2), tr(run, 3), tr(run, 4), tr(run, 5)}
		var ra, rb BatchResult
		ea, eb = race2(func() (err error) { ra, err = a.RecordTransitions(ctx, batch, f); return },
			func() (err error) { rb, err = b.RecordTransitions(ctx, batch, f); return })
		if ea != nil || eb != nil || ra.AckedSeq != 5 || rb.AckedSeq != 5 || ra.Stored+rb.Stored != 5 || ra.Duplicates+rb.Duplicates != 5 {
			t.Fatalf("%s: one batch through both = %+v %v / %+v %v; want 5 stored once, acked 5 on both", run, ra, ea, rb, eb)
		}
		// Seqs 6..7 with different content through each: one wins whole, the other conflicts.
		x, y := []Transition{tr(run, 6), tr(run, 7)}, []Transition{tr(run, 6), tr(run, 7)}
		y[0].Message, y[1].Message = "other", "other"
		ea, eb = race2(func() (err error) { ra, err = a.RecordTransitions(ctx, x, f); return },
			func() (err error) { rb, err = b.RecordTransitions(ctx, y, f); return })
		if (ea == nil) == (eb == nil) || !(errors.Is(ea, ErrConflict) || errors.Is(eb, ErrConflict)) {
			t.Fatalf("%s: different content through both = %+v %v / %+v %v; want one stored, one ErrConflict", run, ra, ea, rb, eb)
		}
		want := x
		if ea != nil {
			want = y
		}
		got, ts, err := a.GetRun(ctx, run)
		if err != nil || got.LastSeq != 7 || len(ts) != 7 || ts[5].Message != want[0].Message || ts[6].Message != want[1].Message {
			t.Fatalf("%s after the races: last_seq %d, %d transitions, %v", run, got.LastSeq, len(ts), err)
		}

		// Approve through one, Reject through the other.
		ap := "ap-" + run
		mustCreateApproval(t, a, newApproval(ap, run, "g"))
		at := t0.Add(2 * time.Minute)
		var da, db Approval
		ea, eb = race2(
			func() (err error) {
				da, err = a.DecideApproval(ctx, Decision{ApprovalID: ap, Verdict: ApprovalApproved, Approver: "amy", At: at})
				return
			},
			func() (err error) {
				db, err = b.DecideApproval(ctx, Decision{ApprovalID: ap, Verdict: ApprovalRejected, Approver: "bo", At: at})
				return
			})
		winner, verdict := da, ApprovalApproved
		switch {
		case ea == nil && errors.Is(eb, ErrAlreadyDecided):
		case eb == nil && errors.Is(ea, ErrAlreadyDecided):
			winner, verdict = db, ApprovalRejected
		default:
			t.Fatalf("%s: approve/reject through both = %v / %v; want one nil, one ErrAlreadyDecided", run, ea, eb)
		}
		stored, err := b.GetApproval(ctx, ap)
		if err != nil || stored.Status != verdict || winner.Status != verdict || len(stored.Votes) != 1 {
			t.Fatalf("%s: stored approval %+v (%v); want %s with one vote", run, stored, err, verdict)
		}
	}
}

// TestPGLeaseTakeOverAcrossReplicas: executor A renews its lease through
// replica A while executor B tries to take the run over through replica B: refused while the
// lease lives (ErrLeaseHeld); once B's replica sees it expired (its clock past the lease),
// B takes over at epoch 2 and from then on A's renewals and transitions through replica A
// are fenced off (ErrLeaseLost), while B's go through either replica.
func TestPGLeaseTakeOverAcrossReplicas(t *testing.T) {
	dsn := newPGDatabase(t)
	ctx := context.Background()
	ca, cb := &movableClock{now: t0}, &movableClock{now: t0}
	open := func(c *movableClock) *Store {
		s, err := Open(ctx, dsn, WithClock(c.Now))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(ca), open(cb)
	const run = "RBOOK-20260512-demo-b10lease"
	mustStart(t, a, newRun(run))
	mustRecord(t, a, tr(run, 1))
	nb := newRun(run)
	nb.OwnerIDHash, nb.Owner, nb.TakeOver = OwnerIDHash("owner-b-0123456789"), "bob", true
	fb := Fence{OwnerIDHash: nb.OwnerIDHash, Epoch: 2}

	// A heartbeats through replica A while B keeps trying through replica B.
	for i := 0; i < 5; i++ {
		ea, eb := race2(func() error { _, err := a.RenewLease(ctx, run, fence1); return err },
			func() error { _, _, err := b.StartRun(ctx, nb); return err })
		if ea != nil || !errors.Is(eb, ErrLeaseHeld) {
			t.Fatalf("heartbeat %d: renew %v, take-over %v; want nil, ErrLeaseHeld", i, ea, eb)
		}
	}
	cb.Advance(DefaultLease + time.Second)
	got, outcome, err := b.StartRun(ctx, nb)
	if err != nil || outcome != TookOver || got.LeaseEpoch != 2 {
		t.Fatalf("take-over after the lease ended = %v epoch %d, %v; want TookOver at epoch 2", outcome, got.LeaseEpoch, err)
	}
	if _, err := a.RenewLease(ctx, run, fence1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("A's heartbeat after the take-over = %v, want ErrLeaseLost", err)
	}
	if _, err := a.RecordTransitions(ctx, []Transition{tr(run, 2)}, fence1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("A's transition after the take-over = %v, want ErrLeaseLost", err)
	}
	if _, err := a.RecordTransitions(ctx, []Transition{tr(run, 2)}, fb); err != nil {
		t.Fatalf("B's transition through replica A: %v", err)
	}
	if _, err := b.RecordTransitions(ctx, []Transition{tr(run, 3)}, fb); err != nil {
		t.Fatalf("B's transition through replica B: %v", err)
	}
	if r, ts, err := a.GetRun(ctx, run); err != nil || r.LastSeq != 3 || len(ts) != 3 || r.LeaseEpoch != 2 {
		t.Fatalf("run after the take-over: last_seq %d, %d transitions, epoch %d, %v", r.LastSeq, len(ts), r.LeaseEpoch, err)
	}
}
