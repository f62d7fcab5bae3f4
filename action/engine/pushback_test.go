package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// pushBackPlan is build → test → review (rewind_targets: [build]) → deploy, build reading the
// reviewer's comment, and lint beside test (a descendant of build the gate does not depend on).
func pushBackPlan() *runbook.Plan {
	review := appr("review", "ship?", "test")
	review.RewindTargets = []string{"build"}
	return pbPlan([]pnode{reads(det("build"), "{{ review.feedback }}", "{{ review.redo_from }}"), det("test", "build"), det("lint", "build"),
		review, det("deploy", "review")}, nil)
}

// A reviewer's push-back re-runs build and test (not lint) with the comment bound as
// {{ review.feedback }}, records who, the comment, the target and the iteration in the
// approval node's evidence, and the gate opens again; approving it then completes the run.
func TestPushBackReRunsFromTheTargetWithTheComment(t *testing.T) {
	p := pushBackPlan()
	opened := 0
	g := &fakeGate{fn: func(_ context.Context, req engine.GateRequest) (engine.Decision, error) {
		opened++
		if opened == 1 {
			return engine.Decision{Verdict: engine.Rejected, By: "bob", Reason: "add a changelog", Source: "control-plane", RedoFrom: "build", Iteration: 1}, nil
		}
		return engine.Decision{Verdict: engine.Approved, By: "bob", Source: "control-plane", Iteration: 2}, nil
	}}
	f := newFake()
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	if got := fmt.Sprint(f.count("build"), f.count("test"), f.count("lint"), f.count("deploy"), opened); got != "2 2 1 1 2" {
		t.Fatalf("runs of build test lint deploy, gate openings = %s; want 2 2 1 1 2 (%s)", got, rec.summary())
	}
	if got := fmt.Sprint(g.reqs[0].RewindTargets); got != "[build]" {
		t.Errorf("GateRequest.RewindTargets = %s; want [build]", got)
	}
	first, again := f.rcs["build"][0].Bindings["review"].(map[string]any), f.rcs["build"][1].Bindings["review"].(map[string]any)
	if first["feedback"] != "" || again["feedback"] != "add a changelog" || again["redo_from"] != "build" {
		t.Fatalf("build's review binding: first run %v, second %v; want no feedback, then the comment and build", first, again)
	}
	ev := evOf(rec.ts, "review")
	if len(ev) != 2 || ev[0].Status != engine.StatusFail || ev[1].Status != engine.StatusPass ||
		ev[0].Output != `{"approved":false,"auto_passed":false,"by":"bob","feedback":"add a changelog","iteration":1,"reason":"add a changelog","redo_from":"build","rule":"","sent_back":true}` {
		t.Fatalf("review evidence %+v", ev)
	}
	dec := find(rec.ts, engine.TransitionGateDecided, "review")
	if len(dec) != 2 || dec[0].Message != "sent back to 'build' by bob via control-plane: add a changelog" {
		t.Fatalf("gate_decided %+v", dec)
	}
	starts := find(rec.ts, engine.TransitionStepStarted, "build")
	if len(starts) != 2 || !strings.Contains(starts[1].Message, "sent back to 'build' by bob at approval 'review' (iteration 1): add a changelog") {
		t.Fatalf("build's second step_started %+v", starts)
	}
}

// A push-back loop ends at the iteration cap: with build's cap of 2, the second push-back
// fails the run with iteration_cap_exceeded naming build and its cap.
func TestPushBackLoopStopsAtTheIterationCap(t *testing.T) {
	p := pushBackPlan()
	p.Steps[0].Node.IterationCap = 2
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Rejected, By: "bob", Reason: "again", Source: "control-plane", RedoFrom: "build"}, nil
	}}
	f := newFake()
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed || f.count("build") != 2 || f.count("deploy") != 0 {
		t.Fatalf("%v %+v build ran %d; %s", err, res, f.count("build"), rec.summary())
	}
	want := "node 'review' failed (iteration_cap_exceeded) and no error handler took it: approval 'review' sent the run back to 'build', but node 'build' reached its iteration cap of 2 runs"
	if !strings.HasPrefix(res.Message, want) {
		t.Fatalf("message %q\nwant prefix %q", res.Message, want)
	}
}

