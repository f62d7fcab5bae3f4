package cpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// batchCP is fakeCP with RecordTransitions: it stores a batch's new seqs in order, counts
// duplicates and answers acked_seq. When hold is set, every RecordTransitions call reports its
// batch on arrived and waits for release before answering: a slow control plane that the
// test paces.
type batchCP struct {
	*fakeCP
	batches [][]int64
	arrived chan []int64
	release chan struct{}
}

func (f *batchCP) RecordTransitions(ctx context.Context, req *rbookv1.RecordTransitionsRequest) (*rbookv1.RecordTransitionsResponse, error) {
	var seqs []int64
	f.mu.Lock()
	var dup int32
	for _, t := range req.GetTransitions() {
		seq := t.GetSeq()
		seqs = append(seqs, seq)
		if n := len(f.seqs); n > 0 && seq <= f.seqs[n-1] {
			dup++
			continue
		}
		if n := len(f.seqs); (n == 0 && seq != 1) || (n > 0 && seq != f.seqs[n-1]+1) {
			f.mu.Unlock()
			return nil, cpErr(connect.CodeFailedPrecondition, "E_SEQ_GAP")
		}
		f.seqs = append(f.seqs, seq)
	}
	f.batches = append(f.batches, seqs)
	acked := f.seqs[len(f.seqs)-1]
	f.mu.Unlock()
	if f.arrived != nil {
		f.arrived <- seqs
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &rbookv1.RecordTransitionsResponse{AckedSeq: acked, Duplicates: dup}, nil
}

// stored returns a copy of the stored seqs and of the batches' seqs.
func (f *batchCP) stored() ([]int64, [][]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.seqs...), append([][]int64(nil), f.batches...)
}

// rpcCounter wraps a handler and counts requests by method name.
type rpcCounter struct {
	next http.Handler
	mu   sync.Mutex
	n    map[string]int
}

func (c *rpcCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.n[path.Base(r.URL.Path)]++
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *rpcCounter) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// serveCounted serves h's RunService (RecordTransitions included when h has it) and counts
// the RPCs.
func serveCounted(t *testing.T, h rbookv1connect.RunServiceHandler) (*Client, *rpcCounter) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(rbookv1connect.NewRunServiceHandler(h))
	counter := &rpcCounter{next: mux, n: map[string]int{}}
	srv := httptest.NewUnstartedServer(counter)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	c := New(srv.URL, "")
	c.Deadline = 5 * time.Second
	return c, counter
}

// ackLog records the acknowledgements and models the state file's outbox: recorded minus
// acknowledged.
type ackLog struct {
	mu    sync.Mutex
	acks  []int64
	high  int64
	maxUn int64
}

func (a *ackLog) ack(seq int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acks = append(a.acks, seq)
	a.high = max(a.high, seq)
}

// recorded notes that seq was recorded and returns the outbox size (unacked transitions).
func (a *ackLog) recorded(seq int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maxUn = max(a.maxUn, seq-a.high)
	return seq - a.high
}

