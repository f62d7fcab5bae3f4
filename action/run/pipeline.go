package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Terminal is the person's side of a run, which the CLI implements: its progress lines (a
// Recorder), the terminal gate, the runner output, and the end of the output.
type Terminal interface {
	engine.Recorder
	// Lines is where the RESUMING line goes.
	Lines() io.Writer
	// SetRunStart is the run's start time, for "ended … after".
	SetRunStart(startedUTC string)
	// SetHints are the commands that resume and end this run, printed when it stops.
	SetHints(resume, cancel string)
	// HumanNeeded says that a playbook's approval node waits for a person.
	HumanNeeded(runID string, req engine.GateRequest)
	// TerminalGate is the terminal side of the run's approvals: who runs it, why stdin cannot
	// answer ("" when it can), the stdin line reader, whether stdin is a terminal, the gate.
	TerminalGate() (who, noInput string, lines *steps.Lines, interactive bool, tg *steps.TerminalGate)
	// Runner is the runner output's part in the gate chain (nil outside a GitHub Actions
	// runner); composeGates places it.
	Runner() RunnerGates
	// CancelPrompt is a rendered Markdown prompt as the person should read it.
	CancelPrompt(md string) string
	// VoteNotices are a control-plane gate's Opened and Progress hooks (an M-of-N gate's
	// votes as they arrive).
	VoteNotices() (opened func(*rbookv1.Approval, string, time.Time), progress func(*rbookv1.Approval))
	// StartErrorHint adds what to do next to a control plane's refusal to start the run.
	StartErrorHint(err error, url string) error
	// Warnings at the start: gates nobody can answer, and a resumed run whose control plane is
	// left behind.
	WarnUnanswerable(plan *runbook.Plan, from int, noInput, cpURL string)
	WarnLeftBehind(st *state.State, name string)
	// Halted, Paused and Finish end the output: a run halted by err; paused at a gate (msg says
	// how to continue); ended with res (the error carries the exit code).
	Halted(st *state.State, err error)
	Paused(st *state.State, msg string, pe *cpclient.PausedError, cpURL string)
	Finish(name string, st *state.State, res engine.Result, evPath string) error
	// Attested tells the output, before Finish, the attestation the run's control plane
	// signed of the finished run (the zero value when there is none).
	Attested(a AttestationFile)
}

// RunnerGates is the runner output's part in a run's gate chain, implemented by
// action/github/runner.Output: Local is the terminal source of a control plane's gate in a
// runner (nil: none can answer), Gate wraps the run's whole gate so the output learns each
// gate's outcome (cp is the control plane's gate inside g, nil when there is none).
type RunnerGates interface {
	Local(tg *steps.TerminalGate, g engine.Gate, stdinIsTerminal bool, noInput string) engine.Gate
	Gate(g engine.Gate, cp *cpclient.Gate, cpURL string, embedded bool) engine.Gate
}

// Options is one run of the pipeline: the resolved configuration and what the run is of.
// Runbook and playbook runs are options of the one pipeline (Playbook nil: a runbook).
type Options struct {
	Config
	Plan *runbook.Plan
	// Name names the run in messages and the report (a runbook's name, a playbook's); Again
	// is the command that continues it ("rbook run NAME").
	Name, Again string
	// StepIndex is --step-index (nil: not given); AllowEdited --allow-edited-runbook;
	// TakeOver --take-over.
	StepIndex   *int
	AllowEdited bool
	TakeOver    bool
	// GateMode is GateModeWait or GateModePause (Config.ResolveGateMode); GitHubEnv the
	// environment reported with each gate.
	GateMode, GitHubEnv string
	// Resume is set by `rbook resume`: the paused run to continue ("" for the newest).
	Resume *string
	// Playbook is set for a playbook run.
	Playbook *Playbook
	// Executors run the steps; Renderer renders prompts; Terminal is the person's side;
	// Err gets the progress lines.
	Executors map[runbook.StepType]engine.Executor
	// Close closes what the executors hold (an MCP session) when the attempt ends (nil: none).
	Close    func()
	Renderer *report.Renderer
	Terminal Terminal
	Err      io.Writer
	// Signals turns the process's signals into the run's cancel causes until the returned
	// func is called (nil: none).
	Signals func(ctx context.Context, cancel context.CancelCauseFunc, statePath string) func()
	// Rebuild makes the Options of a second attempt, when the state file's unfinished run was
	// finished elsewhere and the command starts a new run (nil: the same Options).
	Rebuild func() (Options, error)
}

