package run

// The playbook part of a run's Options, from rbook playbook run's flags: checked before
// anything is recorded (docs/playbooks.md). The auto-pass policy is the caller's: a policy is
// the control plane's (controlplane/approval), which the executor never imports.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// MaxConcurrency is the largest --concurrency rbook playbook run accepts.
const MaxConcurrency = 64

// nothingRecorded ends the message of a playbook run refused before its first transition.
const nothingRecorded = "Nothing was run or recorded."

// PlaybookFlags are rbook playbook run's playbook flags, as given.
type PlaybookFlags struct {
	// Inputs are --input NAME=VALUE; InputsFile is --inputs FILE.
	Inputs     []string
	InputsFile string
	// Concurrency is --concurrency: how many nodes may run at once (1..MaxConcurrency).
	Concurrency int
	// StateFile is --state-file ("" = .rbook/<playbook-name>.playbook.state.json).
	StateFile string
	// Epic and Session are --epic and --session, recorded with the run.
	Epic, Session string
	// Policy is --policy FILE and PolicyShadow --policy-shadow: the auto-pass policy of the
	// embedded control plane or of no control plane.
	Policy       string
	PolicyShadow bool
	// RerunNodes and SkipNodes are --rerun-node and --skip-node.
	RerunNodes, SkipNodes []string
}

// LoadPlaybook is the playbook file. A playbook that does not load is an error that lists
// every issue as file:line:col: field: message, one a line, then "<file> has N issue(s);
// <outcome>" (what was not done: "nothing was run or recorded.").
func LoadPlaybook(file, outcome string) (*runbook.Plan, error) {
	plan, err := runbook.LoadPlaybook(file)
	if err != nil {
		var b strings.Builder
		n := preflight.PrintParseError(&b, file, err)
		return nil, fmt.Errorf("%s%s has %d issue(s); %s", b.String(), file, n, outcome)
	}
	return plan, nil
}

// ValidInputs are --inputs FILE and --input NAME=VALUE (GivenInputs) validated against the
// playbook plan (runbook.ValidatePlaybookInputs). Errors name the flag, the file and line,
// or the input.
func ValidInputs(plan *runbook.Plan, inputsFile string, inputs []string) (map[string]any, error) {
	given, err := GivenInputs(inputsFile, inputs)
	if err != nil {
		return nil, err
	}
	return runbook.ValidatePlaybookInputs(plan, given)
}

// CheckConcurrency refuses a --concurrency outside 1..MaxConcurrency.
func (p PlaybookFlags) CheckConcurrency() error {
	if p.Concurrency < 1 || p.Concurrency > MaxConcurrency {
		return fmt.Errorf("--concurrency %d: use 1..%d", p.Concurrency, MaxConcurrency)
	}
	return nil
}

// External reports whether the run reports to a separate control plane (cfg resolved), which
// decides auto-passes with its own policy. Error: --policy or --policy-shadow with one.
func (p PlaybookFlags) External(cfg Config) (bool, error) {
	external := cfg.ControlPlane != "" && cfg.ControlPlane != "off"
	if external && (p.Policy != "" || p.PolicyShadow) {
		return true, fmt.Errorf("--policy and --policy-shadow are for the embedded control plane and --control-plane off; the control plane %s decides auto-passes with its own policy (rbook serve --playbook-policy FILE --policy-shadow)", cfg.ControlPlane)
	}
	return external, nil
}

// StatePath is --state-file, else .rbook/<playbook-name>.playbook.state.json.
func (p PlaybookFlags) StatePath(plan *runbook.Plan) string {
	if p.StateFile != "" {
		return p.StateFile
	}
	return state.DefaultPlaybookStatePath(plan.Name)
}

// PlaybookInputs are the run's inputs: a run to resume (in plan.StateFilePath) keeps the
// inputs it started with (they need not be given again, and a value given again that differs
// is left for OpenPlaybook to name); else --inputs and --input, validated against the
// playbook. Errors name the flag, the file and line, or the input.
func (p PlaybookFlags) PlaybookInputs(plan *runbook.Plan) (map[string]any, error) {
	given, err := GivenInputs(p.InputsFile, p.Inputs)
	if err != nil {
		return nil, err
	}
	var inputs map[string]any
	if prev, rerr := state.ReadCurrent(plan.StateFilePath); rerr == nil && prev.Kind == state.KindPlaybook && prev.RunStatus == engine.RunInProgress &&
		prev.RunbookName == plan.Name && prev.Inputs != nil {
		inputs = prev.Inputs
		for k, v := range given {
			if rec, ok := prev.Inputs[k]; !ok || fmt.Sprint(rec) != v {
				inputs = nil // OpenPlaybook names the difference
			}
		}
	}
	if inputs == nil {
		if inputs, err = runbook.ValidatePlaybookInputs(plan, given); err != nil {
			return nil, fmt.Errorf("%v\n%s", err, nothingRecorded)
		}
	}
	if _, err := json.Marshal(inputs); err != nil {
		return nil, fmt.Errorf("inputs: %v", err)
	}
	return inputs, nil
}

// Playbook is the Options' Playbook of the playbook file with its validated inputs and the
// --mcp-config its agentic nodes use ("" = <playbook folder>/<playbook base>.mcp.json, named
// again in the resume hint); the caller sets its Policy and StartEmbedded.
func (p PlaybookFlags) Playbook(file string, inputs map[string]any, mcpConfig string) *Playbook {
	return &Playbook{File: file, Inputs: inputs, RerunNodes: p.RerunNodes, SkipNodes: p.SkipNodes, Epic: p.Epic, Session: p.Session,
		Concurrency: p.Concurrency, Shadow: p.PolicyShadow, MCPConfig: mcpConfig}
}

// PlaybookExecutors are the playbook's node executors: deterministic nodes get <playbook
// folder>/bin first on PATH when that folder exists (a line on errw says so); agentic nodes
// an MCP pool over <folder>/<base>.mcp.json or mcpConfig, which the returned func closes. A
// playbook with agentic nodes and no such file, or a config preflight.PlaybookMCPConfig
// refuses, returns its diagnostics and no executors: the run is refused before anything is
// recorded.
func PlaybookExecutors(plan *runbook.Plan, file, mcpConfig string, errw io.Writer) (map[runbook.StepType]engine.Executor, func(), []runbook.Diagnostic) {
	execs := map[runbook.StepType]engine.Executor{}
	det := steps.Deterministic{PathPrepend: steps.PlaybookBinDirs(file)}
	if len(det.PathPrepend) > 0 {
		fmt.Fprintf(errw, "Deterministic nodes find commands in %s first (PATH is prepended with the playbook's bin folder).\n", strings.Join(det.PathPrepend, ", "))
	}
	execs[runbook.TypeDeterministic] = det
	if !preflight.HasAgentic(plan) {
		return execs, func() {}, nil
	}
	cfg, ds := preflight.PlaybookMCPConfig(plan, file, mcpConfig)
	if len(ds) > 0 {
		return nil, nil, ds
	}
	pool := mcp.NewPool(cfg)
	execs[runbook.TypeAgentic] = steps.Agentic{Pool: pool}
	return execs, func() { _ = pool.Close() }, nil
}
