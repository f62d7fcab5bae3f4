package run

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// fakeTerminal is the person's side of a run in these tests: nobody at stdin, every line kept.
type fakeTerminal struct {
	lines    bytes.Buffer
	finished *state.State
	halted   error
	// runner is the runner output's gates (nil: outside a runner).
	runner *fakeRunner
	// resumeHint is the last resume command the pipeline set (SetHints).
	resumeHint string
	// onRecord, when set, sees each transition after the state file recorded it.
	onRecord func(engine.Transition)
}

func (f *fakeTerminal) Record(_ context.Context, t engine.Transition) error {
	if f.onRecord != nil {
		f.onRecord(t)
	}
	return nil
}
func (f *fakeTerminal) Lines() io.Writer                       { return &f.lines }
func (f *fakeTerminal) SetRunStart(string)                     {}
func (f *fakeTerminal) SetHints(resume, _ string)              { f.resumeHint = resume }
func (f *fakeTerminal) HumanNeeded(string, engine.GateRequest) {}
func (f *fakeTerminal) TerminalGate() (string, string, *steps.Lines, bool, *steps.TerminalGate) {
	lines := steps.NewLines(strings.NewReader(""))
	return "tester", "standard input is empty", lines, false, &steps.TerminalGate{In: lines, Out: &f.lines, Who: "tester"}
}
func (f *fakeTerminal) Runner() RunnerGates {
	if f.runner == nil {
		return nil
	}
	return f.runner
}
func (f *fakeTerminal) CancelPrompt(md string) string { return md }
func (f *fakeTerminal) VoteNotices() (func(*rbookv1.Approval, string, time.Time), func(*rbookv1.Approval)) {
	return nil, nil
}
func (f *fakeTerminal) StartErrorHint(err error, _ string) error                   { return err }
func (f *fakeTerminal) WarnUnanswerable(*runbook.Plan, int, string, string)        {}
func (f *fakeTerminal) WarnLeftBehind(*state.State, string)                        {}
func (f *fakeTerminal) Halted(_ *state.State, err error)                           { f.halted = err }
func (f *fakeTerminal) Paused(*state.State, string, *cpclient.PausedError, string) {}
func (f *fakeTerminal) Attested(AttestationFile)                                   {}
func (f *fakeTerminal) Finish(_ string, st *state.State, _ engine.Result, _ string) error {
	f.finished = st
	return nil
}

// gateOptions are the Options of a run of testdata/runbooks/gate.yaml (a confirm gate, then a
// simulated deploy) in a fresh folder, with no control plane.
func gateOptions(t *testing.T) (Options, *fakeTerminal) {
	t.Helper()
	o, term := testdataOptions(t, "gate", "off")
	o.Err = io.Discard
	return o, term
}

// testdataOptions are the Options of a run of testdata/runbooks/<name>.yaml in a fresh
// folder, reporting to controlPlane (Config.Resolve), with every line on the terminal's.
func testdataOptions(t *testing.T, name, controlPlane string) (Options, *fakeTerminal) {
	t.Helper()
	abs, err := filepath.Abs("testdata/runbooks")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	plan, err := runbook.Load(runbook.LoadOptions{Dir: abs, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	term := &fakeTerminal{}
	o := Options{
		Config: Config{Timeout: 5 * time.Second, Lease: cpclient.DefaultLease, Auth: Auth{Mode: AuthNone}},
		Plan:   plan, Name: name, Again: "rbook run " + name, Executors: SimulatedExecutors(), Terminal: term, Err: &term.lines,
	}
	if err := o.Resolve(controlPlane); err != nil {
		t.Fatal(err)
	}
	return o, term
}

// serveRuns serves h (a RunService) on loopback as a control plane does (Connect over h2c)
// until the test ends, and returns its URL.
func serveRuns(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// exitCode is the exit code err carries, or -1.
func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return -1
}

// TestRunRefusesBeforeTouchingState: whatever can refuse a run is checked before the state
// folder is locked or written, so a refused start leaves the folder as it was.
func TestRunRefusesBeforeTouchingState(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"a step index past the last step", func(o *Options) { i := 5; o.StepIndex = &i }, "--step-index 5 is outside 0..2"},
		{"a step index below zero", func(o *Options) { i := -1; o.StepIndex = &i }, "--step-index -1 is outside 0..2"},
		{"a control plane without a scheme", func(o *Options) { o.Resolve("127.0.0.1:7070") }, `--control-plane "127.0.0.1:7070" is not a control plane URL`},
		{"a resume with no control plane", func(o *Options) { id := ""; o.Resume, o.ControlPlane = &id, "off" }, "rbook resume continues a run from the control plane it reports to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := gateOptions(t)
			tc.edit(&o)
			err := Run(context.Background(), o)
			if exitCode(err) != ExitAborted || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v (exit %d); want exit 2 saying %q", err, exitCode(err), tc.want)
			}
			if _, err := os.Stat(".rbook"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf(".rbook: %v; want no state folder after a refused start", err)
			}
		})
	}
}

