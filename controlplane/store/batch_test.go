package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// batchOf returns transitions from..to (inclusive) of run, as tr builds them.
func batchOf(run string, from, to int64) []Transition {
	var out []Transition
	for seq := from; seq <= to; seq++ {
		out = append(out, tr(run, seq))
	}
	return out
}

// A batch of 500 is stored in one commit of the writer, reaches subscribers in seq order in
// one Change, renews the lease and leaves the run row at the last transition.
func TestStoreBatchOf500InOneCommit(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b1"))
	ch, unsubscribe := subscribe(s)
	defer unsubscribe()
	before := s.Stats()
	res, err := s.RecordTransitions(context.Background(), batchOf("b1", 1, 500), fence1)
	if err != nil {
		t.Fatalf("RecordTransitions: %v", err)
	}
	after := s.Stats()
	if res.AckedSeq != 500 || res.Stored != 500 || res.Duplicates != 0 || res.Progress.LastSeq != 500 {
		t.Fatalf("result = acked %d stored %d duplicates %d last_seq %d, want 500/500/0/500",
			res.AckedSeq, res.Stored, res.Duplicates, res.Progress.LastSeq)
	}
	if c, r := after.Commits-before.Commits, after.Requests-before.Requests; c != 1 || r != 1 {
		t.Fatalf("the batch took %d commits and %d write requests, want 1 and 1", c, r)
	}
	changes := ch.snapshot()
	if len(changes) != 1 || len(changes[0].Transitions) != 500 || len(changes[0].Progress) != 500 {
		t.Fatalf("subscribers got %d changes (first with %d transitions), want 1 change with 500", len(changes),
			len(changes[0].Transitions))
	}
	for i, x := range changes[0].Transitions {
		if x.Seq != int64(i+1) {
			t.Fatalf("change transition %d has seq %d, want %d", i, x.Seq, i+1)
		}
	}
	run, stored, err := s.GetRun(context.Background(), "b1")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 500 || run.LastSeq != 500 || run.CurrentNode != "step-500" {
		t.Fatalf("stored %d transitions, run last_seq %d current_node %q; want 500, 500, step-500",
			len(stored), run.LastSeq, run.CurrentNode)
	}
	if want := stored[499].RecordedAt.Add(time.Duration(run.LeaseSeconds) * time.Second); !run.LeaseExpiresAt.Equal(want) {
		t.Fatalf("lease expires at %s, want %s (renewed by the last transition)", run.LeaseExpiresAt, want)
	}
	for i, x := range stored {
		if sent(t, x).StepName != tr("b1", int64(i+1)).StepName {
			t.Fatalf("stored transition %d is %+v", i, x)
		}
	}
}

// A resent batch whose prefix is already stored skips that prefix (counted as duplicates),
// stores the rest, and a wholly replayed batch stores nothing.
func TestStoreReplayedPrefixSkippedAndCounted(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b2"))
	if _, err := s.RecordTransitions(context.Background(), batchOf("b2", 1, 10), fence1); err != nil {
		t.Fatal(err)
	}
	res, err := s.RecordTransitions(context.Background(), batchOf("b2", 4, 15), fence1)
	if err != nil {
		t.Fatalf("RecordTransitions(4..15): %v", err)
	}
	if res.Duplicates != 7 || res.Stored != 5 || res.AckedSeq != 15 {
		t.Fatalf("result = duplicates %d stored %d acked %d, want 7, 5, 15", res.Duplicates, res.Stored, res.AckedSeq)
	}
	res, err = s.RecordTransitions(context.Background(), batchOf("b2", 1, 15), fence1)
	if err != nil || res.Duplicates != 15 || res.Stored != 0 || res.AckedSeq != 15 {
		t.Fatalf("replay of 1..15 = %+v, %v; want 15 duplicates, 0 stored, acked 15", res, err)
	}
	_, stored, err := s.GetRun(context.Background(), "b2")
	if err != nil || len(stored) != 15 {
		t.Fatalf("stored %d transitions, %v; want 15", len(stored), err)
	}
}

