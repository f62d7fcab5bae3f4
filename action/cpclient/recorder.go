package cpclient

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// QueueSize bounds the transitions an asynchronous Recorder holds unsent; Record blocks
// (back-pressure) when it is full.
const QueueSize = 4096

// Recorder is the engine.Recorder that reports transitions to the control plane
// (RecordTransitions, idempotent on run_id + seq; RecordTransition for Sync and for an older
// control plane). Put it after the state file's recorder: a transition is durable locally (in
// the state file's outbox) before it is sent, so the send can be asynchronous — Record queues
// it and one sender delivers the queue in order, everything queued in one call (docs/decisions/durability.md), and the run does not wait a network round trip and a remote fsync per transition.
type Recorder struct {
	C *Client
	// Acked, when set, is told the highest seq up to which the control plane has stored every
	// transition (the state file then drops them from its outbox: FileRecorder.Ack). It is
	// called from the sender goroutine.
	Acked func(seq int64)
	// Cancelled, when set, is called when the control plane says the run was cancelled there
	// (CancelRun); the caller stops the run with engine.CancelRequest.
	Cancelled func()
	// Sync makes Record wait until the control plane has stored the transition.
	Sync bool
	// Linger is how long the sender lets transitions join a call after its first one
	// (0: the package's Linger).
	Linger time.Duration

	once    sync.Once
	queue   chan engine.Transition
	pending sync.WaitGroup
	mu      sync.Mutex
	err     error // the first failure; every later Record returns it
	// held are the transitions appended since the last Flush, not yet queued.
	held []engine.Transition
	// draining counts the Drain calls waiting; kick wakes a sender that lingers (fill).
	draining atomic.Int32
	kick     chan struct{}
}

// Record sends t (Sync) or queues it for the sender: Append, then Flush. It returns the first
// failure of any earlier send: *UnreachableError past the client's deadline, or an error
// naming the code when the control plane refused a transition for good (E_SEQ_GAP,
// E_SEQ_CONFLICT, …).
func (r *Recorder) Record(ctx context.Context, t engine.Transition) error {
	if err := r.Append(ctx, t); err != nil {
		return err
	}
	return r.Flush(ctx)
}

// Append holds t until the next Flush (engine.GroupRecorder): the control plane is sent only
// what the state file's recorder, flushed before this one, has made durable
// (docs/decisions/durability.md, "The journal"). It returns the first failure of an earlier send.
func (r *Recorder) Append(_ context.Context, t engine.Transition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.held = append(r.held, t)
	return nil
}

// Flush sends the held transitions (Sync) or queues them for the sender, in order; the
// queue blocks when it holds QueueSize (back-pressure). Errors are Record's.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	held := r.held
	r.held = nil
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if r.Sync {
		for _, t := range held {
			if err := r.send(ctx, t); err != nil {
				return err
			}
		}
		return nil
	}
	if len(held) == 0 {
		return nil
	}
	r.once.Do(func() {
		r.queue, r.kick = make(chan engine.Transition, QueueSize), make(chan struct{}, 1)
		go r.sender(context.WithoutCancel(ctx))
	})
	r.pending.Add(len(held))
	for _, t := range held {
		r.queue <- t
	}
	return nil
}