// TestFinalRunOutboxIsDeliveredBeforeANewRun: a final run whose transitions never reached its
// control plane is delivered before a new run moves its state file away; when it cannot be,
// the new run does not start and the state file is left as it was.
func TestFinalRunOutboxIsDeliveredBeforeANewRun(t *testing.T) {
	o, term := gateOptions(t)
	final := &state.State{
		RunID: "RBOOK-20260101-gate-00000001", RunbookName: "gate", RunStatus: engine.RunCompleted, LastCompletedStepIndex: 1, TotalSteps: 2,
		EvidencePack: []engine.Evidence{}, StartedUTC: "2026-01-01T00:00:00Z", RunbookHash: o.Plan.ContentHash, SchemaHash8: o.Plan.SchemaHash8,
		Outbox: []engine.Transition{{RunID: "RBOOK-20260101-gate-00000001", Seq: 1, Kind: engine.TransitionRunFinished, StepIndex: -1, RunStatus: engine.RunCompleted}},
	}
	if err := state.Write(o.Plan.StateFilePath, final); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(o.Plan.StateFilePath)
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), o)
	if exitCode(err) != ExitAborted || !strings.Contains(err.Error(), "Not starting a new run") {
		t.Fatalf("Run = %v; want exit 2: not starting a new run over undelivered transitions", err)
	}
	after, err := os.ReadFile(o.Plan.StateFilePath)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the state file changed (%v):\nbefore %s\nafter  %s", err, before, after)
	}
	if term.finished != nil {
		t.Errorf("a run ended (%s); want none started", term.finished.RunID)
	}
}

// TestRunWithoutAControlPlaneEndsInTheStateFile: with --control-plane off the pipeline runs
// the plan with the state file as its only recorder; a gate nobody can answer fails at once.
func TestRunWithoutAControlPlaneEndsInTheStateFile(t *testing.T) {
	o, term := gateOptions(t)
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run = %v; want the run to end (the terminal maps its status to the exit code)", err)
	}
	if term.finished == nil || term.finished.RunStatus != engine.RunFailed {
		t.Fatalf("finished %+v; want the run FAILED at its unanswered gate", term.finished)
	}
	st, err := state.Read(o.Plan.StateFilePath)
	if err != nil || st.RunID != term.finished.RunID || st.RunStatus != engine.RunFailed {
		t.Errorf("state file: %+v, %v; want run %s FAILED", st, err, term.finished.RunID)
	}
}

// refusingRuns is a control plane that refuses every StartRun and records every call made.
type refusingRuns struct {
	rbookv1connect.UnimplementedRunServiceHandler
	mu    sync.Mutex
	calls []string
}

func (r *refusingRuns) StartRun(context.Context, *rbookv1.StartRunRequest) (*rbookv1.StartRunResponse, error) {
	return nil, connect.NewError(connect.CodePermissionDenied, errors.New("this executor may not start runs"))
}

