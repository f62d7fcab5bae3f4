package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// Fifty executors report at once (grpc-go), a poller calls GetRun/ListRuns every
// 50 ms (Connect JSON) and a WatchRun stream is open (gRPC-Web). Nobody sees "database is
// locked"; every acknowledged transition is stored, in order; a refused write is an error.
func TestConcurrentWritersPollerAndWatch(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	cc := grpcConn(t, p.Addr)
	const writers, perRun = 50, 40
	runID := func(i int) string { return fmt.Sprintf("RBOOK-20260102-a01-%02d", i) }
	for i := range writers {
		startRun(t, c, runID(i))
	}

	// The watcher follows run 0 from its first transition to its final one.
	watchCtx, cancelWatch := context.WithCancel(context.Background())
	defer cancelWatch()
	ws, err := newClients(p.URL, connect.WithGRPCWeb()).runs.WatchRun(watchCtx, &rbookv1.WatchRunRequest{RunId: runID(0), FromSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Receive() || ws.Msg().GetTransition() != nil {
		t.Fatalf("WatchRun: want a first run-only message, got %v / %v", ws.Msg(), ws.Err())
	}
	watched := make(chan []int64, 1)
	go func() {
		var seqs []int64
		for ws.Receive() {
			seqs = append(seqs, ws.Msg().GetTransition().GetSeq())
		}
		if ws.Err() != nil {
			seqs = append(seqs, -1)
		}
		watched <- seqs
	}()

	// The poller runs until the writers are done.
	stopPoll := make(chan struct{})
	pollErrs := make(chan error, 1000)
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		pc := newClients(p.URL, connect.WithProtoJSON())
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopPoll:
				return
			case <-tick.C:
			}
			if _, err := pc.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID(i % writers)}); err != nil {
				pollErrs <- err
			}
			if _, err := pc.runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{PageSize: 20}); err != nil {
				pollErrs <- err
			}
		}
	}()

	// A second watcher joins run 1 while it is being written: replay and live overlap, and
	// it must still see every seq once, in order.
	midway := make(chan struct{})
	lateWatched := make(chan []int64, 1)
	go func() {
		<-midway
		s, err := c.runs.WatchRun(watchCtx, &rbookv1.WatchRunRequest{RunId: runID(1)})
		var seqs []int64
		for err == nil && s.Receive() {
			if tr := s.Msg().GetTransition(); tr != nil {
				seqs = append(seqs, tr.GetSeq())
			}
		}
		if err != nil || s.Err() != nil {
			seqs = append(seqs, -1)
		}
		lateWatched <- seqs
	}()

	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(1); seq <= perRun; seq++ {
				if i == 1 && seq == perRun/2 {
					close(midway)
				}
				final := rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED
				if seq == perRun {
					final = rbookv1.RunStatus_RUN_STATUS_SUCCEEDED
				}
				var res rbookv1.RecordTransitionResponse
				req := &rbookv1.RecordTransitionRequest{Transition: transition(runID(i), seq, final), OwnerId: testOwner, Epoch: 1}
				if err := cc.Invoke(context.Background(), rbookv1connect.RunServiceRecordTransitionProcedure, req, &res); err != nil {
					errs <- fmt.Errorf("run %d seq %d: %w", i, seq, err)
					return
				}
				if res.GetLastSeq() != seq || res.GetDuplicate() {
					errs <- fmt.Errorf("run %d seq %d: acknowledged with last_seq %d duplicate %v", i, seq, res.GetLastSeq(), res.GetDuplicate())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stopPoll)
	pollWG.Wait()
	close(errs)
	close(pollErrs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	for err := range pollErrs {
		t.Errorf("poller: %v", err)
	}

	for name, seqs := range map[string][]int64{"from the start": <-watched, "joining midway": <-lateWatched} {
		if len(seqs) != perRun {
			t.Fatalf("WatchRun %s saw %d transitions, want %d: %v", name, len(seqs), perRun, seqs)
		}
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("WatchRun %s: transition %d has seq %d (gap, duplicate or error): %v", name, i, s, seqs)
			}
		}
	}
	for i := range writers {
		got, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID(i)})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_SUCCEEDED || got.GetRun().GetLastSeq() != perRun {
			t.Fatalf("run %d: status %v last_seq %d", i, got.GetRun().GetStatus(), got.GetRun().GetLastSeq())
		}
		if len(got.GetTransitions()) != perRun {
			t.Fatalf("run %d: %d transitions stored, want %d", i, len(got.GetTransitions()), perRun)
		}
		for j, tr := range got.GetTransitions() {
			want := transition(runID(i), int64(j+1), rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED)
			if j+1 == perRun {
				want = transition(runID(i), perRun, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
			}
			if tr.GetSeq() != want.GetSeq() || tr.GetKind() != want.GetKind() || tr.GetStepName() != want.GetStepName() ||
				!proto.Equal(tr.GetEvidence(), want.GetEvidence()) {
				t.Fatalf("run %d transition %d: stored %v, sent %v", i, j, tr, want)
			}
		}
	}
	if s := p.Stderr.String(); strings.Contains(s, "locked") || strings.Contains(s, "BUSY") {
		t.Fatalf("server log mentions a locked database:\n%s", s)
	}

	// A refused write is an error, and nothing of it is stored.
	_, err = c.runs.RecordTransition(context.Background(), &rbookv1.RecordTransitionRequest{Transition: transition(runID(1), perRun+2, 0), OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_SEQ_GAP")
	conflict := transition(runID(1), 3, 0)
	conflict.Message = "different"
	_, err = c.runs.RecordTransition(context.Background(), &rbookv1.RecordTransitionRequest{Transition: conflict, OwnerId: testOwner, Epoch: 1})
	wantCode(t, err, connect.CodeAlreadyExists, "E_SEQ_CONFLICT")
	dup := record(t, c, transition(runID(1), 3, 0))
	if !dup.GetDuplicate() || dup.GetLastSeq() != perRun {
		t.Fatalf("replayed transition: duplicate %v last_seq %d", dup.GetDuplicate(), dup.GetLastSeq())
	}
}

// The same token twice at once, Approve and Reject at once: exactly one decision
// wins, the other gets E_APPROVAL_ALREADY_DECIDED, and the waiting executor (WatchApproval)
// sees exactly the winner.
func TestRacingDecisionsExactlyOneWins(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	cg := newClients(p.URL, connect.WithGRPC())
	for round := range 12 {
		runID := fmt.Sprintf("RBOOK-20260102-a02-%02d", round)
		startRun(t, c, runID)
		record(t, c, transition(runID, 1, 0))
		a, tok := gate(t, c, runID, time.Hour)
		watch, first := watchApproval(t, c, a.GetApprovalId())
		if first.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			t.Fatalf("first watch message: %v", first)
		}
		approveAndReject := round%2 == 1
		start := make(chan struct{})
		results := make([]error, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if approveAndReject && i == 1 {
					_, results[i] = cg.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: tok, Reason: "no", Approver: "rita"})
					return
				}
				_, results[i] = cg.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Reason: "yes", Approver: fmt.Sprintf("ann%d", i)})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: both decisions succeeded", round)
				}
				winner = i
				continue
			}
			wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
		}
		if winner < 0 {
			t.Fatalf("round %d: no decision succeeded: %v", round, results)
		}
		// Without auth a claimed name is recorded as unverified.
		wantStatus, wantBy := rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED, fmt.Sprintf("unverified:ann%d", winner)
		if approveAndReject && winner == 1 {
			wantStatus, wantBy = rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED, "unverified:rita"
		}
		last := lastApproval(t, watch)
		if last.GetStatus() != wantStatus || last.GetApprover() != wantBy {
			t.Fatalf("round %d: watcher saw %v by %q, the winner was %v by %q", round, last.GetStatus(), last.GetApprover(), wantStatus, wantBy)
		}
		got, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
		if err != nil || got.GetApproval().GetStatus() != wantStatus || got.GetApproval().GetApprover() != wantBy {
			t.Fatalf("round %d: stored approval %v (%v), want %v by %s", round, got.GetApproval(), err, wantStatus, wantBy)
		}
	}
}