// A conflict in the middle of a batch stores the prefix before it, returns the ack (the last
// stored seq) and the conflict for the transition at fault; the caller resends from there.
func TestStoreConflictMidBatchStoresPrefix(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b3"))
	if _, err := s.RecordTransitions(context.Background(), batchOf("b3", 1, 5), fence1); err != nil {
		t.Fatal(err)
	}
	// 3 and 4 replayed as stored, 5 with other content: a conflict can only follow replayed
	// seqs (after a newly stored one every seq is new), so the prefix here is duplicates.
	b := batchOf("b3", 3, 9)
	b[2].Message = "different content for seq 5"
	res, err := s.RecordTransitions(context.Background(), b, fence1)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if res.AckedSeq != 5 || res.Duplicates != 2 || res.Stored != 0 || res.Failed.Seq != 5 {
		t.Fatalf("result = %+v, want acked 5, 2 duplicates, 0 stored, failed seq 5", res)
	}

	// A refusal after newly stored ones: the run finished at 6, and the batch 7..10's third
	// transition claims another final status: 7 and 8 stay stored, 9 is ErrRunFinal, ack 8.
	fin := tr("b3", 6)
	fin.Kind, fin.RunStatus, fin.StepName, fin.StepIndex = KindRunFinished, ExecCompleted, "", -1
	if _, err := s.RecordTransition(context.Background(), fin, fence1); err != nil {
		t.Fatal(err)
	}
	b = batchOf("b3", 7, 10)
	b[2].Kind, b[2].RunStatus, b[2].StepName, b[2].StepIndex = KindRunFinished, ExecFailed, "", -1
	res, err = s.RecordTransitions(context.Background(), b, fence1)
	if !errors.Is(err, ErrRunFinal) {
		t.Fatalf("err = %v, want ErrRunFinal", err)
	}
	if res.AckedSeq != 8 || res.Stored != 2 || res.Failed.Seq != 9 {
		t.Fatalf("result = %+v, want acked 8, 2 stored, failed seq 9", res)
	}
	run, stored, err := s.GetRun(context.Background(), "b3")
	if err != nil || len(stored) != 8 || run.LastSeq != 8 || run.Status != RunSucceeded {
		t.Fatalf("run last_seq %d status %s with %d transitions (%v); want 8, succeeded, 8", run.LastSeq, run.Status, len(stored), err)
	}
	// The caller resends from ack+1 with the content fixed.
	res, err = s.RecordTransitions(context.Background(), batchOf("b3", 9, 10), fence1)
	if err != nil || res.AckedSeq != 10 || res.Stored != 2 {
		t.Fatalf("resend = %+v, %v; want acked 10, 2 stored", res, err)
	}
}

// A conflict on the first transition (nothing of the batch stored) is the error alone, and a
// batch beginning past last_seq+1 is ErrOutOfOrder; a stale epoch is ErrLeaseLost and tells
// nothing of the run.
func TestStoreRefusalsWithNothingStored(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b4"))
	if _, err := s.RecordTransitions(context.Background(), batchOf("b4", 1, 3), fence1); err != nil {
		t.Fatal(err)
	}
	conflict := batchOf("b4", 3, 4)
	conflict[0].Message = "other"
	for _, c := range []struct {
		name    string
		batch   []Transition
		fence   Fence
		want    error
		wantAck int64 // the acknowledged seq the refusal reports; -1: not asserted
	}{
		{"conflict at the first", conflict, fence1, ErrConflict, 3},
		{"gap", batchOf("b4", 6, 7), fence1, ErrOutOfOrder, 3},
		{"stale epoch", batchOf("b4", 4, 5), Fence{OwnerIDHash: fence1.OwnerIDHash, Epoch: 7}, ErrLeaseLost, 0},
		{"unknown run", batchOf("nope", 1, 2), fence1, ErrNotFound, -1},
	} {
		res, err := s.RecordTransitions(context.Background(), c.batch, c.fence)
		if !errors.Is(err, c.want) || res.Stored != 0 || (c.wantAck >= 0 && res.AckedSeq != c.wantAck) {
			t.Errorf("%s = %+v, %v; want %v, nothing stored, acked %d", c.name, res, err, c.want, c.wantAck)
		}
	}
	if _, stored, _ := s.GetRun(context.Background(), "b4"); len(stored) != 3 {
		t.Fatalf("stored %d transitions, want 3", len(stored))
	}
}

