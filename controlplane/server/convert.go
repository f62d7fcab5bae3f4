package server

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
)

// Mapping between the store's status words and the proto enums lives here and only here
// (docs/decisions/status-words.md).

// evidenceTimeLayout is how evidence timestamps are rendered: the engine's TimeFormat
// (RFC 3339 UTC, nine fractional digits), so the executor's text round-trips byte for byte.
const evidenceTimeLayout = "2006-01-02T15:04:05.000000000Z"

var runStatusToProto = map[store.RunStatus]rbookv1.RunStatus{
	store.RunRunning:   rbookv1.RunStatus_RUN_STATUS_RUNNING,
	store.RunPaused:    rbookv1.RunStatus_RUN_STATUS_PAUSED,
	store.RunFailed:    rbookv1.RunStatus_RUN_STATUS_FAILED,
	store.RunSucceeded: rbookv1.RunStatus_RUN_STATUS_SUCCEEDED,
	store.RunCancelled: rbookv1.RunStatus_RUN_STATUS_CANCELLED,
}

var runStatusFromProto = map[rbookv1.RunStatus]store.RunStatus{
	rbookv1.RunStatus_RUN_STATUS_RUNNING:   store.RunRunning,
	rbookv1.RunStatus_RUN_STATUS_PAUSED:    store.RunPaused,
	rbookv1.RunStatus_RUN_STATUS_FAILED:    store.RunFailed,
	rbookv1.RunStatus_RUN_STATUS_SUCCEEDED: store.RunSucceeded,
	rbookv1.RunStatus_RUN_STATUS_CANCELLED: store.RunCancelled,
}

// execStatusFromProto maps a transition's run_status to the executor's word; RUNNING and
// PAUSED are both IN_PROGRESS (the store derives paused from gate_opened).
var execStatusFromProto = map[rbookv1.RunStatus]store.ExecStatus{
	rbookv1.RunStatus_RUN_STATUS_RUNNING:   store.ExecInProgress,
	rbookv1.RunStatus_RUN_STATUS_PAUSED:    store.ExecInProgress,
	rbookv1.RunStatus_RUN_STATUS_SUCCEEDED: store.ExecCompleted,
	rbookv1.RunStatus_RUN_STATUS_FAILED:    store.ExecFailed,
	rbookv1.RunStatus_RUN_STATUS_CANCELLED: store.ExecCancelled,
}

var approvalStatusToProto = map[store.ApprovalStatus]rbookv1.ApprovalStatus{
	store.ApprovalPending:   rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING,
	store.ApprovalApproved:  rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED,
	store.ApprovalRejected:  rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED,
	store.ApprovalExpired:   rbookv1.ApprovalStatus_APPROVAL_STATUS_EXPIRED,
	store.ApprovalCancelled: rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED,
}

var approvalStatusFromProto = map[rbookv1.ApprovalStatus]store.ApprovalStatus{
	rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING:   store.ApprovalPending,
	rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:  store.ApprovalApproved,
	rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED:  store.ApprovalRejected,
	rbookv1.ApprovalStatus_APPROVAL_STATUS_EXPIRED:   store.ApprovalExpired,
	rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED: store.ApprovalCancelled,
}

var stepStatusToProto = map[store.StepStatus]rbookv1.StepStatus{
	store.StepPass:                 rbookv1.StepStatus_STEP_STATUS_PASS,
	store.StepFail:                 rbookv1.StepStatus_STEP_STATUS_FAIL,
	store.StepTimedOut:             rbookv1.StepStatus_STEP_STATUS_TIMED_OUT,
	store.StepSkipped:              rbookv1.StepStatus_STEP_STATUS_SKIPPED,
	store.StepAwaitingConfirmation: rbookv1.StepStatus_STEP_STATUS_AWAITING_CONFIRMATION,
}

var stepStatusFromProto = invert(stepStatusToProto)

// The transition kinds in both directions, built once from the generated enum:
// TRANSITION_KIND_STEP_STARTED <-> "step_started" (the store's and engine's word).
var kindsFromProto, kindsToProto = func() (map[rbookv1.TransitionKind]store.TransitionKind, map[store.TransitionKind]rbookv1.TransitionKind) {
	from := map[rbookv1.TransitionKind]store.TransitionKind{}
	for v, name := range rbookv1.TransitionKind_name {
		if k := rbookv1.TransitionKind(v); k != rbookv1.TransitionKind_TRANSITION_KIND_UNSPECIFIED {
			from[k] = store.TransitionKind(strings.ToLower(strings.TrimPrefix(name, "TRANSITION_KIND_")))
		}
	}
	return from, invert(from)
}()

