package engine

import (
	"context"
	"errors"
	"time"

	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/internal/evidencechain"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// StepStatus is the status word of an evidence entry (docs/spec/runbooks.md, "Step 7"; docs/decisions/status-words.md).
type StepStatus string

// The step statuses of the specification, spelled exactly.
const (
	StatusPass                 StepStatus = "PASS"
	StatusFail                 StepStatus = "FAIL"
	StatusTimedOut             StepStatus = "TIMED_OUT"
	StatusSkipped              StepStatus = "SKIPPED"
	StatusAwaitingConfirmation StepStatus = "AWAITING_CONFIRMATION"
)

// RunStatus is run_status in the state file (docs/spec/runbooks.md, "Step 3" to "Step 8"; docs/decisions/status-words.md).
type RunStatus string

// The run statuses of the specification, spelled exactly.
const (
	RunInProgress RunStatus = "IN_PROGRESS"
	RunCompleted  RunStatus = "COMPLETED"
	RunFailed     RunStatus = "FAILED"
	RunCancelled  RunStatus = "CANCELLED"
)

// Final reports whether no step will run after this status.
func (s RunStatus) Final() bool { return s == RunCompleted || s == RunFailed || s == RunCancelled }

// Evidence is one evidence-pack entry: the specification's six fields (docs/spec/runbooks.md, "Step 7"),
// spelled exactly, plus SourceInput. Input is null for a step without kql_or_template.
//
// Input is the input exactly as the step ran with it: for a check, the query after the scope
// filter was injected, byte for byte what validate_query and execute_query received (docs/decisions/two-renderings.md). It is the same struct in the state file, the evidence pack JSON,
// the report and the control plane's record.
type Evidence struct {
	StepName     string     `json:"step_name"`
	Type         string     `json:"type"`
	Input        *string    `json:"input"`
	Output       string     `json:"output"`
	Status       StepStatus `json:"status"`
	TimestampUTC string     `json:"timestamp_utc"`
	// SourceInput is the runbook's kql_or_template as written, kept only when the executor
	// ran something else (a check whose scope filter was injected); absent otherwise. It is
	// an rbook addition to the specification's entry (docs/decisions/two-renderings.md).
	SourceInput *string `json:"source_input,omitempty"`
	// TransitionHash is the hash of the transition that carries this entry (its step_finished,
	// or the run_finished of a cancel), so an entry names its place in the run's hash chain
	// (docs/evidence-chain.md); absent in a run recorded without the chain.
	TransitionHash string `json:"transition_hash,omitempty"`
}

// Outcome is what an Executor returns for one step.
type Outcome struct {
	Status StepStatus
	// Output is the MCP response JSON, the simulated outcome or the user's input (docs/spec/runbooks.md, "Step 7").
	Output string
	// DeployName, when set, becomes the run's last_deploy_name (docs/spec/runbooks.md, "Step 5", "deploy").
	DeployName string
	// Cancel asks the engine to start the cancel flow (the user typed "cancel" at a gate;
	// docs/spec/runbooks.md, "Step 8", docs/decisions/confirm-gates.md).
	Cancel bool
	// halt stops the run without an outcome for the step (a gate that could not wait).
	halt error
	// input is the step's input as it ran (InputRewriter), set by the engine.
	input *string
	// Value is a playbook node's output bindings (docs/spec/playbooks.md, "Nodes"): a deterministic node's
	// stdout JSON object, else {"stdout": text, "exit_code": n}; an agentic node's structured
	// tool result. The engine keeps it under the node id in the run's bindings and records it
	// as the evidence output (JSON). Nil for runbook steps.
	Value map[string]any
	// Event, when set, names the error_handlers event a failed node raises instead of
	// node_failed (runbook.EventAgenticTimeout for an agentic node that timed out).
	Event string
	// redoFrom, on a FAIL of a playbook approval node, is the node a reviewer sent the run
	// back to (docs/push-back.md): the scheduler rewinds instead of handling a failure.
	redoFrom string
}

// InputRewriter is implemented by an Executor that does not run a step's kql_or_template as
// written: a check injects the scope filter before it calls its tools (docs/spec/runbooks.md,
// Step 5, check 1). RunInput returns the input exactly as Execute will send it for the same
// step and RunContext (nil when the step has no input); it must be a pure function of them.
// The engine records it as the evidence's input and keeps the runbook's text as SourceInput
// when the two differ, also when the step times out or never returns
// (docs/decisions/two-renderings.md: the evidence records the query exactly as it was executed).
type InputRewriter interface {
	RunInput(step runbook.Step, run RunContext) *string
}

// ErrNoAnswer is what a Gate returns (wrapped) when nobody can answer it at all, such as a
// closed stdin with no other source: the gate is not confirmed, so it FAILs and on_fail
// applies (docs/spec/runbooks.md, "Step 5", "confirm": anything but yes fails). Any other gate error halts the run.
var ErrNoAnswer = errors.New("nobody can answer this gate")

// ErrGateUnresolved is what a Gate returns (wrapped) when it cannot tell whether or how the
// gate was decided: the control plane that holds the decision stayed unreachable, or a
// person's answer could not be recorded there. The run halts, resumable, even when the gate's
// deadline has passed meanwhile: a gate is never TIMED_OUT (and on_fail never runs) on a
// guess, nor while a person's answer is unrecorded (docs/decisions/confirm-gates.md).
var ErrGateUnresolved = errors.New("the gate's decision is not known")

// RunContext is what an Executor may read about the run it is part of. It is a snapshot:
// executors never write state (ARCHITECTURE.md).
type RunContext struct {
	RunID          string
	Plan           *runbook.Plan
	LastDeployName string
	// StepNumber and StepCount are 1-based "step n of N" for progress output.
	StepNumber, StepCount int
	// Bindings is a playbook run's bindings when the node starts (inputs at the top level,
	// each finished node's output under its id, "error" after a failure handed to an
	// inject_hint target): the executor's own top-level map; nested values are shared with
	// the run and must only be read. Nil for runbooks.
	Bindings map[string]any
	// Iteration is the node's 1-based execution number in this run (playbooks).
	Iteration int
}

// Executor runs steps of one type. Execute must honour ctx (deadline and cancel) and return
// promptly when it is done; the engine turns an expired deadline into TIMED_OUT.
type Executor interface {
	Execute(ctx context.Context, step runbook.Step, run RunContext) Outcome
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, step runbook.Step, run RunContext) Outcome

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, step runbook.Step, run RunContext) Outcome {
	return f(ctx, step, run)
}

