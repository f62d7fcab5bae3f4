package cpclient

import (
	"context"
	"errors"
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
}

func newFake() *fakeCP { return &fakeCP{changed: make(chan struct{})} }

func cpErr(code connect.Code, rcode string) error {
	e := connect.NewError(code, errors.New(rcode+": refused"))
	if d, err := connect.NewErrorDetail(&rbookv1.ErrorInfo{Code: rcode}); err == nil {
		e.AddDetail(d)
	}
	return e
}

func (f *fakeCP) RecordTransition(_ context.Context, req *rbookv1.RecordTransitionRequest) (*rbookv1.RecordTransitionResponse, error) {
	f.mu.Lock()
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
	a := &rbookv1.Approval{ApprovalId: "a-1", RunId: req.GetRunId(), StepName: req.GetStepName(), Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING, Deadline: req.GetDeadline()}
	if f.reopened {
		a.Deadline = timestamppb.New(req.GetDeadline().AsTime().Add(-time.Minute))
	}
	f.setApproval(a)
	return &rbookv1.RequestApprovalResponse{Approval: f.approval, Token: "tok-1"}, nil
}

// decide is the one compare-and-set.
func (f *fakeCP) decide(token, by string, st rbookv1.ApprovalStatus) (*rbookv1.Approval, error) {
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
	a := &rbookv1.Approval{ApprovalId: "a-1", Status: st, Approver: by}
	f.setApproval(a)
	return a, nil
}

func (f *fakeCP) Approve(_ context.Context, req *rbookv1.ApproveRequest) (*rbookv1.ApproveResponse, error) {
	a, err := f.decide(req.GetToken(), req.GetApprover(), rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED)
	return &rbookv1.ApproveResponse{Approval: a}, err
}

func (f *fakeCP) Reject(_ context.Context, req *rbookv1.RejectRequest) (*rbookv1.RejectResponse, error) {
	a, err := f.decide(req.GetToken(), req.GetApprover(), rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED)
	return &rbookv1.RejectResponse{Approval: a}, err
}

func (f *fakeCP) WatchApproval(ctx context.Context, _ *rbookv1.WatchApprovalRequest, s *connect.ServerStream[rbookv1.WatchApprovalResponse]) error {
	for {
		f.mu.Lock()
		a, changed := f.approval, f.changed
		f.mu.Unlock()
		if err := s.Send(&rbookv1.WatchApprovalResponse{Approval: a}); err != nil {
			return err
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
	srv := httptest.NewServer(mux)
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
	if err := r.Flush(t.Context(), []engine.Transition{tr(2), tr(3), tr(4)}); err != nil {
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
	g := &Gate{C: c, Local: &localGate{v: engine.Approved, release: make(chan struct{})}, Who: "ann", Announce: func(_, tok string) { announced <- tok }}
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
		g := &Gate{C: c, Local: local, Who: "ann", Announce: func(_, tok string) { announced <- tok }}
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
	g := &Gate{C: c, Announce: func(string, string) { announced <- struct{}{} }, Cancelled: cancel}
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
	g := &Gate{C: c, Local: local, Who: "starter", Announce: func(_, tok string) { announced <- tok }, Notice: func(m string) { notices <- m }}
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

// An approval that expired on the control plane ends the wait as a timeout.
func TestGateExpiredIsATimeout(t *testing.T) {
	f := newFake()
	c := serve(t, f)
	announced := make(chan struct{}, 1)
	g := &Gate{C: c, Announce: func(string, string) { announced <- struct{}{} }}
	errc := make(chan error, 1)
	go func() {
		_, err := g.Await(t.Context(), engine.GateRequest{RunID: "R", StepName: "g", Deadline: time.Now().Add(time.Minute)})
		errc <- err
	}()
	<-announced
	f.mu.Lock()
	f.setApproval(&rbookv1.Approval{ApprovalId: "a-1", Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_EXPIRED})
	f.mu.Unlock()
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want a deadline", err)
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

// Issue 6, item 2.4: a gate reopened after a restart keeps its approval's original deadline,
// and the terminal prompt states that one deadline, not the fresh step timeout as well.
func TestIssue6_2_4_ReopenedGateStatesOneDeadline(t *testing.T) {
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