func (r *refusingRuns) handler() http.Handler {
	path, h := rbookv1connect.NewRunServiceHandler(r)
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.calls = append(r.calls, strings.TrimPrefix(req.URL.Path, path))
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	return mux
}

// TestNothingIsRecordedOnTheControlPlaneBeforeItsLease: the control-plane recorder joins the
// run only after StartRun granted the lease; a refused StartRun halts the run (exit 2) with
// no transition sent and no state file written.
func TestNothingIsRecordedOnTheControlPlaneBeforeItsLease(t *testing.T) {
	cp := &refusingRuns{}
	o, term := gateOptions(t)
	if err := o.Resolve(serveRuns(t, cp.handler())); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), o)
	if exitCode(err) != ExitAborted || !strings.Contains(err.Error(), "may not start runs") {
		t.Fatalf("Run = %v; want exit 2 with the control plane's refusal", err)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.calls) != 1 || cp.calls[0] != "StartRun" {
		t.Errorf("calls %v; want only StartRun", cp.calls)
	}
	if _, err := os.Stat(o.Plan.StateFilePath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file: %v; want none written before the lease", err)
	}
	if term.finished != nil {
		t.Errorf("a run ended; want none started")
	}
}

// TestARunOverInItsJournalSaysTheNextRunStartsAnew: a run whose last transition reached its
// journal but whose evidence pack could not be written halts (exit 2) saying the run is over
// and that running again writes its files and then starts a new run, not that it resumes.
// Running again does exactly that: the ended run's state file is moved aside with its
// evidence pack written from the journal, and a new run starts.
func TestARunOverInItsJournalSaysTheNextRunStartsAnew(t *testing.T) {
	o, term := testdataOptions(t, "deploy", "off")
	var first string
	deploy := o.Executors[runbook.TypeDeploy]
	o.Executors[runbook.TypeDeploy] = engine.ExecutorFunc(func(ctx context.Context, s runbook.Step, rc engine.RunContext) engine.Outcome {
		if first == "" { // a folder where the first run's pack would go: its write fails
			first = rc.RunID
			if err := os.MkdirAll(state.EvidencePath(o.Plan.StateFilePath, rc.RunID), 0o755); err != nil {
				t.Error(err)
			}
		}
		return deploy.Execute(ctx, s, rc)
	})
	err := Run(t.Context(), o)
	if exitCode(err) != ExitAborted {
		t.Fatalf("Run = %v; want exit %d", err, ExitAborted)
	}
	for _, want := range []string{"Run " + first + " ended COMPLETED", state.JournalPath(o.Plan.StateFilePath, first), "writes the run's state file and evidence pack from the journal", "then starts a NEW run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the halt says:\n%v\nwant it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "to resume") {
		t.Errorf("the halt of a run that is over says to resume it:\n%v", err)
	}

	if err := os.Remove(state.EvidencePath(o.Plan.StateFilePath, first)); err != nil {
		t.Fatal(err)
	}
	if err := Run(t.Context(), o); err != nil {
		t.Fatalf("the next Run = %v", err)
	}
	if term.finished == nil || term.finished.RunID == first || term.finished.RunStatus != engine.RunCompleted {
		t.Fatalf("the next run: %+v; want a new run COMPLETED", term.finished)
	}
	prev, err := state.Read(o.Plan.StateFilePath + ".prev-" + first)
	if err != nil || prev.RunStatus != engine.RunCompleted || len(prev.EvidencePack) != 1 {
		t.Fatalf("the ended run's state file, moved aside: %+v, %v; want COMPLETED with its one entry", prev, err)
	}
	pack, err := os.ReadFile(state.EvidencePath(o.Plan.StateFilePath, first))
	if want, _ := state.EvidencePackJSON(prev.EvidencePack); err != nil || !bytes.Equal(pack, want) {
		t.Errorf("the ended run's evidence pack: %v\n%s\nwant\n%s", err, pack, want)
	}
}