// The limits: 1..MaxBatchTransitions transitions, at most MaxBatchBytes, one run, consecutive
// seqs, each transition valid; a refused batch stores nothing.
func TestStoreBatchLimits(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b5"))
	mustStart(t, s, newRun("b6"))
	big := strings.Repeat("x", MaxTextBytes/2)
	oversize := batchOf("b5", 1, 20)
	for i := range oversize {
		oversize[i].Message = big // 20 × 512 KiB = 10 MiB
	}
	mixed := batchOf("b5", 1, 3)
	mixed[1].RunID = "b6"
	gap := batchOf("b5", 1, 3)
	gap[2].Seq = 4
	invalid := batchOf("b5", 1, 3)
	invalid[2].Kind = ""
	for _, c := range []struct {
		name  string
		batch []Transition
		want  string
	}{
		{"empty", nil, "no transition"},
		{"too many", batchOf("b5", 1, MaxBatchTransitions+1), "1001 transitions, at most 1000"},
		{"too big", oversize, "exceeds 4194304 bytes at transition 7 (seq 8)"},
		{"two runs", mixed, `transition 1 of the batch is of run "b6"`},
		{"gap", gap, "seq 4 after seq 2"},
		{"invalid", invalid, "transition 2 (seq 3) of the batch: store: invalid argument: kind is required"},
	} {
		_, err := s.RecordTransitions(context.Background(), c.batch, fence1)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument containing %q", c.name, err, c.want)
		}
	}
	if res, err := s.RecordTransitions(context.Background(), batchOf("b5", 1, MaxBatchTransitions), fence1); err != nil || res.AckedSeq != MaxBatchTransitions {
		t.Fatalf("a batch of exactly %d = %+v, %v", MaxBatchTransitions, res.AckedSeq, err)
	}
	if _, stored, _ := s.GetRun(context.Background(), "b6"); len(stored) != 0 {
		t.Fatalf("run b6 has %d transitions, want 0", len(stored))
	}
}

// A playbook run recorded as one batch gets the same projection (bindings, iteration counts,
// active nodes, paused at a gate) as the same transitions recorded one by one.
func TestStoreBatchPlaybookProjectionAsSingle(t *testing.T) {
	s, _ := openTest(t)
	one := newPlaybookRun(t, s, "pb-one", `{"env":"prod"}`)
	one.start(0, "a", "check")
	one.finish(0, "a", "check", StepPass, `{"x":1}`)
	one.start(1, "b", "deploy")
	one.rec(KindGateOpened, 2, "g", "confirm", nil, ExecInProgress)
	_, single, err := s.GetRun(context.Background(), "pb-one")
	if err != nil {
		t.Fatal(err)
	}
	newPlaybookRun(t, s, "pb-batch", `{"env":"prod"}`)
	var batch []Transition
	for _, x := range single {
		x.RunID, x.RecordedAt = "pb-batch", time.Time{}
		batch = append(batch, x)
	}
	if _, err := s.RecordTransitions(context.Background(), batch, fence1); err != nil {
		t.Fatal(err)
	}
	a, b := one.row(), (&pbRecorder{t: t, s: s, run: "pb-batch"}).row()
	if a.Status != RunPaused || b.Status != a.Status || b.CurrentNode != a.CurrentNode ||
		string(b.Bindings) != string(a.Bindings) || string(b.IterationCounts) != string(a.IterationCounts) {
		t.Fatalf("batch row = %s %q %s %s; single = %s %q %s %s", b.Status, b.CurrentNode, b.Bindings, b.IterationCounts,
			a.Status, a.CurrentNode, a.Bindings, a.IterationCounts)
	}
	if a.CurrentNode != "b,g" {
		t.Fatalf("current_node = %q, want b,g", a.CurrentNode)
	}
}

// The approval hooks run for a transition inside a batch as for a single one: a
// run_interrupted in the middle of a batch withdraws the run's pending approval in the same
// commit, and the withdrawn approval is published with the batch's transitions.
func TestStoreBatchRunsApprovalHooks(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("b7"))
	a := mustCreateApproval(t, s, newApproval("a7", "b7", "approve"))
	seen, unsubscribe := subscribe(s)
	defer unsubscribe()
	b := batchOf("b7", 1, 3)
	b[1] = Transition{RunID: "b7", Seq: 2, Kind: KindRunInterrupted, At: t0.Add(time.Minute), StepIndex: 1,
		StepName: "approve", StepType: "confirm", RunStatus: ExecInProgress, Message: "interrupted by SIGTERM"}
	before := s.Stats()
	if res, err := s.RecordTransitions(context.Background(), b, fence1); err != nil || res.AckedSeq != 3 {
		t.Fatalf("RecordTransitions = %+v, %v", res, err)
	}
	if c := s.Stats().Commits - before.Commits; c != 1 {
		t.Fatalf("%d commits, want 1", c)
	}
	got, err := s.GetApproval(context.Background(), a.ApprovalID)
	if err != nil || got.Status != ApprovalCancelled || got.DecidedBySource != SourceInterrupted {
		t.Fatalf("approval after the batch = %+v, %v; want cancelled by %s", got, err, SourceInterrupted)
	}
	changes := seen.snapshot()
	if len(changes) != 1 || len(changes[0].Transitions) != 3 || len(changes[0].Approvals) != 1 ||
		changes[0].Approvals[0].ApprovalID != a.ApprovalID {
		t.Fatalf("published %+v; want one change with 3 transitions and the withdrawn approval", changes)
	}
}
