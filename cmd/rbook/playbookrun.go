package main

// rbook playbook run: load and validate a .cantbook and its inputs (refused before anything is
// recorded), then run it on the run pipeline (action/run) as rbook run runs a runbook.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/report"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/controlplane/approval"
)

// playbookFlags are the flags of rbook playbook run.
type playbookFlags struct {
	runFlags
	inputs                []string
	inputsFile            string
	concurrency           int
	stateFile             string
	epic, session         string
	policy                string
	policyShadow          bool
	rerunNodes, skipNodes []string
}

func newPlaybookRunCmd() *cobra.Command {
	var f playbookFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run (or resume) a .cantbook playbook: rbook playbook run runbooks/release.cantbook --input version=…",
		Long: `Run the playbook FILE (.cantbook): each node runs when every node it depends on has
succeeded (or was skipped by a when branch), independent nodes side by side up to
--concurrency. Inputs come from --input NAME=VALUE (repeatable) and --inputs FILE (a YAML or
JSON mapping of names to scalars; --input wins); required inputs that are missing, unknown
ones and an invalid playbook are refused before anything is recorded.

Deterministic nodes exec their command with templated args, without a shell. When the
playbook's folder has a bin/ folder, it is put first on their PATH (the demo's stub pnpm in
runbooks/bin); a line says so. Agentic nodes call a tool of an MCP server from
<folder>/<base>.mcp.json (mcpServers JSON; --mcp-config FILE overrides). An approval node is a
gate: the run is paused while it waits, and it is decided by the auto-pass policy, the
terminal (type yes), or 'rbook playbook approve <TOKEN>' / reject from anywhere. On a
terminal, or with RBOOK_SHOW_TOKEN=1, the token is printed; in CI only the approval id.

The run reports to the embedded control plane by default (as rbook run does; --control-plane
URL for a running 'rbook serve', off for none). With a control plane, its policy decides
auto-passes ('rbook serve --playbook-policy'); the embedded one and --control-plane off use
--policy FILE (default: the built-in conservative rules), --policy-shadow records what the
policy would decide and still asks a person.

State is written to --state-file (default .rbook/<playbook-name>.playbook.state.json) after
every transition: running the same command again after a crash resumes the run (RESUMING …)
without running a recorded node again. A deterministic or agentic node that had started and
has no recorded outcome is in unknown state: the resume refuses, naming it, until you choose
--rerun-node ID (run it again) or --skip-node ID (go on as if it had been skipped). A changed
playbook (another hash) is refused. The run ends with the report (with the DAG as Mermaid)
and the evidence pack JSON next to the state file.

` + playbookExitCodes,
		Example: `  rbook playbook run runbooks/release.cantbook --input version=2026.4.90
  rbook playbook run runbooks/fanout.cantbook --concurrency 2 --control-plane off
  rbook playbook run release.cantbook --inputs inputs.yaml --control-plane http://127.0.0.1:7070
  rbook playbook run release.cantbook --input version=2026.4.90 --rerun-node build   # after "node in unknown state"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlaybook(cmd, args[0], f)
		},
	}
	cmd.Flags().StringArrayVar(&f.inputs, "input", nil, "an input as NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&f.inputsFile, "inputs", "", "a YAML or JSON file mapping input names to values")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", engine.DefaultConcurrency, "how many nodes may run at once (1..64)")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "control plane URL to report to, or several separated by commas (replicas: the next is used when one does not answer) (default $RBOOK_CONTROL_PLANE; unset: start an embedded one; \"off\": none)")
	cmd.Flags().StringVar(&f.stateFile, "state-file", "", "the run's state file (default .rbook/<playbook-name>.playbook.state.json)")
	cmd.Flags().StringVar(&f.epic, "epic", "", "task epic the run belongs to (playbook_runs.epic_id)")
	cmd.Flags().StringVar(&f.session, "session", "", "session the run belongs to (playbook_runs.session_id)")
	cmd.Flags().StringVar(&f.policy, "policy", "", "auto-pass policy rules (YAML) for the embedded control plane or --control-plane off (default: the built-in rules)")
	cmd.Flags().BoolVar(&f.policyShadow, "policy-shadow", false, "record what the auto-pass policy would decide, but let a person decide every approval")
	cmd.Flags().StringArrayVar(&f.rerunNodes, "rerun-node", nil, "resume: run this node in unknown state again (repeatable)")
	cmd.Flags().StringArrayVar(&f.skipNodes, "skip-node", nil, "resume: go on as if this node in unknown state had been skipped (repeatable)")
	cmd.Flags().StringVar(&f.templates, "templates", "", "folder whose templates/*.md override the built-in report templates")
	addSharedExecutorFlags(cmd, &f.runFlags, "mcpServers JSON for agentic nodes (default <playbook folder>/<playbook base>.mcp.json)")
	cmd.Flags().StringVar(&f.githubEnv, "github-environment", "", "GitHub environment the run's approval nodes are bound to, reported with each gate (default $RBOOK_GITHUB_ENVIRONMENT)")
	return cmd
}

// MaxConcurrency is the largest --concurrency rbook playbook run accepts.
const MaxConcurrency = 64

// playbookStatePath is --state-file, else .rbook/<playbook-name>.playbook.state.json.
func playbookStatePath(f playbookFlags, plan *runbook.Plan) string {
	if f.stateFile != "" {
		return f.stateFile
	}
	return state.DefaultPlaybookStatePath(plan.Name)
}

// loadPlaybookPolicy compiles --policy FILE's rules followed by the built-in ones, for a gate
// decided without an outside control plane (the embedded one, or none). Errors name the file
// and line (a rule that does not compile is a load error).
func loadPlaybookPolicy(f playbookFlags) (*approval.Policy, error) {
	// The rules of --policy FILE, then the defaults: the same policy rbook serve
	// --playbook-policy FILE evaluates (a default require-human always wins).
	pol, err := approval.LoadPlaybookPolicy(f.policy)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return pol, nil
}

// playbookExecutors wires the playbook node executors: deterministic nodes
// get <playbook folder>/bin first on PATH when that folder exists (one line says so);
// agentic nodes an MCP pool over <folder>/<base>.mcp.json or mcpConfig. A playbook with
// agentic nodes and no such file, or a config that playbookMCPConfig refuses, is refused.
func playbookExecutors(plan *runbook.Plan, file, mcpConfig string, errw io.Writer) (map[runbook.StepType]engine.Executor, func(), error) {
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
		return nil, nil, setupRefused(ds, "rbook playbook validate "+file)
	}
	pool := mcp.NewPool(cfg)
	execs[runbook.TypeAgentic] = steps.Agentic{Pool: pool}
	return execs, func() { _ = pool.Close() }, nil
}

// runPlaybook runs (or resumes) the playbook file on the run pipeline (action/run): the flags
// become its Options; a second attempt (a run finished elsewhere) builds them again.
func runPlaybook(cmd *cobra.Command, file string, f playbookFlags) error {
	build := func() (pipeline.Options, error) { return f.playbookOptions(cmd, file) }
	o, err := build()
	if err != nil {
		return err
	}
	o.Rebuild = build
	return fromRun(runTraced(cmd, o))
}

// playbookOptions are the pipeline's Options of a playbook run: the playbook, its inputs and
// its policy are checked here, before anything is recorded.
func (f playbookFlags) playbookOptions(cmd *cobra.Command, file string) (pipeline.Options, error) {
	out, errw, ci := ciStreams(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.output)
	plan, err := runbook.LoadPlaybook(file)
	if err != nil {
		var b strings.Builder
		n := preflight.PrintParseError(&b, file, err)
		return pipeline.Options{}, abort("%s%s has %d issue(s); nothing was run or recorded.", b.String(), file, n)
	}
	for _, w := range playbookWarnings(plan) {
		fmt.Fprintln(errw, w)
	}
	if f.concurrency < 1 || f.concurrency > MaxConcurrency {
		return pipeline.Options{}, abort("--concurrency %d: use 1..%d", f.concurrency, MaxConcurrency)
	}
	cfg, err := f.config()
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	pb, err := f.playbook(plan, file, cfg, errw)
	if err != nil {
		return pipeline.Options{}, err
	}
	rend, err := report.New(f.templates)
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	v, err := newView(out, errw, terminals(out, errw), rend, plan, f.output, f.report)
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	v.resumeCmd = pipeline.PlaybookResumeCmd(file, plan.StateFilePath, plan.Name, f.controlPlane, f.mcpConfig)
	ci.attach(v, plan)
	execs, closeExecs, err := playbookExecutors(plan, file, f.mcpConfig, errw)
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	return pipeline.Options{Config: cfg, Plan: plan, Name: plan.Name, Again: "rbook playbook run " + file, GitHubEnv: f.githubEnv,
		Playbook: pb, Renderer: rend, Terminal: runTerminal{v, errw}, Err: errw, Signals: signalsTo(errw),
		Executors: execs, Close: closeExecs}, nil
}

// playbook is the playbook part of the Options: the auto-pass policy (the embedded control
// plane's or this process's, never a separate control plane's), the state file and the inputs.
func (f playbookFlags) playbook(plan *runbook.Plan, file string, cfg pipeline.Config, errw io.Writer) (*pipeline.Playbook, error) {
	external := cfg.ControlPlane != "" && cfg.ControlPlane != "off"
	if external && (f.policy != "" || f.policyShadow) {
		return nil, abort("--policy and --policy-shadow are for the embedded control plane and --control-plane off; the control plane %s decides auto-passes with its own policy (rbook serve --playbook-policy FILE --policy-shadow)", cfg.ControlPlane)
	}
	var localPolicy *approval.Policy
	if !external {
		var err error
		if localPolicy, err = loadPlaybookPolicy(f); err != nil {
			return nil, abort("%v", err)
		}
	}
	plan.StateFilePath = playbookStatePath(f, plan)
	inputs, err := f.playbookInputs(plan)
	if err != nil {
		return nil, err
	}
	if !external && !f.policyShadow { // a separate control plane's policy is not known here
		for _, d := range autoPassWarnings(plan, file, localPolicy, inputs) {
			fmt.Fprintln(errw, "warning: "+d.String())
		}
	}
	pb := &pipeline.Playbook{File: file, Inputs: inputs, RerunNodes: f.rerunNodes, SkipNodes: f.skipNodes, Epic: f.epic, Session: f.session,
		Concurrency: f.concurrency, Shadow: f.policyShadow, MCPConfig: f.mcpConfig}
	if localPolicy != nil {
		pb.Policy = policyFunc(localPolicy)
	}
	pb.StartEmbedded = func(ctx context.Context, errw io.Writer) (string, func(), error) {
		return startEmbeddedWith(ctx, errw, embeddedPolicy{policy: localPolicy, shadow: f.policyShadow})
	}
	return pb, nil
}

// playbookInputs are the run's inputs: a run to resume keeps the inputs it started with (they
// need not be given again); else --inputs and --input, validated against the playbook.
func (f playbookFlags) playbookInputs(plan *runbook.Plan) (map[string]any, error) {
	given, err := pipeline.GivenInputs(f.inputsFile, f.inputs)
	if err != nil {
		return nil, abort("%v", err)
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
			return nil, abort("%v\nNothing was run or recorded.", err)
		}
	}
	if _, err := json.Marshal(inputs); err != nil {
		return nil, abort("inputs: %v", err)
	}
	return inputs, nil
}

// policyFunc is the auto-pass policy pol as the pipeline's gate evaluates it.
func policyFunc(pol *approval.Policy) func(*engine.PolicyContext) engine.PolicyDecision {
	return func(p *engine.PolicyContext) engine.PolicyDecision {
		v := pol.Evaluate(approval.PolicyInput{Node: p.Node, Bindings: p.Bindings, Playbook: p.Playbook, Commands: p.Commands, Tools: p.Tools})
		return engine.PolicyDecision{AutoPassed: v.AutoPassed, Rule: v.Rule, Action: v.Action, Reason: v.Reason}
	}
}
