package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strings"
	"time"
	"unicode"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// Request limits documented in approval_service.proto.
const (
	maxPromptBytes   = 64 << 10
	maxApproverBytes = 256
)

// sourceRPC is the decided_by_source of decisions made through Approve and Reject.
const sourceRPC = "rpc"

// approvalService implements rbookv1connect.ApprovalServiceHandler.
type approvalService struct{ s *Server }

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newApprovalID returns "a-" and 26 random base32 characters (128 bits). The id doubles as
// the token's nonce, so the token can be re-derived from the stored row (see RequestApproval).
func newApprovalID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "a-" + strings.ToLower(idEncoding.EncodeToString(b))
}

// claimsOf is the token a stored approval was issued with: the nonce is the approval id and
// the times are the stored requested_at and deadline, so the same secret re-derives it.
func claimsOf(a store.Approval) approval.Claims {
	return approval.Claims{RunID: a.RunID, NodeID: a.NodeID, IssuedAt: a.RequestedAt, ExpiresAt: a.Deadline,
		Nonce: a.ApprovalID, PlanDigest: a.PlanDigest}
}

// RequestApproval opens a gate and returns its token; the token is in this response only
// and the store keeps its hash, with the step's on_fail. plan_digest must be the run's
// current digest (E_PLAN_DIGEST_MISMATCH otherwise: a run that resumed with an edited
// runbook adopted the new one in StartRun). A retry while the gate is pending (same run,
// node and plan digest; an executor that resumed after dying, or a lost response) returns
// the same approval and re-derives the same token. A pending gate for another plan digest is
// closed as superseded first (docs/decisions/approval-tokens.md: a token approves only the plan
// it was issued for). The deadline is kept to whole seconds (the token's
// resolution) and must be at least a second away.
//
// With a policy context (a playbook approval node; docs/decisions/auto-pass-policy.md) the server's auto-pass
// policy decides first: auto-approve opens the gate already approved (approver and
// decided_by_source "policy", auto_passed, reason "<rule>: <reason>"), which watchers and the
// protection-rule hook see as any decision; require-human, or any decision in shadow mode
// (--policy-shadow), opens it pending. Either way Approval.policy carries the decision, and
// the row keeps it. A policy context on a runbook run is E_INVALID_ARGUMENT. A retried request
// returns the gate as it was decided the first time (the policy is not asked again).
func (h approvalService) RequestApproval(ctx context.Context, req *rbookv1.RequestApprovalRequest) (*rbookv1.RequestApprovalResponse, error) {
	s := h.s
	now := time.Now().UTC()
	switch {
	case req.GetRunId() == "":
		return nil, invalidArg("run_id is required")
	case req.GetStepName() == "":
		return nil, invalidArg("step_name is required")
	case req.GetStepIndex() < 0:
		return nil, invalidArg("step_index is %d, must be >= 0", req.GetStepIndex())
	case len(req.GetPrompt()) > maxPromptBytes:
		return nil, invalidArg("prompt is %d bytes, over the limit of %d", len(req.GetPrompt()), maxPromptBytes)
	case !planDigestRE.MatchString(req.GetPlanDigest()):
		return nil, invalidArg("plan_digest must be 64 lowercase hex characters (SHA-256)")
	case req.GetDeadline() == nil || req.GetDeadline().CheckValid() != nil:
		return nil, invalidArg("deadline is required (when the gate times out)")
	}
	switch req.GetOnFail() {
	case "", "halt", "rollback", "continue":
	default:
		return nil, invalidArg("on_fail %q is not halt, rollback or continue", truncate(req.GetOnFail(), 40))
	}
	inputs := inputspb.FromProto(req.GetInputs())
	if e := gateinputs.Check(inputs); e != nil {
		return nil, invalidArg("%s (docs/approver-inputs.md, \"Declaration\")", e.Error())
	}
	if err := checkRewindTargets(req.GetRewindTargets()); err != nil {
		return nil, err
	}
	fence, err := fenceOf(ctx, req.GetOwnerId(), req.GetEpoch())
	if err != nil {
		return nil, err
	}
	deadline := req.GetDeadline().AsTime().Truncate(time.Second)
	if deadline.Unix() <= now.Unix() {
		return nil, invalidArg("deadline %s must be at least one second in the future", deadline.Format(time.RFC3339))
	}
	// The gate policy's requirement is captured on the row now (docs/approvals.md, "Gate policy"); a run that
	// does not exist is reported by CreateApproval.
	need := approval.Default()
	var policy *store.AutoPassDecision
	if run, err := s.st.Run(ctx, req.GetRunId()); err == nil {
		need = s.opts.GatePolicy.For(run.PlaybookName, req.GetStepName())
		if len(req.GetRewindTargets()) > 0 && run.Kind != store.KindPlaybook {
			// A runbook's rejection is FAIL and on_fail applies: there is nothing to go back to.
			return nil, invalidArg("rewind_targets are only for playbook approval nodes; run %s is a runbook run, whose rejections fail the step (docs/push-back.md)",
				truncate(run.RunID, 140))
		}
		if pc := req.GetPolicy(); pc != nil {
			// Only a playbook's approval node auto-passes; a runbook's confirm step always asks a
			// human, so a policy context on one is refused rather than ignored (docs/decisions/auto-pass-policy.md).
			if run.Kind != store.KindPlaybook {
				return nil, invalidArg("policy is only for playbook approval nodes; run %s is a runbook run, whose confirm steps never auto-pass",
					truncate(run.RunID, 140))
			}
			in, err := policyInputOf(pc)
			if err != nil {
				return nil, err
			}
			d := s.decidePolicy(in)
			if name := gateinputs.NeedsPerson(inputs); d.AutoPassed && name != "" {
				// The policy cannot fill in the form: a person decides (docs/approver-inputs.md).
				d.AutoPassed, d.Reason = false, d.Reason+"; not auto-passed: the input "+name+" is required and has no default, so a person must give it"
			}
			policy = &d
		}
	}
	for attempt := 0; ; attempt++ {
		id := newApprovalID()
		na := store.NewApproval{ApprovalID: id, RunID: req.GetRunId(), NodeID: req.GetStepName(), StepIndex: int(req.GetStepIndex()),
			RequestedAt: now, Deadline: deadline, PlanDigest: req.GetPlanDigest(), Prompt: req.GetPrompt(), OnFail: req.GetOnFail(),
			Fence: &fence, ApprovalsRequired: need.ApprovalsRequired, AllowedApprovers: need.AllowedApprovers,
			StarterMayApprove: need.StarterMayApprove, PolicyRule: need.Rule, GitHub: workflowRunOf(req.GetGithub()), Policy: policy,
			Inputs: inputs, RewindTargets: req.GetRewindTargets()}
		if policy != nil && policy.AutoPassed {
			// The gate opens decided: approved by "policy" (decided_by_source "policy"), auto_passed = 1,
			// with the form's defaults as its input values.
			na.AutoPassed, na.Reason = true, autoPassReason(*policy)
			na.InputValues, _ = gateinputs.Validate(inputs, nil) // NeedsPerson is "": it cannot fail
		}
		token, err := approval.Issue(s.opts.Secret, claimsOf(store.Approval{ApprovalID: id, RunID: na.RunID, NodeID: na.NodeID,
			RequestedAt: now, Deadline: deadline, PlanDigest: na.PlanDigest}))
		if err != nil {
			return nil, invalidArg("%s", strings.TrimPrefix(err.Error(), "approval: "))
		}
		na.TokenHash = approval.TokenHash(token)
		a, created, err := s.st.CreateApproval(ctx, na)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, rpcError(connect.CodeNotFound, CodeRunNotFound, "no run has run_id %q", truncate(req.GetRunId(), 140))
		case errors.Is(err, store.ErrRunFinal):
			return nil, s.finalRunError(ctx, req.GetRunId())
		case errors.Is(err, store.ErrPlanDigestMismatch):
			return nil, rpcError(connect.CodeFailedPrecondition, CodePlanDigestMismatch,
				"run %s executes another plan digest than this request's; resume the run (StartRun) with the edited runbook first",
				truncate(req.GetRunId(), 140))
		case errors.Is(err, store.ErrConflict) && attempt == 0:
			continue // a random id collided; draw another
		case err != nil:
			return nil, s.storeError(ctx, "RequestApproval", err)
		}
		if !created {
			if token, err = s.reissue(a); err != nil {
				// Not re-derivable (issued under another secret): close it and open a new one.
				if attempt > 0 {
					return nil, rpcError(connect.CodeAborted, CodeRetry, "the gate changed while it was being opened; retry")
				}
				if _, err := s.st.DecideApproval(ctx, store.Decision{ApprovalID: a.ApprovalID, Verdict: store.ApprovalCancelled,
					Approver: "system", Reason: "superseded: its token could not be re-issued", Source: store.SourceSuperseded}); err != nil &&
					!errors.Is(err, store.ErrAlreadyDecided) {
					return nil, s.storeError(ctx, "RequestApproval", err)
				}
				continue
			}
		}
		p := s.approvalToProto(a)
		telemetry.FieldsFrom(ctx).Set(a.RunID, a.NodeID, a.ApprovalID) // the RPC's log line names the approval too
		s.log.InfoContext(ctx, "gate opened", "approval_id", a.ApprovalID, "run_id", a.RunID, "node_id", a.NodeID,
			"created", created, "deadline", a.Deadline)
		if d := a.Policy; d != nil {
			s.log.InfoContext(ctx, "gate policy", "approval_id", a.ApprovalID, "auto_passed", d.AutoPassed, "rule", d.Rule,
				"action", d.Action, "shadow", d.Shadow, "reason", d.Reason)
		}
		return &rbookv1.RequestApprovalResponse{Approval: p, Token: token}, nil
	}
}