// A slow control plane that the run outpaces: while each call is held, the run records
// another 400 transitions; when the call returns, the sender sends exactly those 400 in the
// next call. 4,001 transitions go in 11 RecordTransitions calls, none with RecordTransition,
// the outbox never holds more than one held call plus what was recorded meanwhile (it does
// not grow with N), and each acknowledgement is the batch's acked_seq.
func TestSenderBatchesWhileSlowServerCatchesUp(t *testing.T) {
	const rounds, perRound = 10, 400
	f := &batchCP{fakeCP: newFake(), arrived: make(chan []int64), release: make(chan struct{})}
	c, counter := serveCounted(t, f)
	acks := &ackLog{}
	r := &Recorder{C: c, Acked: acks.ack}
	record := func(seq int64) {
		t.Helper()
		if err := r.Record(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
		if n := acks.recorded(seq); n > 2*perRound {
			t.Fatalf("outbox holds %d transitions at seq %d, want at most %d", n, seq, 2*perRound)
		}
	}
	record(1)
	if got := <-f.arrived; len(got) != 1 || got[0] != 1 {
		t.Fatalf("first call carried %v, want [1]", got)
	}
	next := int64(2)
	for round := 0; round < rounds; round++ {
		from := next
		for ; next < from+perRound; next++ {
			record(next) // queued: the sender waits on the held call
		}
		f.release <- struct{}{}
		got := <-f.arrived
		if len(got) != perRound || got[0] != from || got[len(got)-1] != next-1 {
			t.Fatalf("round %d: call carried %d transitions (%v…), want %d..%d", round, len(got), got[:min(3, len(got))], from, next-1)
		}
	}
	f.release <- struct{}{}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	const total = 1 + rounds*perRound
	if n := counter.count("RecordTransitions"); n != rounds+1 {
		t.Fatalf("%d RecordTransitions calls, want %d", n, rounds+1)
	}
	if n := counter.count("RecordTransition"); n != 0 {
		t.Fatalf("%d RecordTransition calls, want 0", n)
	}
	if seqs, _ := f.stored(); len(seqs) != total || seqs[total-1] != total {
		t.Fatalf("control plane stored %d transitions (last %d), want %d", len(seqs), seqs[len(seqs)-1], total)
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	if len(acks.acks) != rounds+1 || acks.acks[0] != 1 || acks.acks[1] != 1+perRound || acks.high != total {
		t.Fatalf("acks %v…, want one per call: 1, %d, …, %d", acks.acks[:min(3, len(acks.acks))], 1+perRound, total)
	}
	if acks.maxUn < perRound {
		t.Fatalf("the outbox peaked at %d, so the server was never behind: the test did not test", acks.maxUn)
	}
}

// An outbox of 2,500 left by an earlier executor (the first 700 already stored) drains in
// three calls of at most MaxBatch: the stored ones count as duplicates and are acknowledged
// with the rest.
func TestSendOutboxDeliversItInFewCalls(t *testing.T) {
	f := &batchCP{fakeCP: newFake()}
	for seq := int64(1); seq <= 700; seq++ {
		f.seqs = append(f.seqs, seq)
	}
	c, counter := serveCounted(t, f)
	acks := &ackLog{}
	r := &Recorder{C: c, Acked: acks.ack}
	var outbox []engine.Transition
	for seq := int64(1); seq <= 2500; seq++ {
		outbox = append(outbox, tr(seq))
	}
	if err := r.SendOutbox(t.Context(), outbox); err != nil {
		t.Fatal(err)
	}
	if n := counter.count("RecordTransitions"); n != 3 {
		t.Fatalf("%d RecordTransitions calls, want 3", n)
	}
	seqs, batches := f.stored()
	if len(batches) != 3 || len(batches[0]) != MaxBatch || len(batches[1]) != MaxBatch || len(batches[2]) != 500 {
		t.Fatalf("batch sizes: %d batches, want 1000, 1000, 500", len(batches))
	}
	if len(seqs) != 2500 || acks.high != 2500 || len(acks.acks) != 3 || acks.acks[0] != 1000 || acks.acks[1] != 2000 {
		t.Fatalf("stored %d, acks %v; want 2500 stored and acks 1000, 2000, 2500", len(seqs), acks.acks)
	}
}

// A control plane without RecordTransitions (an older one: its handler answers
// Unimplemented) gets every transition by RecordTransition, in order, after one refused
// batch call; the client remembers and does not try batches again.
func TestSenderFallsBackOnUnimplemented(t *testing.T) {
	f := newFake() // fakeCP has no RecordTransitions
	c, counter := serveCounted(t, f)
	acks := &ackLog{}
	r := &Recorder{C: c, Acked: acks.ack}
	for seq := int64(1); seq <= 50; seq++ {
		if err := r.Record(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := (&Recorder{C: c, Acked: acks.ack}).SendOutbox(t.Context(), []engine.Transition{tr(50), tr(51)}); err != nil {
		t.Fatal(err)
	}
	if n := counter.count("RecordTransitions"); n != 1 {
		t.Fatalf("%d RecordTransitions calls, want 1 (then the client remembers)", n)
	}
	if n := counter.count("RecordTransition"); n != 52 {
		t.Fatalf("%d RecordTransition calls, want 52", n)
	}
	f.mu.Lock()
	seqs := append([]int64(nil), f.seqs...)
	f.mu.Unlock()
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("stored seqs %v, want 1..51 in order", seqs)
		}
	}
	if len(seqs) != 51 || acks.high != 51 {
		t.Fatalf("stored %d, acked up to %d; want 51 and 51", len(seqs), acks.high)
	}
}

// The batch path keeps the single path's answers: E_RUN_CANCELLED acknowledges and calls
// Cancelled, E_SEQ_GAP is an error naming the seq that Drain and the next Record return.
func TestSenderBatchRefusals(t *testing.T) {
	f := &batchCP{fakeCP: newFake()}
	c, _ := serveCounted(t, f)
	acks := &ackLog{}
	r := &Recorder{C: c, Acked: acks.ack}
	for _, seq := range []int64{1, 2, 3, 7, 8} {
		if err := r.Record(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Drain(t.Context())
	if seqs, _ := f.stored(); Code(err) != "E_SEQ_GAP" || len(seqs) != 3 {
		t.Fatalf("Drain = %v with %v stored, want E_SEQ_GAP after 1..3", err, seqs)
	}
	if err := r.Record(t.Context(), tr(9)); Code(err) != "E_SEQ_GAP" {
		t.Fatalf("the next Record must report the failure: %v", err)
	}

	g := newFake()
	g.cancelled = true
	cb := &cancelBatchCP{fakeCP: g}
	c2, _ := serveCounted(t, cb)
	called := 0
	acks2 := &ackLog{}
	r2 := &Recorder{C: c2, Acked: acks2.ack, Cancelled: func() { called++ }}
	if err := r2.SendOutbox(t.Context(), []engine.Transition{tr(1), tr(2)}); err != nil || called != 1 || acks2.high != 2 {
		t.Fatalf("cancelled run: err %v, Cancelled called %d times, acked %d; want nil, 1, 2", err, called, acks2.high)
	}
}

// cancelBatchCP answers every batch with E_RUN_CANCELLED.
type cancelBatchCP struct{ *fakeCP }

func (f *cancelBatchCP) RecordTransitions(context.Context, *rbookv1.RecordTransitionsRequest) (*rbookv1.RecordTransitionsResponse, error) {
	return nil, cpErr(connect.CodeFailedPrecondition, "E_RUN_CANCELLED")
}

// The control plane is sent only what the engine flushed (the state file's journal made it
// durable first): appended transitions wait for Flush, and Drain does not send them. The
// sender lingers so that flushes made in quick succession share one call; Drain cuts the
// linger short (here it would last an hour).
func TestControlPlaneIsSentOnlyWhatWasFlushed(t *testing.T) {
	f := &batchCP{fakeCP: newFake()}
	c, counter := serveCounted(t, f)
	acks := &ackLog{}
	r := &Recorder{C: c, Acked: acks.ack, Linger: time.Hour}
	for seq := int64(1); seq <= 3; seq++ {
		if err := r.Append(t.Context(), tr(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := counter.count("RecordTransitions") + counter.count("RecordTransition"); n != 0 {
		t.Fatalf("%d calls before any flush, want 0", n)
	}
	if err := r.Flush(t.Context()); err != nil { // the three appended
		t.Fatal(err)
	}
	for _, g := range [][]int64{{4, 5}, {6}} { // two more flushes, one step apart
		for _, seq := range g[:len(g)-1] {
			if err := r.Append(t.Context(), tr(seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Record(t.Context(), tr(g[len(g)-1])); err != nil { // Append and Flush
			t.Fatal(err)
		}
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	seqs, batches := f.stored()
	if len(seqs) != 6 || seqs[5] != 6 || len(batches) != 1 || counter.count("RecordTransitions") != 1 {
		t.Fatalf("stored %v in batches %v (%d calls); want 1..6 in one call", seqs, batches, counter.count("RecordTransitions"))
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	if acks.high != 6 {
		t.Fatalf("acknowledged up to %d, want 6", acks.high)
	}
}
