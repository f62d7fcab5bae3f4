package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// Sentinel errors. Callers test them with errors.Is; the server maps them to connect codes.
// Any other error from this package is a storage failure whose text is for logs, never for
// clients (ARCHITECTURE.md).
var (
	// ErrNotFound: no run or approval with that id (or token hash). Wire code E_APPROVAL_NOT_FOUND
	// for approvals.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyDecided: the approval is no longer pending (the specification's E_APPROVAL_ALREADY_DECIDED).
	ErrAlreadyDecided = errors.New("store: approval already decided")
	// ErrExpired: the approval's deadline had passed when a decision arrived; the store closes
	// the gate as expired in the same transaction (docs/decisions/approval-tokens.md). It wraps ErrAlreadyDecided.
	ErrExpired = fmt.Errorf("%w: deadline passed", ErrAlreadyDecided)
	// ErrConflict: a transition with the same (run_id, seq) but different content is stored.
	ErrConflict = errors.New("store: conflicting transition for this sequence number")
	// ErrOutOfOrder: seq is not last_seq+1 of the run; gaps are refused.
	ErrOutOfOrder = errors.New("store: transition out of order")
	// ErrChainBroken: the transition does not continue its run's hash chain (its prev_hash is
	// not the hash of the run's previous transition, or a chained run's transition has no
	// hash; docs/evidence-chain.md). The message names the seq and the reason.
	ErrChainBroken = errors.New("store: transition breaks the run's hash chain")
	// ErrRunFinal: the run already has its one final status.
	ErrRunFinal = errors.New("store: run is already final")
	// ErrPlanDigestMismatch: an approval is requested or approved for a plan digest that is not
	// the run's current playbook_hash (the run resumed with an edited runbook; docs/decisions/approval-tokens.md).
	// Wire code E_PLAN_DIGEST_MISMATCH.
	ErrPlanDigestMismatch = errors.New("store: plan digest is not the run's current one")
	// ErrSelfApproval: the approver started the run (kept for callers' Decision.Authorize).
	ErrSelfApproval = errors.New("store: the identity that started the run may not approve it")
	// ErrInvalidArgument: a request field is missing, malformed or over a limit; the wrapped
	// message names the field.
	ErrInvalidArgument = errors.New("store: invalid argument")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrRunOwned: StartRun for a run that is not final and whose lease another owner id holds
	// (docs/decisions/leases-and-fencing.md). A fresh executor starts the next run id suffix (docs/decisions/run-ids.md). Wire code
	// E_RUN_OWNED.
	ErrRunOwned = errors.New("store: the run is owned by another executor")
	// ErrLeaseHeld: StartRun with TakeOver while the owner's lease has not expired. Wire code
	// E_LEASE_HELD.
	ErrLeaseHeld = errors.New("store: the run's lease has not expired")
	// ErrLeaseLost: a write (RecordTransition, RenewLease, an approval request) carries an owner
	// id or epoch that no longer holds the run's lease (docs/decisions/leases-and-fencing.md). Wire code E_LEASE_LOST.
	ErrLeaseLost = errors.New("store: the caller no longer holds the run's lease")
	// ErrNotOwner: Fence.Identity is set and is not the run's owner identity (docs/decisions/identity.md).
	ErrNotOwner = errors.New("store: the caller's identity does not own the run")
)

// Lease limits (docs/decisions/leases-and-fencing.md).
const (
	// DefaultLease is a run lease's duration when NewRun.Lease is zero.
	DefaultLease = 60 * time.Second
	// MinLease and MaxLease bound NewRun.Lease.
	MinLease = 5 * time.Second
	MaxLease = time.Hour
)

// RunKind is the kind column: which format a run executes (docs/decisions/status-words.md).
type RunKind string

// The run kinds.
const (
	KindRunbook  RunKind = "runbook"
	KindPlaybook RunKind = "playbook"
)