func (h approvalService) Approve(ctx context.Context, req *rbookv1.ApproveRequest) (*rbookv1.ApproveResponse, error) {
	a, err := h.s.decide(ctx, vote{token: req.GetToken(), approvalID: req.GetApprovalId(), reason: req.GetReason(),
		claimed: req.GetApprover(), verdict: store.ApprovalApproved, inputs: req.GetInputs()})
	if err != nil {
		return nil, err
	}
	p := h.s.approvalToProto(a)
	p.Caller = h.s.eligibility(ctx, a, nil)
	return &rbookv1.ApproveResponse{Approval: p}, nil
}

func (h approvalService) Reject(ctx context.Context, req *rbookv1.RejectRequest) (*rbookv1.RejectResponse, error) {
	a, err := h.s.decide(ctx, vote{token: req.GetToken(), approvalID: req.GetApprovalId(), reason: req.GetReason(),
		claimed: req.GetApprover(), verdict: store.ApprovalRejected, redoFrom: req.GetRedoFrom()})
	if err != nil {
		return nil, err
	}
	p := h.s.approvalToProto(a)
	p.Caller = h.s.eligibility(ctx, a, nil)
	return &rbookv1.RejectResponse{Approval: p}, nil
}

// vote is one Approve or Reject request: the gate by token or by approval id (exactly one).
type vote struct {
	token, approvalID, reason, claimed string
	verdict                            store.ApprovalStatus
	// inputs are the approver's values for the gate's form (Approve only).
	inputs map[string]string
	// source is the channel recorded with the vote ("" means "rpc"; Slack's handler says "slack").
	source string
	// redoFrom is the node a rejection sends the run back to (Reject only; docs/push-back.md).
	redoFrom string
}

