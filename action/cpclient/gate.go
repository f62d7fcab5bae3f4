package cpclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gatechannel"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
)

// Gate decides confirm steps through the control plane: RequestApproval opens the gate, and
// the first decision wins — an Approve/Reject RPC from anyone (rbook approve, grpcurl, a
// generated client), or the Local gate (the terminal), whose answer is applied with the same
// compare-and-set so the two can never both decide (docs/decisions/confirm-gates.md).
type Gate struct {
	C *Client
	// Local, when set, is a second source (the terminal). A Cancelled verdict from it is
	// returned as is (the engine asks to confirm the cancel).
	Local engine.Gate
	// Who is recorded as the approver of a Local decision.
	Who string
	// Opened, when set, is told the approval as RequestApproval returned it (its id,
	// approvals_required, allowed_approvers, starter_may_approve and any votes already cast),
	// its token and the deadline the approval really closes at (a reopened gate keeps its
	// original one) once the gate is open, before Announce: a GitHub runner masks the token
	// and says at the gate how to decide it and who may (docs/action.md, "Runner-native output").
	Opened func(a *rbookv1.Approval, token string, deadline time.Time)
	// Progress, when set, is told each pending state of the approval whose votes differ in
	// number from the last one seen (Opened's, then the watch stream's): a vote of an M-of-N
	// gate arrived and the gate still waits (docs/approvals.md, "Gate policy"), so a person sees
	// each vote land. It is
	// called from the watch goroutine.
	Progress func(a *rbookv1.Approval)
	// Decided, when set, is told the approval as it closed — approved, rejected (also by
	// its deadline, decided_by_source "deadline"), cancelled — as the watch stream or the
	// Approve/Reject of a terminal answer returned it, before Await returns: the job summary
	// lists its votes.
	Decided func(a *rbookv1.Approval)
	// Announce is told the approval as RequestApproval returned it and its token once the
	// gate is open (to print "rbook approve <token>" on a terminal, or only the id in CI: the
	// token is a secret), with approval_url, the gate's page, when the control plane has a
	// public URL (docs/console-links.md).
	Announce func(a *rbookv1.Approval, token string)
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
	// Pause, when set, ends Await as soon as the gate is open and still pending (pause mode,
	// docs/decisions/gate-modes.md): it returns a *PausedError, and a later `rbook resume`
	// continues the run once the gate is decided. A gate the control plane answers at once
	// (auto-passed by its policy) is decided as usual.
	Pause bool
	// GitHub is the workflow run and environment reported with RequestApproval
	// (RequestApprovalRequest.github; docs/approvals.md, "Approve in GitHub"); nil outside a runner.
	GitHub *rbookv1.GitHubWorkflowRun
}

// PausedError is what a Pause gate returns once its gate is open on the control plane and
// every transition up to it is there (Drain ran first): the executor ends the job without
// waiting (docs/approvals.md, "Pause mode").
type PausedError struct {
	// ApprovalID is the open approval (Approval.approval_id).
	ApprovalID string
	// ApprovalURL is its page on the console (Approval.approval_url); "" when the control
	// plane has no public URL.
	ApprovalURL string
	// StepIndex and StepName are the gate's step.
	StepIndex int
	StepName  string
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("paused at gate '%s' (step index %d): approval %s is open", e.StepName, e.StepIndex, e.ApprovalID)
}