// Fence identifies the writer of a run: the owner id (hashed with OwnerIDHash), the lease
// epoch StartRun returned and, with auth on, the caller's identity (docs/decisions/leases-and-fencing.md, docs/decisions/identity.md). A write
// whose fence does not match the run's lease fails with ErrLeaseLost (ErrNotOwner for the
// identity) and changes nothing.
type Fence struct {
	// OwnerIDHash is OwnerIDHash(owner id).
	OwnerIDHash string
	// Epoch is the lease epoch, >= 1.
	Epoch int64
	// Identity, when set, must equal the run's owner identity.
	Identity string
}

// Limits, checked before anything is written.
const (
	// MaxIDBytes caps run ids, approval ids, node ids, names and identities (bytes).
	MaxIDBytes = 256
	// MaxTextBytes caps free text: evidence input and output, prompts, messages, reasons and
	// JSON documents (bytes). The RPC layer's message-size limit is the first line; this one
	// keeps a direct caller from bloating the database.
	MaxTextBytes = 1 << 20
	// DefaultPageSize is the page size of ListRuns and ListApprovals when none is asked for.
	DefaultPageSize = 50
	// MaxPageSize caps ListRuns and ListApprovals pages; larger requests are clamped.
	MaxPageSize = 500
	// MaxTransitionsPage caps one Transitions call.
	MaxTransitionsPage = 1000
)

// RunStatus is the status column of playbook_runs (docs/spec/playbooks.md; docs/decisions/status-words.md).
type RunStatus string

// The run statuses of the specification, spelled exactly.
const (
	RunRunning   RunStatus = "running"
	RunPaused    RunStatus = "paused"
	RunFailed    RunStatus = "failed"
	RunSucceeded RunStatus = "succeeded"
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether s is a final status (no step runs after it).
func (s RunStatus) Final() bool { return s == RunFailed || s == RunSucceeded || s == RunCancelled }

func (s RunStatus) valid() bool { return s == RunRunning || s == RunPaused || s.Final() }

// ExecStatus is the executor's run_status carried by a transition (docs/spec/runbooks.md,
// Steps 3-8; mirrors engine.RunStatus).
type ExecStatus string

// The executor's run statuses, spelled as in the specification's state file.
const (
	ExecInProgress ExecStatus = "IN_PROGRESS"
	ExecCompleted  ExecStatus = "COMPLETED"
	ExecFailed     ExecStatus = "FAILED"
	ExecCancelled  ExecStatus = "CANCELLED"
)

// RunStatusOf maps an executor run_status to the table's status (docs/decisions/status-words.md: the mapping
// lives in one place). IN_PROGRESS is running, or paused when the transition opened a gate.
// It returns ErrInvalidArgument for a word outside the specification's four.
func RunStatusOf(s ExecStatus, kind TransitionKind) (RunStatus, error) {
	switch s {
	case ExecInProgress:
		if kind == KindGateOpened {
			return RunPaused, nil
		}
		return RunRunning, nil
	case ExecCompleted:
		return RunSucceeded, nil
	case ExecFailed:
		return RunFailed, nil
	case ExecCancelled:
		return RunCancelled, nil
	}
	return "", fmt.Errorf("%w: run_status %q is not IN_PROGRESS, COMPLETED, FAILED or CANCELLED", ErrInvalidArgument, s)
}

// StepStatus is an evidence entry's status (docs/spec/runbooks.md, "Step 7").
type StepStatus string

// The step statuses of the specification, spelled exactly.
const (
	StepPass                 StepStatus = "PASS"
	StepFail                 StepStatus = "FAIL"
	StepTimedOut             StepStatus = "TIMED_OUT"
	StepSkipped              StepStatus = "SKIPPED"
	StepAwaitingConfirmation StepStatus = "AWAITING_CONFIRMATION"
)

func (s StepStatus) valid() bool {
	switch s {
	case StepPass, StepFail, StepTimedOut, StepSkipped, StepAwaitingConfirmation:
		return true
	}
	return false
}

// TransitionKind names what happened in a transition (mirrors engine.TransitionKind).
type TransitionKind string

// The transition kinds the executor reports.
const (
	KindRunStarted   TransitionKind = "run_started"
	KindStepStarted  TransitionKind = "step_started"
	KindStepFinished TransitionKind = "step_finished"
	KindGateOpened   TransitionKind = "gate_opened"
	KindGateDecided  TransitionKind = "gate_decided"
	KindRunFinished  TransitionKind = "run_finished"
	// KindRunInterrupted: a signal stopped the executor (or the Action's post step recorded
	// that its job ended without the run); the run stays unfinished and its pending
	// approvals are withdrawn (SourceInterrupted; docs/action.md, "The post step").
	KindRunInterrupted TransitionKind = "run_interrupted"
)

// ApprovalStatus is the status column of playbook_approvals. The specification's words are pending,
// approved and rejected; expired (the deadline closed the gate, TIMED_OUT on the wire) and
// cancelled (CancelRun, or superseded by a new plan digest) are added (docs/decisions/approval-tokens.md).
type ApprovalStatus string

// The approval statuses.
const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalApproved  ApprovalStatus = "approved"
	ApprovalRejected  ApprovalStatus = "rejected"
	ApprovalExpired   ApprovalStatus = "expired"
	ApprovalCancelled ApprovalStatus = "cancelled"
)

