package main

// rbook playbook run (issue 9, items 2, 4 and 8): load and validate a .cantbook and its
// inputs (refused before anything is recorded), then run it on the one engine with the same
// recorders (state file with outbox, control plane — the embedded one by default), the same
// gates (terminal, control plane, GitHub) and the same report and evidence as rbook run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"gopkg.in/yaml.v3"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
)

// MaxInputsFileBytes caps an --inputs file (1 MiB, the playbook's own limit).
const MaxInputsFileBytes = 1 << 20

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

// givenInputs reads --inputs FILE and then --input NAME=VALUE (which win) into the map
// runbook.ValidatePlaybookInputs takes. Errors name the flag, the file and line, or the entry.
func givenInputs(f playbookFlags) (map[string]string, error) {
	given := map[string]string{}
	if f.inputsFile != "" {
		fi, err := os.Stat(f.inputsFile)
		if err != nil {
			return nil, fmt.Errorf("--inputs %s: %w", f.inputsFile, err)
		}
		if fi.Size() > MaxInputsFileBytes {
			return nil, fmt.Errorf("--inputs %s: %d bytes is over the limit of %d", f.inputsFile, fi.Size(), MaxInputsFileBytes)
		}
		data, err := os.ReadFile(f.inputsFile)
		if err != nil {
			return nil, fmt.Errorf("--inputs %s: %w", f.inputsFile, err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("--inputs %s: %v", f.inputsFile, err)
		}
		if len(doc.Content) > 0 {
			m := doc.Content[0]
			if m.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s:%d:%d: --inputs must be a mapping of input names to values", f.inputsFile, m.Line, m.Column)
			}
			for i := 0; i+1 < len(m.Content); i += 2 {
				k, v := m.Content[i], m.Content[i+1]
				if k.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s:%d:%d: --inputs: an input name must be a plain string", f.inputsFile, k.Line, k.Column)
				}
				if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
					return nil, fmt.Errorf("%s:%d:%d: %s: an input value must be a string, number or boolean", f.inputsFile, v.Line, v.Column, k.Value)
				}
				if _, dup := given[k.Value]; dup {
					return nil, fmt.Errorf("%s:%d:%d: %s: the input is given twice", f.inputsFile, k.Line, k.Column, k.Value)
				}
				given[k.Value] = v.Value
			}
		}
	}
	flagged := map[string]bool{}
	for _, kv := range f.inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--input %q: write NAME=VALUE", kv)
		}
		// The same input twice on the command line is refused as in an --inputs file (the
		// last one used to win silently; TestIssue9_Break_DuplicateInputFlagRefused).
		if flagged[k] {
			return nil, fmt.Errorf("--input %s: the input is given twice; give each input once", k)
		}
		flagged[k] = true
		given[k] = v
	}
	return given, nil
}

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

// runPlaybook runs (or resumes) the playbook in file: runPlaybookOnce, started once more when
// the state file's unfinished run was finished elsewhere and closed with the control plane's
// record (errStartAgain), as `rbook run` does.
func runPlaybook(cmd *cobra.Command, file string, f playbookFlags) error {
	err := runPlaybookOnce(cmd, file, f)
	if errors.Is(err, errStartAgain) {
		err = runPlaybookOnce(cmd, file, f)
	}
	return err
}