// Await opens the gate on the control plane and waits for the first decision (engine.Gate).
//
// The control plane's record decides (docs/decisions/confirm-gates.md): ctx's deadline is the gate's, and
// the control plane closes the gate (expired) at that same deadline, so when it passes Await
// waits up to the client's Deadline more for the control plane to say what became of the
// gate — expired (ctx.Err()-like: the engine records TIMED_OUT) or a decision that made it
// in time. When it cannot tell, it returns an error wrapping engine.ErrGateUnresolved and the
// run halts, resumable, rather than time out on a guess. A person's answer at the terminal
// is kept and sent with the client's retries and back-off; until it is recorded or refused
// the gate's deadline does not apply, and an answer the control plane cannot take within the
// Deadline halts the run (ErrGateUnresolved) — it never becomes TIMED_OUT or on_fail. A retry
// that finds the gate E_APPROVAL_ALREADY_DECIDED (the first attempt committed and its answer
// was lost, or someone decided first) takes the decision the watch stream delivers. Await
// returns ctx.Err() when the run stops (signal, cancel).
func (g *Gate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	owner, epoch := g.C.Fence()
	policy, err := PolicyContextProto(req.Policy)
	if err != nil {
		// No policy context the control plane would take: the gate cannot open. That is no
		// decision, so the run halts (resumable) rather than fail the node.
		return engine.Decision{}, fmt.Errorf("gate '%s': %w", req.StepName, err)
	}
	open := &rbookv1.RequestApprovalRequest{
		RunId: req.RunID, StepName: req.StepName, StepIndex: int32(req.StepIndex), Prompt: req.Prompt,
		Deadline: timestamppb.New(req.Deadline), PlanDigest: req.PlanDigest, OnFail: req.OnFail,
		OwnerId: owner, Epoch: epoch, Github: g.GitHub, Policy: policy, Inputs: inputspb.ToProto(req.Inputs),
		RewindTargets: req.RewindTargets,
	}
	// hold ends when the run stops, not at the gate's deadline.
	hold, release := untilStopped(ctx)
	defer release()
	if g.Drain != nil {
		if err := g.Drain(hold); err != nil {
			return engine.Decision{}, stopped(ctx, fmt.Errorf("%w: %w", engine.ErrGateUnresolved, err))
		}
		if ctx.Err() != nil {
			return engine.Decision{}, ctx.Err() // the deadline passed before the gate could open
		}
	}
	var opened *rbookv1.RequestApprovalResponse
	err = g.C.retry(ctx, func(ctx context.Context) error {
		var err error
		opened, err = g.C.Approvals.RequestApproval(ctx, open)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return engine.Decision{}, ctx.Err() // nobody was asked: the gate never opened in time
		}
		return engine.Decision{}, fmt.Errorf("control plane %s: RequestApproval: %w", g.C.URL, err)
	}
	id, token := opened.GetApproval().GetApprovalId(), opened.GetToken()
	// The approval closes at its own deadline; a gate reopened after a restart keeps the
	// approval (and token) it had, with its original, earlier deadline. The Local gate's
	// prompt states that one deadline, not the fresh step timeout.
	localReq := req
	localReq.ApprovalURL = opened.GetApproval().GetApprovalUrl()
	if dl := opened.GetApproval().GetDeadline(); dl != nil && dl.AsTime().Before(req.Deadline) {
		localReq.Deadline = dl.AsTime()
		localReq.Reopened = dl.AsTime().Before(req.Deadline.Add(-time.Second))
	}
	if a := opened.GetApproval(); a.GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		// Decided when it opened: the auto-pass policy approved a playbook gate (docs/decisions/auto-pass-policy.md), or it was approved while this executor was away. Nobody is asked and no
		// token is announced; the decision returns at once, with the policy's verdict.
		if g.Decided != nil {
			g.Decided(a)
		}
		return decisionOf(a)
	}
	if g.Opened != nil {
		g.Opened(opened.GetApproval(), token, localReq.Deadline)
	}
	if g.Announce != nil {
		g.Announce(opened.GetApproval(), token)
	}
	if g.Pause && opened.GetApproval().GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		return engine.Decision{}, &PausedError{ApprovalID: id, ApprovalURL: opened.GetApproval().GetApprovalUrl(), StepIndex: req.StepIndex, StepName: req.StepName}
	}

	hold, stop := context.WithCancel(hold)
	defer stop()
	type result struct {
		d   engine.Decision
		err error
	}
	remote := make(chan result, 1)
	go func() {
		d, err := g.watch(hold, id, len(opened.GetApproval().GetVotes()))
		remote <- result{d, err}
	}()
	local := make(chan result, 1)
	if g.Local != nil {
		go func() {
			d, err := g.Local.Await(ctx, localReq)
			local <- result{d, err}
		}()
	}
	var (
		answer   *engine.Decision // a terminal answer being recorded
		recorded chan result      // its outcome
		gateDone = ctx.Done()     // nil while an answer is being recorded
		grace    <-chan time.Time // after the deadline: how long the control plane has to confirm
	)
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
			if r.err != nil && answer != nil && errors.Is(r.err, context.DeadlineExceeded) {
				// The gate closed on the control plane while a person's answer was on its way.
				return engine.Decision{}, stopped(ctx, fmt.Errorf("%w: your answer %q did not reach the control plane %s before the gate's deadline, so it was not recorded; run the same command again to be asked again", engine.ErrGateUnresolved, answer.Input, g.C.URL))
			}
			if r.err != nil {
				return engine.Decision{}, stopped(ctx, r.err)
			}
			return r.d, nil
		case r := <-local:
			if r.err != nil {
				continue // the terminal cannot answer (stdin closed): the control plane still can
			}
			if r.d.Verdict == engine.Cancelled {
				return r.d, nil
			}
			answer, recorded, gateDone, grace = &r.d, make(chan result, 1), nil, nil
			go func(d engine.Decision) {
				d, err := g.decideLocally(hold, token, d)
				recorded <- result{d, err}
			}(r.d)
		case r := <-recorded:
			switch code := Code(r.err); {
			case r.err == nil:
				return r.d, nil
			case hold.Err() != nil:
				return engine.Decision{}, stopped(ctx, r.err)
			case code == "E_APPROVAL_ALREADY_DECIDED":
				// Someone decided first, or an earlier attempt of ours committed and its answer
				// was lost: the control plane's record, which the watch delivers, decides.
				recorded = nil
			case code == "E_TOKEN_EXPIRED":
				return engine.Decision{}, fmt.Errorf("%w: your answer %q reached the control plane %s only after the gate's deadline, so it was not recorded; run the same command again to be asked again", engine.ErrGateUnresolved, answer.Input, g.C.URL)
			case !isDefinite(r.err):
				return engine.Decision{}, fmt.Errorf("%w: your answer %q could not be recorded on the control plane: %w", engine.ErrGateUnresolved, answer.Input, r.err)
			default:
				// The terminal's answer may not decide this gate (E_PERMISSION_DENIED,
				// E_SELF_APPROVAL): it is no answer, and the control plane decides.
				if g.Notice != nil {
					g.Notice(fmt.Sprintf("your answer could not decide the gate (%v); it waits for a decision on the control plane", r.err))
				}
				answer, recorded, gateDone = nil, nil, ctx.Done()
			}
		case <-gateDone:
			gateDone = nil
			if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return engine.Decision{}, ctx.Err() // the run stopped
			}
			t := time.NewTimer(g.C.deadline())
			defer t.Stop()
			grace = t.C
		case <-grace:
			return engine.Decision{}, fmt.Errorf("%w: the gate's deadline passed and the control plane %s did not confirm within %s that it closed approval %s", engine.ErrGateUnresolved, g.C.URL, g.C.deadline(), id)
		}
	}
}

