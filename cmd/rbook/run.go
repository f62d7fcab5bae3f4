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
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
)

// common holds the flags every runbook verb shares.
type common struct {
	dir, templates, rules string
	// defaulted is the command path ("rbook status") when no RUNBOOK was given and the
	// seed's default, prod, is used; "" when the user named one (see runbookArg).
	defaulted string
}

func (c *common) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.dir, "dir", "runbooks", "folder that holds <runbook>.yaml, its values and MCP config")
	cmd.Flags().StringVar(&c.templates, "templates", "", "folder whose templates/*.md and prompts/*.md override the built-in ones")
	cmd.Flags().StringVar(&c.rules, "rules", "", "rules.yaml to validate steps against instead of the built-in one")
}

// runbookArg is the optional RUNBOOK argument; the seed's default is prod. It notes in
// c.defaulted that prod was not named, so loadPlan can say so when prod cannot be loaded.
func (c *common) runbookArg(cmd *cobra.Command, args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	c.defaulted = cmd.CommandPath()
	return "prod"
}

// loadPlan loads a runbook, printing the seed's ABORT line and every diagnostic on failure.
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
		// say why prod, and how to name the runbook (found trying the README as a new user).
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
	// output is -o (text or json) and report is --report FILE (issue 6, item 3.2).
	output, report string
	// gateMode is --gate-mode and githubEnv --github-environment (issue 8, item 4 and
	// Interface; pause.go); resume is set by `rbook resume`.
	gateMode, githubEnv string
	resume              *resumeTarget
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

// runRunbook runs (or resumes) runbook name: runRunbookOnce, started once more when the state
// file's unfinished run turned out to be finished elsewhere and was closed with the control
// plane's record (errStartAgain): the command then starts a new run, as it would after any
// final run.
func runRunbook(cmd *cobra.Command, name string, f runFlags, stepIndex *int) error {
	err := runRunbookOnce(cmd, name, f, stepIndex)
	if errors.Is(err, errStartAgain) {
		err = runRunbookOnce(cmd, name, f, stepIndex)
	}
	return err
}

