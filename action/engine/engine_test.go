package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func str(s string) *string { return &s }

// memRecorder keeps every transition, checking sequence numbers grow by one.
type memRecorder struct {
	mu sync.Mutex
	ts []engine.Transition
}

func (m *memRecorder) Record(_ context.Context, t engine.Transition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.ts); n > 0 && t.Seq != m.ts[n-1].Seq+1 {
		return errors.New("sequence gap")
	}
	m.ts = append(m.ts, t)
	return nil
}

func (m *memRecorder) evidence() []engine.Evidence {
	var out []engine.Evidence
	for _, t := range m.ts {
		if t.Evidence != nil {
			out = append(out, *t.Evidence)
		}
	}
	return out
}

func (m *memRecorder) summary() string {
	var b []string
	for _, e := range m.evidence() {
		b = append(b, e.StepName+"="+string(e.Status))
	}
	return strings.Join(b, " ")
}

// scripted returns fixed outcomes by step name and counts calls.
type scripted struct {
	mu    sync.Mutex
	out   map[string]engine.Outcome
	calls map[string]int
}

func (s *scripted) Execute(ctx context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
	s.mu.Lock()
	s.calls[step.Name]++
	o, ok := s.out[step.Name]
	s.mu.Unlock()
	if o.Status == "block" {
		<-ctx.Done()
		return engine.Outcome{Status: engine.StatusFail, Output: ctx.Err().Error()}
	}
	if !ok {
		o = engine.Outcome{Status: engine.StatusPass, Output: "ok"}
		if step.Type == runbook.TypeDeploy {
			o.DeployName = "dep-" + step.Name
		}
	}
	return o
}

type gateFunc func(ctx context.Context, req engine.GateRequest) (engine.Decision, error)

func (g gateFunc) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	return g(ctx, req)
}

func plan(steps ...runbook.Step) *runbook.Plan {
	for i := range steps {
		steps[i].Index = i
		if steps[i].TimeoutSeconds == 0 {
			steps[i].TimeoutSeconds = 5
		}
	}
	return &runbook.Plan{Name: "t", Path: "runbooks/t.yaml", Steps: steps, ContentHash: "h"}
}

func check(name string, onFail runbook.OnFail) runbook.Step {
	return runbook.Step{Name: name, Type: runbook.TypeCheck, Input: str("Resources"), OnFail: onFail}
}
func deploy(name string) runbook.Step {
	return runbook.Step{Name: name, Type: runbook.TypeDeploy, Input: str("remediation/a.json"), OnFail: runbook.OnFailRollback}
}
func rollback(name string) runbook.Step {
	return runbook.Step{Name: name, Type: runbook.TypeRollback, Input: str("remediation/b.json"), OnFail: runbook.OnFailHalt}
}
func confirm(name string, onFail runbook.OnFail) runbook.Step {
	return runbook.Step{Name: name, Type: runbook.TypeConfirm, OnFail: onFail}
}

func newEngine(p *runbook.Plan, s *scripted, g engine.Gate, rec *memRecorder) *engine.Engine {
	return &engine.Engine{Plan: p, Gate: g, Recorders: []engine.Recorder{rec}, Grace: 100 * time.Millisecond,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: s, runbook.TypeDeploy: s, runbook.TypeRollback: s}}
}

func newScripted(out map[string]engine.Outcome) *scripted {
	return &scripted{out: out, calls: map[string]int{}}
}

var approve = gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
	return engine.Decision{Verdict: engine.Approved, By: "t", Input: "yes", Source: "test"}, nil
})

