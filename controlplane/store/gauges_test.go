package store

import (
	"context"
	"testing"
	"time"
)

// The gauges count unfinished runs by status, pending gates and the oldest's age, alike on
// both dialects; finished runs and decided gates are not counted.
func TestGaugesCountUnfinishedRunsAndPendingGates(t *testing.T) {
	forBothDialects(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		g, err := s.Gauges(ctx)
		if err != nil || g.GatesWaiting != 0 || len(g.RunsInProgress) != 0 || !g.OldestGateRequestedAt.IsZero() || g.UndeliveredNotifications != 0 {
			t.Fatalf("empty store: %+v, %v", g, err)
		}
		for _, id := range []string{"R1", "R2", "R3", "R4"} {
			mustStart(t, s, newRun(id))
		}
		mustRecord(t, s, tr("R1", 1))
		opened := tr("R2", 1)
		opened.Kind = KindGateOpened
		mustRecord(t, s, opened) // paused at its gate
		mustRecord(t, s, Transition{RunID: "R3", Seq: 1, Kind: KindRunFinished, At: t0.Add(time.Second), StepIndex: -1, RunStatus: ExecCompleted})
		a1 := newApproval("a-1", "R1", "approve")
		a2 := newApproval("a-2", "R2", "approve")
		a2.RequestedAt = t0.Add(2 * time.Minute)
		a4 := newApproval("a-4", "R4", "approve")
		for _, na := range []NewApproval{a1, a2, a4} {
			mustCreateApproval(t, s, na)
		}
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a-4", Verdict: ApprovalApproved, Approver: "bob", Source: "rpc", At: t0.Add(3 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		g, err = s.Gauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[RunStatus]int{RunRunning: 2, RunPaused: 1} // R1, R4 running; R2 paused; R3 succeeded
		if len(g.RunsInProgress) != len(want) || g.RunsInProgress[RunRunning] != 2 || g.RunsInProgress[RunPaused] != 1 {
			t.Errorf("runs in progress %v, want %v", g.RunsInProgress, want)
		}
		if g.GatesWaiting != 2 || !g.OldestGateRequestedAt.Equal(a1.RequestedAt) {
			t.Errorf("gates waiting %d, oldest requested at %v; want 2, %v", g.GatesWaiting, g.OldestGateRequestedAt, a1.RequestedAt)
		}
	})
}

// Change.Progress marks the one transition that made a run final; a transition a cancelled
// run's executor records afterwards for the record is not marked again.
func TestBecameFinalMarksOnlyTheTransitionThatFinishedTheRun(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustStart(t, s, newRun("R2"))
	got, unsubscribe := subscribe(s)
	defer unsubscribe()
	mustRecord(t, s, tr("R1", 1))
	mustRecord(t, s, Transition{RunID: "R1", Seq: 2, Kind: KindRunFinished, At: t0.Add(2 * time.Second), StepIndex: -1, RunStatus: ExecFailed})
	mustRecord(t, s, tr("R2", 1))
	if _, err := s.CancelRun(ctx, "R2", "carol", "wrong window", time.Time{}); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, s, Transition{RunID: "R2", Seq: 2, Kind: KindRunFinished, At: t0.Add(2 * time.Second), StepIndex: -1, RunStatus: ExecCancelled})
	var marked []string
	for _, c := range got.snapshot() {
		for i, p := range c.Progress {
			if p.BecameFinal {
				marked = append(marked, p.RunID+" "+string(p.Status)+" "+string(c.Transitions[i].Kind))
			}
		}
	}
	if len(marked) != 1 || marked[0] != "R1 failed run_finished" {
		t.Errorf("transitions marked as finishing their run: %q, want only R1's run_finished (R2 was finished by CancelRun)", marked)
	}
}

// Another replica's commits reach this one's subscribers marked Remote, and its own are not:
// the metrics count each commit on the replica that made it.
func TestChangesFromAnotherReplicaAreMarkedRemote(t *testing.T) {
	a, b, _ := openReplicas(t)
	fa, fb := follow(a), follow(b)
	mustStart(t, a, newRun("r1"))
	mustRecord(t, a, tr("r1", 1))
	remote := fb.await(t, "r1 #1 on B", func(all []Change) bool { return len(seqsOf(all, "r1")) >= 1 })
	local := fa.await(t, "r1 #1 on A", func(all []Change) bool { return len(seqsOf(all, "r1")) >= 1 })
	for _, c := range remote {
		if !c.Remote {
			t.Errorf("B published A's commit unmarked: %s", summary([]Change{c}))
		}
	}
	for _, c := range local {
		if c.Remote {
			t.Errorf("A published its own commit as remote: %s", summary([]Change{c}))
		}
	}
}
