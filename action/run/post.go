package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// PostInterruptedMessage is the message of the run_interrupted transition `rbook github
// post` records for a run its job left unfinished.
const PostInterruptedMessage = "interrupted: the GitHub Actions job ended while the run was unfinished (recorded by rbook github post)"

// PostTarget is the run `rbook github post` finishes: a runbook's (Name RUNBOOK) or a
// playbook's (Name FILE), with its state file and the command that resumes it.
type PostTarget struct {
	Name, StatePath, Resume string
	// Final names a final run's status in messages.
	Final func(*state.State) string
}

// Post is `rbook github post`, the Action's post step (docs/action.md, "The post step"): for tgt's run, a final
// run only has its outbox delivered; an unfinished one has its outbox delivered, a
// run_interrupted transition recorded under the run's own lease, and its pending approvals
// withdrawn by the control plane; a run paused at a gate on purpose is left alone. Messages go to errw; the withdrawn
// approval ids, one a line ("Withdrawn approval a-… (gate '…' of run …)"), to out.
func (c *Config) Post(ctx context.Context, tgt PostTarget, out, errw io.Writer) error {
	name, statePath := tgt.Name, tgt.StatePath
	if _, err := state.ReadCurrent(statePath); errors.Is(err, state.ErrNotExist) {
		fmt.Fprintf(errw, "rbook github post: no run to finish: %s does not exist (the job never started a run of %s).\n", statePath, name)
		return nil
	}
	// A final run only has its outbox delivered.
	h, err := c.hold(ctx, statePath, verb{role: "post", name: name, deliverFirst: true, read: readAny,
		fail: func(err error) error { return abort("rbook github post: %v", err) }}, errw)
	if err != nil {
		return err
	}
	defer h.release()
	st := h.st
	if st.RunStatus.Final() {
		fmt.Fprintf(errw, "rbook github post: run %s is %s; nothing to withdraw.\n", st.RunID, tgt.Final(st))
		return nil
	}
	fileRec := h.recorder(false)
	if !st.ControlPlaneEmbedded && st.ControlPlane == "" {
		// The run kept its record in the state file only: no approvals exist anywhere.
		if st.Interrupted == nil {
			if err := fileRec.Record(ctx, interruptedTransition(st, 0, "")); err != nil {
				return abort("rbook github post: %v", err)
			}
		}
		fmt.Fprintf(errw, "rbook github post: run %s is unfinished; recorded it interrupted in %s (it reports to no control plane). Resume it with: %s\n", st.RunID, statePath, tgt.Resume)
		return nil
	}
	url, stop, err := c.OutboxTarget(ctx, st)
	if err != nil {
		return abort("rbook github post: run %s is unfinished, and its control plane cannot be reached: %v", st.RunID, err)
	}
	defer stop()
	quick := *c
	quick.Timeout = FinishedElsewhereCheck
	if closed, err := quick.CloseIfFinishedAt(ctx, url, statePath, st, errw); err == nil && closed != nil {
		fmt.Fprintf(errw, "rbook github post: run %s was finished elsewhere and is %s; nothing to withdraw.\n", st.RunID, closed.RunStatus)
		return nil
	}
	fileRec.KeepOutbox = true
	if _, err := c.Deliver(ctx, fileRec, url); err != nil {
		return abort("rbook github post: run %s is unfinished, and %d of its transitions could not be delivered to the control plane %s: %v", st.RunID, fileRec.Unacked(), url, err)
	}
	// Authenticated as the run was (Auth.NewClient: RBOOK_TOKEN, or the job's OIDC token).
	cl, err := c.client(url, st.ControlPlaneEmbedded)
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	cl.SetFence(st.OwnerID, st.LeaseEpoch)
	if paused, err := leftPaused(ctx, cl, st, name, errw); err != nil {
		return abort("rbook github post: %v", err)
	} else if paused {
		return nil
	}
	pending, err := pendingApprovals(ctx, cl, st.RunID)
	if err != nil {
		return abort("rbook github post: %v", err)
	}
	if st.Interrupted == nil || len(pending) > 0 {
		// Record the interruption after the last transition the control plane holds: the
		// state file does not write every transition (as rbook cancel).
		last, head, err := cl.LastLink(ctx, st.RunID)
		if err != nil {
			return abort("rbook github post: run %s is unfinished: %v", st.RunID, err)
		}
		if err := fileRec.Record(ctx, interruptedTransition(st, last, head)); err != nil {
			return abort("rbook github post: %v", err)
		}
		if _, err := c.Deliver(ctx, fileRec, url); err != nil {
			return abort("rbook github post: run %s: the interruption is recorded in %s but not on the control plane %s: %v", st.RunID, statePath, url, err)
		}
	}
	if err := confirmWithdrawn(ctx, cl, st.RunID, url, pending, out); err != nil {
		return err
	}
	fmt.Fprintf(errw, "rbook github post: run %s is unfinished and recorded interrupted on the control plane %s; %d pending approval(s) withdrawn. Resume it with: %s\n",
		st.RunID, url, len(pending), tgt.Resume)
	return nil
}