func TestOnFailTable(t *testing.T) {
	fail := engine.Outcome{Status: engine.StatusFail, Output: "rows"}
	cases := []struct {
		name     string
		plan     *runbook.Plan
		out      map[string]engine.Outcome
		status   engine.RunStatus
		evidence string
	}{
		{"all pass; rollback step skipped in forward flow", plan(check("a", "halt"), deploy("d"), rollback("r"), check("b", "halt")), nil,
			engine.RunCompleted, "a=PASS d=PASS r=SKIPPED b=PASS"},
		{"continue records FAIL and goes on", plan(check("a", "continue"), check("b", "halt")), map[string]engine.Outcome{"a": fail},
			engine.RunCompleted, "a=FAIL b=PASS"},
		{"halt stops", plan(check("a", "halt"), check("b", "halt")), map[string]engine.Outcome{"a": fail},
			engine.RunFailed, "a=FAIL"},
		{"rollback runs the rollback step after the most recent deploy", plan(deploy("d1"), rollback("r1"), deploy("d2"), rollback("r2"), check("c", "rollback"), check("z", "halt")),
			map[string]engine.Outcome{"c": fail}, engine.RunFailed, "d1=PASS r1=SKIPPED d2=PASS r2=SKIPPED c=FAIL r2=PASS"},
		{"rollback with no deploy yet", plan(check("c", "rollback"), deploy("d")), map[string]engine.Outcome{"c": fail},
			engine.RunFailed, "c=FAIL"},
		{"deploy without a rollback step records a FAIL saying so", plan(deploy("d"), check("c", "rollback")), map[string]engine.Outcome{"c": fail},
			engine.RunFailed, "d=PASS c=FAIL d=FAIL"},
		{"missing kql_or_template is SKIPPED", plan(runbook.Step{Name: "n", Type: runbook.TypeCheck, OnFail: "halt"}, check("b", "halt")), nil,
			engine.RunCompleted, "n=SKIPPED b=PASS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &memRecorder{}
			res, err := newEngine(tc.plan, newScripted(tc.out), approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status {
				t.Errorf("status %s, want %s (%s)", res.Status, tc.status, res.Message)
			}
			if got := rec.summary(); got != tc.evidence {
				t.Errorf("evidence %q, want %q", got, tc.evidence)
			}
			last := rec.ts[len(rec.ts)-1]
			if last.Kind != engine.TransitionRunFinished || last.RunStatus != tc.status {
				t.Errorf("last transition %s/%s, want run_finished/%s", last.Kind, last.RunStatus, tc.status)
			}
			if rec.ts[0].Kind != engine.TransitionRunStarted || rec.ts[0].Seq != 1 {
				t.Errorf("first transition %+v, want run_started seq 1", rec.ts[0])
			}
		})
	}
}