func (s ApprovalStatus) valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired, ApprovalCancelled:
		return true
	}
	return false
}

// Sources recorded in decided_by_source by the store itself.
const (
	// SourceDeadline marks approvals closed by ExpireDueApprovals or a late decision.
	SourceDeadline = "deadline"
	// SourceCancelRun marks approvals closed by CancelRun.
	SourceCancelRun = "cancel-run"
	// SourceSuperseded marks a pending approval replaced by one for a new plan digest.
	SourceSuperseded = "superseded"
	// SourcePolicy marks approvals auto-passed by the policy evaluator (docs/spec/playbooks.md, "Policy evaluator").
	SourcePolicy = "policy"
	// SourceInterrupted marks pending approvals withdrawn (closed as cancelled) when their
	// run recorded a run_interrupted transition: the job that waited at the gate is gone, so
	// nobody may approve it; a resumed run opens the gate again with a new approval (docs/action.md, "The post step").
	SourceInterrupted = "interrupted"
)

// NewRun is what StartRun needs to create a run.
type NewRun struct {
	// RunID is the caller's id (docs/spec/runbooks.md, "Step 2"), 1..MaxIDBytes bytes.
	RunID string
	// PlaybookName is the runbook or playbook name; required.
	PlaybookName string
	// PlaybookHash is the lowercase hex SHA-256 of the source (the plan digest); required.
	PlaybookHash string
	// SchemaHash8 is the first 8 hex chars of SHA-256(rules.yaml) (docs/spec/runbooks.md, "Step 1").
	SchemaHash8 string
	// TotalSteps is the number of steps in the plan (docs/spec/runbooks.md, "Step 4").
	TotalSteps int
	// StartedBy is the identity that started the run (for the four-eyes rule, RunStarter).
	StartedBy string
	// EpicID and SessionID are the specification's optional links; empty means NULL.
	EpicID, SessionID string
	// Bindings is a JSON object; nil means {}.
	Bindings json.RawMessage
	// StartedAt defaults to the store's clock.
	StartedAt time.Time
	// Plan is the executor's plan for PlaybookHash, encoded by the caller (the server stores
	// a protobuf RunPlan), at most MaxPlanBytes; nil stores none. It is stored bound to
	// (RunID, PlaybookHash) in the same transaction as the run's start or resume.
	Plan []byte
	// Kind is the run's format; "" means KindRunbook.
	Kind RunKind
	// OwnerIDHash is OwnerIDHash(the executor's owner id): required (docs/decisions/leases-and-fencing.md).
	OwnerIDHash string
	// Owner is the identity that holds the lease from this call on (the authenticated caller,
	// else StartedBy).
	Owner string
	// RequireOwner, when set, refuses a resume by another identity than the run's owner with
	// ErrNotOwner (auth on: executors write only their own runs; docs/decisions/identity.md). Take-over
	// replaces the owner identity instead.
	RequireOwner bool
	// TakeOver lets the call take a run owned by another owner id once its lease expired.
	TakeOver bool
	// Lease is the lease duration; zero means DefaultLease, else MinLease..MaxLease.
	Lease time.Duration
	// GitHub is the job that starts the run, from its verified OIDC token (docs/control-plane.md, "OIDC");
	// nil for any other caller. Stored when the run is created only: a resume or take-over
	// keeps the starter's job, as it keeps started_by.
	GitHub *GitHubJob
	// Reported is the workflow run the executor reports (docs/approvals.md, "Approve in GitHub"; migration 0007), nil for
	// none. Unlike GitHub it is the executor's word, and the last StartRun's wins: a resume
	// in a later job of the workflow reports that job's attempt.
	Reported *WorkflowRun
}