// runPlaybookOnce is one attempt of runPlaybook.
func runPlaybookOnce(cmd *cobra.Command, file string, f playbookFlags) error {
	out, errw, ci := ciStreams(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.output)
	// Everything that can refuse the run is checked before anything is recorded.
	plan, err := runbook.LoadPlaybook(file)
	if err != nil {
		var b strings.Builder
		n := printPlaybookParseError(&b, file, err)
		return abort("%s%s has %d issue(s); nothing was run or recorded.", b.String(), file, n)
	}
	for _, w := range playbookWarnings(plan) {
		fmt.Fprintln(errw, w)
	}
	if f.concurrency < 1 || f.concurrency > MaxConcurrency {
		return abort("--concurrency %d: use 1..%d", f.concurrency, MaxConcurrency)
	}
	if err := checkCPURLs(cpURLFrom(f.controlPlane)); err != nil {
		return abort("%v", err)
	}
	cpGiven, _ := cpURLFrom(f.controlPlane)
	external := cpGiven != "" && cpGiven != "off"
	if external && (f.policy != "" || f.policyShadow) {
		return abort("--policy and --policy-shadow are for the embedded control plane and --control-plane off; the control plane %s decides auto-passes with its own policy (rbook serve --playbook-policy FILE --policy-shadow)", cpGiven)
	}
	var localPolicy *approval.Policy
	if !external {
		if localPolicy, err = loadPlaybookPolicy(f); err != nil {
			return abort("%v", err)
		}
	}
	given, err := givenInputs(f)
	if err != nil {
		return abort("%v", err)
	}
	statePath := playbookStatePath(f, plan)
	plan.StateFilePath = statePath
	// A run to resume keeps the inputs it started with: they need not be given again.
	var inputs map[string]any
	if prev, rerr := state.Read(statePath); rerr == nil && prev.Kind == state.KindPlaybook && prev.RunStatus == engine.RunInProgress &&
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
			return abort("%v\nNothing was run or recorded.", err)
		}
	}
	bindingsJSON, err := json.Marshal(inputs)
	if err != nil {
		return abort("inputs: %v", err)
	}
	if !external && !f.policyShadow { // a separate control plane's policy is not known here
		for _, d := range autoPassWarnings(plan, file, localPolicy, inputs) {
			fmt.Fprintln(errw, "warning: "+d.String())
		}
	}
	rend, err := report.New(f.templates)
	if err != nil {
		return abort("%v", err)
	}
	v, err := newView(out, errw, terminals(out, errw), rend, plan, f.output, f.report)
	if err != nil {
		return abort("%v", err)
	}
	v.resumeCmd = playbookResumeCmd(file, statePath, f, plan.Name)
	ci.attach(v, plan)
	execs, closeExecs, err := playbookExecutors(plan, file, f.mcpConfig, errw)
	if err != nil {
		return abort("%v", err)
	}
	defer closeExecs()

	lock, err := state.Acquire(statePath, "run")
	if err != nil {
		return abort("%v", err)
	}
	defer lock.Discard() // a start refused before its first record leaves no lock file or folder
	if err := deliverFinalFirst(cmd.Context(), statePath, f.controlPlane, f.cpTimeout, errw, plan.Name); err != nil {
		return err
	}
	opened, err := state.OpenPlaybook(plan, statePath, state.PlaybookOpenOptions{
		Lock: lock, Inputs: inputs, RerunNodes: f.rerunNodes, SkipNodes: f.skipNodes,
		PlaybookPath: file, EpicID: f.epic, SessionID: f.session,
	})
	if err != nil {
		return abort("%v", err)
	}
	st := opened.State
	inputs = st.Inputs
	v.setRunStart(st.StartedUTC)
	if opened.Resumed {
		done := map[string]bool{}
		for _, e := range st.EvidencePack {
			done[e.StepName] = true
		}
		fmt.Fprintf(v.lines(), "RESUMING run %s: %d of %d nodes already recorded; none of them runs again.\n", st.RunID, len(done), len(plan.Steps))
	}

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	stopSignals := handleSignals(ctx, cancel, statePath, errw)
	defer stopSignals()

	fileRec := &state.FileRecorder{Path: statePath, State: st}
	drainCP := func(context.Context) error { return nil }
	recorders := []engine.Recorder{fileRec}
	who, noInput, lines, interactive, tg := terminalGate(v, errw)
	var gate engine.Gate = tg
	// The run is paused only when an approval node waits for a person (not when the
	// auto-pass policy passes it): the gates say so through human.
	human := func(req engine.GateRequest) { v.humanNeeded(st.RunID, req) }
	givenCP := f.controlPlane
	f.controlPlane = stateCPFlag(f.controlPlane, opened.Resumed, st, errw)
	cpURL, embedded, stopCP, err := playbookControlPlane(ctx, f, localPolicy, errw)
	if err != nil {
		return abort("%v", err)
	}
	defer stopCP()
	if cpURL != "" && !embedded {
		f.controlPlane = cpURL // the resume hint names it (issue 10, new-user finding 1)
	}
	v.resumeCmd = playbookResumeCmd(file, statePath, f, plan.Name)
	v.cancelCmd = playbookEndHint(st.RunID, statePath, cpURL, embedded)
	stopLease := func() {}
	defer func() { stopLease() }()
	if cpURL != "" {
		c, cpRec, err := cpRecorder(cpURL, embedded, f.cpTimeout, fileRec, cancel)
		if err != nil {
			return abort("%v", err)
		}
		started, err := startPlaybookOnControlPlane(ctx, c, plan, opened, f, who, string(bindingsJSON))
		if errors.Is(err, errFinalThere) {
			return finishedElsewhere(ctx, c, plan, st, false, errw)
		}
		if err != nil {
			return startHalted(ctx, haltedBeforeStart(startErrorHint(err, cpURL), statePath))
		}
		if err := cpRec.Flush(ctx, st.Outbox); err != nil {
			return startHalted(ctx, haltedBeforeStart(err, statePath))
		}
		stopLease = keepLease(ctx, c, st.RunID, started.Lease, cancel)
		v.cancelCmd = playbookEndHint(st.RunID, statePath, cpURL, embedded)
		_, from := cpURLFrom(givenCP)
		noteCPRelink(errw, st, opened.Resumed, cpURL, embedded, from)
		st.ControlPlane, st.ControlPlaneEmbedded, fileRec.KeepOutbox = cpURL, embedded, true
		recorders = append(recorders, cpRec)
		opened.State.Seq = max(st.Seq, started.LastSeq)
		gate = &humanNoticeGate{human: human, cp: &cpclient.Gate{C: c, Local: ci.local(tg, gate, interactive, noInput), Who: who, Announce: playbookAnnouncer(errw, cpURL, embedded), Cancelled: cpRec.Cancelled, Drain: cpRec.Drain,
			Notice: func(m string) { fmt.Fprintln(errw, m) }, GitHub: reportedWorkflowRun(f.githubEnvironment())}}
		drainCP = cpRec.Drain
	} else {
		tg.NoAnswer = noInput
		// No control plane: the auto-pass policy is evaluated here, before the terminal is asked.
		gate = &localPolicyGate{policy: localPolicy, shadow: f.policyShadow, next: tg, human: human}
	}
	gate = ci.gate(gate, cpURL, embedded)
	eng := &engine.Engine{
		Plan: plan, Executors: execs, Gate: gate, Recorders: append(recorders, v, handlerLines{w: v.lines()}),
		Concurrency: f.concurrency, WorkDir: ".",
		// "cancel" typed at an approval node's terminal prompt cancels the run once confirmed
		// (seed Step 8.3's confirmation; without it the gate would only ask again).
		ConfirmCancel: steps.ConfirmCancel(lines, errw, func(string) string {
			return fmt.Sprintf("Cancel playbook run %s? It ends cancelled and no further node starts.", st.RunID)
		}),
	}
	start := engine.Start{RunID: st.RunID, Seq: st.Seq, Fresh: !opened.Resumed, Evidence: st.EvidencePack, Bindings: inputs}
	if len(opened.SkipNodes) > 0 {
		// The operator's --skip-node answers are recorded first, by every recorder, as the
		// engine records a node a when branch skipped; the engine then goes on after them.
		seq, err := recordSkippedNodes(ctx, recorders, v, plan, st, opened.SkipNodes, who)
		if err != nil {
			return abort("%v", err)
		}
		start.Seq, start.Evidence = seq, st.EvidencePack
	}
	fmt.Fprintf(errw, "Run %s · playbook %s (%s) · %d nodes · state %s\n", st.RunID, plan.Name, file, len(plan.Steps), statePath)
	if err := opened.KeepPrevious(); err != nil {
		return abort("%v", err)
	}
	if opened.PrevPath != "" && !opened.Resumed {
		fmt.Fprintf(errw, "The previous run is final; its state is kept as %s.\n", opened.PrevPath)
	}
	res, err := eng.Run(ctx, start)
	return endRun(ctx, v, errw, fileRec, drainCP, plan, st, plan.Name, "rbook playbook run "+file, res, err)
}