func TestDeployWithoutRollbackNamesIt(t *testing.T) {
	rec := &memRecorder{}
	p := plan(deploy("d"), check("c", "rollback"))
	newEngine(p, newScripted(map[string]engine.Outcome{"c": {Status: engine.StatusFail}}), approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	ev := rec.evidence()
	if got := ev[len(ev)-1]; got.Type != "rollback" || !strings.Contains(got.Output, "deploy step 'd' has no rollback step") {
		t.Errorf("last entry %+v", got)
	}
}

// A step that does not answer within max_timeout_seconds ends
// TIMED_OUT, its context is cancelled, and continue goes on to the next step.
func TestStepTimeoutCancelsAndContinues(t *testing.T) {
	slow := check("slow", "continue")
	slow.TimeoutSeconds = 1
	rec := &memRecorder{}
	s := newScripted(map[string]engine.Outcome{"slow": {Status: "block"}})
	res, err := newEngine(plan(slow, check("next", "halt")), s, approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.summary(); got != "slow=TIMED_OUT next=PASS" || res.Status != engine.RunCompleted {
		t.Fatalf("got %q %s", got, res.Status)
	}
	if out := rec.evidence()[0].Output; !strings.Contains(out, "max_timeout_seconds=1") {
		t.Errorf("timeout output %q does not name the limit", out)
	}
}

// An executor that ignores its deadline is abandoned after the grace period.
func TestTimeoutAbandonsStuckExecutor(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	p := plan(check("stuck", "halt"))
	p.Steps[0].TimeoutSeconds = 1
	rec := &memRecorder{}
	e := &engine.Engine{Plan: p, Recorders: []engine.Recorder{rec}, Grace: 50 * time.Millisecond,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: engine.ExecutorFunc(func(context.Context, runbook.Step, engine.RunContext) engine.Outcome {
			<-stuck
			return engine.Outcome{Status: engine.StatusPass}
		})}}
	res, _ := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if res.Status != engine.RunFailed || rec.summary() != "stuck=TIMED_OUT" {
		t.Fatalf("%s %q", res.Status, rec.summary())
	}
}

func TestGateDecisions(t *testing.T) {
	for _, tc := range []struct {
		verdict  engine.Verdict
		status   engine.RunStatus
		evidence string
	}{
		{engine.Approved, engine.RunCompleted, "d=PASS r=SKIPPED g=PASS after=PASS"},
		{engine.Rejected, engine.RunFailed, "d=PASS r=SKIPPED g=FAIL r=PASS"},
	} {
		rec := &memRecorder{}
		var req engine.GateRequest
		g := gateFunc(func(_ context.Context, r engine.GateRequest) (engine.Decision, error) {
			req = r
			return engine.Decision{Verdict: tc.verdict, By: "ann", Input: "typed", Source: "terminal"}, nil
		})
		p := plan(deploy("d"), rollback("r"), confirm("g", "rollback"), check("after", "halt"))
		e := newEngine(p, newScripted(nil), g, rec)
		e.Prompt = func(s runbook.Step, rc engine.RunContext) string { return "prompt " + s.Name + " " + rc.RunID }
		res, _ := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
		if res.Status != tc.status || rec.summary() != tc.evidence {
			t.Errorf("verdict %d: %s %q", tc.verdict, res.Status, rec.summary())
		}
		if req.Prompt != "prompt g R" || req.StepName != "g" || req.PlanDigest != "h" || time.Until(req.Deadline) <= 0 {
			t.Errorf("gate request %+v", req)
		}
		if ev := rec.evidence()[2]; *ev.Input != "user-confirmation" || ev.Output != "typed" {
			t.Errorf("confirm entry %+v", ev)
		}
	}
}

func TestGateTimesOut(t *testing.T) {
	rec := &memRecorder{}
	g := gateFunc(func(ctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
		<-ctx.Done()
		return engine.Decision{}, ctx.Err()
	})
	c := confirm("g", "halt")
	c.TimeoutSeconds = 1
	res, _ := newEngine(plan(c), newScripted(nil), g, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if res.Status != engine.RunFailed || rec.summary() != "g=TIMED_OUT" {
		t.Fatalf("%s %q", res.Status, rec.summary())
	}
}

func TestCancelAtGate(t *testing.T) {
	for _, confirmed := range []bool{true, false} {
		rec := &memRecorder{}
		asked := 0
		g := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
			asked++
			if asked == 1 {
				return engine.Decision{Verdict: engine.Cancelled, Input: "cancel", Source: "terminal"}, nil
			}
			return engine.Decision{Verdict: engine.Approved, Input: "yes", Source: "terminal"}, nil
		})
		e := newEngine(plan(deploy("d"), confirm("g", "halt"), check("after", "halt")), newScripted(nil), g, rec)
		var askedFor string
		e.ConfirmCancel = func(_ context.Context, dep string) (bool, error) { askedFor = dep; return confirmed, nil }
		res, _ := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
		if askedFor != "dep-d" {
			t.Errorf("cancel confirmation asked for %q, want the last deploy dep-d", askedFor)
		}
		if confirmed {
			ev := rec.evidence()
			last := ev[len(ev)-1]
			if res.Status != engine.RunCancelled || rec.summary() != "d=PASS CANCEL=PASS" || last.Type != "cancel" || *last.Input != "dep-d" ||
				last.Output != "Cancel confirmed by user. cancel_arm_template_deployment called (or simulated in v1)." {
				t.Errorf("confirmed cancel: %s %q %+v", res.Status, rec.summary(), last)
			}
		} else if res.Status != engine.RunCompleted || rec.summary() != "d=PASS g=PASS after=PASS" || asked != 2 {
			t.Errorf("refused cancel: %s %q asked %d", res.Status, rec.summary(), asked)
		}
	}
}