// StartOutcome says what StartRun did.
type StartOutcome int

// The StartRun outcomes.
const (
	// Created: the run did not exist; the caller owns it at epoch 1.
	Created StartOutcome = iota + 1
	// Resumed: the caller's owner id already owned the run; the epoch was bumped.
	Resumed
	// TookOver: another owner's lease had expired and TakeOver was set; the epoch was bumped.
	TookOver
)

// Run is one row of playbook_runs. Optional text columns read as "" when NULL, optional
// times as the zero time.
type Run struct {
	RunID        string
	PlaybookName string
	PlaybookHash string
	// CurrentNode is the active step's name; "" when the run is final. For a playbook run, the
	// active nodes' ids joined by "," in step_index order, "" when none (docs/playbooks.md, "Inputs and bindings").
	CurrentNode string
	Bindings    json.RawMessage
	// ErrorContext is a JSON object describing the failing transition when Status is failed.
	ErrorContext    json.RawMessage
	Status          RunStatus
	IterationCounts json.RawMessage
	EpicID          string
	SessionID       string
	StartedAt       time.Time
	CompletedAt     time.Time

	SchemaHash8            string
	TotalSteps             int
	LastCompletedStepIndex int
	LastDeployName         string
	StartedBy              string
	// LastSeq is the seq of the last stored transition (0 before the first).
	LastSeq      int64
	UpdatedAt    time.Time
	CancelledBy  string
	CancelReason string

	// Kind is the run's format (column kind).
	Kind RunKind
	// Owner is the identity that holds (or last held) the lease.
	Owner string
	// OwnerIDHash is the SHA-256 of the lease holder's owner id ("" for runs from before
	// migration 0003).
	OwnerIDHash string
	// LeaseEpoch is the fencing epoch, LeaseExpiresAt when the lease lapses unless renewed.
	LeaseEpoch     int64
	LeaseSeconds   int
	LeaseExpiresAt time.Time
	// GitHub is the GitHub Actions job that started the run (migration 0005), nil if none.
	GitHub *GitHubJob
	// Reported is the workflow run its last StartRun reported (migration 0007), nil if none.
	Reported *WorkflowRun
	// ActiveNodes are a playbook run's active nodes in step_index order (migration 0010;
	// current_node joined by ","); nil for runbook runs and when none is active.
	ActiveNodes []string
	// Nodes are a playbook run's node states derived from its transitions (NodeStates); only
	// RunWithNodes fills them, nil otherwise.
	Nodes []NodeState
}

// Evidence is one evidence-pack entry (docs/spec/runbooks.md, "Step 7"; mirrors engine.Evidence).
type Evidence struct {
	StepName string
	Type     string
	// Input is nil for a step without kql_or_template (JSON null).
	Input *string
	// SourceInput is a check's KQL as written in the runbook; Input is the query executed
	// (docs/decisions/two-renderings.md). nil when they are the same or the step is not a check.
	SourceInput *string
	Output      string
	Status      StepStatus
	// At is timestamp_utc.
	At time.Time
}