// runRunbookOnce is one attempt of runRunbook: everything that can refuse the run is checked
// before the state folder is touched, then the run is started or resumed under the lock.
func runRunbookOnce(cmd *cobra.Command, name string, f runFlags, stepIndex *int) error {
	out, errw, ci := ciStreams(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.output)
	plan, rend, err := f.loadWithReports(name)
	if err != nil {
		return err
	}
	if stepIndex != nil && (*stepIndex < 0 || *stepIndex > len(plan.Steps)) {
		// Refused before anything is written (a resume may start at len, after the last step).
		return abort("--step-index %d is outside 0..%d: runbook %s has %d steps (0-based)", *stepIndex, len(plan.Steps), plan.Name, len(plan.Steps))
	}
	v, err := newView(out, errw, terminals(out, errw), rend, plan, f.output, f.report)
	if err != nil {
		return abort("%v", err)
	}
	ci.attach(v, plan)
	// Everything that can refuse the run is checked before the state is touched.
	if err := checkCPURLs(cpURLFrom(f.controlPlane)); err != nil {
		return abort("%v", err)
	}
	gateMode, err := f.resolveGateMode()
	if err != nil {
		return abort("%v", err)
	}
	execs, closeExecs, err := executors(plan, name, f.dir, f.mcpConfig)
	if err != nil {
		return abort("%v", err)
	}
	defer closeExecs()
	statePath := plan.StateFilePath
	lock, err := state.Acquire(statePath, "run")
	if err != nil {
		return abort("%v", err)
	}
	defer lock.Discard() // a start refused before its first record leaves no lock file or folder
	// A final run whose last transitions never reached its control plane is delivered first:
	// the new run would move its state file (and outbox) away (issue 6, item 1.1).
	if err := deliverFinalFirst(cmd.Context(), statePath, f.controlPlane, f.cpTimeout, errw, name); err != nil {
		return err
	}
	var resumed *resumedGate
	if f.resume != nil {
		// rbook resume: the paused run is found and checked on the control plane, and its
		// state file rebuilt when there is none (issue 8, item 4).
		if resumed, err = prepareResume(cmd.Context(), f, plan, statePath, errw); err != nil {
			return err
		}
		f.takeOver = true // the paused executor released its lease: take the run at the next epoch
	}
	opened, err := state.Open(plan, statePath, state.OpenOptions{StepIndex: stepIndex, AllowEdited: f.allowEdited, Lock: lock})
	if err != nil {
		return abort("%v", err)
	}
	st := opened.State
	v.setRunStart(st.StartedUTC)

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	stopSignals := handleSignals(ctx, cancel, statePath, errw)
	defer stopSignals()

	fileRec := &state.FileRecorder{Path: statePath, State: st}
	drainCP := func(context.Context) error { return nil }
	recorders := []engine.Recorder{fileRec}
	who, noInput, lines, interactive, tg := terminalGate(v, errw)
	var gate engine.Gate = tg
	start := engine.Start{
		RunID: st.RunID, Seq: st.Seq, Index: opened.StartIndex, Fresh: !opened.Resumed,
		RollbackFor: st.RollbackFor, SkipOwedRollback: opened.SkipOwedRollback, Evidence: st.EvidencePack, LastDeployName: st.LastDeployName,
	}
	if stepIndex != nil {
		from := 0
		if opened.Resumed {
			from = st.LastCompletedStepIndex + 1
		}
		if *stepIndex > from {
			start.SkipFrom = from
			start.SkipReason = fmt.Sprintf("skipped: %s started the run at --step-index %d", who, *stepIndex)
		}
	}
	if f.takeOver && !opened.Resumed {
		return abort("--take-over continues an unfinished run, but %s holds none; restore the state file of the run to take over "+
			"(its job's artifact) into %s, or drop --take-over to start a new run", statePath, statePath)
	}
	var cpc *cpclient.Client
	stopLease := func() {}
	cpFlag := stateCPFlag(f.controlPlane, opened.Resumed, st, errw)
	cpURL, embedded, stopCP, err := controlPlaneURL(ctx, cpFlag, errw)
	if err != nil {
		return abort("%v", err)
	}
	defer stopCP()
	v.resumeCmd, v.cancelCmd = runbookHints(name, cpURL, embedded)
	if cpURL == "" && opened.Resumed {
		warnControlPlaneLeftBehind(errw, st, name)
	}
	if cpURL != "" {
		c, cpRec, err := cpRecorder(cpURL, embedded, f.cpTimeout, fileRec, cancel)
		if err != nil {
			return abort("%v", err)
		}
		started, err := startOnControlPlane(ctx, c, plan, opened, f.takeOver, f.lease, who)
		if errors.Is(err, errFinalThere) {
			return finishedElsewhere(ctx, c, plan, st, f.resume != nil, errw)
		}
		if err != nil {
			return startHalted(ctx, haltedBeforeStart(startErrorHint(err, cpURL), statePath))
		}
		if err := cpRec.Flush(ctx, st.Outbox); err != nil {
			return startHalted(ctx, haltedBeforeStart(err, statePath))
		}
		cpc = c
		stopLease = keepLease(ctx, c, st.RunID, started.Lease, cancel)
		start.RunID, start.Seq = st.RunID, max(st.Seq, started.LastSeq)
		_, from := cpURLFrom(f.controlPlane)
		noteCPRelink(errw, st, opened.Resumed, cpURL, embedded, from)
		st.ControlPlane, st.ControlPlaneEmbedded, fileRec.KeepOutbox = cpURL, embedded, true
		recorders = append(recorders, cpRec)
		opened, progress := gateVoteNotices(errw)
		gate = &cpclient.Gate{C: c, Local: ci.local(tg, gate, interactive, noInput), Who: who, Announce: announcer(errw, cpURL, embedded), Cancelled: cpRec.Cancelled, Drain: cpRec.Drain,
			Notice: func(m string) { fmt.Fprintln(errw, m) }, Pause: gateMode == gateModePause, GitHub: reportedWorkflowRun(f.githubEnvironment()),
			Opened: opened, Progress: progress}
		drainCP = cpRec.Drain
	}

	if resumed != nil {
		gate = &decidedGate{g: resumed, next: gate}
	}
	gate = ci.gate(gate, cpURL, embedded)
	eng := &engine.Engine{
		Plan:      plan,
		Executors: execs,
		// Prompts go to stderr so `rbook run demo > report.md` still shows them to the person.
		Gate:      gate,
		Recorders: append(recorders, v),
		Prompt:    gatePrompt(rend),
		ConfirmCancel: steps.ConfirmCancel(lines, errw, func(deploy string) string {
			s, err := rend.RenderCancelPrompt(st.RunID, deploy)
			if err != nil {
				return err.Error()
			}
			return promptFor(errw, s)
		}),
	}
	if opened.Resumed {
		// Said once the control plane took the run: a run it holds as final is not resumed.
		fmt.Fprintf(v.lines(), "RESUMING run %s from step index %d.\n", st.RunID, opened.StartIndex)
	}
	fmt.Fprintf(errw, "Run %s · runbook %s (%s) · %d steps · state %s\n", st.RunID, plan.Name, plan.Path, len(plan.Steps), statePath)
	if start.RollbackFor == "" {
		warnUnanswerableGates(errw, plan, start.Index, noInput, cpURL)
	}
	if cpURL == "" {
		tg.NoAnswer = noInput // the terminal is the only source, and it cannot answer
	}
	if err := opened.KeepPrevious(); err != nil {
		return abort("%v", err)
	}
	if gateMode == gateModePause {
		pauseNote(errw, plan, start.Index)
	}
	if opened.PrevPath != "" && !opened.Resumed {
		// Only now is the file there (issue 6, item 2.4).
		fmt.Fprintf(errw, "The previous run is final; its state is kept as %s.\n", opened.PrevPath)
	}
	res, err := eng.Run(ctx, start)
	if pe := (*cpclient.PausedError)(nil); errors.As(err, &pe) && cpc != nil {
		return finishPaused(ctx, v, errw, name, st, fileRec, drainCP, cpc, stopLease, pe)
	}
	return endRun(ctx, v, errw, fileRec, drainCP, plan, st, name, "rbook run "+name, res, err)
}

