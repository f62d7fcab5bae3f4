package cpclient_test

// Tests of executor failover against two real control-plane
// handlers (controlplane/server) over one shared store, as two replicas on one database
// are. Test code only: the package itself still meets the control plane only through gen/.

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// replica is one control-plane handler over the shared store, served over h2c on 127.0.0.1,
// counting the RPCs it received by procedure.
type replica struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
	// watching is closed when the first WatchApproval stream reaches this replica.
	watching chan struct{}
	once     sync.Once
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request, next http.Handler) {
	proc := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	r.mu.Lock()
	r.hits[proc]++
	r.mu.Unlock()
	if proc == "WatchApproval" {
		r.once.Do(func() { close(r.watching) })
	}
	next.ServeHTTP(w, req)
}

func (r *replica) count(proc string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[proc]
}

// kill stops the replica the way a crashed process stops: its port refuses connections and
// every open connection (a watch stream's too) is cut.
func (r *replica) kill() {
	r.srv.Listener.Close()
	r.srv.CloseClientConnections()
}

// sharedStore opens one SQLite store for the test.
func sharedStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newReplica serves a new server.New over st.
func newReplica(t *testing.T, st *store.Store) *replica {
	t.Helper()
	h, err := server.New(st, server.Options{Secret: bytes.Repeat([]byte("s"), 32), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{hits: map[string]int{}, watching: make(chan struct{})}
	r.srv = h2cServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.ServeHTTP(w, req, h) }))
	t.Cleanup(func() { h.Close(); r.srv.Close() })
	return r
}

// deadURL is an http:// URL on 127.0.0.1 whose port was just closed: connections are refused.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// syncBuffer is a Progress writer safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	foRunID  = "RBOOK-20260101-failover-0123abcd"
	foDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	foOwner  = "o-failovertestowner0001"
)

// foStart starts the test run on c.
func foStart(t *testing.T, c *cpclient.Client, steps int) {
	t.Helper()
	if _, err := c.StartRun(t.Context(), cpclient.RunInfo{RunID: foRunID, RunbookName: "failover", PlanDigest: foDigest,
		SchemaHash8: "0123abcd", StartedBy: "test", TotalSteps: steps, StartedAt: time.Now(), OwnerID: foOwner}); err != nil {
		t.Fatal(err)
	}
}

// foClient is a client on the comma-separated urls that writes its
// failover progress lines to progress and gives up on an unreachable control plane after
// 10 s, well inside the tests' own timeouts.
func foClient(urls string, progress *syncBuffer) *cpclient.Client {
	c := cpclient.New(urls, "")
	c.Progress = progress
	c.Deadline = 10 * time.Second
	return c
}

// foTransition is transition seq of the test run: run_started first, then a step started
// or finished (step index (seq-2)/2).
func foTransition(seq int64) engine.Transition {
	t := engine.Transition{RunID: foRunID, Seq: seq, Kind: engine.TransitionRunStarted, Time: time.Now(), RunStatus: engine.RunInProgress, StepIndex: -1}
	if seq > 1 {
		t.StepIndex, t.StepName, t.StepType = int((seq-2)/2), "step", "check"
		t.Kind = engine.TransitionStepStarted
		if seq%2 == 1 {
			t.Kind = engine.TransitionStepFinished
			t.Evidence = &engine.Evidence{StepName: "step", Type: "check", Status: engine.StatusPass, TimestampUTC: t.Time.UTC().Format(time.RFC3339Nano)}
		}
	}
	return t
}

// storedSeqs reads the run's transitions back from the store.
func storedSeqs(t *testing.T, st *store.Store) []int64 {
	t.Helper()
	_, ts, err := st.GetRun(t.Context(), foRunID)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]int64, len(ts))
	for i, tr := range ts {
		seqs[i] = tr.Seq
	}
	return seqs
}

// wantSeqs fails unless seqs (what: where they were read) is exactly 1..n, each once.
func wantSeqs(t *testing.T, what string, seqs []int64, n int64) {
	t.Helper()
	if int64(len(seqs)) != n {
		t.Fatalf("%s: %d transitions, want %d: %v", what, len(seqs), n, seqs)
	}
	for i, s := range seqs {
		if s != int64(i)+1 {
			t.Fatalf("%s: seqs are not 1..%d each once: %v", what, n, seqs)
		}
	}
}

