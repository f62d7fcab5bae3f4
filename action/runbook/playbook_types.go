package runbook

import "github.com/rbookhq/rbook-action/internal/gateinputs"

// The playbook half of the Plan (docs/spec/playbooks.md; docs/decisions/playbooks-on-one-engine.md). A .cantbook
// compiles to the same Plan as a runbook: one Step per node, in file order, with Depends
// holding the indexes of the steps it waits for (edges and depends together), and the
// playbook-only facts in Plan.Playbook and Step.Node.

// PlanKind says which format a Plan was loaded from.
type PlanKind string

// The plan kinds. The zero value "" is a runbook, so runbook code needs no change.
const (
	KindRunbook  PlanKind = ""
	KindPlaybook PlanKind = "playbook"
)

// The playbook node types (docs/spec/playbooks.md, "Document format").
const (
	TypeDeterministic StepType = "deterministic"
	TypeAgentic       StepType = "agentic"
	TypeApproval      StepType = "approval"
)

// NodePolicyRequireHuman is an approval node's policy that pins it to a person: the auto-pass
// policy never passes it (the engine sends it as node.policy in the policy context, and the
// control plane's evaluator honours it before any rule).
const NodePolicyRequireHuman = "require-human"

// NodePolicies are the values an approval node's policy field may have.
var NodePolicies = []string{NodePolicyRequireHuman}

// DefaultIterationCap is a node's iteration_cap when the file sets none (docs/spec/playbooks.md, "Iterations"):
// at most 3 executions of one node in a run.
const DefaultIterationCap = 3

// MaxIterationCap is the hard limit of iteration_cap and max_iterations (docs/spec/playbooks.md,
// validation rule 10: 0..10).
const MaxIterationCap = 10

// RunBudgetPerNode times the number of nodes is a run's global budget of node executions
// (docs/spec/playbooks.md, "Iterations"): no combination of handlers can execute more than this.
const RunBudgetPerNode = 10

// Playbook holds the playbook-level parts of a .cantbook (docs/spec/playbooks.md).
type Playbook struct {
	// Version is the version field's text, always "1.0" once loaded.
	Version     string
	Description string
	Inputs      []PlaybookInput
	Edges       []Edge
	// ErrorHandlers in file order (the specification: error_handlers).
	ErrorHandlers []ErrorHandler
	// Source is the .cantbook's bytes; Plan.ContentHash is their SHA-256 (the playbook hash).
	Source []byte
	// Warnings are what the parser noticed that does not stop the load (e.g. an unquoted
	// version: 1.0 is accepted with a warning to quote it, docs/decisions/yaml-safety.md); nil
	// when there are none. Added by
	// the parser (docs/spec/playbooks.md); `rbook playbook validate` prints them.
	Warnings []Diagnostic
}

// PlaybookInput is one entry of inputs (docs/spec/playbooks.md).
type PlaybookInput struct {
	Name        string
	Required    bool
	Description string
	// Default is applied when the caller gives no value; HasDefault tells a null default apart.
	Default    any
	HasDefault bool
	Line       int
}

// Node is what a Step carries for a playbook node (Step.Node); nil for runbook steps. Strings
// that may hold {{ var }} templates are kept as written: executors render them with Render
// against the run's bindings just before the node runs (docs/spec/playbooks.md, "Nodes").
type Node struct {
	// ID is the node id (also Step.Name).
	ID string
	// Depends are the ids the node waits for: its depends list and every edge into it, each
	// once, in file order (Step.Depends has the same as step indexes).
	Depends []string
	// Command and Args (deterministic): exec'd without a shell; each arg is one argv entry.
	Command string
	Args    []string
	// Env adds variables to a deterministic node's environment; Cwd is its working folder
	// (relative to the playbook run's working folder). Both are templated.
	Env map[string]string
	Cwd string
	// Skill and Agent (agentic): Agent names the server in the mcpServers config, Skill the tool.
	Skill, Agent string
	// Inputs (agentic) become the tool's arguments after templating every string inside.
	Inputs map[string]any
	// Prompt (approval) is templated before it is shown.
	Prompt string
	// Policy (approval) is the node's own say over the auto-pass policy: NodePolicyRequireHuman
	// pins the node to a person, and no rule (built-in or --playbook-policy) can pass it; ""
	// lets the policy in force decide.
	Policy string
	// Form (approval) is the approver-input form the node's inputs: declares, checked with
	// gateinputs.CheckField; nil for none. The values the gate is approved with are in the
	// node's output under "inputs", read as {{ <id>.inputs.<name> }} (docs/approver-inputs.md).
	Form []gateinputs.Field
	// RewindTargets (approval) are the nodes a reviewer may send the run back to when they
	// reject the gate (rewind_targets:), each an ancestor of the node, in file order; nil for
	// none (docs/push-back.md).
	RewindTargets []string
	// IterationCap is how many times the node may execute in one run: iteration_cap or
	// max_iterations as written (0..10), DefaultIterationCap when absent. 0 and 1 both mean
	// it runs once and is never re-run.
	IterationCap int
	// OnFailure is the node's on_failure block (the reference's inject-hint extension); nil when absent.
	OnFailure *OnFailure
	// Requires and Ensures are facts checked before the node runs and after it succeeded.
	Requires, Ensures []string
	// TimeoutSet is true when the node has its own timeout (Step.TimeoutSeconds holds it).
	TimeoutSet bool
}

// OnFailure is a node's on_failure: {inject_into, max_iterations}.
type OnFailure struct {
	// InjectInto is the node re-run with the error in its bindings before this node runs again.
	InjectInto string
	// MaxIterations, when > 0, caps this node's executions like iteration_cap.
	MaxIterations int
}

// Edge is one entry of edges: from → to, with an optional contract and condition.
type Edge struct {
	From, To string
	// Requires are facts that must hold when the edge is crossed (after From succeeded,
	// before To runs); Ensures must hold after To succeeded (contract.requires/ensures).
	Requires, Ensures []string
	// When, if set, must hold for To to run; a false When skips To for this branch.
	When *When
	Line int
}

// WhenOp is the one operator of an edge's when.
type WhenOp string

// The when operators (the reference's edge conditions).
const (
	WhenEquals    WhenOp = "equals"
	WhenNotEquals WhenOp = "notEquals"
	WhenExists    WhenOp = "exists"
	WhenIn        WhenOp = "in"
	WhenTruthy    WhenOp = "truthy"
)

// When is an edge condition: Op applied to the binding at path Binding ("test.exit_code",
// "version"). Value is the operand (a list for in; a bool for exists/truthy, true by default).
type When struct {
	Binding string
	Op      WhenOp
	Value   any
}

// ErrorHandler is one entry of error_handlers.
type ErrorHandler struct {
	// On is "<node-id>-failed", "node_failed", "agentic_timeout", "iteration_cap_exceeded" or
	// "contract_violation".
	On string
	// Action is "abort", "continue", "retry" or "inject_hint".
	Action string
	// Message is templated and recorded when the handler fires.
	Message string
	Line    int
}

// The error_handlers actions and event names (docs/spec/playbooks.md, "Error handlers").
const (
	HandlerAbort      = "abort"
	HandlerContinue   = "continue"
	HandlerRetry      = "retry"
	HandlerInjectHint = "inject_hint"

	EventNodeFailed           = "node_failed"
	EventAgenticTimeout       = "agentic_timeout"
	EventIterationCapExceeded = "iteration_cap_exceeded"
	EventContractViolation    = "contract_violation"
	// EventFailedSuffix makes "<node-id>-failed".
	EventFailedSuffix = "-failed"
)