// invert swaps keys and values of a one-to-one map.
func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// kindToProto maps a stored kind to the enum; an unknown word is UNSPECIFIED.
func kindToProto(k store.TransitionKind) rbookv1.TransitionKind { return kindsToProto[k] }

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// runToProto renders a run with the status the caller computed (gateIndex.effective).
func runToProto(r store.Run, status rbookv1.RunStatus) *rbookv1.Run {
	p := &rbookv1.Run{
		RunId: r.RunID, Kind: runKindToProto[r.Kind], Name: r.PlaybookName, ContentHash: r.PlaybookHash, CurrentStep: r.CurrentNode,
		Status: status, StartedAt: ts(r.StartedAt), CompletedAt: ts(r.CompletedAt),
		SchemaHash8: r.SchemaHash8, TotalSteps: int32(r.TotalSteps), LastCompletedStepIndex: int32(r.LastCompletedStepIndex),
		LastDeployName: r.LastDeployName, StartedBy: r.StartedBy, LastSeq: r.LastSeq, UpdatedAt: ts(r.UpdatedAt),
		StartedByJob: githubJobToProto(r.GitHub), ReportedWorkflowRun: workflowRunToProto(r.Reported),
	}
	if r.LeaseEpoch > 0 {
		p.Lease = &rbookv1.RunLease{Owner: r.Owner, Epoch: r.LeaseEpoch, ExpiresAt: ts(r.LeaseExpiresAt)}
	}
	if len(r.ErrorContext) > 0 && string(r.ErrorContext) != "null" {
		p.ErrorContext = string(r.ErrorContext)
	}
	if r.Kind == store.KindPlaybook {
		p.Playbook = playbookToProto(r)
	}
	// The store keeps no current step index: a final run is past its last step, otherwise the
	// step after the last completed one is the current one.
	p.CurrentStepIndex = min(int32(r.LastCompletedStepIndex+1), int32(r.TotalSteps))
	if r.Status.Final() {
		p.CurrentStepIndex = int32(r.TotalSteps)
	}
	return p
}

// applyProgress updates a run copy with what a transition changed (store.Change.Progress).
func applyProgress(r *store.Run, p store.RunProgress) {
	r.Status, r.CurrentNode, r.LastSeq = p.Status, p.CurrentNode, p.LastSeq
	r.LastCompletedStepIndex, r.LastDeployName = p.LastCompletedStepIndex, p.LastDeployName
	if !p.CompletedAt.IsZero() {
		r.CompletedAt = p.CompletedAt
	}
	r.Owner, r.OwnerIDHash, r.LeaseEpoch, r.LeaseExpiresAt = p.Owner, p.OwnerIDHash, p.LeaseEpoch, p.LeaseExpiresAt
	if pb := p.Playbook; pb != nil {
		r.Bindings, r.IterationCounts, r.ActiveNodes = pb.Bindings, pb.IterationCounts, pb.ActiveNodes
	}
}

var runKindToProto = map[store.RunKind]rbookv1.RunKind{
	store.KindRunbook:  rbookv1.RunKind_RUN_KIND_RUNBOOK,
	store.KindPlaybook: rbookv1.RunKind_RUN_KIND_PLAYBOOK,
}

func transitionToProto(t store.Transition) *rbookv1.Transition {
	p := &rbookv1.Transition{
		RunId: t.RunID, Seq: t.Seq, Kind: kindToProto(t.Kind), Time: ts(t.At), StepIndex: int32(t.StepIndex),
		StepName: t.StepName, StepType: t.StepType, LastDeployName: t.LastDeployName, Message: t.Message,
		RecordedAt: ts(t.RecordedAt), RollbackFor: t.RollbackFor, PrevHash: t.PrevHash, Hash: t.Hash,
	}
	if st, err := store.RunStatusOf(t.RunStatus, t.Kind); err == nil {
		p.RunStatus = runStatusToProto[st]
	}
	if t.Evidence != nil {
		p.Evidence = evidenceToProto(*t.Evidence)
		p.Evidence.TransitionHash = t.Hash
	}
	return p
}

func evidenceToProto(e store.Evidence) *rbookv1.Evidence {
	return &rbookv1.Evidence{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output,
		Status: stepStatusToProto[e.Status], TimestampUtc: e.At.UTC().Format(evidenceTimeLayout), SourceInput: e.SourceInput}
}

// MaxEvidenceOutputBytes caps an evidence entry's output at the server (docs/control-plane.md, "Limits"):
// the executor's own cap (engine.MaxOutputBytes, 64 KiB) plus room for its truncation note,
// so every honest executor fits and nothing larger is ever stored.
const MaxEvidenceOutputBytes = 64<<10 + 256