// TestFailoverFirstURLDeadFromTheStart: the first URL refuses connections from the
// start, so the client uses the second (one progress line), for StartRun and every batch.
func TestFailoverFirstURLDeadFromTheStart(t *testing.T) {
	st := sharedStore(t)
	b := newReplica(t, st)
	dead := deadURL(t)
	var progress syncBuffer
	c := foClient(" "+dead+" , "+b.srv.URL+"/ ", &progress)
	if got := c.URLs(); len(got) != 2 || got[0] != dead || got[1] != b.srv.URL {
		t.Fatalf("URLs() = %q, want [%s %s] (spaces and trailing slash trimmed)", got, dead, b.srv.URL)
	}
	foStart(t, c, 10)
	r := &cpclient.Recorder{C: c}
	const n = 21
	for seq := int64(1); seq <= n; seq++ {
		if err := r.Record(t.Context(), foTransition(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "the store", storedSeqs(t, st), n)
	if c.Current() != b.srv.URL {
		t.Fatalf("Current() = %s, want %s", c.Current(), b.srv.URL)
	}
	want := "control plane: " + dead + " unreachable; using " + b.srv.URL + "\n"
	if got := progress.String(); got != want {
		t.Fatalf("progress = %q, want exactly %q", got, want)
	}
	if b.count("StartRun") != 1 || b.count("RecordTransitions") == 0 {
		t.Fatalf("replica B saw StartRun %d, RecordTransitions %d", b.count("StartRun"), b.count("RecordTransitions"))
	}
}

// TestFailoverFirstKilledMidRun: replica A serves the run until it is killed while
// a gate waits on its WatchApproval stream; the stream reconnects through B, the gate is
// approved through B and decided, and the run's remaining transitions land through B. Read
// back from the shared store, seqs are 1..N, each once.
func TestFailoverFirstKilledMidRun(t *testing.T) {
	st := sharedStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	var progress syncBuffer
	c := foClient(a.srv.URL+","+b.srv.URL, &progress)
	foStart(t, c, 20)
	r := &cpclient.Recorder{C: c}
	record := func(from, to int64) {
		t.Helper()
		for seq := from; seq <= to; seq++ {
			if err := r.Record(t.Context(), foTransition(seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(1, 9)
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a.count("RecordTransitions") == 0 || b.count("RecordTransitions") != 0 || progress.String() != "" {
		t.Fatalf("before the kill: A got %d batches, B %d, progress %q; want everything through A", a.count("RecordTransitions"), b.count("RecordTransitions"), progress.String())
	}

	// A gate opens through A and waits on A's WatchApproval stream.
	announced := make(chan string, 1)
	g := &cpclient.Gate{C: c, Drain: r.Drain, Announce: func(_ *rbookv1.Approval, token string) { announced <- token }}
	decided := make(chan engine.Decision, 1)
	go func() {
		d, err := g.Await(t.Context(), engine.GateRequest{RunID: foRunID, StepName: "gate", StepIndex: 5, Prompt: "go?",
			Deadline: time.Now().Add(time.Minute), PlanDigest: foDigest, OnFail: "halt"})
		if err != nil {
			t.Error(err)
		}
		decided <- d
	}()
	token := <-announced
	select {
	case <-a.watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate's watch stream never reached replica A")
	}
	a.kill()

	// Approved through B only: the gate's watch must see it there.
	onB := cpclient.New(b.srv.URL, "")
	if _, err := onB.Approvals.Approve(t.Context(), &rbookv1.ApproveRequest{Token: token, Approver: "bob", Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-decided:
		if d.Verdict != engine.Approved || d.By != "unverified:bob" && d.By != "bob" {
			t.Fatalf("decision %+v, want approved by bob", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gate was approved through B but never decided")
	}
	if b.count("WatchApproval") == 0 {
		t.Fatal("the watch stream never reconnected through B")
	}

	const n = 31
	record(10, n)
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "the store", storedSeqs(t, st), n)
	if b.count("RecordTransitions") == 0 {
		t.Fatal("no transition went through B after A was killed")
	}
	want := "control plane: " + a.srv.URL + " unreachable; using " + b.srv.URL + "\n"
	if got := progress.String(); got != want {
		t.Fatalf("progress = %q, want exactly %q", got, want)
	}
}

// TestFailoverNotOnApplicationErrors: the control plane's own refusal (a stale
// lease epoch: E_LEASE_LOST) and a bad request (InvalidArgument) are answers, not failures
// of the URL: the client stays on A, B is never asked, and no progress line is written.
func TestFailoverNotOnApplicationErrors(t *testing.T) {
	st := sharedStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	var progress syncBuffer
	c := foClient(a.srv.URL+","+b.srv.URL, &progress)
	foStart(t, c, 10)
	owner, epoch := c.Fence()
	c.SetFence(owner, epoch+1) // a lease this executor does not hold
	r := &cpclient.Recorder{C: c, Sync: true}
	err := r.Record(t.Context(), foTransition(1))
	if !errors.Is(err, cpclient.ErrLeaseLost) {
		t.Fatalf("Record with a stale epoch: %v, want cpclient.ErrLeaseLost", err)
	}
	// A direct call (no retry loop) refused as invalid: also no move.
	if _, err := c.Runs.GetRun(t.Context(), &rbookv1.GetRunRequest{}); cpclient.Code(err) != "E_INVALID_ARGUMENT" {
		t.Fatalf("GetRun without a run id: %v, want E_INVALID_ARGUMENT", err)
	}
	if c.Current() != a.srv.URL || progress.String() != "" {
		t.Fatalf("after refusals the client uses %s and wrote %q; want %s and nothing", c.Current(), progress.String(), a.srv.URL)
	}
	for _, proc := range []string{"StartRun", "RecordTransitions", "RecordTransition", "GetRun"} {
		if n := b.count(proc); n != 0 {
			t.Fatalf("replica B was asked %s %d times; refusals must not move the client", proc, n)
		}
	}
	if a.count("RecordTransitions")+a.count("RecordTransition") != 1 {
		t.Fatalf("A got %d record calls, want 1 (a refusal is not retried)", a.count("RecordTransitions")+a.count("RecordTransition"))
	}
}

// TestFailoverOnGatewayErrorsAndDirectCalls: a load balancer answering 503 for the
// first URL is a transport failure: a direct call (rbook approve, get: no retry loop) moves
// to the next URL within the same call, and a watch (WatchRun) follows through it.
func TestFailoverOnGatewayErrorsAndDirectCalls(t *testing.T) {
	st := sharedStore(t)
	b := newReplica(t, st)
	var gateway atomic.Int32
	lb := h2cServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gateway.Add(1)
		http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
	}))
	t.Cleanup(lb.Close)
	var progress syncBuffer
	c := foClient(lb.URL+","+b.srv.URL, &progress)
	if _, err := c.Runs.GetRun(t.Context(), &rbookv1.GetRunRequest{RunId: foRunID}); cpclient.Code(err) != "E_RUN_NOT_FOUND" {
		t.Fatalf("GetRun: %v, want E_RUN_NOT_FOUND from replica B", err)
	}
	if gateway.Load() != 1 || b.count("GetRun") != 1 || c.Current() != b.srv.URL {
		t.Fatalf("gateway hits %d, B GetRun %d, current %s; want 1, 1, B", gateway.Load(), b.count("GetRun"), c.Current())
	}
	want := "control plane: " + lb.URL + " unreachable; using " + b.srv.URL + "\n"
	if got := progress.String(); got != want {
		t.Fatalf("progress = %q, want %q", got, want)
	}
}

// TestFailoverWatchRunResumesWithoutDuplicates: a WatchRun through A that breaks
// when A is killed reconnects through B from the seq after the last one seen: every
// transition is delivered once, in order.
func TestFailoverWatchRunResumesWithoutDuplicates(t *testing.T) {
	st := sharedStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	writer := cpclient.New(b.srv.URL, "")
	foStart(t, writer, 10)
	rec := &cpclient.Recorder{C: writer, Sync: true}
	for seq := int64(1); seq <= 5; seq++ {
		if err := rec.Record(t.Context(), foTransition(seq)); err != nil {
			t.Fatal(err)
		}
	}
	c := cpclient.New(a.srv.URL+","+b.srv.URL, "")
	c.Deadline = 10 * time.Second
	var seen []int64
	killed := false
	err := c.WatchRun(t.Context(), foRunID, 1, func(m *rbookv1.WatchRunResponse) (bool, error) {
		tr := m.GetTransition()
		if tr == nil {
			return false, nil
		}
		seen = append(seen, tr.GetSeq())
		switch tr.GetSeq() {
		case 5:
			if killed {
				return false, nil
			}
			killed = true
			a.kill() // the stream through A breaks after 5
			for seq := int64(6); seq <= 9; seq++ {
				if err := rec.Record(t.Context(), foTransition(seq)); err != nil {
					return false, err
				}
			}
		case 9:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "the watch", seen, 9)
	if b.count("WatchRun") == 0 || c.Current() != b.srv.URL {
		t.Fatalf("the watch did not move to B (B WatchRun %d, current %s)", b.count("WatchRun"), c.Current())
	}
}

// TestFailoverURLListParsing: SplitURLs trims, refuses empty and non-http(s)
// items naming them, and caps the list at cpclient.MaxURLs.
func TestFailoverURLListParsing(t *testing.T) {
	got, err := cpclient.SplitURLs(" http://a:1/ ,https://b ")
	if err != nil || len(got) != 2 || got[0] != "http://a:1" || got[1] != "https://b" {
		t.Fatalf("SplitURLs = %q, %v", got, err)
	}
	for in, want := range map[string]string{
		"http://a,,http://b": "URL 2 is empty",
		"http://a,":          "URL 2 is empty",
		"http://a, b:7070":   `URL 2 "b:7070" is not a control plane URL`,
		"http://a,ftp://b":   `URL 2 "ftp://b" is not a control plane URL`,
		"127.0.0.1:7070":     `"127.0.0.1:7070" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://127.0.0.1:7070`,
		"http://a,http://":   `URL 2 "http://" is not a control plane URL`,
		strings.Repeat("http://a,", cpclient.MaxURLs) + "http://a": "lists 17 control plane URLs, more than the 16 allowed",
	} {
		_, err := cpclient.SplitURLs(in)
		var ue *cpclient.URLError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("cpclient.SplitURLs(%q) = %v, want an error containing %q", in, err, want)
		}
	}
	if got, err := cpclient.SplitURLs(strings.TrimSuffix(strings.Repeat("http://a,", cpclient.MaxURLs), ",")); err != nil || len(got) != cpclient.MaxURLs {
		t.Fatalf("a list of cpclient.MaxURLs: %d URLs, %v", len(got), err)
	}
}

// TestFailoverRoundRobinBacksOffBetweenRounds: with every URL failing (load
// balancers answering 503), a retried call alternates between them, one attempt each per
// round, backs off between rounds (not between URLs), ends with *UnreachableError at its
// Deadline, and writes each move once (not once per round).
func TestFailoverRoundRobinBacksOffBetweenRounds(t *testing.T) {
	var mu sync.Mutex
	var order []string
	lb := func(name string) *httptest.Server {
		s := h2cServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := lb("a"), lb("b")
	var progress syncBuffer
	c := cpclient.New(a.URL+","+b.URL, "")
	c.Progress = &progress
	c.Deadline = time.Second
	_, err := c.LastSeq(t.Context(), foRunID)
	var ue *cpclient.UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("LastSeq against two failing URLs: %v, want *UnreachableError", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, name := range order {
		if want := []string{"a", "b"}[i%2]; name != want {
			t.Fatalf("attempt %d went to %s, want %s (round robin): %v", i+1, name, want, order)
		}
	}
	// Back-off between rounds (≥ 50 ms, doubling) leaves room for a handful of rounds in
	// 1 s; without it the loop would make thousands of attempts.
	if rounds := len(order) / 2; rounds < 2 || rounds > 12 {
		t.Fatalf("%d rounds in 1s (%d attempts), want 2..12: back-off between full rounds", rounds, len(order))
	}
	want := "control plane: " + a.URL + " unreachable; using " + b.URL + "\n" +
		"control plane: " + b.URL + " unreachable; using " + a.URL + "\n"
	if got := progress.String(); got != want {
		t.Fatalf("progress = %q, want each move once: %q", got, want)
	}
}
