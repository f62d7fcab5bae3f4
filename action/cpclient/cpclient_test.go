package cpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// fakeCP is a small in-memory control plane: enough of RunService and ApprovalService to
// exercise the client's retries, deduplication and gate races.
type fakeCP struct {
	rbookv1connect.UnimplementedRunServiceHandler
	rbookv1connect.UnimplementedApprovalServiceHandler
	mu          sync.Mutex
	failFirst   int // RecordTransition answers Unavailable this many times first
	seqs        []int64
	cancelled   bool
	approval    *rbookv1.Approval
	changed     chan struct{} // closed and replaced on every approval change
	decideCalls int
	// reopened makes RequestApproval answer like a gate opened before a restart: the same
	// approval with its original, earlier deadline.
	reopened bool
	// approveFail makes Approve answer Unavailable this many times first (-1: always).
	approveFail int
	// watchBreak makes the first WatchApproval stream, after its first message, wait this
	// long and then fail with Unavailable.
	watchBreak  time.Duration
	watchCalls  int
	watched     chan struct{} // closed once the first watch stream sent its first message
	recordCalls int
	// recordHang makes RecordTransition wait until the client gives up.
	recordHang bool
	// policy is the verdict of the auto-pass policy recorded on the approval when it opens.
	policy *rbookv1.PolicyDecision
}

func newFake() *fakeCP { return &fakeCP{changed: make(chan struct{}), watched: make(chan struct{})} }

func cpErr(code connect.Code, rcode string) error {
	e := connect.NewError(code, errors.New(rcode+": refused"))
	if d, err := connect.NewErrorDetail(&rbookv1.ErrorInfo{Code: rcode}); err == nil {
		e.AddDetail(d)
	}
	return e
}

func (f *fakeCP) RecordTransition(ctx context.Context, req *rbookv1.RecordTransitionRequest) (*rbookv1.RecordTransitionResponse, error) {
	f.mu.Lock()
	f.recordCalls++
	if f.recordHang {
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	defer f.mu.Unlock()
	if f.failFirst > 0 {
		f.failFirst--
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}
	if f.cancelled {
		return nil, cpErr(connect.CodeFailedPrecondition, "E_RUN_CANCELLED")
	}
	seq := req.GetTransition().GetSeq()
	for _, s := range f.seqs {
		if s == seq {
			return &rbookv1.RecordTransitionResponse{Duplicate: true, LastSeq: f.seqs[len(f.seqs)-1]}, nil
		}
	}
	if n := len(f.seqs); (n == 0 && seq != 1) || (n > 0 && seq != f.seqs[n-1]+1) {
		return nil, cpErr(connect.CodeFailedPrecondition, "E_SEQ_GAP")
	}
	f.seqs = append(f.seqs, seq)
	return &rbookv1.RecordTransitionResponse{LastSeq: seq}, nil
}

func (f *fakeCP) setApproval(a *rbookv1.Approval) {
	f.approval = a
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCP) RequestApproval(_ context.Context, req *rbookv1.RequestApprovalRequest) (*rbookv1.RequestApprovalResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := &rbookv1.Approval{ApprovalId: "a-1", RunId: req.GetRunId(), StepName: req.GetStepName(), Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING, Deadline: req.GetDeadline(), Policy: f.policy}
	if f.reopened {
		a.Deadline = timestamppb.New(req.GetDeadline().AsTime().Add(-time.Minute))
	}
	f.setApproval(a)
	return &rbookv1.RequestApprovalResponse{Approval: f.approval, Token: "tok-1"}, nil
}

// decide is the one compare-and-set; it keeps the reason, as the control plane records it
// (the watch then delivers it, whichever of the two answers reaches the gate first).
func (f *fakeCP) decide(token, by, reason string, st rbookv1.ApprovalStatus) (*rbookv1.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decideCalls++
	if token != "tok-1" || f.approval == nil {
		return nil, cpErr(connect.CodeNotFound, "E_APPROVAL_NOT_FOUND")
	}
	if by == "starter" {
		return nil, cpErr(connect.CodePermissionDenied, "E_SELF_APPROVAL")
	}
	if f.approval.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		return nil, cpErr(connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED")
	}
	a := &rbookv1.Approval{ApprovalId: "a-1", Status: st, Approver: by, Reason: reason, Policy: f.approval.GetPolicy()}
	f.setApproval(a)
	return a, nil
}

func (f *fakeCP) Approve(_ context.Context, req *rbookv1.ApproveRequest) (*rbookv1.ApproveResponse, error) {
	f.mu.Lock()
	if f.approveFail != 0 {
		f.approveFail--
		f.decideCalls++
		f.mu.Unlock()
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("503 Service Unavailable"))
	}
	f.mu.Unlock()
	a, err := f.decide(req.GetToken(), req.GetApprover(), req.GetReason(), rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED)
	return &rbookv1.ApproveResponse{Approval: a}, err
}