// Transition is one durable event of a run (mirrors engine.Transition). Seq starts at 1 and
// grows by one per transition; (RunID, Seq) is the idempotency key.
type Transition struct {
	RunID string
	Seq   int64
	Kind  TransitionKind
	At    time.Time
	// StepIndex is the 0-based step, -1 for run-level transitions.
	StepIndex int
	StepName  string
	StepType  string
	// Evidence is set on step_finished and on the CANCEL audit entry; nil otherwise.
	Evidence       *Evidence
	RunStatus      ExecStatus
	LastDeployName string
	// RollbackFor names the failed step whose on_fail: rollback is being carried out (docs/decisions/rollback-compensation.md).
	RollbackFor string
	Message     string
	// RecordedAt is when the control plane stored the transition (the writer's clock in the
	// transaction that committed it; column recorded_at). RecordTransition sets it and ignores
	// the caller's value; it is zero for transitions stored before migration 0002.
	RecordedAt time.Time
	// PrevHash and Hash are the transition's links in the run's hash chain, "sha256:" + 64
	// lowercase hex (docs/evidence-chain.md; migration 0021); both empty for a transition
	// recorded without the chain. The caller checks Hash against the transition's content
	// (evidencechain.HashOf); RecordTransition checks PrevHash against the stored chain.
	PrevHash, Hash string
}

// RunProgress is the part of a run row that transitions change. RecordTransition reads and
// returns only these columns: scanning the whole row cost a fifth of its CPU time.
type RunProgress struct {
	RunID       string
	Status      RunStatus
	CurrentNode string
	// LastSeq is the seq of the last stored transition (0 before the first).
	LastSeq int64
	// ChainHead is the hash of transition LastSeq ("" for a run without the chain), valid
	// when chainKnown: a progress read from the run row does not hold it, and the writer
	// reads it from the transition when it needs it (chainHead).
	ChainHead              string
	chainKnown             bool
	LastCompletedStepIndex int
	LastDeployName         string
	CompletedAt            time.Time
	// The lease (docs/decisions/leases-and-fencing.md): RecordTransition checks the caller's Fence against these and
	// renews LeaseExpiresAt by LeaseSeconds.
	Owner          string
	OwnerIDHash    string
	LeaseEpoch     int64
	LeaseSeconds   int
	LeaseExpiresAt time.Time
	// Playbook is, in Change.Progress of a playbook run, its bindings, iteration counts and
	// active nodes after the transition (docs/playbooks.md, "Inputs and bindings"); nil for runbook runs and elsewhere.
	Playbook *PlaybookProgress
	// BecameFinal is true, in Change.Progress, for the transition whose commit gave the run
	// its final status (the control plane's finished-runs counter; docs/metrics.md).
	BecameFinal bool

	// playbook is true for a run of kind playbook; active is its active_nodes JSON text.
	playbook bool
	active   string
}

// RecordResult is what RecordTransition reports.
type RecordResult struct {
	// Duplicate is true when an identical transition was already stored (nothing changed).
	Duplicate bool
	// Progress is the run's progress after the call. Status is the run's one final status
	// once it has one, even when the transition says IN_PROGRESS (an executor winding down
	// after CancelRun learns of the cancel here).
	Progress RunProgress
}

// RunFilter selects ListRuns results; zero fields do not filter.
type RunFilter struct {
	Status       RunStatus
	PlaybookName string
	// Kind, when set, lists only runs of that kind (docs/playbooks.md, "Running"; ListRunsRequest.kind).
	Kind RunKind
	// Repository, when set, lists only runs whose repository ("owner/name": the verified job's,
	// else the reported workflow run's) equals it without regard to case.
	Repository string
	// StartedBy, when set, lists only runs with that started_by (exact match).
	StartedBy string
	// StartedAfter and StartedBefore, when not zero, list only runs with StartedAfter <=
	// started_at < StartedBefore.
	StartedAfter, StartedBefore time.Time
	// PageSize defaults to DefaultPageSize and is clamped to MaxPageSize.
	PageSize int
	// PageToken is a NextPageToken from a previous call with the same filters.
	PageToken string
}