// endRun ends a run (runbook or playbook) after eng.Run returned res and err: the
// control-plane recorder is drained (drainCP, for at most signalDrainGrace after a signal),
// the state file synced, and the report finished under name (finishReport). Transitions a
// signal kept from the control plane stay in the outbox, and one line says that againCmd
// (e.g. "rbook run NAME") sends them first (issue 6, item 1.4). Any other error halts the run:
// exit 2, resumable by running the same command again.
func endRun(ctx context.Context, v *view, errw io.Writer, fileRec *state.FileRecorder, drainCP func(context.Context) error,
	plan *runbook.Plan, st *state.State, name, againCmd string, res engine.Result, err error) error {
	statePath := fileRec.Path
	if err == nil {
		dctx, stopDrain := drainContext(ctx)
		err = drainCP(dctx)
		stopDrain()
		var ue *cpclient.UnreachableError
		if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.As(err, &ue)) {
			// A signal stopped the run: it ends now, and what the control plane has not taken
			// in time waits in the outbox for the next run (issue 6, item 1.4). A refusal
			// (E_LEASE_LOST, …) still halts.
			fmt.Fprintf(errw, "%d transition(s) of run %s have not reached the control plane (%v); they are kept in the state file's outbox and the next '%s' sends them first.\n", fileRec.Unacked(), st.RunID, err, againCmd)
			err = nil
		}
	}
	if err == nil {
		err = fileRec.Sync()
	}
	if err != nil {
		v.halted(st, err)
		return &exitError{code: exitAborted, msg: fmt.Sprintf("%v\nRun %s halted; everything recorded is in %s. Run the same command again to resume.", err, st.RunID, statePath)}
	}
	return finishReport(v, errw, name, plan, st, res)
}

// signalDrainGrace is how long, once a signal has stopped the run, the executor still gives
// the control plane to take the transitions queued for it; the rest stays in the state file's
// outbox for the next run, so SIGTERM ends the executor within seconds even when the control
// plane is dead (issue 6, item 1.4).
const signalDrainGrace = 3 * time.Second

// drainContext is the context of the final drain of the control-plane recorder: it lasts as
// long as ctx (the run's: a signal cancels it) and signalDrainGrace after ctx ends.
func drainContext(ctx context.Context) (context.Context, func()) {
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(signalDrainGrace, cancel) })
	return d, func() { stop(); cancel() }
}