func (f *fakeCP) Reject(_ context.Context, req *rbookv1.RejectRequest) (*rbookv1.RejectResponse, error) {
	a, err := f.decide(req.GetToken(), req.GetApprover(), req.GetReason(), rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED)
	return &rbookv1.RejectResponse{Approval: a}, err
}

func (f *fakeCP) WatchApproval(ctx context.Context, _ *rbookv1.WatchApprovalRequest, s *connect.ServerStream[rbookv1.WatchApprovalResponse]) error {
	f.mu.Lock()
	f.watchCalls++
	breakAfter := f.watchBreak
	if f.watchCalls > 1 {
		breakAfter = 0
	}
	f.mu.Unlock()
	for {
		f.mu.Lock()
		a, changed := f.approval, f.changed
		f.mu.Unlock()
		if err := s.Send(&rbookv1.WatchApprovalResponse{Approval: a}); err != nil {
			return err
		}
		if breakAfter > 0 {
			close(f.watched)
			time.Sleep(breakAfter) // a stream that lived long, then broke
			return connect.NewError(connect.CodeUnavailable, errors.New("connection reset"))
		}
		if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func serve(t *testing.T, f *fakeCP) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(rbookv1connect.NewRunServiceHandler(f))
	mux.Handle(rbookv1connect.NewApprovalServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // the client speaks h2c to http:// URLs
	srv.Start()
	t.Cleanup(srv.Close)
	c := New(srv.URL, "")
	c.Deadline = 5 * time.Second
	return c
}

func tr(seq int64) engine.Transition {
	return engine.Transition{RunID: "R", Seq: seq, Kind: engine.TransitionStepStarted, Time: time.Unix(0, 0), RunStatus: engine.RunInProgress}
}

func TestRecorderRetriesAndAcks(t *testing.T) {
	f := newFake()
	f.failFirst = 3
	var acked []int64
	r := &Recorder{C: serve(t, f), Acked: func(s int64) { acked = append(acked, s) }, Sync: true}
	for seq := int64(1); seq <= 3; seq++ {
		if err := r.Record(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
	}
	// Resending an outbox that overlaps what the control plane holds is harmless.
	if err := r.SendOutbox(t.Context(), []engine.Transition{tr(2), tr(3), tr(4)}); err != nil {
		t.Fatal(err)
	}
	if len(f.seqs) != 4 || f.seqs[3] != 4 || len(acked) != 6 {
		t.Fatalf("stored %v, acked %v", f.seqs, acked)
	}
	if err := r.Record(t.Context(), tr(9)); Code(err) != "E_SEQ_GAP" {
		t.Fatalf("a gap: %v", err)
	}
}

// Asynchronous mode: Record returns at once, the sender delivers in order, Drain waits, and a
// failure surfaces at the next Record.
func TestRecorderAsync(t *testing.T) {
	f := newFake()
	f.failFirst = 2
	var mu sync.Mutex
	var acked []int64
	r := &Recorder{C: serve(t, f), Acked: func(s int64) { mu.Lock(); acked = append(acked, s); mu.Unlock() }}
	for seq := int64(1); seq <= 200; seq++ {
		if err := r.Record(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if len(f.seqs) != 200 || f.seqs[199] != 200 || n != 200 {
		t.Fatalf("stored %d (last %d), acked %d", len(f.seqs), f.seqs[len(f.seqs)-1], n)
	}
	r.Record(t.Context(), tr(500)) // a gap: refused by the control plane
	if err := r.Drain(t.Context()); Code(err) != "E_SEQ_GAP" {
		t.Fatalf("Drain after a refused transition: %v", err)
	}
	if err := r.Record(t.Context(), tr(201)); Code(err) != "E_SEQ_GAP" {
		t.Fatalf("the next Record must report the failure: %v", err)
	}
}

func TestRecorderGivesUpPastDeadline(t *testing.T) {
	c := New("http://127.0.0.1:1", "") // nothing listens on port 1
	c.Deadline = 300 * time.Millisecond
	err := (&Recorder{C: c, Sync: true}).Record(t.Context(), tr(1))
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("err %v, want *UnreachableError", err)
	}
}

func TestRecorderSeesCancelRun(t *testing.T) {
	f := newFake()
	f.cancelled = true
	called := 0
	r := &Recorder{C: serve(t, f), Cancelled: func() { called++ }, Sync: true}
	if err := r.Record(t.Context(), tr(1)); err != nil || called != 1 {
		t.Fatalf("err %v, Cancelled called %d times", err, called)
	}
	final := tr(2)
	final.Kind, final.RunStatus = engine.TransitionRunFinished, engine.RunCancelled
	if err := r.Record(t.Context(), final); err != nil || called != 1 {
		t.Fatalf("the executor's own CANCELLED record: err %v, Cancelled called %d times", err, called)
	}
}

// localGate answers once with v, after release is closed.
type localGate struct {
	v       engine.Verdict
	release chan struct{}
}

func (l *localGate) Await(ctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
	select {
	case <-l.release:
		return engine.Decision{Verdict: l.v, Input: "typed", Source: "terminal"}, nil
	case <-ctx.Done():
		return engine.Decision{}, ctx.Err()
	}
}

func TestGateRemoteDecision(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	announced := make(chan string, 1)
	g := &Gate{C: c, Local: &localGate{v: engine.Approved, release: make(chan struct{})}, Who: "ann", Announce: func(_ *rbookv1.Approval, tok string) { announced <- tok }}
	done := make(chan engine.Decision, 1)
	go func() {
		d, err := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	tok := <-announced
	if _, err := c.Approvals.Reject(t.Context(), &rbookv1.RejectRequest{Token: tok, Approver: "bob"}); err != nil {
		t.Fatal(err)
	}
	d := <-done
	if d.Verdict != engine.Rejected || d.By != "bob" || d.Source != "control-plane" {
		t.Fatalf("decision %+v", d)
	}
}

func TestGateLocalAnswerUsesTheSameCompareAndSet(t *testing.T) {
	for _, remoteFirst := range []bool{false, true} {
		f := newFake()
		c := serve(t, f)
		local := &localGate{v: engine.Approved, release: make(chan struct{})}
		announced := make(chan string, 1)
		g := &Gate{C: c, Local: local, Who: "ann", Announce: func(_ *rbookv1.Approval, tok string) { announced <- tok }}
		done := make(chan engine.Decision, 1)
		go func() {
			d, _ := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
			done <- d
		}()
		tok := <-announced
		if remoteFirst {
			if _, err := c.Approvals.Reject(t.Context(), &rbookv1.RejectRequest{Token: tok, Approver: "bob"}); err != nil {
				t.Fatal(err)
			}
		}
		close(local.release)
		d := <-done
		want := engine.Approved
		if remoteFirst {
			want = engine.Rejected // the terminal's yes lost the compare-and-set
		}
		if d.Verdict != want {
			t.Errorf("remoteFirst=%v: verdict %d, want %d", remoteFirst, d.Verdict, want)
		}
		f.mu.Lock()
		calls, final := f.decideCalls, f.approval.GetStatus()
		f.mu.Unlock()
		if (final == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED) != (want == engine.Approved) || calls < 1 {
			t.Errorf("remoteFirst=%v: approval %s after %d decide calls", remoteFirst, final, calls)
		}
	}
}

func TestGateRunCancelled(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	announced := make(chan struct{}, 1)
	g := &Gate{C: c, Announce: func(*rbookv1.Approval, string) { announced <- struct{}{} }, Cancelled: cancel}
	errc := make(chan error, 1)
	go func() {
		_, err := g.Await(ctx, engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
		errc <- err
	}()
	<-announced
	f.mu.Lock()
	f.setApproval(&rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED})
	f.mu.Unlock()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the run's context cancelled through Cancelled", err)
	}
}

// A terminal answer the control plane refuses (self-approval, no approver role) is no
// decision: the gate keeps waiting and a later decision on the control plane counts.
func TestGateLocalAnswerRefusedKeepsWaiting(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	local := &localGate{v: engine.Rejected, release: make(chan struct{})}
	announced := make(chan string, 1)
	notices := make(chan string, 1)
	g := &Gate{C: c, Local: local, Who: "starter", Announce: func(_ *rbookv1.Approval, tok string) { announced <- tok }, Notice: func(m string) { notices <- m }}
	done := make(chan engine.Decision, 1)
	go func() {
		d, _ := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
		done <- d
	}()
	tok := <-announced
	close(local.release)
	if m := <-notices; !strings.Contains(m, "E_SELF_APPROVAL") {
		t.Fatalf("notice %q", m)
	}
	if _, err := c.Approvals.Approve(t.Context(), &rbookv1.ApproveRequest{Token: tok, Approver: "bob"}); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d.Verdict != engine.Approved || d.By != "bob" {
		t.Fatalf("decision %+v", d)
	}
}

// A gate the control plane closed at its deadline (REJECTED "timed out
// after …", decided_by_source "deadline"; EXPIRED from older control planes) ends the wait as
// a timeout, so the engine records TIMED_OUT and on_fail applies; a person's REJECTED stays a
// rejection.
func TestGateClosedByDeadlineIsATimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		a       *rbookv1.Approval
		timeout bool
	}{
		{"rejected by the deadline", &rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED,
			Approver: "system", Reason: "timed out after 1m0s", DecidedBySource: "deadline"}, true},
		{"expired (older control plane)", &rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_EXPIRED}, true},
		{"rejected by a person", &rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED,
			Approver: "alice", Reason: "no", DecidedBySource: "rpc"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			cl := serve(t, f)
			announced := make(chan struct{}, 1)
			g := &Gate{C: cl, Announce: func(*rbookv1.Approval, string) { announced <- struct{}{} }}
			type res struct {
				d   engine.Decision
				err error
			}
			done := make(chan res, 1)
			go func() {
				d, err := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
				done <- res{d, err}
			}()
			<-announced
			f.mu.Lock()
			f.setApproval(c.a)
			f.mu.Unlock()
			r := <-done
			if c.timeout {
				if !errors.Is(r.err, context.DeadlineExceeded) {
					t.Fatalf("err %v, want a deadline", r.err)
				}
				if c.a.GetReason() != "" && !strings.Contains(r.err.Error(), "timed out after 1m0s") {
					t.Fatalf("err %q does not say how long the gate waited", r.err)
				}
				return
			}
			if r.err != nil || r.d.Verdict != engine.Rejected || r.d.By != "alice" || r.d.Reason != "no" {
				t.Fatalf("decision %+v, %v; want rejected by alice", r.d, r.err)
			}
		})
	}
}