// RunPage is one ListRuns page, newest first (started_at, then run_id, descending).
type RunPage struct {
	Runs []Run
	// NextPageToken is "" on the last page.
	NextPageToken string
}

// NewApproval is what CreateApproval needs to open a gate.
type NewApproval struct {
	// ApprovalID is the caller's id (random; the approval package can use it as the token nonce).
	ApprovalID string
	RunID      string
	// NodeID is the gate's step name (the specification: "approval node id in the playbook").
	NodeID    string
	StepIndex int
	// TokenHash is approval.TokenHash(token): 64 lowercase hex chars. The raw token never
	// reaches the store.
	TokenHash string
	// RequestedAt defaults to the store's clock.
	RequestedAt time.Time
	// Deadline is when the gate times out; zero means none.
	Deadline   time.Time
	PlanDigest string
	Prompt     string
	// AutoPassed records the policy evaluator's verdict: the approval is created approved by
	// SourcePolicy, with Reason as its reason (docs/spec/playbooks.md, "Policy evaluator").
	AutoPassed bool
	Reason     string
	// OnFail is the gate step's on_fail: "halt", "rollback", "continue" (docs/spec/runbooks.md,
	// "Step fields"), or "" when the caller did not say; shown to approvers.
	OnFail string
	// Fence, when set, must hold the run's lease (docs/decisions/leases-and-fencing.md): only the run's executor opens
	// its gates and receives their tokens (docs/decisions/identity.md). The server always sets it.
	Fence *Fence
	// The gate policy's requirement, captured when the gate opens (docs/approvals.md, "Gate policy"):
	// ApprovalsRequired distinct approvals (0 means 1; at most MaxApprovalsRequired), who may
	// decide (AllowedApprovers; empty = anyone with the approver role), whether the run's
	// starter may approve, and the rule's name for refusals.
	ApprovalsRequired int
	AllowedApprovers  []string
	StarterMayApprove bool
	PolicyRule        string
	// GitHub is the workflow run and environment the executor reports with the gate (docs/approvals.md, "Approve in GitHub";
	// migration 0007), nil for none; at most MaxWorkflowRunField bytes a field.
	GitHub *WorkflowRun
	// Policy is what the auto-pass policy decided at a playbook approval node (docs/decisions/auto-pass-policy.md;
	// migration 0010's policy_json), nil when none ran. Policy.AutoPassed must equal AutoPassed
	// and a Shadow decision never auto-passes (ErrInvalidArgument).
	Policy *AutoPassDecision
	// Inputs is the gate's approver-input form (migration 0016; docs/approver-inputs.md), nil
	// for none; it must pass gateinputs.Check (ErrInvalidArgument naming the field).
	Inputs []gateinputs.Field
	// InputValues are the values of a gate created AutoPassed (the form's defaults), stored
	// as its decided values; ignored otherwise.
	InputValues map[string]string
	// RewindTargets are the node ids a rejection may send the run back to (a playbook
	// approval node's rewind_targets; migration 0018), nil for none; at most
	// MaxRewindTargets, each a non-empty id of at most MaxIDBytes (ErrInvalidArgument).
	RewindTargets []string
}

// MaxRewindTargets bounds NewApproval.RewindTargets (a playbook has at most 256 nodes).
const MaxRewindTargets = 256

// AutoPassDecision is the auto-pass policy's decision stored on an approval (column
// policy_json; docs/spec/playbooks.md "Policy evaluator"; docs/decisions/auto-pass-policy.md): Rule is the deciding rule
// ("" when none matched), Action "auto-approve" or "require-human", Reason why; Shadow marks a
// decision recorded without acting on it (rbook serve --policy-shadow).
type AutoPassDecision struct {
	AutoPassed bool   `json:"auto_passed"`
	Rule       string `json:"rule"`
	Action     string `json:"action"`
	Reason     string `json:"reason"`
	Shadow     bool   `json:"shadow"`
}