// TransitionKind names what happened in a Transition.
type TransitionKind string

// The transitions a run reports.
const (
	TransitionRunStarted   TransitionKind = "run_started"
	TransitionStepStarted  TransitionKind = "step_started"
	TransitionStepFinished TransitionKind = "step_finished"
	TransitionGateOpened   TransitionKind = "gate_opened"
	TransitionGateDecided  TransitionKind = "gate_decided"
	TransitionRunFinished  TransitionKind = "run_finished"
	// TransitionRunInterrupted records that a signal stopped the executor; the run stays
	// IN_PROGRESS and resumable (docs/runbooks.md, "State, resume and crashes").
	TransitionRunInterrupted TransitionKind = "run_interrupted"
)

// Transition is one durable event of a run. Seq starts at 1 for a run and grows by one per
// transition; (RunID, Seq) is the idempotency key recorders deduplicate on.
type Transition struct {
	RunID string         `json:"run_id"`
	Seq   int64          `json:"seq"`
	Kind  TransitionKind `json:"kind"`
	Time  time.Time      `json:"time"`
	// StepIndex is the 0-based step the transition is about, -1 for run-level transitions.
	StepIndex int    `json:"step_index"`
	StepName  string `json:"step_name,omitempty"`
	StepType  string `json:"step_type,omitempty"`
	// Evidence is set on step_finished (and on run_finished for the CANCEL audit entry).
	Evidence *Evidence `json:"evidence,omitempty"`
	// RunStatus is the run's status after this transition.
	RunStatus      RunStatus `json:"run_status"`
	LastDeployName string    `json:"last_deploy_name,omitempty"`
	// RollbackFor names the failed step whose on_fail: rollback is being carried out; set on
	// that step's step_finished and on the compensation's transitions, so a resumed run knows
	// the compensation is still owed (docs/decisions/rollback-compensation.md).
	RollbackFor string `json:"rollback_for,omitempty"`
	// Message is a short human-readable note (gate decision source, halt reason, …).
	Message string `json:"message,omitempty"`
	// PrevHash is the previous transition's Hash (evidencechain.Genesis for seq 1) and Hash
	// this transition's own, both "sha256:" + 64 lowercase hex over the canonical encoding of
	// docs/evidence-chain.md (Seal sets them). Both are empty in a run recorded without the
	// chain (by an older executor).
	PrevHash string `json:"prev_hash,omitempty"`
	Hash     string `json:"hash,omitempty"`
}