// The decision of an M-of-N gate names every approver (the Action's
// approved-by output), also when only the votes carry them.
func TestDecisionNamesEveryApprover(t *testing.T) {
	votes := []*rbookv1.ApprovalVote{
		{Approver: "alice", Verdict: rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED},
		{Approver: "bob", Verdict: rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED},
	}
	for _, by := range []string{"alice, bob", ""} {
		d, err := decisionOf(&rbookv1.Approval{Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED, Approver: by, Votes: votes, Reason: "ok"})
		if err != nil || d.Verdict != engine.Approved || d.By != "alice, bob" || d.Reason != "ok" {
			t.Fatalf("approver %q: decision %+v, %v; want approved by \"alice, bob\"", by, d, err)
		}
	}
}

// promptWriter collects what a terminal gate prints and signals each write.
type promptWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	writes chan struct{}
}

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.b.Write(p)
	w.mu.Unlock()
	select {
	case w.writes <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *promptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A gate reopened after a restart keeps its approval's original deadline,
// and the terminal prompt states that one deadline, not the fresh step timeout as well.
func TestReopenedGateStatesOneDeadline(t *testing.T) {
	f := newFake()
	f.reopened = true
	c := serve(t, f)
	var notices []string
	var nmu sync.Mutex
	out := &promptWriter{writes: make(chan struct{}, 16)}
	pr, pw := io.Pipe()
	defer pw.Close()
	local := &steps.TerminalGate{In: steps.NewLines(pr), Out: out, Who: "ann"}
	g := &Gate{C: c, Local: local, Who: "ann", Notice: func(m string) { nmu.Lock(); notices = append(notices, m); nmu.Unlock() }}
	requested := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	done := make(chan engine.Decision, 1)
	go func() {
		d, _ := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: requested})
		done <- d
	}()
	for !strings.HasSuffix(out.String(), "> ") {
		<-out.writes
	}
	prompt := out.String()
	original := requested.Add(-time.Minute).UTC().Format("2006-01-02 15:04:05 UTC")
	if strings.Count(prompt, "closes at") != 1 || !strings.Contains(prompt, "closes at "+original) || !strings.Contains(prompt, "original deadline") {
		t.Errorf("prompt states no single deadline %s:\n%s", original, prompt)
	}
	if strings.Contains(prompt, requested.UTC().Format("15:04:05")) {
		t.Errorf("prompt also states the fresh timeout %s:\n%s", requested.UTC().Format("15:04:05"), prompt)
	}
	io.WriteString(pw, "yes\n")
	if d := <-done; d.Verdict != engine.Approved {
		t.Fatalf("decision %+v", d)
	}
	nmu.Lock()
	defer nmu.Unlock()
	if len(notices) != 0 {
		t.Errorf("extra notices %q", notices)
	}
}