// MaxApprovalsRequired is the largest ApprovalsRequired a gate may have (the schema's CHECK,
// migration 0004; equal to approval.MaxGateApprovals).
const MaxApprovalsRequired = 10

// Vote is one row of approval_votes: one identity's decision on a gate (docs/approvals.md, "Gate policy").
type Vote struct {
	Approver string
	// Verdict is ApprovalApproved or ApprovalRejected.
	Verdict ApprovalStatus
	Reason  string
	At      time.Time
	// Source is the channel: "rpc", "terminal", …
	Source string
	// Verified is false for a name an unauthenticated caller asserted.
	Verified bool
	// Person is the people-directory person whose identity Approver is (migration 0015;
	// docs/people.md), "" when it had none: then the identity counts as itself.
	Person string
	// InputValues are the approver-input values this vote gave, validated with defaults
	// applied (migration 0016); nil for a rejection and for a gate without inputs.
	InputValues map[string]string
}

// Key is who cast v for counting distinct approvals: "person:<id>" when the vote has a
// person, else its identity (docs/people.md, "Counting").
func (v Vote) Key() string { return personKey(v.Person, v.Approver) }

// personKey is Vote.Key of a vote by identity with person ("" for none).
func personKey(person, identity string) string {
	if person != "" {
		return "person:" + person
	}
	return identity
}

// RunStarter is who started a run, for the four-eyes rule (docs/approvals.md, "Gate policy"): started_by and,
// once the control plane records it, the GitHub actor of the job that started the run.
type RunStarter struct {
	StartedBy   string
	GitHubActor string
}

// Approval is one row of playbook_approvals. Optional columns read as "" / zero time.
type Approval struct {
	ApprovalID string
	RunID      string
	NodeID     string
	StepIndex  int
	// TokenHash is the hex SHA-256 of the token (the token column), never the token.
	TokenHash   string
	Status      ApprovalStatus
	RequestedAt time.Time
	// DecidedAt is the specification's approved_at, set by every decision (approve, reject, expire, cancel).
	DecidedAt       time.Time
	Approver        string
	Reason          string
	AutoPassed      bool
	Deadline        time.Time
	PlanDigest      string
	Prompt          string
	DecidedBySource string
	// OnFail is the gate step's on_fail ("" for approvals stored before migration 0002).
	OnFail string
	// The gate policy's requirement captured when the gate opened (migration 0004; 1, none,
	// false, "" for approvals stored before it).
	ApprovalsRequired int
	AllowedApprovers  []string
	StarterMayApprove bool
	PolicyRule        string
	// Person is who decided the gate as people (migration 0015): the approving people
	// (person ids, an identity with no person as itself) joined with ", " in vote order, or
	// the one who rejected; "" while pending and for decisions no person made.
	Person string
	// Votes are every vote cast on the gate, in vote order (the tally).
	Votes []Vote
	// GitHub is the workflow run and environment reported when the gate opened (migration
	// 0007; docs/approvals.md, "Approve in GitHub"), nil if none.
	GitHub *WorkflowRun
	// Policy is the auto-pass policy's decision at a playbook approval node (migration 0010),
	// nil when none ran.
	Policy *AutoPassDecision
	// Inputs is the gate's approver-input form (migration 0016), nil for none.
	Inputs []gateinputs.Field
	// InputValues are the values the gate was approved with (those of the deciding vote,
	// validated, defaults applied); nil while pending, on a rejection, and without inputs.
	InputValues map[string]string
	// RewindTargets are the nodes a rejection may send the run back to (migration 0018;
	// docs/push-back.md), nil for none.
	RewindTargets []string
	// RedoFrom is the node a rejection sent the run back to; "" for a plain rejection and
	// while pending.
	RedoFrom string
	// Iteration is which opening of the node's gate in its run this approval is: 1 for the
	// first, n+1 after the run was sent back from this node n times.
	Iteration int
}

