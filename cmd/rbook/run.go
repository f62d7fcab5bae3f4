package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github/runner"
	"github.com/rbookhq/rbook-action/action/report"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/controlplane/embedded"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// common holds the flags every runbook verb shares.
type common struct {
	dir, templates, rules string
	// defaulted is the command path ("rbook status") when no RUNBOOK was given and the
	// default, prod, is used; "" when the user named one (see runbookArg).
	defaulted string
}

func (c *common) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.dir, "dir", "runbooks", "folder that holds <runbook>.yaml, its values and MCP config")
	cmd.Flags().StringVar(&c.templates, "templates", "", "folder whose templates/*.md and prompts/*.md override the built-in ones")
	cmd.Flags().StringVar(&c.rules, "rules", "", "rules.yaml to validate steps against instead of the built-in one")
}

// runbookArg is the optional RUNBOOK argument; the default is prod. It notes in
// c.defaulted that prod was not named, so loadPlan can say so when prod cannot be loaded.
func (c *common) runbookArg(cmd *cobra.Command, args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	c.defaulted = cmd.CommandPath()
	return "prod"
}

// loadPlan loads a runbook, printing the ABORT line (docs/spec/runbooks.md) and every diagnostic on failure.
func (c *common) loadPlan(name string) (*runbook.Plan, error) {
	plan, err := runbook.Load(runbook.LoadOptions{Dir: c.dir, Name: name, RulesPath: c.rules})
	if err == nil {
		return plan, nil
	}
	// Only a runbook that does not load is looked at as a playbook: a loaded one has steps,
	// and the file is not read and parsed a second time on every run.
	if err := playbookGiven(c.dir, name, "run"); err != nil {
		return nil, err
	}
	var le *runbook.LoadError
	if !errors.As(err, &le) {
		return nil, abort("%v", err)
	}
	msg := le.Abort
	if le.Next != "" {
		msg += "\n" + le.Next
	}
	for _, d := range le.Diagnostics {
		if msg != "" {
			msg += "\n"
		}
		msg += d.String()
	}
	if c.defaulted != "" {
		// A new user who ran the demo and then types 'rbook status' gets prod's ABORT line:
		// say why prod, and how to name the runbook.
		msg += fmt.Sprintf("\n(No RUNBOOK was given, so %s used the default, prod; name the runbook to use another, e.g. '%s demo'.)", c.defaulted, c.defaulted)
	}
	return nil, abort("%s", msg)
}

type runFlags struct {
	common
	stepIndex    int
	allowEdited  bool
	mcpConfig    string
	controlPlane string
	cpTimeout    time.Duration
	takeOver     bool
	lease        time.Duration
	// output is -o (text or json) and report is --report FILE.
	output, report string
	// gateMode is --gate-mode and githubEnv --github-environment (docs/approvals.md, "Pause mode");
	// resume is set by `rbook resume` (--run-id, "" for the newest paused run).
	gateMode, githubEnv string
	resume              *string
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:     "run [RUNBOOK]",
		Aliases: []string{"execute"},
		Short:   "Run (or resume) a runbook: rbook run demo",
		Long: `Run runbooks/<RUNBOOK>.yaml (default: prod) step by step.

Each step's status is printed as it finishes; a confirm step waits for you to type yes
(continue), no (fail the gate; its on_fail applies) or cancel (cancel the run). State is
written to the runbook's state_file_path after every step, so running the same command
again after a crash resumes where it stopped. The evidence pack is written as JSON next to
the state file.

On a terminal, each step is one line (step n of N, name, type, status, duration), a gate is
a box, and the run ends with a summary that says where the evidence pack is. When stdout
is not a terminal, stdout gets the Markdown: each step's status, the report ("# Runbook
Execution Report") and the evidence pack, as in: rbook run demo > report.md
--report FILE also writes the Markdown report to FILE; -o json prints only the final
result (the state file's fields, message, file paths, exit_code) as JSON on stdout.
Colour is used only on a terminal, and never with NO_COLOR set.

` + exitCodesHelp,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var idx *int
			if cmd.Flags().Changed("step-index") {
				idx = &f.stepIndex
			}
			return runRunbook(cmd, f.runbookArg(cmd, args), f, idx)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&f.stepIndex, "step-index", 0, "start (or resume) at this 0-based step index")
	cmd.Flags().BoolVar(&f.allowEdited, "allow-edited-runbook", false, "resume even though the runbook or its values changed since the run started")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "control plane URL to report to, or several separated by commas (replicas: the next is used when one does not answer) (default $RBOOK_CONTROL_PLANE; unset: start an embedded one; \"off\": none)")
	cmd.Flags().BoolVar(&f.takeOver, "take-over", false, "resume a run that another executor owns on the control plane, once its lease expired")
	addExecutorFlags(cmd, &f)
	return cmd
}

