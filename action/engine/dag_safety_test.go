package engine_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// A guarded node's env changes what its command runs (PATH picks the program, GOFLAGS adds
// -toolexec, GIT_CONFIG_* adds hooks): the policy context's command line carries it in front
// as K=V, sorted by key and rendered, so no read-only rule can pass "ls" run from another PATH.
func TestPolicyCommandLineShowsTheNodesEnv(t *testing.T) {
	ls := det("list", "review")
	ls.Command, ls.Args = "ls", []string{"-la"}
	ls.Env = map[string]string{"PATH": "/tmp/{{ dir }}", "GOFLAGS": "-toolexec=x"}
	p := pbPlan([]pnode{appr("review", "ok?"), ls}, nil)
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, By: "me", Source: "cli"}, nil
	}}
	rec := &memRecorder{}
	e := pbEngine(p, newFake(), rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"dir": "evil"}})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	if got := g.reqs[0].Policy.Commands; !slices.Equal(got, []string{"GOFLAGS=-toolexec=x PATH=/tmp/evil ls -la"}) {
		t.Fatalf("policy commands %q", got)
	}
}

// A node whose executor panics is that node's FAIL ("the executor panicked: …"), not a crash
// of rbook that would leave every sibling running at the time in unknown state: the siblings
// finish, the failure handling applies (here none: the run fails at the node) and the run
// gets its final record.
func TestExecutorPanicIsNodeFailure(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("boom", "a"), det("side", "a"), det("after", "boom")}, nil)
	f := newFake()
	f.fn["boom"] = func(context.Context, engine.RunContext, int) engine.Outcome { panic("nil map in executor") }
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Concurrency = 4
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	ev := evOf(rec.ts, "boom")
	if len(ev) != 1 || ev[0].Status != engine.StatusFail || !strings.Contains(ev[0].Output, "the executor panicked: nil map in executor") {
		t.Fatalf("boom evidence %+v", ev)
	}
	if s := evOf(rec.ts, "side"); len(s) != 1 || s[0].Status != engine.StatusPass {
		t.Fatalf("side evidence %+v", s)
	}
	if f.count("after") != 0 {
		t.Fatal("after ran")
	}
	if last := rec.ts[len(rec.ts)-1]; last.Kind != engine.TransitionRunFinished || last.RunStatus != engine.RunFailed {
		t.Fatalf("last transition %+v", last)
	}
}

// The same for a runbook step (the chain path of the one scheduler).
func TestGatePanicIsNodeFailure(t *testing.T) {
	p := pbPlan([]pnode{appr("review", "ok?"), det("after", "review")}, nil)
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) { panic("gate bug") }}
	rec := &memRecorder{}
	f := newFake()
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	if ev := evOf(rec.ts, "review"); len(ev) != 1 || ev[0].Status != engine.StatusFail || !strings.Contains(ev[0].Output, "panicked: gate bug") {
		t.Fatalf("review evidence %+v", ev)
	}
	if f.count("after") != 0 {
		t.Fatal("after ran")
	}
}

// A when on an edge whose From was itself skipped by a when branch is evaluated, not waved
// through: here notes is skipped (channel is not nightly), so publish-notes, behind
// "notes.path exists", is skipped too instead of running without the notes; join, behind a
// plain edge, still runs (a when-skipped dependency counts as done).
func TestWhenAfterWhenSkippedNode(t *testing.T) {
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "when-after-when-skipped.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	rec := &serialRecorder{}
	e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{rec}, Concurrency: 4,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeterministic: f}}
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"channel": "stable"}})
	if err != nil || res.Status != engine.RunCompleted || rec.err != nil {
		t.Fatalf("%v %+v %v", err, res, rec.err)
	}
	if f.count("notes") != 0 || f.count("publish-notes") != 0 || f.count("join") != 1 {
		t.Fatalf("calls %v", f.calls)
	}
	if ev := evOf(rec.ts, "publish-notes"); len(ev) != 1 || ev[0].Status != engine.StatusSkipped || ev[0].Output != "skipped: when notes.path exists true is false" {
		t.Fatalf("publish-notes evidence %+v", ev)
	}
}
