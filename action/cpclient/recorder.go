package cpclient

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// QueueSize bounds the transitions an asynchronous Recorder holds unsent; Record blocks
// (back-pressure) when it is full.
const QueueSize = 4096

// Recorder is the engine.Recorder that reports transitions to the control plane
// (RecordTransition, idempotent on run_id + seq). Put it after the state file's recorder:
// a transition is durable locally (in the state file's outbox) before it is sent, so the
// send can be asynchronous — Record queues it and one sender delivers the queue in order,
// and the run does not wait a network round trip and a remote fsync per transition.
type Recorder struct {
	C *Client
	// Acked, when set, is told each seq the control plane has stored (the state file then drops
	// it from its outbox). It is called from the sender goroutine.
	Acked func(seq int64)
	// Cancelled, when set, is called when the control plane says the run was cancelled there
	// (CancelRun); the caller stops the run with engine.CancelRequest.
	Cancelled func()
	// Sync makes Record wait until the control plane has stored the transition.
	Sync bool

	once    sync.Once
	queue   chan engine.Transition
	pending sync.WaitGroup
	mu      sync.Mutex
	err     error // the first failure; every later Record returns it
}

// Record sends t (Sync) or queues it for the sender. It returns the first failure of any
// earlier send: *UnreachableError past the client's deadline, or an error naming the code
// when the control plane refused a transition for good (E_SEQ_GAP, E_SEQ_CONFLICT, …).
func (r *Recorder) Record(ctx context.Context, t engine.Transition) error {
	if err := r.failed(); err != nil {
		return err
	}
	if r.Sync {
		return r.send(ctx, t)
	}
	r.once.Do(func() {
		r.queue = make(chan engine.Transition, QueueSize)
		go r.sender(context.WithoutCancel(ctx))
	})
	r.pending.Add(1)
	r.queue <- t
	return nil
}

func (r *Recorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) sender(ctx context.Context) {
	for t := range r.queue {
		if r.failed() == nil {
			if err := r.send(ctx, t); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
		}
		r.pending.Done()
	}
}

// Drain waits until every queued transition was sent (or ctx ends) and returns the first
// failure. Call it before a gate opens and before the run's outcome is reported.
func (r *Recorder) Drain(ctx context.Context) error {
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

// Flush sends transitions left in a state file's outbox, oldest first (duplicates are fine:
// RecordTransition is idempotent).
func (r *Recorder) Flush(ctx context.Context, outbox []engine.Transition) error {
	for _, t := range outbox {
		if err := r.send(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// RunStatusToProto maps a state-file run status to the proto enum (DESIGN D7).
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
		RollbackFor: t.RollbackFor,
	}
	if e := t.Evidence; e != nil {
		p.Evidence = &rbookv1.Evidence{StepName: e.StepName, Type: e.Type, Input: e.Input, SourceInput: e.SourceInput, Output: e.Output,
			Status: stepStatus[e.Status], TimestampUtc: e.TimestampUTC}
	}
	return p
}