// Playbook is what a playbook run adds to the pipeline.
type Playbook struct {
	// File is the .cantbook; Inputs its validated inputs as given (StartRun's first bindings;
	// the engine starts from the state file's).
	File   string
	Inputs map[string]any
	// RerunNodes and SkipNodes answer nodes in unknown state; Epic and Session are recorded.
	RerunNodes, SkipNodes []string
	Epic, Session         string
	Concurrency           int
	// Policy decides approval nodes without a control plane (nil: none); Shadow records what
	// it would decide and lets a person decide.
	Policy func(*engine.PolicyContext) engine.PolicyDecision
	Shadow bool
	// StartEmbedded starts the embedded control plane with the playbook's policy.
	StartEmbedded func(ctx context.Context, errw io.Writer) (string, func(), error)
	// MCPConfig is --mcp-config, repeated in the resume hint.
	MCPConfig string
}

// Run runs (or resumes) the run o describes, from the lock to the end of the run: once more
// when the state file's unfinished run turned out to be finished elsewhere and was closed
// with the control plane's record (the command then starts a new run, as after any final run).
func Run(ctx context.Context, o Options) error {
	err := runOnce(ctx, o)
	if !errors.Is(err, errStartAgain) {
		return err
	}
	if o.Rebuild != nil {
		if o, err = o.Rebuild(); err != nil {
			return err
		}
	}
	return runOnce(ctx, o)
}

// attempt is the state of one attempt of Run.
type attempt struct {
	Options
	statePath string
	opened    *state.Opened
	st        *state.State
	fileRec   *state.FileRecorder
	recorders []engine.Recorder
	gate      engine.Gate
	start     engine.Start
	cpc       *cpclient.Client
	cpRec     *cpclient.Recorder // the control plane's recorder, once StartRun granted the lease
	drainCP   func(context.Context) error
	stopLease func()
	cpURL     string
	embedded  bool
	// terminal gate parts
	who, noInput string
	lines        *steps.Lines
	interactive  bool
	tg           *steps.TerminalGate
	resumed      *cpclient.DecidedGate
	trace        *runTrace
}

// runOnce is one attempt of Run. Its order is the pipeline's rules: refuse before touching
// state, lock, deliver the final outbox first, open or resume the state, start on the control
// plane under the lease, then record, gate and run.
func runOnce(ctx context.Context, o Options) error {
	if o.Close != nil {
		defer o.Close()
	}
	a := &attempt{Options: o, statePath: o.Plan.StateFilePath, drainCP: func(context.Context) error { return nil }, stopLease: func() {}}
	if err := a.refuse(); err != nil {
		return err
	}
	// A final run whose last transitions never reached its control plane is delivered first:
	// the new run would move its state file (and outbox) away. A start refused before its
	// first record leaves no lock file or folder.
	h, err := a.hold(ctx, a.statePath, verb{role: "run", name: a.Name, deliverFirst: true, undelivered: refuseNewRun(a.statePath, a.Name), discard: true}, a.Err)
	if err != nil {
		return err
	}
	defer h.release()
	if a.Resume != nil {
		// rbook resume: the paused run is found and checked on the control plane, and its
		// state file rebuilt when there is none.
		if a.resumed, err = a.prepareResume(ctx, *a.Resume, a.Plan, a.statePath, a.Err); err != nil {
			return err
		}
		a.TakeOver = true // the paused executor released its lease: take the run at the next epoch
	}
	if err := a.open(h.lock); err != nil {
		return err
	}
	ctx, endTrace := a.startTrace(ctx)
	defer endTrace()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if a.Signals != nil {
		defer a.Signals(ctx, cancel, a.statePath)()
	}
	a.fileRec = &state.FileRecorder{Path: a.statePath, State: a.st, OverlapWrites: true, ReuseFiles: true}
	defer func() { _ = a.fileRec.Wait() }() // a run that stopped on an error leaves no rewrite half done
	a.recorders = []engine.Recorder{a.fileRec, a.trace}
	a.who, a.noInput, a.lines, a.interactive, a.tg = a.Terminal.TerminalGate()
	a.start = a.startAt()
	if a.TakeOver && !a.opened.Resumed {
		return abort("--take-over continues an unfinished run, but %s holds none; restore the state file of the run to take over "+
			"(its job's artifact) into %s, or drop --take-over to start a new run", a.statePath, a.statePath)
	}
	stopCP, err := a.controlPlane(ctx, cancel)
	defer stopCP()
	defer func() { a.stopLease() }()
	if err != nil {
		return err
	}
	a.composeGates()
	return a.run(ctx)
}