// nodeIDRE is a playbook node id's shape (action/runbook's node ids).
var nodeIDRE = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}$`)

// maxRewindTargets bounds RequestApprovalRequest.rewind_targets (a playbook's node limit).
const maxRewindTargets = 256

// checkRewindTargets refuses rewind targets that are no node ids: E_INVALID_ARGUMENT naming
// rewind_targets[i].
func checkRewindTargets(ts []string) error {
	if len(ts) > maxRewindTargets {
		return invalidArg("rewind_targets has %d entries, over the limit of %d", len(ts), maxRewindTargets)
	}
	for i, t := range ts {
		if !nodeIDRE.MatchString(t) {
			return invalidArg("rewind_targets[%d] %q is not a node id ([A-Za-z0-9_-]{1,64})", i, truncate(t, 70))
		}
	}
	return nil
}

// unverifiedPrefix marks a vote by a name an unauthenticated caller asserted (approval.proto,
// ApprovalVote.approver; docs/approvals.md, "Gate policy").
const unverifiedPrefix = "unverified:"

// callerVoter is who casts v: the authenticated caller, else the person at the
// keyboard of the embedded control plane as "unverified:<os user>" (Options.LocalPerson),
// else the asserted name as "unverified:<name>", else "anonymous" (unverified). Server.voterOf
// adds its person.
func callerVoter(ctx context.Context, claimed string) approval.Voter {
	if c, ok := CallerFrom(ctx); ok {
		v := approval.Voter{Identity: c.Identity, Verified: true, Groups: c.Groups, GitHub: c.GitHubLogin}
		if v.GitHub == "" && c.GitHub != nil {
			v.GitHub = c.GitHub.Actor // an OIDC caller: the job's actor
		}
		return v
	}
	if p := localPerson(ctx); p != "" {
		return approval.Voter{Identity: unverifiedPrefix + p}
	}
	if claimed == "" {
		return approval.Voter{Identity: "anonymous"}
	}
	return approval.Voter{Identity: unverifiedPrefix + claimed}
}

// decide is Approve and Reject (docs/decisions/confirm-gates.md,
// docs/decisions/approval-tokens.md). By token: cap its size, verify its HMAC (constant time)
// before reading anything, find the gate by the token's hash, check the plan digest, the gate's
// state and the expiry. By approval id: only an authenticated caller, or one holding
// Options.LocalApprover (E_UNAUTHENTICATED otherwise). Then one store transaction checks the
// gate's captured policy (allowed approvers, four-eyes), records the vote and, when the votes
// decide the gate, decides it with the compare-and-set. Error messages name the approval id,
// never the token.
func (s *Server) decide(ctx context.Context, v vote) (store.Approval, error) {
	switch {
	case v.token == "" && v.approvalID == "":
		return store.Approval{}, invalidArg("give the gate's token or its approval_id")
	case v.token != "" && v.approvalID != "":
		return store.Approval{}, invalidArg("give the gate's token or its approval_id, not both")
	case len(v.token) > approval.MaxTokenBytes:
		return store.Approval{}, rpcError(connect.CodePermissionDenied, CodeTokenInvalid,
			"the approval token is %d bytes, over the limit of %d", len(v.token), approval.MaxTokenBytes)
	case len(v.approvalID) > maxApproverBytes:
		return store.Approval{}, invalidArg("approval_id is %d bytes, over the limit of %d", len(v.approvalID), maxApproverBytes)
	case len(v.reason) > maxReasonBytes:
		return store.Approval{}, invalidArg("reason is %d bytes, over the limit of %d", len(v.reason), maxReasonBytes)
	case len(v.claimed) > maxApproverBytes:
		return store.Approval{}, invalidArg("approver is %d bytes, over the limit of %d", len(v.claimed), maxApproverBytes)
	case len(v.redoFrom) > maxApproverBytes:
		return store.Approval{}, invalidArg("redo_from is %d bytes, over the limit of %d", len(v.redoFrom), maxApproverBytes)
	case len(v.inputs) > gateinputs.MaxFields:
		return store.Approval{}, invalidArg("inputs has %d values; a gate declares at most %d fields", len(v.inputs), gateinputs.MaxFields)
	}
	if err := printableText("reason", v.reason); err != nil {
		return store.Approval{}, err
	}
	if err := printableText("approver", v.claimed); err != nil {
		return store.Approval{}, err
	}
	now := time.Now()
	byID := v.approvalID != ""
	var a store.Approval
	if byID {
		if err := s.byIDRefusal(ctx); err != nil {
			return store.Approval{}, err
		}
		var err error
		if a, err = s.st.GetApproval(ctx, v.approvalID); errors.Is(err, store.ErrNotFound) {
			return store.Approval{}, rpcError(connect.CodeNotFound, CodeApprovalNotFound, "no approval has approval_id %q", truncate(v.approvalID, 140))
		} else if err != nil {
			return store.Approval{}, s.storeError(ctx, "finding the approval", err)
		}
	} else {
		claims, verr := s.verifyToken(v.token, now)
		if verr != nil && !errors.Is(verr, approval.ErrTokenExpired) {
			return store.Approval{}, rpcError(connect.CodePermissionDenied, CodeTokenInvalid,
				"the approval token is invalid (malformed, altered, truncated or signed with another secret; "+
					"every replica of a control plane must share RBOOK_APPROVAL_SECRET)")
		}
		var err error
		a, err = s.st.GetApprovalByTokenHash(ctx, approval.TokenHash(v.token))
		if errors.Is(err, store.ErrNotFound) {
			return store.Approval{}, rpcError(connect.CodeNotFound, CodeApprovalNotFound, "no approval matches this token")
		}
		if err != nil {
			return store.Approval{}, s.storeError(ctx, "finding the approval", err)
		}
		if claims.RunID != a.RunID || claims.NodeID != a.NodeID {
			return store.Approval{}, rpcError(connect.CodePermissionDenied, CodeTokenInvalid, "the approval token was issued for another gate")
		}
		if claims.PlanDigest != a.PlanDigest {
			return store.Approval{}, rpcError(connect.CodeFailedPrecondition, CodePlanDigestMismatch,
				"approval %s: the token was issued for another plan digest", a.ApprovalID)
		}
		if a.Status != store.ApprovalPending {
			return a, closedError(a, false)
		}
		if verr != nil {
			s.wakeDeadlines() // the timer closes the gate; the token is refused either way
			return a, rpcError(connect.CodeFailedPrecondition, CodeTokenExpired,
				"approval %s expired at %s; its token no longer works", a.ApprovalID, claims.ExpiresAt.Format(time.RFC3339))
		}
	}
	if a.Status != store.ApprovalPending {
		return a, closedError(a, byID)
	}
	voter := s.voterOf(ctx, v.claimed)
	approve := v.verdict == store.ApprovalApproved
	d := store.Decision{ApprovalID: a.ApprovalID, Verdict: v.verdict, Approver: voter.Identity, Verified: voter.Verified,
		Person: voter.Person, Reason: v.reason, Source: cmp.Or(v.source, sourceRPC), At: now,
		Authorize: voteAuthorizer(voter, approve), InputValues: v.inputs, RedoFrom: v.redoFrom}
	decided, err := s.st.DecideApproval(ctx, d)
	var inputErr *gateinputs.Error
	switch {
	case errors.As(err, &inputErr):
		// Nothing was recorded: the gate is as it was (docs/approver-inputs.md).
		return decided, invalidArg("approval %s: %s; nothing was decided, approve again with a valid value", a.ApprovalID, inputErr.Error())
	case v.redoFrom != "" && errors.Is(err, store.ErrInvalidArgument):
		// Nothing was recorded: the gate is as it was (docs/push-back.md).
		return decided, invalidArg("approval %s: %s; nothing was decided", a.ApprovalID,
			strings.TrimPrefix(err.Error(), store.ErrInvalidArgument.Error()+": "))
	case errors.Is(err, approval.ErrSelfApproval):
		return decided, rpcError(connect.CodePermissionDenied, CodeSelfApproval,
			"%s started run %s and may not approve its gates (%s: starter_may_approve is false); another approver must decide approval %s",
			voter.Identity, a.RunID, requirementOf(decided).Rule, a.ApprovalID)
	case errors.Is(err, approval.ErrUnverifiedCount):
		return decided, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"approval %s needs %d distinct approvers (%s) and only authenticated identities count, not a name the caller gives (%s); run the control plane with --auth-file",
			a.ApprovalID, requirementOf(decided).ApprovalsRequired, requirementOf(decided).Rule, voter.Identity)
	case errors.Is(err, approval.ErrNotAllowedApprover):
		r := requirementOf(decided)
		return decided, rpcError(connect.CodePermissionDenied, CodePermissionDenied,
			"%s may not decide approval %s: %s allows only %s; ask one of them to decide it", voter.Identity, a.ApprovalID, r.Rule, strings.Join(r.AllowedApprovers, ", "))
	case errors.Is(err, store.ErrAlreadyDecided), errors.Is(err, store.ErrPlanDigestMismatch):
		// ErrExpired is an ErrAlreadyDecided; on ErrPlanDigestMismatch the store closed the gate
		// as superseded (the run executes another plan), which closedError explains.
		return decided, closedError(decided, byID)
	case errors.Is(err, store.ErrNotFound):
		return a, rpcError(connect.CodeNotFound, CodeApprovalNotFound, "no approval matches this token")
	case err != nil:
		return a, s.storeError(ctx, "deciding the approval", err)
	}
	telemetry.FieldsFrom(ctx).Set(decided.RunID, decided.NodeID, decided.ApprovalID) // a call by token learns them here
	if decided.Status == store.ApprovalPending {
		s.log.InfoContext(ctx, "gate vote", "approval_id", decided.ApprovalID, "run_id", decided.RunID,
			"approver", voter.Identity, "person", voter.Person, "approvals", len(decided.ApprovedPeople()), "required", decided.ApprovalsRequired)
		return decided, nil
	}
	s.log.InfoContext(ctx, "gate decided", "approval_id", decided.ApprovalID, "run_id", decided.RunID,
		"status", string(decided.Status), "approver", decided.Approver)
	s.countDecision(ctx, v, decided)
	s.reviewAttestation(ctx, decided) // signed right after the decision's commit; a failure is logged, and a read signs it
	return decided, nil
}

// byIDRefusal is why the caller of ctx may not decide a gate by approval id, or nil when it
// may: an authenticated caller, or one holding the embedded control plane's local approver
// key (Options.LocalApprover), may; anyone else must use the gate's token. Approve, Reject and
// the caller's eligibility (eligibility.go) ask it. Error: E_UNAUTHENTICATED saying what to do.
func (s *Server) byIDRefusal(ctx context.Context) error {
	if _, ok := CallerFrom(ctx); ok || localApprover(ctx) {
		return nil
	}
	if len(s.opts.LocalApprover) > 0 && s.opts.Auth == nil {
		return rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
			"deciding a gate by approval_id on the embedded control plane of an 'rbook run' needs its folder's local approver key: "+
				"run 'rbook approve ID' in that run's folder, without --control-plane or RBOOK_CONTROL_PLANE, or use the approval token")
	}
	return rpcError(connect.CodeUnauthenticated, CodeUnauthenticated,
		"deciding a gate by approval_id needs an authenticated approver, and this control plane has no auth file: use the approval token "+
			"(the waiting run prints it on a terminal, or with RBOOK_SHOW_TOKEN=1), or run the control plane with --auth-file")
}

// voteAuthorizer is the gate policy's check of one vote by voter (approve or reject) on a gate
// and its run's starter: approval.CheckVote on the requirement captured on the gate. It is the
// store's Decision.Authorize for Approve and Reject, and the eligibility shown before a person
// decides asks the same function (eligibility.go), so the two cannot disagree.
func voteAuthorizer(voter approval.Voter, approve bool) func(store.Approval, store.RunStarter) error {
	return func(cur store.Approval, st store.RunStarter) error {
		return approval.CheckVote(requirementOf(cur), approval.Starter{StartedBy: st.StartedBy, GitHubActor: st.GitHubActor}, voter, approve)
	}
}

// printableText refuses a control character (C0 including newline and tab, DEL, C1) or a
// bidirectional-text control in field v: reasons and approver names reach terminals, the
// runner's log, reports and the job summary, where ESC sequences, carriage returns, newlines
// and bidi overrides would forge or hide output (docs/approvals.md, "Gate policy": a reason is one line).
// Error: E_INVALID_ARGUMENT naming the field, the character and its byte offset.
func printableText(field, v string) error {
	for i, r := range v {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return invalidArg("%s has the control character %U at byte %d; give one line of printable text", field, r, i)
		}
	}
	return nil
}

// requirementOf is the gate policy requirement captured on a (docs/approvals.md, "Gate policy").
func requirementOf(a store.Approval) approval.GateRequirement {
	r := approval.GateRequirement{Rule: a.PolicyRule, ApprovalsRequired: max(a.ApprovalsRequired, 1),
		AllowedApprovers: a.AllowedApprovers, StarterMayApprove: a.StarterMayApprove}
	if r.Rule == "" {
		r.Rule = approval.DefaultRuleName
	}
	return r
}

// closedError says why a gate that is no longer pending refuses a decision. A gate closed by
// its deadline (status rejected, or expired for rows of older versions) is E_TOKEN_EXPIRED on
// the token path and a "timed out" E_APPROVAL_ALREADY_DECIDED by approval id (docs/approvals.md, "Gates decided from CI").
func closedError(a store.Approval, byID bool) error {
	timedOut := a.Status == store.ApprovalExpired || (a.Status == store.ApprovalRejected && a.DecidedBySource == store.SourceDeadline)
	switch {
	case timedOut && byID:
		return rpcError(connect.CodeFailedPrecondition, CodeApprovalAlreadyDecided,
			"approval %s timed out at its deadline %s (%s) and was rejected; it can no longer be decided",
			a.ApprovalID, a.Deadline.Format(time.RFC3339), a.Reason)
	case timedOut:
		return rpcError(connect.CodeFailedPrecondition, CodeTokenExpired,
			"approval %s timed out at its deadline %s; its token no longer works", a.ApprovalID, a.Deadline.Format(time.RFC3339))
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceCancelRun:
		return rpcError(connect.CodeFailedPrecondition, CodeRunCancelled,
			"run %s was cancelled; approval %s is closed", a.RunID, a.ApprovalID)
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceSuperseded:
		return rpcError(connect.CodeFailedPrecondition, CodePlanDigestMismatch,
			"approval %s was superseded: the run resumed with another plan digest, so its token no longer works", a.ApprovalID)
	case a.Status == store.ApprovalCancelled && a.DecidedBySource == store.SourceInterrupted:
		return rpcError(connect.CodeFailedPrecondition, CodeApprovalAlreadyDecided,
			"approval %s was withdrawn: the job running run %s was interrupted; resume the run to open the gate again", a.ApprovalID, a.RunID)
	case a.Status == store.ApprovalCancelled:
		return rpcError(connect.CodeFailedPrecondition, CodeApprovalAlreadyDecided,
			"approval %s was closed when run %s finished", a.ApprovalID, a.RunID)
	}
	by := a.Approver
	if by == "" {
		by = "unknown"
	}
	return rpcError(connect.CodeFailedPrecondition, CodeApprovalAlreadyDecided, "approval %s was already %s by %s", a.ApprovalID, a.Status, by)
}

func (h approvalService) GetApproval(ctx context.Context, req *rbookv1.GetApprovalRequest) (*rbookv1.GetApprovalResponse, error) {
	if req.GetApprovalId() == "" {
		return nil, invalidArg("approval_id is required")
	}
	a, err := h.s.st.GetApproval(ctx, req.GetApprovalId())
	if errors.Is(err, store.ErrNotFound) {
		return nil, rpcError(connect.CodeNotFound, CodeApprovalNotFound, "no approval has approval_id %q", truncate(req.GetApprovalId(), 140))
	}
	if err != nil {
		return nil, h.s.storeError(ctx, "GetApproval", err)
	}
	p := h.s.approvalToProto(a)
	p.Caller = h.s.eligibility(ctx, a, nil)
	h.s.fillNotices(ctx, p)
	p.ReviewAttestationJson = h.s.reviewAttestation(ctx, a)
	return &rbookv1.GetApprovalResponse{Approval: p}, nil
}

// MaxApprovalsPage is ListApprovals' default and largest page: 40 approvals with 64 KiB
// prompts (maxPromptBytes) and 1 KiB reasons stay under 3 MiB, below gRPC's 4 MiB default
// receive limit (docs/control-plane.md, "Limits").
const MaxApprovalsPage = 40

func (h approvalService) ListApprovals(ctx context.Context, req *rbookv1.ListApprovalsRequest) (*rbookv1.ListApprovalsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, invalidArg("page_size is %d, must be >= 0", req.GetPageSize())
	}
	size := int(req.GetPageSize())
	if size == 0 || size > MaxApprovalsPage {
		size = MaxApprovalsPage
	}
	f := store.ApprovalFilter{RunID: req.GetRunId(), PageSize: size, PageToken: req.GetPageToken()}
	if req.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_UNSPECIFIED {
		st, ok := approvalStatusFromProto[req.GetStatus()]
		if !ok {
			return nil, invalidArg("status %d is not an APPROVAL_STATUS_* value", req.GetStatus())
		}
		f.Status = st
	}
	page, err := h.s.st.ListApprovals(ctx, f)
	if err != nil {
		return nil, h.s.storeError(ctx, "ListApprovals", err)
	}
	out := &rbookv1.ListApprovalsResponse{NextPageToken: page.NextPageToken, Approvals: make([]*rbookv1.Approval, len(page.Approvals))}
	runs := runsSeen{}
	for i, a := range page.Approvals {
		out.Approvals[i] = h.s.approvalToProto(a)
		out.Approvals[i].Caller = h.s.eligibility(ctx, a, runs)
	}
	return out, nil
}

// verifyToken is approval.Verify with the current secret, then, for a token that secret
// did not sign, with Options.PreviousSecret: a gate opened before the secret was rotated is
// still decided by its token (docs/tls.md, "Rotating the approval secret").
func (s *Server) verifyToken(token string, now time.Time) (approval.Claims, error) {
	claims, err := approval.Verify(s.opts.Secret, token, now)
	if errors.Is(err, approval.ErrTokenInvalid) && len(s.opts.PreviousSecret) > 0 {
		return approval.Verify(s.opts.PreviousSecret, token, now)
	}
	return claims, err
}

// reissue re-derives the token of the stored approval a (a RequestApproval retried for a
// gate already open): under the current secret, else under Options.PreviousSecret for a gate
// opened before a rotation. Errors: the token a holds was issued under neither.
func (s *Server) reissue(a store.Approval) (string, error) {
	for _, secret := range [][]byte{s.opts.Secret, s.opts.PreviousSecret} {
		if len(secret) == 0 {
			continue
		}
		if token, err := approval.Issue(secret, claimsOf(a)); err == nil && approval.TokenHash(token) == a.TokenHash {
			return token, nil
		}
	}
	return "", errors.New("the gate's token was issued under another approval secret")
}
