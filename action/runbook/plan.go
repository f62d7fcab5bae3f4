// Package runbook loads and validates runbook YAML files (docs/spec/runbooks.md, "Step 1";
// docs/decisions/values-substitution.md, docs/decisions/yaml-safety.md, docs/decisions/rules-schema.md, docs/decisions/step-timeouts.md, docs/decisions/run-ids.md) into a Plan, the one shape the engine executes.
package runbook

import "github.com/rbookhq/rbook-action/internal/gateinputs"

// StepType is a step's declared type (docs/spec/runbooks.md, "Runbook format").
type StepType string

// The step types of the runbook DSL.
const (
	TypeCheck    StepType = "check"
	TypeDeploy   StepType = "deploy"
	TypeConfirm  StepType = "confirm"
	TypeRollback StepType = "rollback"
)

// SideEffecting reports whether running the step twice could change the world twice.
// Deploy and rollback steps are side-effecting; checks and confirm gates are safe to repeat
// (docs/spec/runbooks.md, "Step 3", "resume must not repeat a side effect").
// Playbook nodes: a deterministic command and an agentic tool call may change the world; an
// approval may not (docs/playbooks.md, "Inputs and bindings").
func (t StepType) SideEffecting() bool {
	return t == TypeDeploy || t == TypeRollback || t == TypeDeterministic || t == TypeAgentic
}

// OnFail is what the engine does when a step ends FAIL or TIMED_OUT
// (docs/spec/runbooks.md, "Step 5", "on_fail").
type OnFail string

// The on_fail actions.
const (
	OnFailHalt     OnFail = "halt"
	OnFailRollback OnFail = "rollback"
	OnFailContinue OnFail = "continue"
)

// DefaultMaxStepTimeoutSeconds is the runbook-level step timeout when
// max_step_timeout_seconds is omitted (docs/spec/runbooks.md, "Step 1").
const DefaultMaxStepTimeoutSeconds = 300

// Step is one validated runbook step.
type Step struct {
	// Index is the 0-based position in runbook_steps.
	Index int
	// Name is unique within the runbook.
	Name string
	Type StepType
	// Input is kql_or_template after values substitution; nil when null or omitted.
	Input *string
	// Params is the params map after values substitution (nil when omitted). Scalars keep
	// their source text where the YAML tag is a number (docs/decisions/yaml-safety.md), so 1.10 stays "1.10": numbers
	// are json.Number (or string when the text is no JSON number, e.g. 0755), booleans bool,
	// null nil, mappings map[string]any, lists []any.
	Params map[string]any
	OnFail OnFail
	// TimeoutSeconds is the effective max_timeout_seconds: the step's own value, else the
	// runbook's max_step_timeout_seconds (docs/decisions/step-timeouts.md).
	TimeoutSeconds int
	// Line and Column locate the step's mapping in the runbook file (1-based).
	Line, Column int
	// Depends are the indexes of the steps this one waits for (a playbook node's depends and
	// incoming edges). Nil for runbook steps: a runbook is a chain, each step after the one
	// before it (docs/decisions/playbooks-on-one-engine.md).
	Depends []int
	// Node is the playbook node behind the step; nil for runbook steps.
	Node *Node
	// Form is a runbook confirm step's approver-input form (its inputs:, checked with
	// gateinputs.CheckField); nil for none and for playbook steps, whose approval nodes keep
	// theirs in Node.Form. The values a confirm step is approved with are kept with the
	// decision, in the evidence and the report; a runbook has no bindings that read them
	// (docs/approver-inputs.md, "Runbook confirm steps").
	Form []gateinputs.Field
}

// Plan is a loaded, validated runbook.
type Plan struct {
	// Name is runbook_name, matching [A-Za-z0-9._-]{1,64} (docs/decisions/run-ids.md).
	Name string
	// Path is the runbook file as given (e.g. runbooks/demo.yaml).
	Path string
	// ValuesPath is the values file that was applied (e.g. runbooks/demo.values.yaml).
	ValuesPath    string
	Subscriptions []string
	// StateFilePath is state_file_path as written in the runbook (relative to the working directory).
	StateFilePath string
	// MaxStepTimeoutSeconds is the runbook-level cap, default 300.
	MaxStepTimeoutSeconds int
	Steps                 []Step
	// ContentHash is the lowercase hex SHA-256 over the runbook file bytes, a 0 byte, and the
	// values file bytes: it changes when anything that shapes the run is edited.
	ContentHash string
	// SchemaHash8 is the first 8 lowercase hex chars of SHA-256(rules.yaml) (docs/spec/runbooks.md, "Step 1").
	SchemaHash8 string
	// ValueTexts maps each top-level key of the values file to the text of every scalar
	// in its value (one for a scalar, all the items of a list or mapping, each distinct text
	// once), so a GitHub runner can mask the values whose key looks secret before anything
	// prints them (docs/action.md, "Runner-native output").
	ValueTexts map[string][]string
	// Kind is KindPlaybook for a .cantbook, KindRunbook ("") for a runbook.
	Kind PlanKind
	// Playbook holds a .cantbook's inputs, edges and error handlers; nil for runbooks.
	Playbook *Playbook
}