// refuse checks, before the state folder is touched, everything that can refuse the run.
func (a *attempt) refuse() error {
	if a.StepIndex != nil && (*a.StepIndex < 0 || *a.StepIndex > len(a.Plan.Steps)) {
		// Refused before anything is written (a resume may start at len, after the last step).
		return abort("--step-index %d is outside 0..%d: runbook %s has %d steps (0-based)", *a.StepIndex, len(a.Plan.Steps), a.Plan.Name, len(a.Plan.Steps))
	}
	if a.invalid != nil {
		return abort("%v", a.invalid)
	}
	return nil
}

// open opens (or resumes) the run's state under lock.
func (a *attempt) open(lock *state.Lock) error {
	var err error
	if pb := a.Playbook; pb != nil {
		a.opened, err = state.OpenPlaybook(a.Plan, a.statePath, state.PlaybookOpenOptions{
			Lock: lock, Inputs: pb.Inputs, RerunNodes: pb.RerunNodes, SkipNodes: pb.SkipNodes,
			PlaybookPath: pb.File, EpicID: pb.Epic, SessionID: pb.Session,
		})
	} else {
		a.opened, err = state.Open(a.Plan, a.statePath, state.OpenOptions{StepIndex: a.StepIndex, AllowEdited: a.AllowEdited, Lock: lock})
	}
	if err != nil {
		return abort("%v", err)
	}
	a.st = a.opened.State
	a.Terminal.SetRunStart(a.st.StartedUTC)
	if pb := a.Playbook; pb != nil {
		if a.opened.Resumed {
			done := map[string]bool{}
			for _, e := range a.st.EvidencePack {
				done[e.StepName] = true
			}
			fmt.Fprintf(a.Terminal.Lines(), "RESUMING run %s: %d of %d nodes already recorded; none of them runs again.\n", a.st.RunID, len(done), len(a.Plan.Steps))
		}
	}
	return nil
}

// startAt is where the engine starts: the opened state, and for --step-index past the next
// step, the steps it skips.
func (a *attempt) startAt() engine.Start {
	st, opened := a.st, a.opened
	if a.Playbook != nil {
		// The run's bindings start with the inputs its state file holds (a resumed run's own).
		return engine.Start{RunID: st.RunID, Seq: st.Seq, ChainHead: st.ChainHead, Fresh: !opened.Resumed, Evidence: st.EvidencePack, Bindings: st.Inputs}
	}
	start := engine.Start{
		RunID: st.RunID, Seq: st.Seq, ChainHead: st.ChainHead, Index: opened.StartIndex, Fresh: !opened.Resumed,
		RollbackFor: st.RollbackFor, SkipOwedRollback: opened.SkipOwedRollback, Evidence: st.EvidencePack, LastDeployName: st.LastDeployName,
	}
	if a.StepIndex != nil {
		from := 0
		if opened.Resumed {
			from = st.LastCompletedStepIndex + 1
		}
		if *a.StepIndex > from {
			start.SkipFrom = from
			start.SkipReason = fmt.Sprintf("skipped: %s started the run at --step-index %d", a.who, *a.StepIndex)
		}
	}
	return start
}

// SignalDrainGrace is how long, once a signal has stopped the run, the executor still gives
// the control plane to take the transitions queued for it; the rest stays in the state file's
// outbox for the next run, so SIGTERM ends the executor within seconds even when the control
// plane is dead.
const SignalDrainGrace = 3 * time.Second

// drainContext is the context of the final drain of the control-plane recorder: it lasts as
// long as ctx (the run's: a signal cancels it) and SignalDrainGrace after ctx ends.
func drainContext(ctx context.Context) (context.Context, func()) {
	d, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(SignalDrainGrace, cancel) })
	return d, func() { stop(); cancel() }
}

// startHalted is the error of a run that could not start on its control plane: halted,
// resumable (exit 2), or stopped by a signal before it started.
func startHalted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("%v before the run was started on the control plane; nothing was run. Run the same command again to start it.", context.Cause(ctx))}
	}
	return abort("%v", err)
}

// WriteEvidence writes the evidence pack JSON next to the state file and returns its path, or
// "" (with a warning on errw) when it could not be written. A final run's pack was already
// written by the FileRecorder before its final state.
func WriteEvidence(errw io.Writer, plan *runbook.Plan, st *state.State) string {
	evPath, err := state.WriteEvidence(plan.StateFilePath, st)
	if err != nil {
		fmt.Fprintf(errw, "warning: evidence pack not written to %s: %v\n", evPath, err)
		return ""
	}
	return evPath
}

// GatePrompt renders the step status with AWAITING_CONFIRMATION (docs/spec/runbooks.md,
// "confirm").
func GatePrompt(rend *report.Renderer) func(runbook.Step, engine.RunContext) string {
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
