package server_test

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// transitions builds transitions from..to of runID (transition's shapes); the last is
// run_finished SUCCEEDED when final.
func transitions(runID string, from, to int64, final bool) []*rbookv1.Transition {
	var out []*rbookv1.Transition
	for seq := from; seq <= to; seq++ {
		st := rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED
		if final && seq == to {
			st = rbookv1.RunStatus_RUN_STATUS_SUCCEEDED
		}
		out = append(out, transition(runID, seq, st))
	}
	return out
}

// A batch reaches a WatchRun subscriber that was watching before it: every transition, in
// seq order, once; a resent batch is acknowledged with its duplicates counted and watchers
// see nothing twice.
func TestServerBatchReachesWatcherInOrder(t *testing.T) {
	c := startInProcess(t)
	const id = "R-batch-watch"
	startRun(t, c, id)
	record(t, c, transition(id, 1, 0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.runs.WatchRun(ctx, &rbookv1.WatchRunRequest{RunId: id, FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The replayed seq 1 proves the subscription is live before the batch is sent.
	for s.Receive() && s.Msg().GetTransition().GetSeq() != 1 {
	}
	res, err := c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{
		Transitions: transitions(id, 2, 300, true), OwnerId: testOwner, Epoch: epochOf(t, c, id)})
	if err != nil {
		t.Fatalf("RecordTransitions: %v", err)
	}
	if res.GetAckedSeq() != 300 || res.GetDuplicates() != 0 {
		t.Fatalf("response = %v, want acked_seq 300, duplicates 0", res)
	}
	var seqs []int64
	for s.Receive() {
		if tr := s.Msg().GetTransition(); tr != nil {
			seqs = append(seqs, tr.GetSeq())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("WatchRun ended with %v after %d transitions", err, len(seqs))
	}
	if len(seqs) != 299 {
		t.Fatalf("watcher saw %d transitions after seq 1, want 299 (2..300)", len(seqs))
	}
	for i, seq := range seqs {
		if seq != int64(i+2) {
			t.Fatalf("watcher's transition %d has seq %d, want %d", i, seq, i+2)
		}
	}
	// The same batch again: all duplicates, acked at the run's last seq.
	res, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{
		Transitions: transitions(id, 2, 300, true), OwnerId: testOwner, Epoch: epochOf(t, c, id)})
	if err != nil || res.GetAckedSeq() != 300 || res.GetDuplicates() != 299 {
		t.Fatalf("resent batch = %v, %v; want acked_seq 300, duplicates 299", res, err)
	}
	run, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id, PageSize: 1})
	if err != nil || run.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED || run.GetRun().GetLastSeq() != 300 {
		t.Fatalf("GetRun = %v, %v; want succeeded at last_seq 300", run.GetRun(), err)
	}
}

// A batch with a stale epoch is E_LEASE_LOST and stores nothing; bad batches are
// E_INVALID_ARGUMENT naming the transition; a refusal after a stored prefix answers the ack
// alone, and the resend from acked_seq + 1 gets the refusal.
func TestServerBatchStaleEpochAndLimits(t *testing.T) {
	c := startInProcess(t)
	const id = "R-batch-fence"
	startRun(t, c, id)
	startRun(t, c, id) // the same owner resumes: epoch 2
	if e := epochOf(t, c, id); e != 2 {
		t.Fatalf("epoch = %d, want 2", e)
	}
	ctx := context.Background()
	_, err := c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{
		Transitions: transitions(id, 1, 5, false), OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_LEASE_LOST")
	if run, _ := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id, PageSize: 1}); run.GetRun().GetLastSeq() != 0 {
		t.Fatalf("last_seq = %d after a refused batch, want 0", run.GetRun().GetLastSeq())
	}

	_, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{OwnerId: testOwner, Epoch: 2})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	gap := transitions(id, 1, 3, false)
	gap[2].Seq = 5
	_, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{Transitions: gap, OwnerId: testOwner, Epoch: 2})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	bad := transitions(id, 1, 3, false)
	bad[1].Kind = rbookv1.TransitionKind_TRANSITION_KIND_UNSPECIFIED
	_, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{Transitions: bad, OwnerId: testOwner, Epoch: 2})
	wantCode(t, err, connect.CodeInvalidArgument, "E_INVALID_ARGUMENT")
	if ce := new(connect.Error); !errors.As(err, &ce) || ce.Message() != "E_INVALID_ARGUMENT: transitions[1]: transition.kind is required (a TRANSITION_KIND_* value)" {
		t.Fatalf("message = %v, want it to name transitions[1]", err)
	}

	// 1..3 stored, then 4..6 where 5 claims FAILED after 4 made the run SUCCEEDED: the
	// answer is acked_seq 4; the resend from 5 is E_RUN_FINAL.
	res, err := c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{
		Transitions: transitions(id, 1, 3, false), OwnerId: testOwner, Epoch: 2})
	if err != nil || res.GetAckedSeq() != 3 {
		t.Fatalf("1..3 = %v, %v", res, err)
	}
	tail := []*rbookv1.Transition{transition(id, 4, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED),
		transition(id, 5, rbookv1.RunStatus_RUN_STATUS_FAILED), transition(id, 6, 0)}
	res, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{Transitions: tail, OwnerId: testOwner, Epoch: 2})
	if err != nil || res.GetAckedSeq() != 4 {
		t.Fatalf("4..6 = %v, %v; want acked_seq 4 and no error", res, err)
	}
	_, err = c.runs.RecordTransitions(ctx, &rbookv1.RecordTransitionsRequest{Transitions: tail[1:], OwnerId: testOwner, Epoch: 2})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_FINAL")
}

// With an auth file, RecordTransitions is an executor's write: a viewer is refused, and an
// executor identity that does not own the run is E_PERMISSION_DENIED even with its owner id
// and epoch; the owner's batch is stored.
func TestServerBatchAnotherOwnerDenied(t *testing.T) {
	p := startServe(t, "--auth-file", writeAuthFile(t))
	ctx := context.Background()
	ciBot := newClients(p.URL, withBearer("exec-token-0123456789"))
	bob := newClients(p.URL, withBearer("bob-exec-token-0123456789"), connect.WithGRPC())
	viewer := newClients(p.URL, withBearer("view-token-0123456789"))
	const id = "R-batch-owner"
	startRun(t, ciBot, id)
	req := &rbookv1.RecordTransitionsRequest{Transitions: transitions(id, 1, 4, false), OwnerId: testOwner, Epoch: 1}
	_, err := bob.runs.RecordTransitions(ctx, req)
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	_, err = viewer.runs.RecordTransitions(ctx, req)
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
	res, err := ciBot.runs.RecordTransitions(ctx, req)
	if err != nil || res.GetAckedSeq() != 4 {
		t.Fatalf("owner's batch = %v, %v; want acked_seq 4", res, err)
	}
	// A replay by another identity learns nothing of the stored record either.
	_, err = bob.runs.RecordTransitions(ctx, req)
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")
}