// A decision that lands between "gate opened" and "waiting" is taken:
// a watch opened after (or while) the gate is decided still ends with the decision, so the
// run never waits forever for a consumed approval. A retried RequestApproval while the gate
// is pending returns the same approval and token.
func TestDecisionBeforeWatch(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	for round := range 10 {
		runID := fmt.Sprintf("RBOOK-20260102-a02w-%02d", round)
		startRun(t, c, runID)
		a, tok := gate(t, c, runID, time.Hour)
		again, tok2 := gate(t, c, runID, 2*time.Hour)
		if again.GetApprovalId() != a.GetApprovalId() || tok2 != tok {
			t.Fatalf("retried RequestApproval opened another gate: %s vs %s, same token %v", again.GetApprovalId(), a.GetApprovalId(), tok2 == tok)
		}
		run, err := c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID})
		if err != nil || run.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED {
			t.Fatalf("run with a pending gate: %v (%v), want PAUSED", run.GetRun().GetStatus(), err)
		}
		decided := make(chan error, 1)
		go func() {
			_, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok})
			decided <- err
		}()
		if round%2 == 0 {
			if err := <-decided; err != nil { // decided before the executor starts waiting
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := c.apps.WatchApproval(ctx, &rbookv1.WatchApprovalRequest{ApprovalId: a.GetApprovalId()})
		if err != nil {
			t.Fatal(err)
		}
		last := lastApproval(t, s)
		cancel()
		if last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || last.GetApprover() != "anonymous" {
			t.Fatalf("round %d: watch ended with %v by %q", round, last.GetStatus(), last.GetApprover())
		}
		if round%2 == 1 {
			if err := <-decided; err != nil {
				t.Fatal(err)
			}
		}
		run, err = c.runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: runID})
		if err != nil || run.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_RUNNING {
			t.Fatalf("run after the decision: %v (%v), want RUNNING", run.GetRun().GetStatus(), err)
		}
	}
}

