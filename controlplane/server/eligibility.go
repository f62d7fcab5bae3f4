package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// CodeAlreadyVoted is ApprovalEligibility.code when the caller's approval is already counted
// on a gate that still waits for others (approval.proto, ApprovalEligibility). Approve by the
// same identity again changes nothing.
const CodeAlreadyVoted = "E_ALREADY_VOTED"

// runsSeen reads each run at most once while one response is built (ListApprovals lists up to
// MaxApprovalsPage gates, often of the same run).
type runsSeen map[string]store.Run

// eligibility answers, for the caller of ctx and gate a, what Approve would do if that caller
// called it now by approval id (Approval.caller): the checks run in Approve's order and are
// Approve's own functions — the role the auth interceptor requires (roleMay), who may decide by
// approval id (byIDRefusal), the gate's state (closedError), the deadline, the plan digest the
// gate is bound to, the gate policy (voteAuthorizer: approval.CheckVote) — then whether the
// caller's approval is already counted (CodeAlreadyVoted). reason is a sentence for the person
// on the page. A run that cannot be read leaves the answer out (nil), logged.
func (s *Server) eligibility(ctx context.Context, a store.Approval, runs runsSeen) *rbookv1.ApprovalEligibility {
	voter := s.voterOf(ctx, "")
	e := &rbookv1.ApprovalEligibility{Identity: voter.Identity}
	refuse := func(code, format string, args ...any) *rbookv1.ApprovalEligibility {
		e.Code, e.Reason = code, fmt.Sprintf(format, args...)
		return e
	}
	if c, ok := CallerFrom(ctx); ok && !roleMay(c.Role, rbookv1connect.ApprovalServiceApproveProcedure) {
		return refuse(CodePermissionDenied, "You can see this gate but not decide it: your role is %s, and deciding needs the approver role.", c.Role)
	}
	if err := s.byIDRefusal(ctx); err != nil {
		if s.opts.Auth != nil {
			return refuse(errorCode(err), "Sign in to decide this gate.")
		}
		return refuse(errorCode(err), "This control plane has no sign-in: decide this gate with the command the waiting run printed.")
	}
	if a.Status != store.ApprovalPending {
		return refuse(errorCode(closedError(a, true)), "%s", closedSentence(a))
	}
	if !a.Deadline.IsZero() && !a.Deadline.After(time.Now()) {
		return refuse(CodeApprovalAlreadyDecided, "This gate's deadline passed at %s; it can no longer be decided.", a.Deadline.UTC().Format(time.RFC3339))
	}
	run, ok := runs[a.RunID]
	if !ok {
		var err error
		if run, err = s.st.Run(ctx, a.RunID); err != nil {
			s.log.WarnContext(ctx, "eligibility: run not readable", "run_id", a.RunID, "approval_id", a.ApprovalID, "error", err)
			return nil
		}
		if runs != nil {
			runs[a.RunID] = run
		}
	}
	if run.PlaybookHash != a.PlanDigest {
		return refuse(CodePlanDigestMismatch, "The run now executes an edited runbook, so this gate can no longer be approved; the run asks again when it reaches the step.")
	}
	starter := store.RunStarter{StartedBy: run.StartedBy}
	if run.GitHub != nil {
		starter.GitHubActor = run.GitHub.Actor
	}
	need := requirementOf(a)
	switch err := voteAuthorizer(voter, true)(a, starter); {
	case errors.Is(err, approval.ErrSelfApproval):
		return refuse(CodeSelfApproval, "You started this run; another person must approve it (four-eyes).")
	case errors.Is(err, approval.ErrNotAllowedApprover):
		return refuse(CodePermissionDenied, "Only %s may decide this gate; you are not one of them: ask one of them to decide it.", strings.Join(need.AllowedApprovers, ", "))
	case errors.Is(err, approval.ErrUnverifiedCount):
		return refuse(CodeUnauthenticated, "This gate needs %d approvals from people who signed in; sign in to approve it.", need.ApprovalsRequired)
	case err != nil:
		return refuse(CodePermissionDenied, "You may not decide this gate.")
	}
	approved := a.ApprovedPeople() // distinct people (docs/people.md, "Counting")
	if slices.Contains(a.ApprovedBy(), voter.Identity) || slices.Contains(approved, voter.Key()) {
		left := need.ApprovalsRequired - len(approved)
		return refuse(CodeAlreadyVoted, "You already approved this gate; it waits for %s from someone else.", yamlerr.Plural(left, "more approval", "more approvals"))
	}
	e.MayDecide = true
	if need.ApprovalsRequired > 1 {
		e.Reason = fmt.Sprintf("You may approve or reject this gate; your approval would be %d of the %d it needs.", len(approved)+1, need.ApprovalsRequired)
	} else {
		e.Reason = "You may approve or reject this gate."
	}
	return e
}

// closedSentence says in a sentence why a gate that is no longer pending cannot be decided:
// who decided it, or that it timed out, was withdrawn, superseded or closed with its run
// (the cases of closedError).
func closedSentence(a store.Approval) string {
	switch {
	case a.Status == store.ApprovalExpired || a.Status == store.ApprovalRejected && a.DecidedBySource == store.SourceDeadline:
		return fmt.Sprintf("This gate timed out at its deadline %s and was rejected, so it can no longer be decided; starting the run again opens a new gate.",
			a.Deadline.UTC().Format(time.RFC3339))
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceCancelRun:
		return "The run was cancelled, so this gate is closed."
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceSuperseded:
		return "This gate was replaced: the run resumed with an edited runbook."
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceInterrupted:
		return "This gate was withdrawn: the job running the run was interrupted. Resuming the run opens it again."
	case a.Status == store.ApprovalCancelled:
		return "This gate was closed when its run finished."
	}
	by := a.Approver
	if by == "" {
		by = "someone"
	}
	return fmt.Sprintf("This gate was already %s by %s.", a.Status, by)
}