// ApprovedBy lists the identities that approved a, in vote order.
func (a Approval) ApprovedBy() []string {
	var out []string
	for _, v := range a.Votes {
		if v.Verdict == ApprovalApproved {
			out = append(out, v.Approver)
		}
	}
	return out
}

// ApprovedPeople lists who approved a as distinct people, in vote order: each approving
// vote's Key, once. Its length is the tally M-of-N counts (docs/people.md, "Counting").
func (a Approval) ApprovedPeople() []string {
	var out []string
	for _, v := range a.Votes {
		if k := v.Key(); v.Verdict == ApprovalApproved && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Decision is one DecideApproval request.
type Decision struct {
	ApprovalID string
	// Verdict is approved, rejected, expired or cancelled.
	Verdict  ApprovalStatus
	Approver string
	Reason   string
	// Source names where the decision came from ("rpc", "terminal", "github", …).
	Source string
	// At defaults to the store's clock. Approve and reject at or after the deadline fail with
	// ErrExpired.
	At time.Time
	// Verified marks Approver as an authenticated identity (recorded on the vote).
	Verified bool
	// Person is the people-directory person Approver belongs to, "" for none (recorded on
	// the vote; docs/people.md). An approve by a person who already approved through another
	// identity counts once, as one by the same identity does.
	Person string
	// Authorize, when set, is called inside the deciding transaction for an approve or reject,
	// with the gate as it stands (its captured policy and votes) and the run's starter; an
	// error refuses the vote (nothing is written) and is returned by DecideApproval as is
	// (docs/approvals.md, "Gate policy": not an allowed approver, four-eyes). It must not block.
	Authorize func(a Approval, starter RunStarter) error
	// InputValues are the approver's values for the gate's form (docs/approver-inputs.md).
	// An approve validates them against the gate's declared inputs with gateinputs.Validate in
	// the deciding transaction, after Authorize: invalid values refuse the vote (nothing is
	// written) and DecideApproval returns the *gateinputs.Error, wrapped in
	// ErrInvalidArgument, with the current row. A reject ignores them.
	InputValues map[string]string
	// RedoFrom, on a reject, sends the run back to that node (docs/push-back.md). It must be
	// one of the gate's RewindTargets, checked in the deciding transaction after Authorize:
	// otherwise DecideApproval returns ErrInvalidArgument naming the allowed targets with the
	// current row, and nothing is written. An approve with a RedoFrom is refused the same way.
	RedoFrom string
}

// ApprovalFilter selects ListApprovals results; zero fields do not filter.
type ApprovalFilter struct {
	Status ApprovalStatus
	RunID  string
	// PageSize defaults to DefaultPageSize and is clamped to MaxPageSize.
	PageSize  int
	PageToken string
}

// ApprovalPage is one ListApprovals page, newest first (requested_at, then approval_id).
type ApprovalPage struct {
	Approvals     []Approval
	NextPageToken string
}

// Change is what one commit changed, handed to subscribers after the commit (Subscribe).
// Within a Change, items keep commit order; transitions of one run are in seq order.
type Change struct {
	// Runs holds each run row created by StartRun, whose plan StartRun adopted (AdoptPlan),
	// or cancelled by CancelRun, as it stands after the change.
	Runs []Run
	// Progress holds, for each recorded transition, its run's progress after it.
	Progress    []RunProgress
	Transitions []Transition
	// Approvals holds each approval row as it stands after a change.
	Approvals []Approval
	// Remote is true for another replica's commit, read by the change listener (PostgreSQL;
	// pglisten.go): this replica's metrics count only its own commits (docs/metrics.md).
	Remote bool
}

func (c *Change) append(o Change) {
	c.Runs = append(c.Runs, o.Runs...)
	c.Progress = append(c.Progress, o.Progress...)
	c.Transitions = append(c.Transitions, o.Transitions...)
	c.Approvals = append(c.Approvals, o.Approvals...)
}

func (c Change) empty() bool {
	return len(c.Runs) == 0 && len(c.Progress) == 0 && len(c.Transitions) == 0 && len(c.Approvals) == 0
}