// A confirmed cancel from elsewhere while parked at a gate; a signal mid-step.
func TestCancelWhileParkedAndSignals(t *testing.T) {
	t.Run("cancel request", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		rec := &memRecorder{}
		g := gateFunc(func(gctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
			cancel(engine.CancelRequest{By: "oncall"})
			<-gctx.Done()
			return engine.Decision{}, gctx.Err()
		})
		s := newScripted(nil)
		res, err := newEngine(plan(deploy("d"), confirm("g", "halt"), check("after", "halt")), s, g, rec).Run(ctx, engine.Start{RunID: "R", Fresh: true})
		if err != nil || res.Status != engine.RunCancelled {
			t.Fatalf("%v %s", err, res.Status)
		}
		if rec.summary() != "d=PASS CANCEL=PASS" || s.calls["after"] != 0 {
			t.Errorf("evidence %q, later step ran %d times", rec.summary(), s.calls["after"])
		}
	})
	t.Run("signal", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		rec := &memRecorder{}
		s := newScripted(map[string]engine.Outcome{"slow": {Status: "block"}})
		started := make(chan struct{})
		e := newEngine(plan(check("slow", "continue"), check("after", "halt")), s, approve, rec)
		e.Recorders = append(e.Recorders, engine.RecorderFunc(func(_ context.Context, t engine.Transition) error {
			if t.Kind == engine.TransitionStepStarted {
				close(started)
			}
			return nil
		}))
		go func() { <-started; cancel(engine.Interrupted{Signal: "SIGTERM"}) }()
		res, _ := e.Run(ctx, engine.Start{RunID: "R", Fresh: true})
		if res.Status != engine.RunInProgress || rec.summary() != "" || s.calls["after"] != 0 {
			t.Fatalf("%s %q: an interrupted run stays resumable, with no outcome for the stopped step", res.Status, rec.summary())
		}
		last := rec.ts[len(rec.ts)-1]
		if last.Kind != engine.TransitionRunInterrupted || last.StepName != "slow" || !strings.Contains(last.Message, "interrupted by SIGTERM during step 'slow'") {
			t.Errorf("final record %+v", last)
		}
		finals := 0
		for _, tr := range rec.ts {
			if tr.Kind == engine.TransitionRunFinished || tr.Kind == engine.TransitionRunInterrupted {
				finals++
			}
		}
		if finals != 1 {
			t.Errorf("%d final records, want exactly 1", finals)
		}
	})
}

func TestResumeOwedRollback(t *testing.T) {
	rec := &memRecorder{}
	s := newScripted(nil)
	p := plan(deploy("d"), rollback("r"), check("c", "rollback"))
	prior := []engine.Evidence{{StepName: "d", Type: "deploy", Status: engine.StatusPass}, {StepName: "r", Type: "rollback", Status: engine.StatusSkipped}, {StepName: "c", Type: "check", Status: engine.StatusFail}}
	res, _ := newEngine(p, s, approve, rec).Run(context.Background(), engine.Start{RunID: "R", Seq: 7, Index: 3, RollbackFor: "c", Evidence: prior})
	if res.Status != engine.RunFailed || rec.summary() != "r=PASS" || s.calls["c"] != 0 {
		t.Fatalf("%s %q", res.Status, rec.summary())
	}
	if rec.ts[0].Seq != 8 {
		t.Errorf("first seq %d, want 8 (continues the run's sequence)", rec.ts[0].Seq)
	}
}

// An operator who resumes past a compensating rollback whose outcome is unknown
// ("--step-index N+1: go on after it") gets the rollback recorded SKIPPED and the run FAILED,
// and the rollback is not executed again (the kill -9 campaign found this: docs/development.md,
// "The kill -9 campaign").
func TestSkippedOwedRollbackIsNotRunAgain(t *testing.T) {
	rec := &memRecorder{}
	s := newScripted(nil)
	p := plan(deploy("d"), rollback("r"), check("c", "rollback"))
	prior := []engine.Evidence{{StepName: "d", Type: "deploy", Status: engine.StatusPass}, {StepName: "r", Type: "rollback", Status: engine.StatusSkipped}, {StepName: "c", Type: "check", Status: engine.StatusFail}}
	res, err := newEngine(p, s, approve, rec).Run(context.Background(), engine.Start{RunID: "R", Seq: 9, Index: 2, RollbackFor: "c", SkipOwedRollback: true, Evidence: prior})
	if err != nil || res.Status != engine.RunFailed || rec.summary() != "r=SKIPPED" || s.calls["r"] != 0 {
		t.Fatalf("%s %q, rollback executed %d times, %v", res.Status, rec.summary(), s.calls["r"], err)
	}
	if ev := rec.evidence(); !strings.Contains(ev[0].Output, "skipped by the operator") {
		t.Fatalf("the SKIPPED entry says %q", ev[0].Output)
	}
}