// playbookControlPlane is controlPlaneURL for a playbook: an embedded control plane decides
// auto-passes with pol (and shadow).
func playbookControlPlane(ctx context.Context, f playbookFlags, pol *approval.Policy, errw io.Writer) (string, bool, func(), error) {
	u, _ := cpURLFrom(f.controlPlane)
	if u == "" {
		url, stop, err := startEmbeddedWith(ctx, errw, embeddedPolicy{policy: pol, shadow: f.policyShadow})
		return url, true, stop, err
	}
	return controlPlaneURL(ctx, f.controlPlane, errw)
}

// startPlaybookOnControlPlane is startOnControlPlane for a playbook run: kind
// RUN_KIND_PLAYBOOK, the inputs as its first bindings, its epic and session.
func startPlaybookOnControlPlane(ctx context.Context, c *cpclient.Client, plan *runbook.Plan, opened *state.Opened, f playbookFlags, who, bindings string) (cpclient.Started, error) {
	st := opened.State
	runPlan := cpclient.PlanOf(plan)
	for range 1000 {
		started, err := c.StartRun(ctx, cpclient.RunInfo{
			RunID: st.RunID, RunbookName: plan.Name, PlanDigest: plan.ContentHash, SchemaHash8: plan.SchemaHash8,
			StartedBy: who, TotalSteps: len(plan.Steps), StartedAt: startedAt(st), OwnerID: st.OwnerID,
			Lease: f.lease, Reported: reportedWorkflowRun(""), Plan: runPlan,
			Kind: rbookv1.RunKind_RUN_KIND_PLAYBOOK, Bindings: bindings, EpicID: st.EpicID, SessionID: st.SessionID,
		})
		taken := errors.Is(err, cpclient.ErrRunFinal) || errors.Is(err, cpclient.ErrRunOwned) ||
			err == nil && !started.Created && started.LastSeq > 0
		switch {
		case !opened.Resumed && taken:
			st.RunID = opened.NextFreeRunID(st.RunID)
			continue
		case errors.Is(err, cpclient.ErrRunFinal):
			return started, fmt.Errorf("run %s on the control plane %s: %w", st.RunID, c.URL, errFinalThere)
		case errors.Is(err, cpclient.ErrRunOwned):
			return started, fmt.Errorf("%v\nThis state file's executor does not own run %s any more", err, st.RunID)
		case err != nil:
			return started, err
		}
		st.LeaseEpoch = started.Epoch
		return started, nil
	}
	return cpclient.Started{}, fmt.Errorf("no free run id after %s", st.RunID)
}

