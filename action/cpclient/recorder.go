package cpclient

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Recorder is the engine.Recorder that reports transitions to the control plane
// (RecordTransition, idempotent on run_id + seq). Put it after the state file's recorder, so
// a transition is durable locally before it is sent.
type Recorder struct {
	C *Client
	// Acked, when set, is told each seq the control plane has stored (the state file then drops
	// it from its outbox).
	Acked func(seq int64)
	// Cancelled, when set, is called when the control plane says the run was cancelled there
	// (CancelRun); the caller stops the run with engine.CancelRequest.
	Cancelled func()
}

// Record sends t, retrying with back-off while the control plane is unreachable. It returns
// *UnreachableError past the client's deadline, and an error naming the code when the control
// plane refuses the transition for good (E_SEQ_GAP, E_SEQ_CONFLICT, …).
func (r *Recorder) Record(ctx context.Context, t engine.Transition) error {
	req := &rbookv1.RecordTransitionRequest{Transition: ToProto(t)}
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
		if err := r.Record(ctx, t); err != nil {
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
	}
	if e := t.Evidence; e != nil {
		p.Evidence = &rbookv1.Evidence{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output, Status: stepStatus[e.Status], TimestampUtc: e.TimestampUTC}
	}
	return p
}