func TestRecorderErrorStopsRun(t *testing.T) {
	boom := errors.New("disk full")
	s := newScripted(nil)
	e := newEngine(plan(check("a", "halt"), check("b", "halt")), s, approve, &memRecorder{})
	n := 0
	e.Recorders = append(e.Recorders, engine.RecorderFunc(func(context.Context, engine.Transition) error {
		if n++; n == 3 {
			return boom
		}
		return nil
	}))
	if _, err := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true}); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if s.calls["b"] != 0 {
		t.Errorf("step b ran after a recorder failed")
	}
}

func TestRollbackVerbOnlyOnce(t *testing.T) {
	p := plan(deploy("d"), rollback("r"), check("c", "halt"))
	rec := &memRecorder{}
	s := newScripted(nil)
	e := newEngine(p, s, approve, rec)
	if res, _ := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true}); res.Status != engine.RunCompleted {
		t.Fatal(res)
	}
	for i := 0; i < 2; i++ {
		res, err := e.Rollback(context.Background(), engine.Start{RunID: "R", Seq: rec.ts[len(rec.ts)-1].Seq, Evidence: rec.evidence()}, engine.RunCompleted)
		if err != nil || res.Status != engine.RunCompleted {
			t.Fatalf("rollback %d: %v %+v", i, err, res)
		}
		if i == 1 && !strings.Contains(res.Message, "already rolled back by 'r'") {
			t.Errorf("second rollback: %q", res.Message)
		}
	}
	if got := rec.summary(); got != "d=PASS r=SKIPPED c=PASS r=PASS" || s.calls["r"] != 1 {
		t.Errorf("evidence %q, rollback ran %d times", got, s.calls["r"])
	}
}

func TestOutputIsCapped(t *testing.T) {
	huge := strings.Repeat("é", engine.MaxOutputBytes) // 2 bytes a rune: the cut lands mid-rune
	rec := &memRecorder{}
	s := newScripted(map[string]engine.Outcome{"a": {Status: engine.StatusFail, Output: huge}})
	newEngine(plan(check("a", "continue")), s, approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	out := rec.evidence()[0].Output
	if len(out) > engine.MaxOutputBytes+200 || !strings.Contains(out, "output truncated: 131072 bytes in all") || !utf8.ValidString(out) {
		t.Fatalf("len %d, valid UTF-8 %v, tail %q", len(out), utf8.ValidString(out), out[len(out)-80:])
	}
}

// An operator's --step-index jump leaves a SKIPPED entry for every step it passed over.
func TestStepIndexJumpIsRecorded(t *testing.T) {
	rec := &memRecorder{}
	s := newScripted(nil)
	p := plan(check("a", "halt"), confirm("gate", "halt"), check("c", "halt"))
	res, _ := newEngine(p, s, approve, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true, Index: 2, SkipFrom: 0, SkipReason: "skipped: --step-index 2 given by ann"})
	if res.Status != engine.RunCompleted || rec.summary() != "a=SKIPPED gate=SKIPPED c=PASS" || s.calls["a"] != 0 {
		t.Fatalf("%s %q", res.Status, rec.summary())
	}
	if out := rec.evidence()[1].Output; out != "skipped: --step-index 2 given by ann" {
		t.Errorf("skip entry output %q", out)
	}
}