// transitionFromProto validates what the store does not (enums, required message fields)
// and converts. Errors name the request field.
func transitionFromProto(p *rbookv1.Transition) (store.Transition, error) {
	if p == nil {
		return store.Transition{}, invalidArg("transition is required")
	}
	kind, ok := kindsFromProto[p.GetKind()]
	if !ok {
		return store.Transition{}, invalidArg("transition.kind is required (a TRANSITION_KIND_* value)")
	}
	exec, ok := execStatusFromProto[p.GetRunStatus()]
	if !ok {
		return store.Transition{}, invalidArg("transition.run_status is required (a RUN_STATUS_* value)")
	}
	if p.GetTime() == nil {
		return store.Transition{}, invalidArg("transition.time is required")
	}
	if err := p.GetTime().CheckValid(); err != nil {
		return store.Transition{}, invalidArg("transition.time is not a valid timestamp")
	}
	t := store.Transition{
		RunID: p.GetRunId(), Seq: p.GetSeq(), Kind: kind, At: p.GetTime().AsTime(),
		StepIndex: int(p.GetStepIndex()), StepName: p.GetStepName(), StepType: p.GetStepType(), RunStatus: exec,
		LastDeployName: p.GetLastDeployName(), Message: p.GetMessage(), RollbackFor: p.GetRollbackFor(),
	}
	if e := p.GetEvidence(); e != nil {
		status, ok := stepStatusFromProto[e.GetStatus()]
		if !ok {
			return store.Transition{}, invalidArg("transition.evidence.status is required (a STEP_STATUS_* value)")
		}
		at, err := time.Parse(time.RFC3339Nano, e.GetTimestampUtc())
		if err != nil {
			return store.Transition{}, invalidArg("transition.evidence.timestamp_utc %q is not an RFC 3339 time", truncate(e.GetTimestampUtc(), 64))
		}
		// A chained transition's hash covers timestamp_utc as sent, and the record serves it
		// in evidenceTimeLayout: only that form keeps the two equal (docs/evidence-chain.md).
		if p.GetHash() != "" && at.UTC().Format(evidenceTimeLayout) != e.GetTimestampUtc() {
			return store.Transition{}, invalidArg("transition.evidence.timestamp_utc %q is not in the form the chain hashes: UTC with nine fraction digits, e.g. 2026-01-02T03:04:05.000000000Z",
				truncate(e.GetTimestampUtc(), 64))
		}
		if len(e.GetOutput()) > MaxEvidenceOutputBytes {
			return store.Transition{}, invalidArg("transition.evidence.output is %d bytes, over the limit of %d (64 KiB and the executor's truncation note)",
				len(e.GetOutput()), MaxEvidenceOutputBytes)
		}
		t.Evidence = &store.Evidence{StepName: e.GetStepName(), Type: e.GetType(), Input: e.Input, SourceInput: e.SourceInput,
			Output: e.GetOutput(), Status: status, At: at}
	}
	if err := checkSealed(p, &t); err != nil {
		return store.Transition{}, err
	}
	return t, nil
}

// approvalToProto renders an approval; it never carries the token or its hash (docs/decisions/approval-tokens.md).
// Every response that carries an Approval renders it here, so each has approval_url, the
// gate's page on this control plane's console when it has a public URL (Options.PublicURL).
func (s *Server) approvalToProto(a store.Approval) *rbookv1.Approval {
	p := &rbookv1.Approval{
		ApprovalId: a.ApprovalID, RunId: a.RunID, StepName: a.NodeID, RequestedAt: ts(a.RequestedAt),
		ApprovedAt: ts(a.DecidedAt), Approver: a.Approver, DecidedPerson: a.Person, Reason: a.Reason, Status: approvalStatusToProto[a.Status],
		AutoPassed: a.AutoPassed, StepIndex: int32(a.StepIndex), Prompt: a.Prompt, Deadline: ts(a.Deadline),
		PlanDigest: a.PlanDigest, OnFail: a.OnFail, DecidedBySource: a.DecidedBySource, Github: workflowRunToProto(a.GitHub),
		ApprovalsRequired: int32(max(a.ApprovalsRequired, 1)), AllowedApprovers: a.AllowedApprovers,
		StarterMayApprove: a.StarterMayApprove, Policy: policyToProto(a.Policy),
		ApprovalUrl: consolelink.ApprovalURL(s.opts.PublicURL, a.ApprovalID),
		Inputs:      inputspb.ToProto(a.Inputs), InputValues: a.InputValues,
		RewindTargets: a.RewindTargets, RedoFrom: a.RedoFrom, Iteration: int32(max(a.Iteration, 1)),
	}
	for _, v := range a.Votes {
		p.Votes = append(p.Votes, &rbookv1.ApprovalVote{Approver: v.Approver, Verdict: approvalStatusToProto[v.Verdict],
			Reason: v.Reason, At: ts(v.At), Source: v.Source, Verified: v.Verified, Person: v.Person, PersonName: s.personLabel(v.Person), InputValues: v.InputValues})
	}
	if p.Approver == "" && (a.Status == store.ApprovalExpired || a.Status == store.ApprovalCancelled) {
		p.Approver = "system" // approval.proto: "system" for expiry and cancel
	}
	return p
}

// truncate shortens s to at most n bytes for an error message (a client's oversized field is
// not echoed whole), without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