// playbookAnnouncer prints how to decide an open approval node: `rbook playbook approve
// <TOKEN>` on a terminal or with RBOOK_SHOW_TOKEN=1, else only the approval id (the token is
// a secret; the same rule as announcer for runbook gates).
//
// The printed command names the control plane (--control-plane URL) when it is a separate
// one; the embedded one's address changes with every run, so the line says instead that the
// command works from this folder while this run waits (issue 9 UX, item 3).
func playbookAnnouncer(errw io.Writer, url string, embedded bool) func(a *rbookv1.Approval, token string) {
	target := " --control-plane " + url
	where := "From another terminal"
	if embedded {
		target = ""
		where = "From another terminal in this folder, while this run waits (the embedded control plane ends with this process)"
	}
	interactive := showApprovalToken()
	return func(a *rbookv1.Approval, token string) {
		defer printInputsHint(errw, a)
		defer fmt.Fprint(errw, cpclient.PushBackHint(a))
		defer printPageLink(errw, a)
		id := a.GetApprovalId()
		if interactive {
			if embedded {
				fmt.Fprintf(errw, "Approval %s is open on %s. %s:\n  rbook playbook approve %s\n  rbook playbook reject %s\nor with its token:\n  rbook playbook approve %s\n  rbook playbook reject %s\n", id, url, where, id, id, token, token)
				return
			}
			fmt.Fprintf(errw, "Approval %s is open on %s. %s:\n  rbook playbook approve %s%s\n  rbook playbook reject %s%s\n", id, url, where, token, target, token, target)
			return
		}
		if embedded {
			fmt.Fprintf(errw, "Approval %s is open on the embedded control plane %s; decide it from another terminal in this folder with: rbook playbook approve %s (its token is a secret and is not printed here).\n", id, url, id)
			return
		}
		fmt.Fprintf(errw, "Approval %s is open on the control plane %s (its token is a secret and is not printed here: %s); decide it with: rbook approve %s --control-plane %s\n", id, url, seeTokenHint, id, url)
	}
}