func connectErr(code connect.Code, rcode string) error {
	if rcode != "" {
		return cpErr(code, rcode)
	}
	return connect.NewError(code, errors.New("from the transport"))
}

// Transient failures are retried, definite refusals are not.
func TestRetryableClassification(t *testing.T) {
	cases := []struct {
		code  connect.Code
		rcode string
		want  bool
	}{
		{connect.CodeUnavailable, "", true},      // refused or reset connection, HTTP 429/502/503/504
		{connect.CodeUnknown, "", true},          // another HTTP status, a broken read
		{connect.CodeInternal, "", true},         // incomplete envelope, unexpected EOF
		{connect.CodeDeadlineExceeded, "", true}, // an attempt timed out
		{connect.CodeCanceled, "", true},         // a stream reset by the peer
		{connect.CodeAborted, "", true},
		{connect.CodeInvalidArgument, "", false},
		{connect.CodeUnauthenticated, "", false}, // HTTP 401
		{connect.CodePermissionDenied, "", false},
		{connect.CodeUnimplemented, "", false}, // HTTP 404
		{connect.CodeResourceExhausted, "", false},
		{connect.CodeAborted, "E_RETRY", true},
		{connect.CodeUnavailable, "E_RETRY", true},
		{connect.CodeInternal, "E_INTERNAL", true},
		{connect.CodeAlreadyExists, "E_SEQ_CONFLICT", false},
		{connect.CodeFailedPrecondition, "E_SEQ_GAP", false},
		{connect.CodePermissionDenied, "E_PERMISSION_DENIED", false},
		{connect.CodeInvalidArgument, "E_INVALID_ARGUMENT", false},
		{connect.CodeFailedPrecondition, "E_APPROVAL_ALREADY_DECIDED", false},
		{connect.CodeUnavailable, "E_SOMETHING_NEW", false}, // any other rbook code is the server's answer
	}
	for _, c := range cases {
		if got := Retryable(connectErr(c.code, c.rcode)); got != c.want {
			t.Errorf("%s %q: Retryable = %v, want %v", c.code, c.rcode, got, c.want)
		}
	}
	if Retryable(errors.New("not a connect error")) {
		t.Error("an unknown error is retried")
	}
}