// leftPaused reports whether st's run is one the job left paused at a gate on purpose: the gate mode is pause ($RBOOK_GATE_MODE, which the Action's post step gets
// from the same gate-mode input as its main step), the state file awaits a confirmation and
// records no interruption, and the control plane's last transition of the run opened that
// gate. Such a run is left alone — its gate stays open (or decided, if an approver was quick)
// for a later job's `rbook resume` — and one line says so on errw. Errors are the control
// plane's (GetRun, retried as cpclient retries).
func leftPaused(ctx context.Context, cl *cpclient.Client, st *state.State, name string, errw io.Writer) (bool, error) {
	ac := st.AwaitingConfirmation
	if os.Getenv("RBOOK_GATE_MODE") != GateModePause || ac == nil || st.Interrupted != nil {
		return false, nil
	}
	resp, err := cl.Runs.GetRun(ctx, &rbookv1.GetRunRequest{RunId: st.RunID})
	if err != nil {
		return false, fmt.Errorf("run %s is unfinished: control plane %s: GetRun: %w", st.RunID, cl.URL, err)
	}
	ts := resp.GetTransitions()
	if len(ts) == 0 {
		return false, nil
	}
	if last := ts[len(ts)-1]; last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_GATE_OPENED || last.GetStepIndex() != int32(ac.StepIndex) {
		return false, nil
	}
	approval := "its approval"
	if page, err := cl.Approvals.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: st.RunID, PageSize: 1}); err == nil && len(page.GetApprovals()) > 0 {
		a := page.GetApprovals()[0]
		approval = fmt.Sprintf("approval %s (%s)", a.GetApprovalId(), strings.ToLower(strings.TrimPrefix(a.GetStatus().String(), "APPROVAL_STATUS_")))
	}
	fmt.Fprintf(errw, "rbook github post: run %s is paused at gate '%s' (gate-mode pause); nothing withdrawn: %s stays on the control plane %s, and a later job continues the run with verb resume (rbook resume %s --run-id %s).\n",
		st.RunID, ac.StepName, approval, cl.URL, name, st.RunID)
	return true, nil
}

// interruptedTransition is the run_interrupted transition for st's run after the last one
// the state file or the control plane (cpSeq, whose hash is cpHead) holds, at the gate it
// waited at or the side-effecting step it was running, if any; sealed as the next link of
// the run's chain.
func interruptedTransition(st *state.State, cpSeq int64, cpHead string) engine.Transition {
	seq, head := continueAfter(st, cpSeq, cpHead)
	t := engine.Transition{RunID: st.RunID, Seq: seq + 1, Kind: engine.TransitionRunInterrupted, Time: time.Now().UTC(),
		StepIndex: -1, RunStatus: engine.RunInProgress, Message: PostInterruptedMessage, RollbackFor: st.RollbackFor}
	switch {
	case st.AwaitingConfirmation != nil:
		t.StepIndex, t.StepName, t.StepType = st.AwaitingConfirmation.StepIndex, st.AwaitingConfirmation.StepName, "confirm"
	case st.InFlight != nil:
		t.StepIndex, t.StepName, t.StepType = st.InFlight.StepIndex, st.InFlight.StepName, st.InFlight.StepType
	case len(st.InFlightNodes) > 0: // a playbook's first node in flight
		f := st.InFlightNodes[0]
		t.StepIndex, t.StepName, t.StepType = f.StepIndex, f.StepName, f.StepType
	}
	t.Seal(engine.ChainPrev(seq, head))
	return t
}

// lastWithdrawn is runID's newest approval when the control plane withdrew it at an
// interruption (decided_by_source "interrupted"), else nil (the newest gate was decided
// otherwise, there is none, or the lookup failed: it only informs the log).
func lastWithdrawn(ctx context.Context, cl *cpclient.Client, runID string) *rbookv1.Approval {
	page, err := cl.Approvals.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: runID, PageSize: 1})
	if err != nil || len(page.GetApprovals()) == 0 || page.GetApprovals()[0].GetDecidedBySource() != "interrupted" {
		return nil
	}
	return page.GetApprovals()[0]
}

// pendingApprovals lists runID's pending approvals on the control plane, every page.
func pendingApprovals(ctx context.Context, cl *cpclient.Client, runID string) ([]*rbookv1.Approval, error) {
	req := &rbookv1.ListApprovalsRequest{RunId: runID, Status: rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING}
	var all []*rbookv1.Approval
	for {
		page, err := cl.Approvals.ListApprovals(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("control plane %s: ListApprovals of run %s: %w", cl.URL, runID, err)
		}
		all = append(all, page.GetApprovals()...)
		if page.GetNextPageToken() == "" {
			return all, nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}

// confirmWithdrawn checks that every approval of run runID that was pending is closed now (the
// control plane withdraws them in the transaction that records run_interrupted), printing one
// line per withdrawn approval id on out. An approval left pending is refused (exit 2).
func confirmWithdrawn(ctx context.Context, cl *cpclient.Client, runID, url string, pending []*rbookv1.Approval, out io.Writer) error {
	var still []string
	for _, a := range pending {
		resp, err := cl.Approvals.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
		if err != nil {
			return abort("rbook github post: control plane %s: GetApproval %s: %v", url, a.GetApprovalId(), err)
		}
		if resp.GetApproval().GetStatus() == rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
			still = append(still, a.GetApprovalId())
			continue
		}
		fmt.Fprintf(out, "Withdrawn approval %s (gate '%s' of run %s)\n", a.GetApprovalId(), a.GetStepName(), runID)
	}
	if len(still) > 0 {
		return abort("rbook github post: run %s is recorded interrupted, but the control plane %s left approval(s) %s pending (does it predate withdrawing approvals at run_interrupted?); reject them with 'rbook reject'",
			runID, url, strings.Join(still, ", "))
	}
	if len(pending) == 0 {
		// rbook itself recorded the interruption (SIGINT/SIGTERM from the runner), which
		// withdrew the gate's approval already: say which, so the job log shows it closed.
		if a := lastWithdrawn(ctx, cl, runID); a != nil {
			fmt.Fprintf(out, "Approval %s (gate '%s' of run %s) was withdrawn when the job was interrupted\n", a.GetApprovalId(), a.GetStepName(), runID)
		}
	}
	return nil
}