// showApprovalToken reports whether an open gate's token may be printed: with
// RBOOK_SHOW_TOKEN=1, else only on a terminal outside CI. CI is GITHUB_ACTIONS=true or CI set
// to anything but "" / "false" / "0" (most CI systems set CI=true; a CI job with a
// pseudo-terminal used to get the token printed into its log; found by
// TestIssue9_Break_TokenNotPrintedOnACITerminal).
func showApprovalToken() bool {
	if showToken() {
		return true
	}
	ci := os.Getenv("CI")
	inCI := os.Getenv("GITHUB_ACTIONS") == "true" || ci != "" && ci != "false" && ci != "0"
	return !inCI && term.IsTerminal(int(os.Stderr.Fd()))
}

// playbookExecutors wires the playbook node executors (issue 9, item 3): deterministic nodes
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
	if !hasAgentic(plan) {
		return execs, func() {}, nil
	}
	cfg, ds := playbookMCPConfig(plan, file, mcpConfig)
	if len(ds) > 0 {
		return nil, nil, setupRefused(ds, "rbook playbook validate "+file)
	}
	pool := mcp.NewPool(cfg)
	execs[runbook.TypeAgentic] = steps.Agentic{Pool: pool}
	return execs, func() { _ = pool.Close() }, nil
}

// recordSkippedNodes records each --skip-node answer as a SKIPPED step_finished of that node,
// through every recorder and the view, and returns the last seq. The output starts with
// engine.WhenSkippedPrefix ("skipped: when resumed, by …"): a node skipped that way counts as
// done for its dependants, which is what "go on after it" means (the runbook rule of
// --step-index past a step in unknown state); its output is no binding.
func recordSkippedNodes(ctx context.Context, recorders []engine.Recorder, v *view, plan *runbook.Plan, st *state.State, ids []string, who string) (int64, error) {
	seq := st.Seq
	for _, id := range ids {
		idx := slices.IndexFunc(plan.Steps, func(s runbook.Step) bool { return s.Name == id })
		if idx < 0 {
			return seq, fmt.Errorf("--skip-node %s: the playbook has no such node", id)
		}
		s := plan.Steps[idx]
		seq++
		ev := engine.Evidence{StepName: s.Name, Type: string(s.Type), Output: fmt.Sprintf("%sresumed, by %s with --skip-node: its outcome was never recorded, so it may or may not have taken effect; check it by hand", engine.WhenSkippedPrefix, who),
			Status: engine.StatusSkipped, TimestampUTC: engine.FormatTime(timeNow())}
		t := engine.Transition{RunID: st.RunID, Seq: seq, Kind: engine.TransitionStepFinished, Time: timeNow(), StepIndex: idx, StepName: s.Name, StepType: string(s.Type), Evidence: &ev, RunStatus: engine.RunInProgress}
		for _, r := range append(slices.Clone(recorders), v) {
			if err := r.Record(context.WithoutCancel(ctx), t); err != nil {
				return seq, err
			}
		}
	}
	return seq, nil
}

// printInputsHint lists the approver-input form of an open approval, one field a line as the
// terminal asks for it (steps.FieldPrompt), and how to give the values with rbook approve
// (docs/approver-inputs.md); nothing for a gate without a form.
func printInputsHint(w io.Writer, a *rbookv1.Approval) {
	fields := inputspb.FromProto(a.GetInputs())
	if len(fields) == 0 {
		return
	}
	fmt.Fprintln(w, "The approver gives these inputs with the approval (--input NAME=VALUE, once per field):")
	for _, f := range fields {
		fmt.Fprintln(w, "  "+strings.TrimSuffix(steps.FieldPrompt(f), ": "))
	}
}