// startHalted is the error of a run that could not start on its control plane: halted,
// resumable (exit 2), or stopped by a signal before it started.
func startHalted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: exitFailed, msg: fmt.Sprintf("%v before the run was started on the control plane; nothing was run. Run the same command again to start it.", context.Cause(ctx))}
	}
	return abort("%v", err)
}

// finishReport writes the evidence pack JSON next to the state file (seed Step 9.3) and hands
// the end of the output to the view (render.go), which maps the run status to the exit code.
func finishReport(v *view, errw io.Writer, name string, plan *runbook.Plan, st *state.State, res engine.Result) error {
	evPath := writeEvidence(errw, plan, st)
	return v.finish(name, st, res, evPath)
}

// gatePrompt renders the step status with AWAITING_CONFIRMATION (seed Step 5, confirm 1).
func gatePrompt(rend *report.Renderer) func(runbook.Step, engine.RunContext) string {
	return func(step runbook.Step, rc engine.RunContext) string {
		in := "user-confirmation"
		s, err := rend.RenderStepStatus(report.StepStatus{
			RunID: rc.RunID, Number: rc.StepNumber, Count: rc.StepCount,
			Entry: engine.Evidence{StepName: step.Name, Type: string(step.Type), Input: &in, Status: engine.StatusAwaitingConfirmation, TimestampUTC: engine.FormatTime(time.Now())},
		})
		if err != nil {
			return err.Error()
		}
		return s
	}
}

// cancelRequest is what `rbook cancel` leaves for a live executor before signalling it.
type cancelRequest struct {
	By           string `json:"by"`
	RequestedUTC string `json:"requested_utc"`
}

func cancelRequestPath(statePath string) string { return statePath + ".cancel" }

// handleSignals turns SIGINT, SIGTERM and SIGHUP into Interrupted, and SIGUSR1 with a cancel
// request file into a confirmed cancel (case R07). On Windows, Ctrl-C/Ctrl-Break and
// console close interrupt, and the cancel request file is polled for (signals_windows.go;
// issue 7, item 1). The returned func stops it.
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
					p := cancelRequestPath(statePath)
					data, err := os.ReadFile(p)
					var req cancelRequest
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

// writeEvidence writes the evidence pack JSON next to the state file (seed Step 9.3) and
// returns its path, or "" (with a warning) when it could not be written. A final run's pack
// was already written by the FileRecorder before its final state (issue 6, item 1.7).
func writeEvidence(errw io.Writer, plan *runbook.Plan, st *state.State) string {
	evPath, err := state.WriteEvidence(plan.StateFilePath, st)
	if err != nil {
		fmt.Fprintf(errw, "warning: evidence pack not written to %s: %v\n", evPath, err)
		return ""
	}
	return evPath
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

// cpRecorder is the control-plane client of a run at url (embedded: the one this process
// started), with calls bounded by deadline (--cp-timeout), and the recorder that sends every
// transition to it: acknowledged ones leave fileRec's outbox, and a CancelRun seen there
// cancels the run with "the control plane (CancelRun)" as who cancelled it. Errors are
// newCPClient's.
func cpRecorder(url string, embedded bool, deadline time.Duration, fileRec *state.FileRecorder, cancel context.CancelCauseFunc) (*cpclient.Client, *cpclient.Recorder, error) {
	c, err := newCPClient(url, embedded)
	if err != nil {
		return nil, nil, err
	}
	c.Deadline = deadline
	return c, &cpclient.Recorder{C: c, Acked: fileRec.Ack, Cancelled: func() { cancel(engine.CancelRequest{By: "the control plane (CancelRun)"}) }}, nil
}

// keepLease renews the lease of run runID (lease long) on c until the returned func is called
// or ctx ends; a lost lease cancels the run, saying another executor owns it now (issue 6).
func keepLease(ctx context.Context, c *cpclient.Client, runID string, lease time.Duration, cancel context.CancelCauseFunc) func() {
	leaseCtx, endLease := context.WithCancel(ctx)
	go c.KeepLease(leaseCtx, runID, lease, func(err error) {
		cancel(fmt.Errorf("%v; another executor owns the run now, so this one stops", err))
	})
	return endLease
}
