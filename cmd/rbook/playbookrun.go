package main

// rbook playbook run: load and validate a .cantbook and its inputs (refused before anything is
// recorded), then run it on the run pipeline (action/run) as rbook run runs a runbook.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/internal/planview"
)

// playbookFlags are the flags of rbook playbook run.
type playbookFlags struct {
	runFlags
	pipeline.PlaybookFlags
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
	cmd.Flags().StringArrayVar(&f.Inputs, "input", nil, "an input as NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&f.InputsFile, "inputs", "", "a YAML or JSON file mapping input names to values")
	cmd.Flags().IntVar(&f.Concurrency, "concurrency", engine.DefaultConcurrency, "how many nodes may run at once (1..64)")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "control plane URL to report to, or several separated by commas (replicas: the next is used when one does not answer) (default $RBOOK_CONTROL_PLANE; unset: start an embedded one; \"off\": none)")
	cmd.Flags().StringVar(&f.StateFile, "state-file", "", "the run's state file (default .rbook/<playbook-name>.playbook.state.json)")
	cmd.Flags().StringVar(&f.Epic, "epic", "", "task epic the run belongs to (playbook_runs.epic_id)")
	cmd.Flags().StringVar(&f.Session, "session", "", "session the run belongs to (playbook_runs.session_id)")
	cmd.Flags().StringVar(&f.Policy, "policy", "", "auto-pass policy rules (YAML) for the embedded control plane or --control-plane off (default: the built-in rules)")
	cmd.Flags().BoolVar(&f.PolicyShadow, "policy-shadow", false, "record what the auto-pass policy would decide, but let a person decide every approval")
	cmd.Flags().StringArrayVar(&f.RerunNodes, "rerun-node", nil, "resume: run this node in unknown state again (repeatable)")
	cmd.Flags().StringArrayVar(&f.SkipNodes, "skip-node", nil, "resume: go on as if this node in unknown state had been skipped (repeatable)")
	cmd.Flags().StringVar(&f.templates, "templates", "", "folder whose templates/*.md override the built-in report templates")
	addSharedExecutorFlags(cmd, &f.runFlags, "mcpServers JSON for agentic nodes (default <playbook folder>/<playbook base>.mcp.json)")
	cmd.Flags().StringVar(&f.githubEnv, "github-environment", "", "GitHub environment the run's approval nodes are bound to, reported with each gate (default $RBOOK_GITHUB_ENVIRONMENT)")
	return cmd
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
	plan, err := pipeline.LoadPlaybook(file, "nothing was run or recorded.")
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	for _, w := range playbookWarnings(plan) {
		fmt.Fprintln(errw, w)
	}
	if err := f.CheckConcurrency(); err != nil {
		return pipeline.Options{}, abort("%v", err)
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
	execs, closeExecs, ds := pipeline.PlaybookExecutors(plan, file, f.mcpConfig, errw)
	if len(ds) > 0 {
		return pipeline.Options{}, setupRefused(ds, "rbook playbook validate "+file)
	}
	return pipeline.Options{Config: cfg, Plan: plan, Name: plan.Name, Again: "rbook playbook run " + file, GitHubEnv: f.githubEnv,
		Playbook: pb, Renderer: rend, Terminal: runTerminal{v, errw}, Err: errw, Signals: signalsTo(errw),
		Executors: execs, Close: closeExecs}, nil
}

// playbook is the playbook part of the Options: the auto-pass policy (the embedded control
// plane's or this process's, never a separate control plane's), the state file and the inputs.
func (f playbookFlags) playbook(plan *runbook.Plan, file string, cfg pipeline.Config, errw io.Writer) (*pipeline.Playbook, error) {
	external, err := f.External(cfg)
	if err != nil {
		return nil, abort("%v", err)
	}
	var localPolicy *approval.Policy
	if !external { // the rules of --policy FILE, then the defaults, as rbook serve --playbook-policy FILE
		if localPolicy, err = approval.LoadPlaybookPolicy(f.Policy); err != nil {
			return nil, abort("--policy: %v", err)
		}
	}
	plan.StateFilePath = f.StatePath(plan)
	inputs, err := f.PlaybookInputs(plan)
	if err != nil {
		return nil, abort("%v", err)
	}
	if !external && !f.PolicyShadow { // a separate control plane's policy is not known here
		for _, d := range autoPassWarnings(plan, file, localPolicy, inputs) {
			fmt.Fprintln(errw, "warning: "+d.String())
		}
	}
	pb := f.Playbook(file, inputs, f.mcpConfig)
	if localPolicy != nil {
		pb.Policy = planview.PolicyGate(localPolicy)
	}
	pb.StartEmbedded = func(ctx context.Context, errw io.Writer) (string, func(), error) {
		return startEmbeddedWith(ctx, errw, embeddedPolicy{policy: localPolicy, shadow: f.PolicyShadow})
	}
	return pb, nil
}