// isDefinite reports whether err is the control plane's definite answer (not a transport
// failure, not *UnreachableError).
func isDefinite(err error) bool {
	var ue *UnreachableError
	return err != nil && !errors.As(err, &ue) && !Retryable(err) && Code(err) != ""
}

// untilStopped returns a context that ends when ctx is cancelled (the run stopped: a signal,
// a cancel) but not when ctx's own deadline passes.
func untilStopped(ctx context.Context) (context.Context, func()) {
	hold, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
			cancel(cause)
		}
	})
	return hold, func() { stop(); cancel(nil) }
}

// stopped returns ctx.Err() when the run stopped (so the engine records the interruption),
// else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return ctx.Err()
	}
	return err
}

// decideLocally applies a terminal answer with the same compare-and-set as everyone else,
// retrying transient failures with the client's back-off (docs/decisions/confirm-gates.md).
func (g *Gate) decideLocally(ctx context.Context, token string, d engine.Decision) (engine.Decision, error) {
	// The reason marks the channel "terminal" for the control plane's metrics; a control
	// character typed at the prompt is sent as U+FFFD (gatechannel.TerminalReason).
	reason := gatechannel.TerminalReason(d.Input)
	var closed *rbookv1.Approval
	err := g.C.retry(ctx, func(ctx context.Context) error {
		if d.Verdict == engine.Approved {
			resp, err := g.C.Approvals.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Reason: reason, Approver: g.Who, Inputs: d.InputValues})
			closed = resp.GetApproval()
			return err
		}
		resp, err := g.C.Approvals.Reject(ctx, &rbookv1.RejectRequest{Token: token, Reason: reason, Approver: g.Who, RedoFrom: d.RedoFrom})
		closed = resp.GetApproval()
		return err
	})
	if err == nil && g.Decided != nil && closed != nil && closed.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		g.Decided(closed)
	}
	if err == nil {
		// The decision carries the reason, and the decider, the control plane recorded, as
		// one the watch delivers does (the step outputs approved-by and approval-comment;
		// docs/action.md, "Runner-native output"): "unverified:ann" for a name a control plane without auth took.
		d.Reason = reason
		if by := closed.GetApprover(); by != "" {
			d.By = by
		}
		if d.Verdict == engine.Approved {
			d.InputValues = closed.GetInputValues() // validated, defaults applied
		}
		d.Iteration = int(closed.GetIteration())
		// The policy verdict the control plane recorded at the gate's opening, as the watch
		// delivers it: the evidence is the same whichever of the two reports the decision first.
		if p := closed.GetPolicy(); p != nil {
			d.Policy = PolicyDecisionOf(p)
		}
	}
	return d, err
}

