package cpclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Gate decides confirm steps through the control plane: RequestApproval opens the gate, and
// the first decision wins — an Approve/Reject RPC from anyone (rbook approve, grpcurl, a
// generated client), or the Local gate (the terminal), whose answer is applied with the same
// compare-and-set so the two can never both decide (DESIGN D8).
type Gate struct {
	C *Client
	// Local, when set, is a second source (the terminal). A Cancelled verdict from it is
	// returned as is (the engine asks to confirm the cancel).
	Local engine.Gate
	// Who is recorded as the approver of a Local decision.
	Who string
	// Announce is told the approval id and token once the gate is open (to print
	// "rbook approve <token>" on a terminal, or only the id in CI: the token is a secret).
	Announce func(approvalID, token string)
	// Cancelled is called when the control plane cancelled the run while the gate waited;
	// the caller stops the run with engine.CancelRequest. Await then waits for ctx to end.
	Cancelled func()
	// Drain, when set, runs before the gate opens: the control plane then holds every
	// transition up to the gate (an asynchronous Recorder's Drain).
	Drain func(context.Context) error
	// Notice, when set, is told why a Local answer could not decide the gate (for example
	// the executor's token may not approve: E_PERMISSION_DENIED, E_SELF_APPROVAL); the gate
	// then keeps waiting for a decision on the control plane.
	Notice func(msg string)
}

// Await opens the gate on the control plane and waits for the first decision (engine.Gate).
// It returns ctx.Err() when the gate's deadline passes or the run stops.
func (g *Gate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	owner, epoch := g.C.Fence()
	open := &rbookv1.RequestApprovalRequest{
		RunId: req.RunID, StepName: req.StepName, StepIndex: int32(req.StepIndex), Prompt: req.Prompt,
		Deadline: timestamppb.New(req.Deadline), PlanDigest: req.PlanDigest, OnFail: req.OnFail,
		OwnerId: owner, Epoch: epoch,
	}
	if g.Drain != nil {
		if err := g.Drain(ctx); err != nil {
			return engine.Decision{}, err
		}
	}
	var opened *rbookv1.RequestApprovalResponse
	err := g.C.retry(ctx, func(ctx context.Context) error {
		var err error
		opened, err = g.C.Approvals.RequestApproval(ctx, open)
		return err
	})
	if err != nil {
		return engine.Decision{}, fmt.Errorf("control plane %s: RequestApproval: %w", g.C.URL, err)
	}
	id, token := opened.GetApproval().GetApprovalId(), opened.GetToken()
	if g.Announce != nil {
		g.Announce(id, token)
	}
	// The approval closes at its own deadline; a gate reopened after a restart keeps the
	// approval (and token) it had, with its original, earlier deadline. The Local gate's
	// prompt states that one deadline, not the fresh step timeout (issue 6, item 2.4).
	localReq := req
	if dl := opened.GetApproval().GetDeadline(); dl != nil && dl.AsTime().Before(req.Deadline) {
		localReq.Deadline = dl.AsTime()
		localReq.Reopened = dl.AsTime().Before(req.Deadline.Add(-time.Second))
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	type result struct {
		d   engine.Decision
		err error
	}
	remote := make(chan result, 1)
	go func() {
		d, err := g.watch(ctx, id)
		remote <- result{d, err}
	}()
	local := make(chan result, 1)
	if g.Local != nil {
		go func() {
			d, err := g.Local.Await(ctx, localReq)
			local <- result{d, err}
		}()
	}
	for {
		select {
		case r := <-remote:
			if errors.Is(r.err, errRunCancelled) {
				if g.Cancelled != nil {
					g.Cancelled()
				}
				<-ctx.Done()
				return engine.Decision{}, ctx.Err()
			}
			return r.d, r.err
		case r := <-local:
			if r.err != nil || r.d.Verdict == engine.Cancelled {
				if r.err != nil {
					continue // the terminal cannot answer (stdin closed): the control plane still can
				}
				return r.d, nil
			}
			d, err := g.decideLocally(ctx, token, r.d)
			if err == nil {
				return d, nil
			}
			// Another source decided first (its decision arrives on the watch stream), or the
			// terminal's answer may not decide this gate: either way the control plane decides.
			if Code(err) != "E_APPROVAL_ALREADY_DECIDED" && g.Notice != nil {
				g.Notice(fmt.Sprintf("your answer could not decide the gate (%v); it waits for a decision on the control plane", err))
			}
		}
	}
}

// decideLocally applies a terminal answer with the same compare-and-set as everyone else.
func (g *Gate) decideLocally(ctx context.Context, token string, d engine.Decision) (engine.Decision, error) {
	reason := "answered at the executor's terminal: " + d.Input
	var err error
	if d.Verdict == engine.Approved {
		_, err = g.C.Approvals.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Reason: reason, Approver: g.Who})
	} else {
		_, err = g.C.Approvals.Reject(ctx, &rbookv1.RejectRequest{Token: token, Reason: reason, Approver: g.Who})
	}
	return d, err
}

var errRunCancelled = errors.New("the run was cancelled on the control plane")

// watch follows the approval until it is decided. A broken stream is reopened (with
// back-off); the control plane replays the current state first, so nothing is missed.
func (g *Gate) watch(ctx context.Context, approvalID string) (engine.Decision, error) {
	var decided *rbookv1.Approval
	err := g.C.retry(ctx, func(ctx context.Context) error {
		stream, err := g.C.Approvals.WatchApproval(ctx, &rbookv1.WatchApprovalRequest{ApprovalId: approvalID})
		if err != nil {
			return err
		}
		defer stream.Close()
		for stream.Receive() {
			a := stream.Msg().GetApproval()
			if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
				decided = a
				return nil
			}
		}
		if err := stream.Err(); err != nil {
			return err
		}
		return errStreamEnded
	})
	if err != nil {
		return engine.Decision{}, err
	}
	d := engine.Decision{By: decided.GetApprover(), Reason: decided.GetReason(), Source: "control-plane"}
	switch decided.GetStatus() {
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		d.Verdict = engine.Approved
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED:
		d.Verdict = engine.Rejected
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED:
		return engine.Decision{}, errRunCancelled
	default: // expired: the gate's deadline passed on the control plane
		return engine.Decision{}, fmt.Errorf("approval %s expired: %w", approvalID, context.DeadlineExceeded)
	}
	return d, nil
}

// errStreamEnded is a watch stream that ended before a decision; it is retried.
var errStreamEnded = &retryableError{"the approval stream ended before a decision"}

type retryableError struct{ msg string }

func (e *retryableError) Error() string { return e.msg }