// Link returns t as the hash chain sees it (evidencechain.Link), with its hashes.
func (t Transition) Link() evidencechain.Link {
	l := evidencechain.Link{RunID: t.RunID, Seq: t.Seq, Kind: string(t.Kind), Time: t.Time, StepIndex: t.StepIndex,
		StepName: t.StepName, StepType: t.StepType, RunStatus: string(t.RunStatus), LastDeployName: t.LastDeployName,
		RollbackFor: t.RollbackFor, Message: t.Message, PrevHash: t.PrevHash, Hash: t.Hash}
	if e := t.Evidence; e != nil {
		l.Evidence = &evidencechain.Entry{StepName: e.StepName, Type: e.Type, Input: e.Input, Output: e.Output,
			Status: string(e.Status), TimestampUTC: e.TimestampUTC, SourceInput: e.SourceInput}
	}
	return l
}

// Seal makes t the transition after the one whose hash is prev (evidencechain.Genesis for a
// run's first): it sets PrevHash and Hash, and its evidence entry's TransitionHash on a copy
// of the entry. An empty prev means the run is recorded without the chain (one an older
// executor started): t is left unsealed (docs/evidence-chain.md, "Verifying a chain").
func (t *Transition) Seal(prev string) {
	if prev == "" {
		return
	}
	l := t.Link()
	evidencechain.Seal(prev, &l)
	t.PrevHash, t.Hash = l.PrevHash, l.Hash
	if t.Evidence != nil {
		e := *t.Evidence
		e.TransitionHash = t.Hash
		t.Evidence = &e
	}
}

// Recorder stores transitions. Record must be durable before it returns (ARCHITECTURE.md);
// an error stops the run.
type Recorder interface {
	Record(ctx context.Context, t Transition) error
}

// GroupRecorder is a Recorder that can take transitions as a group and make them durable
// together (docs/decisions/durability.md, "The journal": one fdatasync per step). The engine
// calls Append for each transition it emits and Flush before anything depends on them being
// durable: before a step runs (its side effect), before a gate waits, before the scheduler
// blocks, and when Run returns. A transition appended but not flushed is written (it survives
// kill -9, the process's death) but may be lost with the machine, and it must not be
// published (sent to a control plane) yet. Record is Append then Flush. An error from either
// stops the run.
type GroupRecorder interface {
	Recorder
	// Append takes t; it is durable and published with the next Flush.
	Append(ctx context.Context, t Transition) error
	// Flush makes every transition appended so far durable, in order, and publishes them.
	Flush(ctx context.Context) error
}

// Verdict is a gate's decision.
type Verdict int

// Gate verdicts (docs/decisions/confirm-gates.md).
const (
	Approved Verdict = iota + 1
	Rejected
	Cancelled
)