var errRunCancelled = errors.New("the run was cancelled on the control plane")

// watch follows the approval until it is decided; votes is how many votes it had when it
// opened (Progress is told of each pending state with another number). A broken stream is reopened with the
// client's back-off; the control plane replays the current state first, so nothing is
// missed. A stream counts as alive once its first message arrived (a silent connection is
// found by HTTP/2 pings, see PingInterval); it fails with engine.ErrGateUnresolved when the
// control plane stayed unreachable for the client's Deadline.
func (g *Gate) watch(ctx context.Context, approvalID string, votes int) (engine.Decision, error) {
	var decided *rbookv1.Approval
	err := g.C.retryAlive(ctx, func(ctx context.Context, alive func()) error {
		stream, err := g.C.Approvals.WatchApproval(ctx, &rbookv1.WatchApprovalRequest{ApprovalId: approvalID})
		if err != nil {
			return err
		}
		defer stream.Close()
		for stream.Receive() {
			alive()
			a := stream.Msg().GetApproval()
			if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
				decided = a
				return nil
			}
			if n := len(a.GetVotes()); n != votes {
				votes = n
				if g.Progress != nil {
					g.Progress(a)
				}
			}
		}
		if err := stream.Err(); err != nil {
			return err
		}
		return errStreamEnded
	})
	if err != nil {
		if ctx.Err() != nil {
			return engine.Decision{}, ctx.Err()
		}
		return engine.Decision{}, fmt.Errorf("%w: watching approval %s: %w", engine.ErrGateUnresolved, approvalID, err)
	}
	if g.Decided != nil {
		g.Decided(decided)
	}
	return decisionOf(decided)
}

// sourceDeadline is Approval.decided_by_source of a gate its deadline closed (approval.proto).
const sourceDeadline = "deadline"

// decisionOf turns a decided approval into the engine's decision. A gate closed by its
// deadline — status REJECTED with decided_by_source "deadline" (docs/approvals.md, "Gates decided from CI"), or EXPIRED
// from older control planes — is no rejection: it returns an error wrapping
// context.DeadlineExceeded, so the engine records TIMED_OUT and on_fail applies
// (docs/spec/runbooks.md, "Step 5", "confirm"). An approved M-of-N gate's By names every approver in vote
// order ("alice, bob": the approval's approver).
func decisionOf(a *rbookv1.Approval) (engine.Decision, error) {
	d := engine.Decision{By: a.GetApprover(), Reason: a.GetReason(), Source: "control-plane", Policy: PolicyDecisionOf(a.GetPolicy()),
		Iteration: int(a.GetIteration())}
	if a.GetDecidedBySource() == SourcePolicy {
		d.Source = SourcePolicy
	}
	switch st := a.GetStatus(); {
	case st == rbookv1.ApprovalStatus_APPROVAL_STATUS_EXPIRED,
		st == rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED && a.GetDecidedBySource() == sourceDeadline:
		return engine.Decision{}, fmt.Errorf("approval %s %s: %w", a.GetApprovalId(), timedOut(a), context.DeadlineExceeded)
	case st == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		d.Verdict, d.InputValues = engine.Approved, a.GetInputValues()
		if d.By == "" {
			var by []string
			for _, v := range a.GetVotes() {
				if v.GetVerdict() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
					by = append(by, v.GetApprover())
				}
			}
			d.By = strings.Join(by, ", ")
		}
	case st == rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED:
		// A push-back (docs/push-back.md): the engine sends the run back to RedoFrom.
		d.Verdict, d.RedoFrom = engine.Rejected, a.GetRedoFrom()
	case st == rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED:
		return engine.Decision{}, errRunCancelled
	default:
		return engine.Decision{}, fmt.Errorf("approval %s has the unknown status %v", a.GetApprovalId(), st)
	}
	return d, nil
}

// timedOut says how a deadline closed a: its reason ("timed out after 5m0s") or "expired".
func timedOut(a *rbookv1.Approval) string {
	if strings.HasPrefix(a.GetReason(), "timed out") {
		return a.GetReason()
	}
	return "expired"
}

// errStreamEnded is a watch stream that ended before a decision; it is retried.
var errStreamEnded = &retryableError{"the approval stream ended before a decision"}

type retryableError struct{ msg string }

func (e *retryableError) Error() string { return e.msg }