// A run that stopped after a push-back was recorded resumes from it: the nodes it sent back
// that have not run since run again (with the comment), then the gate opens again.
func TestPushBackResumesFromTheRecordedPushBack(t *testing.T) {
	p := pushBackPlan()
	prior := []engine.Evidence{
		{StepName: "build", Type: "deterministic", Output: `{"n":1}`, Status: engine.StatusPass},
		{StepName: "test", Type: "deterministic", Output: `{"n":1}`, Status: engine.StatusPass},
		{StepName: "lint", Type: "deterministic", Output: `{"n":1}`, Status: engine.StatusPass},
		{StepName: "review", Type: "approval", Status: engine.StatusFail,
			Output: `{"approved":false,"by":"bob","feedback":"fix it","iteration":1,"reason":"fix it","redo_from":"build","sent_back":true}`},
		{StepName: "build", Type: "deterministic", Output: `{"n":2}`, Status: engine.StatusPass},
	}
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, By: "bob", Source: "control-plane"}, nil
	}}
	f := newFake()
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Seq: 20, Evidence: prior})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	if got := rec.summary(); got != "test=PASS review=PASS deploy=PASS" {
		t.Fatalf("resumed evidence %s; want test, review, deploy only", got)
	}
	if it := f.rcs["test"][0].Iteration; it != 2 {
		t.Errorf("test's iteration %d, want 2", it)
	}
}

// The run's execution budget (runbook.RunBudgetPerNode × nodes node runs) bounds a push-back
// loop as well as the iteration caps do (docs/push-back.md, "Caps and budget"): with caps
// above what the budget can pay, build → review (2 nodes, a budget of 20 runs) sent back every
// time runs each node 10 times, and the tenth push-back, which would re-run build as the 21st
// node run, fails the run with execution_budget_exhausted at build instead of opening the gate
// an eleventh time. The engine holds this bound itself, whatever caps its plan carries.
func TestPushBackLoopStopsAtTheExecutionBudget(t *testing.T) {
	review := appr("review", "ship?", "build")
	review.RewindTargets = []string{"build"}
	build := det("build")
	build.IterationCap, review.IterationCap = runbook.MaxIterationCap+1, runbook.MaxIterationCap+1
	p := pbPlan([]pnode{build, review}, nil)
	opened := 0
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		opened++
		return engine.Decision{Verdict: engine.Rejected, By: "bob", Reason: "again", Source: "control-plane", RedoFrom: "build", Iteration: opened}, nil
	}}
	f := newFake()
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed {
		t.Fatalf("%v %+v; want the run failed (%s)", err, res, rec.summary())
	}
	budget := runbook.RunBudgetPerNode * 2
	if got := fmt.Sprint(f.count("build"), opened); got != fmt.Sprint(budget/2, budget/2) {
		t.Fatalf("runs of build, gate openings = %s; want %d %d (%s)", got, budget/2, budget/2, rec.summary())
	}
	want := fmt.Sprintf("execution budget of %d node runs exhausted (%d × 2 nodes) at node 'build'", budget, runbook.RunBudgetPerNode)
	if res.Message != want {
		t.Fatalf("message %q\nwant %q", res.Message, want)
	}
	if ev := evOf(rec.ts, "review"); len(ev) != opened || ev[len(ev)-1].Status != engine.StatusFail ||
		!strings.Contains(ev[len(ev)-1].Output, `"redo_from":"build","rule":"","sent_back":true`) {
		t.Fatalf("review evidence %+v; want %d push-backs recorded", ev, opened)
	}
	if fin := find(rec.ts, engine.TransitionRunFinished, "build"); len(fin) != 1 || fin[0].RunStatus != engine.RunFailed || fin[0].Message != want {
		t.Fatalf("run_finished %+v; want one at build, failed, saying %q", fin, want)
	}
}