// A gate that cannot wait (control plane gone, refused) is no decision: the run halts,
// resumable, and on_fail does not run. A gate nobody can answer is not confirmed: FAIL.
func TestGateErrorsHaltOrFail(t *testing.T) {
	down := errors.New("control plane down")
	rec := &memRecorder{}
	g := gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) { return engine.Decision{}, down })
	s := newScripted(nil)
	res, err := newEngine(plan(deploy("d"), rollback("r"), confirm("g", "rollback")), s, g, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if !errors.Is(err, down) || res.Status != engine.RunInProgress || rec.summary() != "d=PASS r=SKIPPED" || s.calls["r"] != 0 {
		t.Fatalf("gate error: %v %s %q, rollback ran %d times", err, res.Status, rec.summary(), s.calls["r"])
	}
	rec = &memRecorder{}
	g = gateFunc(func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{}, fmt.Errorf("%w: stdin is closed", engine.ErrNoAnswer)
	})
	res, err = newEngine(plan(confirm("g", "halt")), newScripted(nil), g, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if err != nil || res.Status != engine.RunFailed || rec.summary() != "g=FAIL" {
		t.Fatalf("no answer: %v %s %q", err, res.Status, rec.summary())
	}
}

// A gate whose decision is not known (ErrGateUnresolved) halts the run,
// resumable, even when its deadline passed meanwhile: no TIMED_OUT, no on_fail.
func TestUnresolvedGateHaltsAfterItsDeadline(t *testing.T) {
	rec := &memRecorder{}
	g := gateFunc(func(ctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
		<-ctx.Done() // the deadline passes while a person's answer is on its way
		return engine.Decision{}, fmt.Errorf("%w: the answer could not be recorded", engine.ErrGateUnresolved)
	})
	c := confirm("g", "rollback")
	c.TimeoutSeconds = 1
	s := newScripted(nil)
	res, err := newEngine(plan(deploy("d"), rollback("r"), c), s, g, rec).Run(context.Background(), engine.Start{RunID: "R", Fresh: true})
	if !errors.Is(err, engine.ErrGateUnresolved) || res.Status != engine.RunInProgress || rec.summary() != "d=PASS r=SKIPPED" || s.calls["r"] != 0 {
		t.Fatalf("unresolved gate: %v %s %q, rollback ran %d times", err, res.Status, rec.summary(), s.calls["r"])
	}
}

// rewriter is a check executor that, like steps.Check, runs its input with a suffix.
type rewriter struct{ block bool }

func (w rewriter) RunInput(step runbook.Step, _ engine.RunContext) *string {
	if step.Input == nil {
		return nil
	}
	q := *step.Input + " | where scoped"
	return &q
}

func (w rewriter) Execute(ctx context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
	if w.block && step.Name == "slow" {
		<-ctx.Done()
		return engine.Outcome{Status: engine.StatusFail, Output: ctx.Err().Error()}
	}
	return engine.Outcome{Status: engine.StatusPass, Output: "[]"}
}

// The evidence's input is the input the executor ran with (the runbook's
// text goes to source_input), also when the step timed out; an executor that runs its input
// as written gets no source_input.
func TestEvidenceHoldsTheInputThatRan(t *testing.T) {
	for _, block := range []bool{false, true} {
		slow := check("slow", runbook.OnFailContinue)
		slow.TimeoutSeconds = 1
		p := plan(check("q", runbook.OnFailHalt), slow, deploy("d"))
		rec := &memRecorder{}
		e := newEngine(p, newScripted(nil), approve, rec)
		e.Executors[runbook.TypeCheck] = rewriter{block: block}
		if _, err := e.Run(context.Background(), engine.Start{RunID: "R", Fresh: true}); err != nil {
			t.Fatal(err)
		}
		ev := rec.evidence()
		if len(ev) != 3 {
			t.Fatalf("evidence %s", rec.summary())
		}
		for _, i := range []int{0, 1} {
			if ev[i].Input == nil || *ev[i].Input != "Resources | where scoped" || ev[i].SourceInput == nil || *ev[i].SourceInput != "Resources" {
				t.Errorf("block=%v: entry %d (%s) input %v source %v", block, i, ev[i].Status, ev[i].Input, ev[i].SourceInput)
			}
		}
		if block && ev[1].Status != engine.StatusTimedOut {
			t.Errorf("the blocked check ended %s", ev[1].Status)
		}
		if ev[2].SourceInput != nil || ev[2].Input == nil || *ev[2].Input != "remediation/a.json" {
			t.Errorf("deploy entry input %v source %v", ev[2].Input, ev[2].SourceInput)
		}
	}
}