// The back-off doubles from minBackoff, never exceeds maxBackoff, and is
// jittered (equal jitter: between half the step and the step).
func TestBackoffIsCappedAndJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for n := range 40 {
		step := maxBackoff
		if n < 16 {
			step = min(minBackoff<<n, maxBackoff)
		}
		d := backoff(n)
		if d < step/2 || d > step {
			t.Fatalf("backoff(%d) = %s, want within [%s, %s]", n, d, step/2, step)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Errorf("only %d distinct waits in 40: no jitter", len(seen))
	}
}

// A control plane that takes calls and never answers costs one attempt
// timeout per attempt, and the call gives up at the deadline instead of hanging.
func TestAttemptTimeoutBoundsASilentServer(t *testing.T) {
	f := newFake()
	f.recordHang = true
	c := serve(t, f)
	c.Deadline, c.AttemptTimeout = 1500*time.Millisecond, 200*time.Millisecond
	err := (&Recorder{C: c, Sync: true}).Record(t.Context(), tr(1))
	var ue *UnreachableError
	if !errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want *UnreachableError that is no deadline", err)
	}
	f.mu.Lock()
	calls := f.recordCalls
	f.mu.Unlock()
	if calls < 3 {
		t.Fatalf("%d attempts within the deadline; each should have been cut at the attempt timeout", calls)
	}
	// A direct unary call without a deadline gets the attempt timeout too (the CLI's get, runs).
	if _, err := c.Runs.RecordTransition(t.Context(), &rbookv1.RecordTransitionRequest{Transition: ToProto(tr(1))}); connect.CodeOf(err) != connect.CodeDeadlineExceeded {
		t.Fatalf("a direct call: %v, want deadline_exceeded", err)
	}
}