// Token replay and binding, points 1 to 7 below; tokens never appear in outputs or logs.
func TestTokenReplayAndBinding(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	cc := grpcConn(t, p.Addr)
	ctx := context.Background()
	var tokens []string
	approve := func(tok string) (*rbookv1.ApproveResponse, error) {
		return c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Reason: "looks good", Approver: "alice"})
	}
	pending := func(id string) {
		t.Helper()
		got, err := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: id})
		if err != nil || got.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			t.Fatalf("approval %s changed by a refused call: %v (%v)", id, got.GetApproval(), err)
		}
	}

	startRun(t, c, "R1")
	a1, t1 := gate(t, c, "R1", time.Hour)
	tokens = append(tokens, t1)

	// 1. accepted, with approver and reason recorded.
	res, err := approve(t1)
	if err != nil {
		t.Fatalf("point 1: %v", err)
	}
	if got := res.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetApprover() != "unverified:alice" || got.GetReason() != "looks good" {
		t.Fatalf("point 1: %v", got)
	}
	// 2. replay: refused over Connect and over grpc-go, Reject too; nothing changes.
	_, err = approve(t1)
	wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	var out rbookv1.RejectResponse
	err = cc.Invoke(ctx, rbookv1connect.ApprovalServiceRejectProcedure, &rbookv1.RejectRequest{Token: t1}, &out)
	if rbookCode(err) != "E_APPROVAL_ALREADY_DECIDED" {
		t.Fatalf("point 2 over gRPC: %v", err)
	}
	got, _ := c.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a1.GetApprovalId()})
	if got.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetApproval().GetReason() != "looks good" {
		t.Fatalf("point 2 changed the approval: %v", got.GetApproval())
	}

	// 3. a token for another run's gate: signed right but matching no approval, or signed
	// with another secret.
	startRun(t, c, "R2")
	a2, t2 := gate(t, c, "R2", time.Hour)
	tokens = append(tokens, t2)
	forged, err := approval.Issue([]byte(testSecret), approval.Claims{RunID: "R2", NodeID: "approve", IssuedAt: time.Now(),
		ExpiresAt: time.Now().Add(time.Hour), PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = approve(forged)
	wantCode(t, err, connect.CodeNotFound, "E_APPROVAL_NOT_FOUND")
	otherKey, _ := approval.Issue([]byte("another-secret-0123456789"), approval.Claims{RunID: "R2", NodeID: "approve",
		IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), PlanDigest: digest("plan")})
	_, err = approve(otherKey)
	wantCode(t, err, connect.CodePermissionDenied, "E_TOKEN_INVALID")
	pending(a2.GetApprovalId())

	// 4. one signature character changed; one character short: refused, no panic, unchanged.
	flipped := []byte(t2)
	if flipped[len(flipped)-2] == 'A' {
		flipped[len(flipped)-2] = 'B'
	} else {
		flipped[len(flipped)-2] = 'A'
	}
	for name, tok := range map[string]string{"flipped": string(flipped), "shortened": t2[:len(t2)-1], "payload only": strings.Split(t2, ".")[0]} {
		_, err = approve(tok)
		if rbookCode(err) != "E_TOKEN_INVALID" {
			t.Fatalf("point 4 %s: %v", name, err)
		}
	}
	pending(a2.GetApprovalId())
	if _, err := approve(t2); err != nil {
		t.Fatalf("point 4: the genuine token no longer works after refused forgeries: %v", err)
	}

	// 5. after its expiry: refused, saying it timed out (the deadline decides the
	// gate rejected, "timed out after …").
	startRun(t, c, "R4")
	a4, t4 := gate(t, c, "R4", 1500*time.Millisecond)
	tokens = append(tokens, t4)
	w4, _ := watchApproval(t, c, a4.GetApprovalId())
	if last := lastApproval(t, w4); last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED ||
		last.GetDecidedBySource() != "deadline" || !strings.HasPrefix(last.GetReason(), "timed out after ") {
		t.Fatalf("point 5: the gate ended %v, want REJECTED by the deadline", last)
	}
	_, err = approve(t4)
	wantCode(t, err, connect.CodeFailedPrecondition, "E_TOKEN_EXPIRED")
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("point 5: message does not say it timed out: %v", err)
	}

	// 6. the runbook was edited and the run resumed with another plan digest: the run adopts
	// it (GetRun shows it), the old gate's token dies at once, and a gate can only be opened
	// for the run's current digest. A refused StartRun changes nothing.
	startRunDigest(t, c, "R5", digest("v1"))
	_, t5 := gateDigest(t, c, "R5", time.Hour, digest("v1"))
	tokens = append(tokens, t5)
	if run := startRunDigest(t, c, "R5", digest("v2")); run.GetContentHash() != digest("v2") { // the resume
		t.Fatalf("point 6: the resumed run has plan digest %s, want v2's", run.GetContentHash())
	}
	if got, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R5"}); err != nil || got.GetRun().GetContentHash() != digest("v2") {
		t.Fatalf("point 6: GetRun after the resume: %v, %v", got.GetRun(), err)
	}
	_, err = approve(t5)
	wantCode(t, err, connect.CodeFailedPrecondition, "E_PLAN_DIGEST_MISMATCH")
	_, err = c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, "R5"), RunId: "R5", StepName: "approve", StepIndex: 1,
		Deadline: timestamppb.New(time.Now().Add(time.Hour)), PlanDigest: digest("v1")})
	wantCode(t, err, connect.CodeFailedPrecondition, "E_PLAN_DIGEST_MISMATCH")
	_, err = c.runs.StartRun(ctx, &rbookv1.StartRunRequest{OwnerId: "another-owner-0123456789", RunId: "R5", Name: "demo", ContentHash: digest("v3"),
		SchemaHash8: "0123abcd", TotalSteps: 5})
	wantCode(t, err, connect.CodeAlreadyExists, "E_RUN_OWNED")
	if got, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: "R5"}); err != nil || got.GetRun().GetContentHash() != digest("v2") {
		t.Fatalf("point 6: a refused StartRun changed the plan digest: %v, %v", got.GetRun(), err)
	}
	_, t5b := gateDigest(t, c, "R5", time.Hour, digest("v2"))
	tokens = append(tokens, t5b)
	if _, err := approve(t5b); err != nil {
		t.Fatalf("point 6: the new digest's token: %v", err)
	}

	// 7. random, empty and 1 MiB strings: refused quickly, no panic.
	random := make([]byte, 96)
	_, _ = rand.Read(random)
	big := strings.Repeat("x", 1<<20)
	for name, tc := range map[string]struct {
		tok  string
		code connect.Code
		rc   string
	}{
		"random":     {base64.RawURLEncoding.EncodeToString(random), connect.CodePermissionDenied, "E_TOKEN_INVALID"},
		"random.dot": {"abc.def", connect.CodePermissionDenied, "E_TOKEN_INVALID"},
		"empty":      {"", connect.CodeInvalidArgument, "E_INVALID_ARGUMENT"},
		"1 MiB":      {big, connect.CodePermissionDenied, "E_TOKEN_INVALID"},
	} {
		began := time.Now()
		_, err := approve(tc.tok)
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("point 7 %s: refused after %v", name, took)
		}
		wantCode(t, err, tc.code, tc.rc)
	}

	// Tokens appear in no output and no log line.
	var outputs []string
	for _, id := range []string{"R1", "R2", "R4", "R5"} {
		r, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id})
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, protojson.Format(r))
	}
	list, err := c.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{})
	if err != nil || len(list.GetApprovals()) < 5 {
		t.Fatalf("ListApprovals: %d approvals, %v", len(list.GetApprovals()), err)
	}
	outputs = append(outputs, protojson.Format(list))
	if err := p.stop(t); err != nil {
		t.Fatalf("rbook serve exited with %v", err)
	}
	outputs = append(outputs, p.Stderr.String())
	if !strings.Contains(p.Stderr.String(), "procedure=/rbook.v1.ApprovalService/Approve") {
		t.Fatalf("the server log has no Approve lines:\n%s", p.Stderr.String())
	}
	for _, tok := range tokens {
		payload, sig, _ := strings.Cut(tok, ".")
		for _, o := range outputs {
			if strings.Contains(o, payload) || strings.Contains(o, sig) {
				t.Fatalf("a token (or part of one) appears in output or logs:\n%s", o)
			}
		}
	}
}