func currentUser() string {
	if a := os.Getenv("GITHUB_ACTOR"); a != "" {
		return a
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

// handleSignals turns SIGINT, SIGTERM and SIGHUP into Interrupted, and SIGUSR1 with a cancel
// request file into a confirmed cancel (`rbook cancel` of a live run). On Windows,
// Ctrl-C/Ctrl-Break and console close interrupt, and the cancel request file is polled for
// (signals_windows.go). The returned func stops it.
func handleSignals(ctx context.Context, cancel context.CancelCauseFunc, statePath string, errw io.Writer) func() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, runSignals...)
	done := make(chan struct{})
	watchCancelRequests(statePath, ch, done)
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-ch:
				if s == cancelSignal {
					p := pipeline.CancelRequestPath(statePath)
					data, err := os.ReadFile(p)
					var req pipeline.CancelRequest
					if err != nil || json.Unmarshal(data, &req) != nil {
						continue
					}
					os.Remove(p)
					fmt.Fprintf(errw, "Cancel requested by %s: cancelling the run…\n", req.By)
					cancel(engine.CancelRequest{By: req.By})
					continue
				}
				name := signalNames[s]
				if ctx.Err() == nil {
					fmt.Fprintf(errw, "Received %s: stopping the run and recording it…\n", name)
				}
				cancel(engine.Interrupted{Signal: name})
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// terminalGate is the terminal side of a run's approvals (runbook gates and playbook approval
// nodes alike): who runs it (currentUser), why stdin cannot answer ("" when it can,
// noInputReason), the stdin line reader, whether stdin is a terminal (its answers are echoed),
// and the TerminalGate asking on errw (boxed by the view when v.gateBox).
func terminalGate(v *view, errw io.Writer) (who, noInput string, lines *steps.Lines, interactive bool, tg *steps.TerminalGate) {
	who = currentUser()
	noInput = noInputReason(os.Stdin)
	lines = steps.NewLines(os.Stdin)
	interactive = term.IsTerminal(int(os.Stdin.Fd()))
	tg = &steps.TerminalGate{In: lines, Out: errw, Who: who, Echoed: interactive}
	if v.gateBox {
		tg.Render = v.renderGate
	}
	return who, noInput, lines, interactive, tg
}

// runRunbook runs (or resumes) runbook name on the run pipeline (action/run): the flags
// become its Options; a second attempt (a run finished elsewhere) builds them again.
func runRunbook(cmd *cobra.Command, name string, f runFlags, stepIndex *int) error {
	build := func() (pipeline.Options, error) { return f.runbookOptions(cmd, name, stepIndex) }
	o, err := build()
	if err != nil {
		return err
	}
	o.Rebuild = build
	return fromRun(runTraced(cmd, o))
}

// runbookOptions are the pipeline's Options of a runbook run: everything that can refuse it
// is checked here or by the pipeline before the state is touched.
func (f runFlags) runbookOptions(cmd *cobra.Command, name string, stepIndex *int) (pipeline.Options, error) {
	out, errw, ci := ciStreams(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.output)
	plan, rend, err := f.loadWithReports(name)
	if err != nil {
		return pipeline.Options{}, err
	}
	cfg, cfgErr := f.config()
	v, err := newView(out, errw, terminals(out, errw), rend, plan, f.output, f.report)
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	ci.attach(v, plan)
	o := pipeline.Options{Config: cfg, Plan: plan, Name: name, Again: "rbook run " + name, StepIndex: stepIndex, AllowEdited: f.allowEdited,
		TakeOver: f.takeOver, GitHubEnv: f.githubEnv, Resume: f.resume, Renderer: rend, Terminal: runTerminal{v, errw}, Err: errw, Signals: signalsTo(errw)}
	if cfgErr != nil || stepIndex != nil && (*stepIndex < 0 || *stepIndex > len(plan.Steps)) {
		return o, nil // the pipeline refuses them before anything else
	}
	if o.GateMode, err = cfg.ResolveGateMode(f.gateMode); err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	execs, closeExecs, err := executors(plan, name, f.dir, f.mcpConfig)
	if err != nil {
		return pipeline.Options{}, abort("%v", err)
	}
	o.Executors, o.Close = execs, closeExecs
	return o, nil
}

// config is the run's configuration from the flags and the environment, resolved once.
func (f *runFlags) config() (pipeline.Config, error) {
	c := pipeline.Config{Timeout: f.cpTimeout, Lease: f.lease, Auth: cpAuthConfig(), Embedded: embeddedControlPlane()}
	err := c.Resolve(f.controlPlane)
	return c, err
}

// deliveryConfig is the configuration of a verb that delivers an outbox (status, cancel, the
// post step): its --control-plane and --control-plane-timeout.
func deliveryConfig(flag string, timeout time.Duration) *pipeline.Config {
	c := &pipeline.Config{Timeout: timeout, Auth: cpAuthConfig(), Embedded: embeddedControlPlane()}
	c.Resolve(flag) // an invalid value matters only when the state file names no control plane: Config.OutboxTarget
	return c
}

// embeddedControlPlane is this folder's embedded control plane, for the pipeline.
func embeddedControlPlane() *pipeline.Embedded {
	return &pipeline.Embedded{Start: startEmbedded, URLFile: embeddedURLFile, DB: embedded.DB}
}

// signalsTo is handleSignals for the pipeline, with its lines on errw.
func signalsTo(errw io.Writer) func(context.Context, context.CancelCauseFunc, string) func() {
	return func(ctx context.Context, cancel context.CancelCauseFunc, statePath string) func() {
		return handleSignals(ctx, cancel, statePath, errw)
	}
}

// fromRun is the pipeline's error as the CLI's: its exit code and message.
func fromRun(err error) error {
	var re *pipeline.ExitError
	if errors.As(err, &re) {
		return &exitError{code: re.Code, msg: re.Msg}
	}
	return err
}

// runTerminal is the CLI's side of a run for the pipeline: the view (render.go) and its
// runner output (ci_output.go).
type runTerminal struct {
	*view
	errw io.Writer
}

func (t runTerminal) Lines() io.Writer              { return t.lines() }
func (t runTerminal) SetRunStart(startedUTC string) { t.setRunStart(startedUTC) }
func (t runTerminal) SetHints(resume, cancel string) {
	t.resumeCmd, t.cancelCmd = resume, cancel
}
func (t runTerminal) HumanNeeded(runID string, req engine.GateRequest) { t.humanNeeded(runID, req) }
func (t runTerminal) TerminalGate() (string, string, *steps.Lines, bool, *steps.TerminalGate) {
	return terminalGate(t.view, t.errw)
}
func (t runTerminal) Runner() pipeline.RunnerGates {
	if t.ci == nil {
		return nil // not a typed nil: the pipeline composes no runner output outside a runner
	}
	return t.ci.Output
}
func (t runTerminal) CancelPrompt(md string) string { return termui.PromptFor(t.errw, md) }
func (t runTerminal) VoteNotices() (func(*rbookv1.Approval, string, time.Time), func(*rbookv1.Approval)) {
	return runner.VoteNotices(t.errw)
}
func (t runTerminal) StartErrorHint(err error, url string) error { return startErrorHint(err, url) }
func (t runTerminal) WarnUnanswerable(plan *runbook.Plan, from int, noInput, cpURL string) {
	termui.WarnUnanswerableGates(t.errw, plan, from, noInput, cpURL)
}
func (t runTerminal) WarnLeftBehind(st *state.State, name string) {
	termui.WarnControlPlaneLeftBehind(t.errw, st, name, embedded.DB)
}
func (t runTerminal) Halted(st *state.State, err error)   { t.halted(st, err) }
func (t runTerminal) Attested(a pipeline.AttestationFile) { t.attestation = a }
func (t runTerminal) Finish(name string, st *state.State, res engine.Result, evPath string) error {
	return t.finish(name, st, res, evPath)
}

// Paused prints how to continue a paused run (as JSON too with -o json) and writes the
// runner's outputs.
func (t runTerminal) Paused(st *state.State, msg string, pe *cpclient.PausedError, cpURL string) {
	if t.mode == modeJSON {
		t.printJSON(st, msg, "", exitCompleted)
	}
	fmt.Fprintln(t.errw, msg)
	if t.ci != nil {
		t.ci.PublishPaused(st, pe, cpURL)
	}
}

// gatePrompt is pipeline.GatePrompt.
func gatePrompt(rend *report.Renderer) func(runbook.Step, engine.RunContext) string {
	return pipeline.GatePrompt(rend)
}
