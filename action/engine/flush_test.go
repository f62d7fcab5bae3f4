package engine_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// flushLog is a GroupRecorder that writes what it is given into one shared log with what the
// steps do: "+kind step" for an Append, "flush" for a Flush (only when something was
// appended since the last one), "run step" and "await step" from the executor and the gate.
type flushLog struct {
	mu  sync.Mutex
	log []string
	// group is what was appended since the last flush (the log interleaves the steps' notes).
	group []string
	// flushed, when set, is called after each flush with the transitions it flushed.
	flushed func(group []string)
}

func (f *flushLog) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *flushLog) Record(ctx context.Context, t engine.Transition) error {
	_ = f.Append(ctx, t)
	return f.Flush(ctx)
}

func (f *flushLog) Append(_ context.Context, t engine.Transition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.TrimSpace("+" + string(t.Kind) + " " + t.StepName)
	f.log = append(f.log, line)
	f.group = append(f.group, line)
	return nil
}

func (f *flushLog) Flush(context.Context) error {
	f.mu.Lock()
	group := f.group
	if len(group) > 0 {
		f.log = append(f.log, "flush")
	}
	f.group = nil
	f.mu.Unlock()
	if f.flushed != nil {
		f.flushed(group)
	}
	return nil
}

func (f *flushLog) Execute(_ context.Context, step runbook.Step, _ engine.RunContext) engine.Outcome {
	f.note("run " + step.Name)
	return engine.Outcome{Status: engine.StatusPass, Output: "ok", Value: map[string]any{"ok": true}}
}

func (f *flushLog) lines() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, "\n")
}

// TestStepsRunOnlyAfterTheirStartIsFlushed: the engine flushes a GroupRecorder before any step
// runs (a step's start, with the previous step's finish, in one flush), before a gate waits
// and when the run ends (the last finish with run_finished), so what a step's effect or a
// person's decision depends on is durable first (docs/decisions/durability.md, "The journal").
func TestStepsRunOnlyAfterTheirStartIsFlushed(t *testing.T) {
	f := &flushLog{}
	gate := gateFunc(func(_ context.Context, req engine.GateRequest) (engine.Decision, error) {
		f.note("await " + req.StepName)
		return engine.Decision{Verdict: engine.Approved, By: "t", Input: "yes", Source: "test"}, nil
	})
	p := plan(check("pre", runbook.OnFailHalt), deploy("app"), confirm("ok", runbook.OnFailHalt))
	e := &engine.Engine{Plan: p, Gate: gate, Recorders: []engine.Recorder{f},
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: f, runbook.TypeDeploy: f}}
	res, err := e.Run(t.Context(), engine.Start{RunID: "r", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	want := strings.Join([]string{
		"+run_started", "+step_started pre", "flush", "run pre",
		"+step_finished pre", "+step_started app", "flush", "run app",
		"+step_finished app", "+step_started ok", "flush",
		"+gate_opened ok", "flush", "await ok",
		"+gate_decided ok", "flush",
		"+step_finished ok", "+run_finished", "flush",
	}, "\n")
	if got := f.lines(); got != want {
		t.Errorf("order of records, flushes and effects:\n%s\nwant\n%s", got, want)
	}
}

// TestAPlaybookNodesFinishIsFlushedBeforeTheSchedulerWaits: in a playbook where one node
// finishes while another still runs and nothing new can start, the finish is flushed before
// the scheduler waits for the running node (it is not held until that node ends).
func TestAPlaybookNodesFinishIsFlushedBeforeTheSchedulerWaits(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	f := &flushLog{flushed: func(group []string) {
		if slices.Contains(group, "+step_finished quick") {
			once.Do(func() { close(release) }) // slow ends only once quick's finish was flushed
		}
	}}
	slow := engine.ExecutorFunc(func(ctx context.Context, step runbook.Step, rc engine.RunContext) engine.Outcome {
		out := f.Execute(ctx, step, rc)
		if step.Name == "slow" {
			<-release
		}
		return out
	})
	p := pbPlan([]pnode{det("slow"), det("quick")}, nil)
	e := &engine.Engine{Plan: p, Recorders: []engine.Recorder{f}, Concurrency: 2,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeterministic: slow}}
	res, err := e.Run(t.Context(), engine.Start{RunID: "r", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("Run = %+v, %v\n%s", res, err, f.lines())
	}
	if got := f.lines(); !strings.Contains(got, "+step_finished quick\nflush") || !strings.HasSuffix(got, "+step_finished slow\n+run_finished\nflush") {
		t.Errorf("records and flushes:\n%s", got)
	}
}

// TestEveryEntryPointReturnsWithItsRecordsFlushed: Run, Cancel and Rollback each return only
// after flushing what they appended, so the `rbook cancel` and `rbook rollback` verbs, which
// do not go through Run, leave their final records durable too.
func TestEveryEntryPointReturnsWithItsRecordsFlushed(t *testing.T) {
	p := plan(check("pre", runbook.OnFailHalt), deploy("app"), rollback("undo"))
	cases := []struct {
		name string
		call func(e *engine.Engine) (engine.Result, error)
		want engine.RunStatus
	}{
		{"Run", func(e *engine.Engine) (engine.Result, error) {
			return e.Run(t.Context(), engine.Start{RunID: "r", Fresh: true})
		}, engine.RunCompleted},
		{"Cancel", func(e *engine.Engine) (engine.Result, error) {
			return e.Cancel(t.Context(), engine.Start{RunID: "r", Index: 1}, "alice")
		}, engine.RunCancelled},
		{"Rollback", func(e *engine.Engine) (engine.Result, error) {
			return e.Rollback(t.Context(), engine.Start{RunID: "r", Index: 1}, engine.RunInProgress)
		}, engine.RunFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &flushLog{}
			e := &engine.Engine{Plan: p, Recorders: []engine.Recorder{f},
				Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: f, runbook.TypeDeploy: f, runbook.TypeRollback: f}}
			res, err := c.call(e)
			if err != nil || res.Status != c.want {
				t.Fatalf("%s = %+v, %v; want %s", c.name, res, err, c.want)
			}
			if got := f.lines(); !strings.HasSuffix(got, "+run_finished\nflush") {
				t.Errorf("%s returned with records not flushed:\n%s", c.name, got)
			}
		})
	}
}