func (r *Recorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// sender delivers the queue in order: each call carries everything queued within Linger of
// its first transition (up to MaxBatch transitions and MaxBatchBytes; batch), so a control
// plane that is slower than the run catches up in few calls, the outbox does not grow with
// the run's length, and a run of quick steps costs the control plane one commit for many.
func (r *Recorder) sender(ctx context.Context) {
	wait := r.Linger
	if wait <= 0 {
		wait = Linger
	}
	linger := time.NewTimer(wait)
	var carry *engine.Transition // taken from the queue but not fitting the previous batch
	for {
		var first engine.Transition
		if carry != nil {
			first, carry = *carry, nil
		} else {
			t, ok := <-r.queue
			if !ok {
				return
			}
			first = t
		}
		b := newBatch(first)
		carry = r.fill(b, linger, wait)
		if r.failed() == nil {
			if err := r.sendBatch(ctx, b.ts, b.ps); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
		}
		r.pending.Add(-b.len())
	}
}

// fill adds queued transitions to b until it is full, the queue is empty and wait has
// passed since fill began (at once while Drain waits), or one does not fit: that one is
// returned, to start the next batch.
func (r *Recorder) fill(b *batch, linger *time.Timer, wait time.Duration) *engine.Transition {
	linger.Reset(wait)
	defer linger.Stop()
	waited := false
	for b.len() < MaxBatch {
		var t engine.Transition
		select {
		case t = <-r.queue:
		default:
			if waited || r.draining.Load() > 0 {
				return nil
			}
			select {
			case t = <-r.queue:
			case <-linger.C:
				waited = true
				continue
			case <-r.kick:
				waited = true
				continue
			}
		}
		if !b.add(t) {
			return &t
		}
	}
	return nil
}

// Linger is how long the sender lets more transitions join a call after its first one
// (docs/decisions/durability.md, "The journal"): an engine flushes a step's transitions about
// a millisecond apart, and one call costs the control plane one commit (an fsync) however
// many it carries. A gate's Drain sends at once; the control plane's view lags a run by at
// most this.
const Linger = 20 * time.Millisecond

// Limits of one RecordTransitions call made by the sender (docs/decisions/durability.md).
const (
	// MaxBatch caps the transitions of one call: the control plane's limit (store.MaxBatchTransitions).
	MaxBatch = 1000
	// MaxBatchBytes caps the encoded transitions of one call (bytes): well below the control
	// plane's default 4 MiB request cap (server.DefaultMaxMessageBytes) and its 4 MiB batch
	// limit. A single larger transition is still sent, alone.
	MaxBatchBytes = 2 << 20
)

// batch gathers consecutive transitions of one run within MaxBatch and MaxBatchBytes.
type batch struct {
	ts []engine.Transition
	// ps holds ts in wire form (ToProto), made once for both the size and the request.
	ps    []*rbookv1.Transition
	bytes int
}

func newBatch(t engine.Transition) *batch {
	p := ToProto(t)
	return &batch{ts: []engine.Transition{t}, ps: []*rbookv1.Transition{p}, bytes: proto.Size(p)}
}

func (b *batch) len() int { return len(b.ts) }

// add appends t when it continues the batch (same run, next seq) and fits; else it reports false.
func (b *batch) add(t engine.Transition) bool {
	last := b.ts[len(b.ts)-1]
	if len(b.ts) >= MaxBatch || t.RunID != last.RunID || t.Seq != last.Seq+1 {
		return false
	}
	p := ToProto(t)
	n := proto.Size(p)
	if b.bytes+n > MaxBatchBytes {
		return false
	}
	b.ts, b.ps, b.bytes = append(b.ts, t), append(b.ps, p), b.bytes+n
	return true
}

// sendBatch delivers ts (consecutive transitions of one run; ps is their wire form) with
// RecordTransitions and acknowledges the stored prefix (Acked with acked_seq) after each
// answer, resending the rest until all is stored or refused. The answers are handled as send handles RecordTransition's:
// E_RUN_FINAL and E_RUN_CANCELLED acknowledge the batch and call Cancelled, E_LEASE_LOST is
// ErrLeaseLost, other refusals are errors naming the seq. A control plane without
// RecordTransitions (Unimplemented) gets the transitions one by one, and the client
// remembers it.
func (r *Recorder) sendBatch(ctx context.Context, ts []engine.Transition, ps []*rbookv1.Transition) error {
	for len(ts) > 0 {
		if r.C.noBatch.Load() {
			for _, t := range ts {
				if err := r.send(ctx, t); err != nil {
					return err
				}
			}
			return nil
		}
		owner, epoch := r.C.Fence()
		req := &rbookv1.RecordTransitionsRequest{OwnerId: owner, Epoch: epoch, Transitions: ps}
		var res *rbookv1.RecordTransitionsResponse
		err := r.C.retry(ctx, func(ctx context.Context) error {
			var err error
			res, err = r.C.Runs.RecordTransitions(ctx, req)
			return err
		})
		first, last := ts[0], ts[len(ts)-1]
		switch Code(err) {
		case "":
			if connect.CodeOf(err) == connect.CodeUnimplemented {
				r.C.noBatch.Store(true) // an older control plane: one by one from now on
				continue
			}
			if err != nil {
				return err
			}
		case "E_RUN_FINAL", "E_RUN_CANCELLED":
			// As for one transition (send): the control plane holds the run's one final status.
			if r.Cancelled != nil {
				for _, t := range ts {
					if t.RunStatus != engine.RunCancelled {
						r.Cancelled()
						break
					}
				}
			}
			if r.Acked != nil {
				r.Acked(last.Seq)
			}
			return nil
		case "E_LEASE_LOST":
			return fmt.Errorf("%w: control plane %s refused transition %d of run %s: %v", ErrLeaseLost, r.C.URL, first.Seq, first.RunID, err)
		default:
			return fmt.Errorf("control plane %s refused transition %d of run %s: %w", r.C.URL, first.Seq, first.RunID, err)
		}
		acked := res.GetAckedSeq()
		if acked < first.Seq {
			return fmt.Errorf("control plane %s acknowledged run %s up to seq %d, below the batch's first seq %d",
				r.C.URL, first.RunID, acked, first.Seq)
		}
		if r.Acked != nil {
			r.Acked(acked)
		}
		for len(ts) > 0 && ts[0].Seq <= acked {
			ts, ps = ts[1:], ps[1:] // stored; the rest is resent and its refusal, if any, comes back
		}
	}
	return nil
}

// Drain waits until every queued transition was sent (or ctx ends) and returns the first
// failure. Call it before a gate opens and before the run's outcome is reported.
func (r *Recorder) Drain(ctx context.Context) error {
	r.draining.Add(1)
	defer r.draining.Add(-1)
	select {
	case r.kick <- struct{}{}:
	default:
	}
	done := make(chan struct{})
	go func() { r.pending.Wait(); close(done) }()
	select {
	case <-done:
		return r.failed()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Recorder) send(ctx context.Context, t engine.Transition) error {
	owner, epoch := r.C.Fence()
	req := &rbookv1.RecordTransitionRequest{Transition: ToProto(t), OwnerId: owner, Epoch: epoch}
	err := r.C.retry(ctx, func(ctx context.Context) error {
		_, err := r.C.Runs.RecordTransition(ctx, req)
		return err
	})
	switch Code(err) {
	case "":
		if err != nil {
			return err
		}
	case "E_RUN_FINAL", "E_RUN_CANCELLED":
		// The control plane already holds the run's one final status (CancelRun won). The
		// local record goes on; the run stops at the next step boundary.
		if r.Cancelled != nil && t.RunStatus != engine.RunCancelled {
			r.Cancelled()
		}
	case "E_LEASE_LOST":
		return fmt.Errorf("%w: control plane %s refused transition %d of run %s: %v", ErrLeaseLost, r.C.URL, t.Seq, t.RunID, err)
	default:
		return fmt.Errorf("control plane %s refused transition %d of run %s: %w", r.C.URL, t.Seq, t.RunID, err)
	}
	if r.Acked != nil {
		r.Acked(t.Seq)
	}
	return nil
}

// SendOutbox sends transitions left in a state file's outbox, oldest first, in batches of
// consecutive seqs (duplicates are fine: RecordTransition and RecordTransitions are
// idempotent), and waits for each answer. Errors are Record's.
func (r *Recorder) SendOutbox(ctx context.Context, outbox []engine.Transition) error {
	for len(outbox) > 0 {
		b := newBatch(outbox[0])
		for _, t := range outbox[1:] {
			if !b.add(t) {
				break
			}
		}
		if err := r.sendBatch(ctx, b.ts, b.ps); err != nil {
			return err
		}
		outbox = outbox[b.len():]
	}
	return nil
}

// RunStatusFromProto maps a wire run status to the state file's word: RUNNING and PAUSED are
// IN_PROGRESS (a paused run is unfinished), SUCCEEDED is COMPLETED, FAILED and CANCELLED keep
// their names. ok is false for UNSPECIFIED and any value this client does not know.
func RunStatusFromProto(s rbookv1.RunStatus) (st engine.RunStatus, ok bool) {
	switch s {
	case rbookv1.RunStatus_RUN_STATUS_RUNNING, rbookv1.RunStatus_RUN_STATUS_PAUSED:
		return engine.RunInProgress, true
	case rbookv1.RunStatus_RUN_STATUS_SUCCEEDED:
		return engine.RunCompleted, true
	case rbookv1.RunStatus_RUN_STATUS_FAILED:
		return engine.RunFailed, true
	case rbookv1.RunStatus_RUN_STATUS_CANCELLED:
		return engine.RunCancelled, true
	}
	return "", false
}

// RunStatusToProto maps a state-file run status to the proto enum (docs/decisions/status-words.md).
func RunStatusToProto(s engine.RunStatus) rbookv1.RunStatus {
	switch s {
	case engine.RunInProgress:
		return rbookv1.RunStatus_RUN_STATUS_RUNNING
	case engine.RunCompleted:
		return rbookv1.RunStatus_RUN_STATUS_SUCCEEDED
	case engine.RunFailed:
		return rbookv1.RunStatus_RUN_STATUS_FAILED
	case engine.RunCancelled:
		return rbookv1.RunStatus_RUN_STATUS_CANCELLED
	}
	return rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED
}

var stepStatus = map[engine.StepStatus]rbookv1.StepStatus{
	engine.StatusPass:                 rbookv1.StepStatus_STEP_STATUS_PASS,
	engine.StatusFail:                 rbookv1.StepStatus_STEP_STATUS_FAIL,
	engine.StatusTimedOut:             rbookv1.StepStatus_STEP_STATUS_TIMED_OUT,
	engine.StatusSkipped:              rbookv1.StepStatus_STEP_STATUS_SKIPPED,
	engine.StatusAwaitingConfirmation: rbookv1.StepStatus_STEP_STATUS_AWAITING_CONFIRMATION,
}

var transitionKind = map[engine.TransitionKind]rbookv1.TransitionKind{
	engine.TransitionRunStarted:     rbookv1.TransitionKind_TRANSITION_KIND_RUN_STARTED,
	engine.TransitionStepStarted:    rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED,
	engine.TransitionStepFinished:   rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED,
	engine.TransitionGateOpened:     rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED,
	engine.TransitionGateDecided:    rbookv1.TransitionKind_TRANSITION_KIND_GATE_DECIDED,
	engine.TransitionRunFinished:    rbookv1.TransitionKind_TRANSITION_KIND_RUN_FINISHED,
	engine.TransitionRunInterrupted: rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED,
}

// ToProto maps an engine transition to the wire message.
func ToProto(t engine.Transition) *rbookv1.Transition {
	p := &rbookv1.Transition{
		RunId: t.RunID, Seq: t.Seq, Kind: transitionKind[t.Kind], Time: timestamppb.New(t.Time),
		StepIndex: int32(t.StepIndex), StepName: t.StepName, StepType: t.StepType,
		RunStatus: RunStatusToProto(t.RunStatus), LastDeployName: t.LastDeployName, Message: t.Message,
		RollbackFor: t.RollbackFor, PrevHash: t.PrevHash, Hash: t.Hash,
	}
	if e := t.Evidence; e != nil {
		p.Evidence = &rbookv1.Evidence{StepName: e.StepName, Type: e.Type, Input: e.Input, SourceInput: e.SourceInput, Output: e.Output,
			Status: stepStatus[e.Status], TimestampUtc: e.TimestampUTC, TransitionHash: e.TransitionHash}
	}
	return p
}
