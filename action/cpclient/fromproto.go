package cpclient

import (
	"context"
	"fmt"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// FromProto maps a stored wire transition back to the engine's (the inverse of ToProto), so
// `rbook resume` can rebuild a paused run's state file from the control plane's record
// (docs/decisions/gate-modes.md). A PAUSED or RUNNING run status is IN_PROGRESS. Errors: an
// unknown transition kind, run status or step status (a newer control plane), naming the seq.
func FromProto(p *rbookv1.Transition) (engine.Transition, error) {
	t := engine.Transition{
		RunID: p.GetRunId(), Seq: p.GetSeq(), Time: p.GetTime().AsTime().UTC(), StepIndex: int(p.GetStepIndex()),
		StepName: p.GetStepName(), StepType: p.GetStepType(), LastDeployName: p.GetLastDeployName(),
		Message: p.GetMessage(), RollbackFor: p.GetRollbackFor(), PrevHash: p.GetPrevHash(), Hash: p.GetHash(),
	}
	for k, v := range transitionKind {
		if v == p.GetKind() {
			t.Kind = k
		}
	}
	if t.Kind == "" {
		return t, fmt.Errorf("transition %d has the unknown kind %v", p.GetSeq(), p.GetKind())
	}
	var ok bool
	if t.RunStatus, ok = RunStatusFromProto(p.GetRunStatus()); !ok {
		return t, fmt.Errorf("transition %d has the unknown run status %v", p.GetSeq(), p.GetRunStatus())
	}
	if e := p.GetEvidence(); e != nil {
		ev := engine.Evidence{StepName: e.GetStepName(), Type: e.GetType(), Input: e.Input, SourceInput: e.SourceInput,
			Output: e.GetOutput(), TimestampUTC: e.GetTimestampUtc(), TransitionHash: p.GetHash()}
		for k, v := range stepStatus {
			if v == e.GetStatus() {
				ev.Status = k
			}
		}
		if ev.Status == "" {
			return t, fmt.Errorf("transition %d has the unknown step status %v", p.GetSeq(), e.GetStatus())
		}
		t.Evidence = &ev
	}
	return t, nil
}

// DecisionOf is how a decided approval decides its gate (see decisionOf): Approved or
// Rejected with the approver and reason; an error wrapping context.DeadlineExceeded for a gate
// its deadline closed (the step is TIMED_OUT); an error for a cancelled (withdrawn) one.
func DecisionOf(a *rbookv1.Approval) (engine.Decision, error) { return decisionOf(a) }

// ReleaseLease ends this client's lease on the run now (RenewLeaseRequest.release; pause
// mode, docs/approvals.md, "Pause mode"), so the executor that resumes the run takes it over at once at the
// next epoch. Errors: the control plane's refusal, or *UnreachableError after the Deadline.
func (c *Client) ReleaseLease(ctx context.Context, runID string) error {
	owner, epoch := c.Fence()
	return c.retry(ctx, func(ctx context.Context) error {
		_, err := c.Runs.RenewLease(ctx, &rbookv1.RenewLeaseRequest{RunId: runID, OwnerId: owner, Epoch: epoch, Release: true})
		return err
	})
}

// Retry runs f with the client's retries and back-off (transient failures are retried until
// the client's Deadline; a definite refusal is returned at once), for the calls `rbook
// resume` makes before it starts the run.
func (c *Client) Retry(ctx context.Context, f func(context.Context) error) error {
	return c.retry(ctx, f)
}