// GateRequest describes a confirm gate waiting for a decision.
type GateRequest struct {
	RunID     string
	StepIndex int
	StepName  string
	// StepCount is the runbook's number of steps, for "step n of N" (StepIndex+1 of StepCount).
	StepCount int
	// Prompt is the rendered step-status template with AWAITING_CONFIRMATION (docs/spec/runbooks.md, "Step 5", "confirm").
	Prompt string
	// Deadline is when the gate times out (the step's max_timeout_seconds).
	Deadline time.Time
	// PlanDigest is the run's runbook content hash; approvals are bound to it (docs/decisions/approval-tokens.md).
	PlanDigest string
	// OnFail is what a rejection or a timeout leads to, for the prompt.
	OnFail string
	// Reopened is true when a gate (the control plane's) hands a Local gate the approval that
	// was opened before the executor restarted: Deadline is then that approval's original
	// deadline, the one the gate really closes at, so the prompt states one deadline only
	// (a resumed gate's prompt must be true).
	Reopened bool
	// NodeID is the playbook approval node's id (equal to StepName); empty for a runbook's
	// confirm step. A playbook gate makes the run "paused" while it waits (docs/spec/playbooks.md).
	NodeID string
	// Policy is what the auto-pass policy evaluates at a playbook approval node (docs/decisions/auto-pass-policy.md); nil for a runbook's confirm step.
	Policy *PolicyContext
	// ApprovalURL is the gate's page on the control plane's console (Approval.approval_url)
	// when a control plane with a public URL opened the gate, for a Local gate to show
	// (docs/console-links.md); "" otherwise. It carries no secret.
	ApprovalURL string
	// Inputs is the approver-input form of a playbook approval node (runbook.Node.Form), nil
	// for none; the gate collects a value per field with an approval (docs/approver-inputs.md).
	Inputs []gateinputs.Field
	// RewindTargets are the nodes a rejection of a playbook approval node may send the run
	// back to (runbook.Node.RewindTargets; docs/push-back.md), nil for none.
	RewindTargets []string
}

// PolicyContext is the input of the auto-pass policy at a playbook approval node (docs/decisions/auto-pass-policy.md).
type PolicyContext struct {
	// Node is the approval node: id, type, prompt (rendered), depends, and policy when the
	// node has one ("require-human": no rule may auto-pass it).
	Node map[string]any
	// Bindings is the run's bindings when the gate opened.
	Bindings map[string]any
	// Playbook is {name, hash, version}.
	Playbook map[string]any
	// Commands are the resolved command lines of the deterministic nodes the gate guards (those
	// reachable from it before the next approval): the node's env as sorted K=V pairs, then the
	// command and its templated args, joined by spaces (a policy sees what changes the program).
	Commands []string
	// Tools are "agent/skill" of the agentic nodes the gate guards.
	Tools []string
}

// PolicyDecision is what the auto-pass policy decided at a gate (docs/decisions/auto-pass-policy.md).
type PolicyDecision struct {
	// AutoPassed is true when the gate was approved by the policy without a human.
	AutoPassed bool
	// Rule names the deciding rule ("" when no rule matched); Action is "auto-approve" or
	// "require-human"; Reason says why.
	Rule, Action, Reason string
	// Shadow is true when the policy ran in shadow mode: it decided nothing, a human did.
	Shadow bool
}

// Decision is how a gate was decided.
type Decision struct {
	Verdict Verdict
	// By is who decided (a user name, "terminal", an approver identity).
	By string
	// Reason is free text; Input is the raw terminal line when the decision came from a terminal.
	Reason, Input string
	// Source names the gate that decided: "terminal", "control-plane", "github", "policy".
	Source string
	// Policy is the auto-pass policy's decision at a playbook approval node; nil when no
	// policy ran (runbook confirm steps).
	Policy *PolicyDecision
	// InputValues are the approver-input values an approval was decided with, validated
	// against GateRequest.Inputs (gateinputs.Validate) with defaults applied; nil for a gate
	// without inputs and for a rejection.
	InputValues map[string]string
	// RedoFrom, on a rejection, is the node the reviewer sent the run back to (one of
	// GateRequest.RewindTargets; docs/push-back.md), "" for a plain rejection: the run goes
	// back to that node with Reason as the comment, and the gate opens again when it gets back.
	RedoFrom string
	// Iteration is which opening of the node's gate in its run decided (Approval.iteration),
	// 0 when the gate does not count them (the engine then uses the node's execution count).
	Iteration int
}

// Gate waits for a human decision. Await returns ctx.Err() when ctx ends first (deadline: the
// gate timed out).
type Gate interface {
	Await(ctx context.Context, req GateRequest) (Decision, error)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(ctx context.Context, t Transition) error

// Record calls f.
func (f RecorderFunc) Record(ctx context.Context, t Transition) error { return f(ctx, t) }