// A gate nobody answers closes at its deadline and its token dies; CancelRun
// while a gate waits gives the run one final status, ends the watches and kills the token.
func TestGateDeadlineAndCancelRunKillTheToken(t *testing.T) {
	p := startServe(t)
	c := newClients(p.URL)
	ctx := context.Background()

	t.Run("deadline", func(t *testing.T) {
		startRun(t, c, "gate-deadline")
		a, tok := gate(t, c, "gate-deadline", 1500*time.Millisecond)
		w, _ := watchApproval(t, c, a.GetApprovalId())
		last := lastApproval(t, w)
		// Decided rejected, "timed out after <deadline - requested_at>".
		open := last.GetDeadline().AsTime().Sub(last.GetRequestedAt().AsTime())
		// The deadline is kept to whole seconds, so a 1.5 s gate was open 0.5-1.5 s: rounded up.
		want := "timed out after 1s"
		if open > time.Second {
			want = "timed out after 2s"
		}
		if last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || last.GetApprover() != "system" || last.GetApprovedAt() == nil ||
			last.GetDecidedBySource() != "deadline" || last.GetReason() != want || open <= 0 || open > 1500*time.Millisecond {
			t.Fatalf("gate at its deadline: %v, want REJECTED by the deadline, %q", last, want)
		}
		if last.GetApprovedAt().AsTime().Before(a.GetDeadline().AsTime()) {
			t.Fatalf("closed at %v, before its deadline %v", last.GetApprovedAt().AsTime(), a.GetDeadline().AsTime())
		}
		_, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_TOKEN_EXPIRED")
		_, err = c.apps.Reject(ctx, &rbookv1.RejectRequest{Token: tok})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_TOKEN_EXPIRED")
	})

	t.Run("cancel", func(t *testing.T) {
		const id = "gate-cancel"
		startRun(t, c, id)
		record(t, c, transition(id, 1, 0))
		a, tok := gate(t, c, id, time.Hour)
		wa, _ := watchApproval(t, c, a.GetApprovalId())
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wr, err := c.runs.WatchRun(wctx, &rbookv1.WatchRunRequest{RunId: id, FromSeq: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !wr.Receive() || wr.Msg().GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_PAUSED {
			t.Fatalf("WatchRun first message: %v %v", wr.Msg(), wr.Err())
		}
		began := time.Now()
		res, err := c.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: id, Reason: "change freeze"})
		if err != nil || res.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
			t.Fatalf("CancelRun: %v %v", res.GetRun(), err)
		}
		if last := lastApproval(t, wa); last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED {
			t.Fatalf("WatchApproval ended with %v", last.GetStatus())
		}
		var runMsgs []*rbookv1.WatchRunResponse
		for wr.Receive() {
			runMsgs = append(runMsgs, wr.Msg())
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("the watchers learnt of the cancel after %v, want within a second", took)
		}
		if wr.Err() != nil || len(runMsgs) == 0 || runMsgs[len(runMsgs)-1].GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
			t.Fatalf("WatchRun after CancelRun: %v, %v", runMsgs, wr.Err())
		}
		_, err = c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_CANCELLED")
		again, err := c.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: id})
		if err != nil || again.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED ||
			!again.GetRun().GetCompletedAt().AsTime().Equal(res.GetRun().GetCompletedAt().AsTime()) {
			t.Fatalf("second CancelRun: %v %v", again.GetRun(), err)
		}
		_, err = c.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: 1, RunId: id, StepName: "n2", PlanDigest: digest("plan"),
			Deadline: timestamppb.New(time.Now().Add(time.Hour))})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_CANCELLED")

		// The executor winds down: its in-progress transition is kept but answered with
		// E_RUN_CANCELLED; a different final status is refused; its CANCELLED finish is kept.
		_, err = c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: transition(id, 2, 0), OwnerId: testOwner, Epoch: 1})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_CANCELLED")
		_, err = c.runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: transition(id, 3, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED), OwnerId: testOwner, Epoch: 1})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_RUN_CANCELLED")
		record(t, c, transition(id, 3, rbookv1.RunStatus_RUN_STATUS_CANCELLED))
		run, err := c.runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: id})
		if err != nil {
			t.Fatal(err)
		}
		finals := 0
		for _, tr := range run.GetTransitions() {
			if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED {
				finals++
				if tr.GetRunStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
					t.Fatalf("stored final transition says %v", tr.GetRunStatus())
				}
			}
		}
		if run.GetRun().GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED || finals != 1 || run.GetRun().GetLastSeq() != 3 {
			t.Fatalf("run after cancel: status %v, %d final transitions, last_seq %d", run.GetRun().GetStatus(), finals, run.GetRun().GetLastSeq())
		}
	})

	t.Run("final transition closes gates", func(t *testing.T) {
		const id = "gate-finished"
		startRun(t, c, id)
		a, tok := gate(t, c, id, time.Hour)
		w, _ := watchApproval(t, c, a.GetApprovalId())
		record(t, c, transition(id, 1, rbookv1.RunStatus_RUN_STATUS_FAILED))
		if last := lastApproval(t, w); last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED {
			t.Fatalf("gate of a finished run: %v", last.GetStatus())
		}
		_, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok})
		wantCode(t, err, connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	})
}