// A watch stream that lived longer than the deadline and then broke gets a
// full deadline to come back: the clock starts when the stream was lost.
func TestWatchDeadlineCountsFromTheLoss(t *testing.T) {
	f := newFake()
	f.watchBreak = 700 * time.Millisecond
	c := serve(t, f)
	c.Deadline = 500 * time.Millisecond
	announced := make(chan string, 1)
	g := &Gate{C: c, Announce: func(_ *rbookv1.Approval, tok string) { announced <- tok }}
	done := make(chan error, 1)
	go func() {
		d, err := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
		if err == nil && d.Verdict != engine.Approved {
			err = fmt.Errorf("verdict %d", d.Verdict)
		}
		done <- err
	}()
	tok := <-announced
	<-f.watched
	if _, err := c.Approvals.Approve(t.Context(), &rbookv1.ApproveRequest{Token: tok, Approver: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the watch did not come back after a long-lived stream broke: %v", err)
	}
	f.mu.Lock()
	calls := f.watchCalls
	f.mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d watch streams, want the broken one and its replacement", calls)
	}
}

// A terminal answer the control plane cannot take at once is sent again
// until it is recorded — also after the gate's deadline passed meanwhile.
func TestAnswerRetriedPastTheGateDeadline(t *testing.T) {
	f := newFake()
	f.approveFail = 4
	c := serve(t, f)
	local := &localGate{v: engine.Approved, release: make(chan struct{})}
	close(local.release)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond) // the gate's deadline
	defer cancel()
	g := &Gate{C: c, Local: local, Who: "ann"}
	d, err := g.Await(ctx, engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(300 * time.Millisecond)})
	if err != nil || d.Verdict != engine.Approved {
		t.Fatalf("decision %+v, err %v; want the answer recorded", d, err)
	}
	if ctx.Err() == nil {
		t.Fatal("the retries ended before the gate's deadline; the test proves nothing")
	}
	f.mu.Lock()
	calls, st := f.decideCalls, f.approval.GetStatus()
	f.mu.Unlock()
	if calls != 5 || st != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("%d Approve calls, approval %s", calls, st)
	}
}

// An answer that cannot be recorded within the deadline makes the gate
// unresolved (the run halts), never a timeout.
func TestUnrecordableAnswerIsUnresolved(t *testing.T) {
	f := newFake()
	f.approveFail = -1
	c := serve(t, f)
	c.Deadline = 600 * time.Millisecond
	local := &localGate{v: engine.Approved, release: make(chan struct{})}
	close(local.release)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	g := &Gate{C: c, Local: local, Who: "ann"}
	_, err := g.Await(ctx, engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(200 * time.Millisecond)})
	if !errors.Is(err, engine.ErrGateUnresolved) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `your answer "typed" could not be recorded`) {
		t.Fatalf("err %v, want ErrGateUnresolved and no deadline", err)
	}
}
