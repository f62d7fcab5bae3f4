package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// pnode is a playbook node for a hand-built Plan (the parser is written in parallel; these
// tests build the Plan it would produce: one Step per node in order, Depends = depends ∪ edges).
type pnode struct {
	runbook.Node
	typ runbook.StepType
}

func det(id string, deps ...string) pnode {
	return pnode{Node: runbook.Node{ID: id, Depends: deps, Command: "tool", Args: []string{id}, IterationCap: runbook.DefaultIterationCap}, typ: runbook.TypeDeterministic}
}

// reads gives n the args args, so its templates name what it reads (nodes get a private copy
// of the bindings their templates name).
func reads(n pnode, args ...string) pnode {
	n.Args = args
	return n
}

func appr(id, prompt string, deps ...string) pnode {
	return pnode{Node: runbook.Node{ID: id, Depends: deps, Prompt: prompt, IterationCap: runbook.DefaultIterationCap}, typ: runbook.TypeApproval}
}

func pbPlan(nodes []pnode, edges []runbook.Edge, handlers ...runbook.ErrorHandler) *runbook.Plan {
	idx := map[string]int{}
	for i, n := range nodes {
		idx[n.ID] = i
	}
	steps := make([]runbook.Step, len(nodes))
	for i, n := range nodes {
		node := n.Node
		deps := append([]string(nil), node.Depends...)
		for _, e := range edges {
			if e.To == node.ID && !slices.Contains(deps, e.From) {
				deps = append(deps, e.From)
			}
		}
		node.Depends = deps
		var di []int
		for _, d := range deps {
			di = append(di, idx[d])
		}
		steps[i] = runbook.Step{Index: i, Name: node.ID, Type: n.typ, OnFail: runbook.OnFailHalt, TimeoutSeconds: 5, Depends: di, Node: &node}
	}
	return &runbook.Plan{Name: "pb", Path: "t.cantbook", Steps: steps, ContentHash: "hash", Kind: runbook.KindPlaybook,
		Playbook: &runbook.Playbook{Version: "1.0", Edges: edges, ErrorHandlers: handlers}}
}

// fakeExec runs playbook nodes with per-node functions (default: PASS with {"node", "n"}),
// counting calls and the most nodes it saw executing at once.
type fakeExec struct {
	mu    sync.Mutex
	calls map[string]int
	rcs   map[string][]engine.RunContext
	fn    map[string]func(ctx context.Context, rc engine.RunContext, n int) engine.Outcome
	cur   atomic.Int32
	peak  atomic.Int32
}

func newFake() *fakeExec {
	return &fakeExec{calls: map[string]int{}, rcs: map[string][]engine.RunContext{}, fn: map[string]func(context.Context, engine.RunContext, int) engine.Outcome{}}
}

func (f *fakeExec) Execute(ctx context.Context, step runbook.Step, rc engine.RunContext) engine.Outcome {
	c := f.cur.Add(1)
	defer f.cur.Add(-1)
	for p := f.peak.Load(); c > p && !f.peak.CompareAndSwap(p, c); p = f.peak.Load() {
	}
	f.mu.Lock()
	f.calls[step.Name]++
	n := f.calls[step.Name]
	f.rcs[step.Name] = append(f.rcs[step.Name], rc)
	fn := f.fn[step.Name]
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, rc, n)
	}
	return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"node": step.Name, "n": n}}
}

func (f *fakeExec) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

func fails(msg string) func(context.Context, engine.RunContext, int) engine.Outcome {
	return func(context.Context, engine.RunContext, int) engine.Outcome {
		return engine.Outcome{Status: engine.StatusFail, Output: msg}
	}
}

// serialRecorder takes no lock: -race reports it if two goroutines ever record at once. It
// checks that Seq grows by one.
type serialRecorder struct {
	ts  []engine.Transition
	err error
}

func (s *serialRecorder) Record(_ context.Context, t engine.Transition) error {
	if n := len(s.ts); n > 0 && t.Seq != s.ts[n-1].Seq+1 && s.err == nil {
		s.err = fmt.Errorf("seq %d after %d", t.Seq, s.ts[n-1].Seq)
	}
	s.ts = append(s.ts, t)
	return nil
}

func pbEngine(p *runbook.Plan, f *fakeExec, rec engine.Recorder) *engine.Engine {
	return &engine.Engine{Plan: p, Recorders: []engine.Recorder{rec}, Grace: 100 * time.Millisecond,
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeterministic: f, runbook.TypeAgentic: f}}
}

func find(ts []engine.Transition, kind engine.TransitionKind, name string) []engine.Transition {
	var out []engine.Transition
	for _, t := range ts {
		if t.Kind == kind && t.StepName == name {
			out = append(out, t)
		}
	}
	return out
}

func evSummary(ts []engine.Transition) string {
	var b []string
	for _, t := range ts {
		if t.Evidence != nil {
			b = append(b, t.Evidence.StepName+"="+string(t.Evidence.Status))
		}
	}
	return strings.Join(b, " ")
}

func evOf(ts []engine.Transition, name string) []engine.Evidence {
	var out []engine.Evidence
	for _, t := range find(ts, engine.TransitionStepFinished, name) {
		out = append(out, *t.Evidence)
	}
	return out
}

// barrier is released when n parties have arrived.
type barrier struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) arrive(ctx context.Context) bool {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
		return true
	case <-ctx.Done():
		return false
	}
}

// A diamond a → b, a → c, b+c → d runs b and c at the same
// time (each waits at a barrier only the other can open; their recorded start and finish
// times overlap) and d once after both. Outputs are bindings under the node id, each node
// sees a private deep copy, and the recorder is called from one goroutine with seq +1 each.
func TestDiamondRunsBranchesConcurrently(t *testing.T) {
	p := pbPlan([]pnode{det("a"), reads(det("b"), "{{ a.tag }}", "{{ version }}"), reads(det("c"), "{{ a.tag }}", "{{ version }}"),
		reads(det("d", "b", "c"), "{{ a.list }}", "{{ b.saw }}", "{{ version }}")},
		[]runbook.Edge{{From: "a", To: "b"}, {From: "a", To: "c"}})
	f := newFake()
	bar := newBarrier(2)
	f.fn["a"] = func(context.Context, engine.RunContext, int) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"tag": "v1", "list": []any{"x"}}}
	}
	branch := func(ctx context.Context, rc engine.RunContext, _ int) engine.Outcome {
		a := rc.Bindings["a"].(map[string]any)
		tag := a["tag"]
		a["tag"] = "mutated by a branch" // a private copy: nobody else may see this
		if !bar.arrive(ctx) {
			return engine.Outcome{Status: engine.StatusFail, Output: "the other branch never ran at the same time"}
		}
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"saw": tag, "version": rc.Bindings["version"]}}
	}
	f.fn["b"], f.fn["c"] = branch, branch
	rec := &serialRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"version": "2026.4.90"}})
	if err != nil || res.Status != engine.RunCompleted || rec.err != nil {
		t.Fatalf("%v %+v %v: %s", err, res, rec.err, evSummary(rec.ts))
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if n := f.count(id); n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
	sb, sc := find(rec.ts, engine.TransitionStepStarted, "b")[0], find(rec.ts, engine.TransitionStepStarted, "c")[0]
	fb, fc := find(rec.ts, engine.TransitionStepFinished, "b")[0], find(rec.ts, engine.TransitionStepFinished, "c")[0]
	if !sb.Time.Before(fc.Time) || !sc.Time.Before(fb.Time) || sb.Seq > fc.Seq || sc.Seq > fb.Seq {
		t.Errorf("b [%v, %v] and c [%v, %v] do not overlap", sb.Time, fb.Time, sc.Time, fc.Time)
	}
	sd := find(rec.ts, engine.TransitionStepStarted, "d")[0]
	if sd.Seq < fb.Seq || sd.Seq < fc.Seq {
		t.Errorf("d started (seq %d) before b (%d) and c (%d) finished", sd.Seq, fb.Seq, fc.Seq)
	}
	for i, tr := range rec.ts {
		if tr.Seq != int64(i+1) {
			t.Fatalf("transition %d has seq %d", i, tr.Seq)
		}
	}
	if got := evOf(rec.ts, "b")[0].Output; got != `{"saw":"v1","version":"2026.4.90"}` {
		t.Errorf("b's evidence output %s", got)
	}
	d := f.rcs["d"][0]
	if d.Bindings["a"].(map[string]any)["tag"] != "v1" || d.Bindings["b"].(map[string]any)["saw"] != "v1" || d.Bindings["version"] != "2026.4.90" || d.Iteration != 1 {
		t.Errorf("d's bindings %v iteration %d", d.Bindings, d.Iteration)
	}
	if _, ok := d.Bindings["c"]; ok || len(d.Bindings) != 3 {
		t.Errorf("d's templates name a, b and version only, yet it got %v", d.Bindings)
	}
	if ev := evOf(rec.ts, "a")[0]; ev.Type != "deterministic" || ev.Output != `{"list":["x"],"tag":"v1"}` {
		t.Errorf("a's evidence %+v", ev)
	}
}

// Never more than Engine.Concurrency nodes execute at once (default
// DefaultConcurrency = 4), and the limit is reached (6 independent nodes, each held until the
// test releases it).
func TestConcurrencyLimitHolds(t *testing.T) {
	for _, tc := range []struct{ set, limit int }{{1, 1}, {3, 3}, {0, engine.DefaultConcurrency}} {
		set, limit := tc.set, tc.limit
		t.Run(fmt.Sprint(set), func(t *testing.T) {
			var nodes []pnode
			for i := range 6 {
				nodes = append(nodes, det(fmt.Sprintf("n%d", i)))
			}
			f := newFake()
			entered := make(chan string, 6)
			release := make(chan struct{})
			for _, n := range nodes {
				f.fn[n.ID] = func(ctx context.Context, _ engine.RunContext, _ int) engine.Outcome {
					entered <- n.ID
					select {
					case <-release:
						return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{}}
					case <-ctx.Done():
						return engine.Outcome{Status: engine.StatusFail, Output: "never released"}
					}
				}
			}
			rec := &memRecorder{}
			e := pbEngine(pbPlan(nodes, nil), f, rec)
			e.Concurrency = set
			done := make(chan engine.Result, 1)
			go func() {
				res, _ := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
				done <- res
			}()
			// A guard, not a synchronisation: a scheduler that starts too few nodes fails
			// here instead of hanging the test.
			guard := time.After(20 * time.Second)
			recv := func() {
				select {
				case <-entered:
				case <-guard:
					t.Fatalf("fewer than %d nodes were started at once (peak %d)", limit, f.peak.Load())
				}
			}
			for range limit {
				recv()
			}
			if c := f.cur.Load(); c != int32(limit) {
				t.Errorf("%d nodes executing, want %d", c, limit)
			}
			for range 6 - limit {
				release <- struct{}{}
				recv()
			}
			for range limit {
				release <- struct{}{}
			}
			res := <-done
			if res.Status != engine.RunCompleted || f.peak.Load() != int32(limit) {
				t.Fatalf("%+v, peak %d, want %d", res, f.peak.Load(), limit)
			}
		})
	}
}

// A failed node's dependants are SKIPPED "not run" (no step_started) and,
// under continue, independent nodes still run; the run completes naming the failure.
func TestFailedNodeDependantsNotRunOthersGoOn(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("b", "a"), det("c", "b"), det("x")}, nil,
		runbook.ErrorHandler{On: "a-failed", Action: runbook.HandlerContinue, Message: "a is optional ({{ error.message }})"})
	f := newFake()
	f.fn["a"] = fails("exit 1")
	rec := &serialRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted || !strings.Contains(res.Message, "1 node(s) failed") || !strings.HasSuffix(res.Message, "'a' (node_failed): a is optional (exit 1); not run because of it: 'b', 'c'") {
		t.Fatalf("%v %+v", err, res)
	}
	if got := strings.Fields(evSummary(rec.ts)); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"a=FAIL", "b=SKIPPED", "c=SKIPPED", "x=PASS"}) {
		t.Errorf("evidence %s", got)
	}
	if o := evOf(rec.ts, "b")[0].Output; o != "not run: dependency 'a' failed" {
		t.Errorf("b: %q", o)
	}
	if o := evOf(rec.ts, "c")[0].Output; o != "not run: dependency 'b' was not run" {
		t.Errorf("c: %q", o)
	}
	if len(find(rec.ts, engine.TransitionStepStarted, "b")) != 0 || f.count("b")+f.count("c") != 0 || f.count("x") != 1 {
		t.Errorf("b/c started or ran; x ran %d times", f.count("x"))
	}
}

// With no handler a failure fails the run: the node already running finishes
// and is recorded, nothing new starts, unstarted nodes are SKIPPED "not run: the run failed".
func TestUnhandledFailureDrainsRunningNodes(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("b"), det("c"), det("d", "a")}, nil)
	f := newFake()
	aRecorded := make(chan struct{})
	f.fn["a"] = fails("boom")
	f.fn["b"] = func(ctx context.Context, _ engine.RunContext, _ int) engine.Outcome {
		select {
		case <-aRecorded: // b is still running when a's failure is recorded
			return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"late": true}}
		case <-ctx.Done():
			return engine.Outcome{Status: engine.StatusFail, Output: "a's failure was never recorded"}
		}
	}
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Concurrency = 2
	e.Recorders = append(e.Recorders, engine.RecorderFunc(func(_ context.Context, t engine.Transition) error {
		if t.Kind == engine.TransitionStepFinished && t.StepName == "a" {
			close(aRecorded)
		}
		return nil
	}))
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed || res.Message != "node 'a' failed (node_failed) and no error handler took it: boom" {
		t.Fatalf("%v %+v", err, res)
	}
	if got := rec.summary(); got != "a=FAIL b=PASS c=SKIPPED d=SKIPPED" {
		t.Errorf("evidence %s", got)
	}
	ev := rec.evidence()
	if ev[2].Output != "not run: the run failed at 'a'" || ev[3].Output != "not run: dependency 'a' failed" || f.count("c") != 0 {
		t.Errorf("c %q, d %q, c ran %d", ev[2].Output, ev[3].Output, f.count("c"))
	}
	if last := rec.ts[len(rec.ts)-1]; last.Kind != engine.TransitionRunFinished || last.RunStatus != engine.RunFailed || last.StepName != "a" || last.StepIndex != -1 {
		t.Errorf("last %+v", last)
	}
}

// An edge when that is false skips its To (SKIPPED with why, no start),
// and the skip counts as done for the dependants.
func TestWhenBranchSkips(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("major"), det("minor"), det("d", "major", "minor")}, []runbook.Edge{
		{From: "a", To: "major", When: &runbook.When{Binding: "a.kind", Op: runbook.WhenEquals, Value: "major"}},
		{From: "a", To: "minor", When: &runbook.When{Binding: "a.kind", Op: runbook.WhenIn, Value: []any{"minor", "patch"}}},
	})
	f := newFake()
	f.fn["a"] = func(context.Context, engine.RunContext, int) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"kind": "patch"}}
	}
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted || res.Message != "" {
		t.Fatalf("%v %+v", err, res)
	}
	if got := rec.summary(); got != "a=PASS major=SKIPPED minor=PASS d=PASS" {
		t.Errorf("evidence %s", got)
	}
	if o := evOf(rec.ts, "major")[0].Output; o != `skipped: when a.kind equals "major" is false` {
		t.Errorf("major: %q", o)
	}
	if f.count("major") != 0 || len(find(rec.ts, engine.TransitionStepStarted, "major")) != 0 {
		t.Error("major started")
	}
}

// Retry re-runs the node, counted against its iteration cap: a node that
// passes on its third run runs three times; one that never passes runs exactly cap times and
// the run fails with iteration_cap_exceeded.
func TestRetryCountedAgainstCap(t *testing.T) {
	retry := runbook.ErrorHandler{On: "flaky-failed", Action: runbook.HandlerRetry, Message: "again {{ error.message }}"}
	f := newFake()
	f.fn["flaky"] = func(_ context.Context, _ engine.RunContext, n int) engine.Outcome {
		if n < 3 {
			return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("fail %d", n)}
		}
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"ok": true}}
	}
	rec := &memRecorder{}
	res, err := pbEngine(pbPlan([]pnode{det("flaky")}, nil, retry), f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted || f.count("flaky") != 3 || rec.summary() != "flaky=FAIL flaky=FAIL flaky=PASS" {
		t.Fatalf("%v %+v ran %d: %s", err, res, f.count("flaky"), rec.summary())
	}
	if its := []int{f.rcs["flaky"][0].Iteration, f.rcs["flaky"][1].Iteration, f.rcs["flaky"][2].Iteration}; !slices.Equal(its, []int{1, 2, 3}) {
		t.Errorf("iterations %v", its)
	}
	if m := find(rec.ts, engine.TransitionStepStarted, "flaky")[1].Message; m != "retry (error handler on: flaky-failed) after node_failed: again fail 1" {
		t.Errorf("second start's message %q", m)
	}

	f = newFake()
	f.fn["flaky"] = fails("always")
	rec = &memRecorder{}
	res, _ = pbEngine(pbPlan([]pnode{det("flaky")}, nil, retry), f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if res.Status != engine.RunFailed || f.count("flaky") != 3 || res.Message != "node 'flaky' failed (iteration_cap_exceeded) and no error handler took it: node 'flaky' reached its iteration cap of 3 runs" {
		t.Fatalf("%+v ran %d", res, f.count("flaky"))
	}
}

// A node that always fails with on_failure.inject_into ends the
// run with iteration_cap_exceeded after a bounded number of executions: 3 of the target and
// 3 of the node (cap 3 each, counts never reset); the target sees the error in its bindings.
func TestInjectIntoEndsAtIterationCap(t *testing.T) {
	check := det("check", "fix")
	check.OnFailure = &runbook.OnFailure{InjectInto: "fix"}
	f := newFake()
	f.fn["check"] = func(_ context.Context, _ engine.RunContext, n int) engine.Outcome {
		return engine.Outcome{Status: engine.StatusFail, Value: map[string]any{"stderr": fmt.Sprintf("lint %d", n), "exit_code": 1}}
	}
	rec := &memRecorder{}
	res, err := pbEngine(pbPlan([]pnode{det("fix"), check}, nil), f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed {
		t.Fatalf("%v %+v", err, res)
	}
	if f.count("fix") != 3 || f.count("check") != 3 {
		t.Errorf("fix ran %d, check %d; want 3 and 3", f.count("fix"), f.count("check"))
	}
	if !strings.Contains(res.Message, "(iteration_cap_exceeded)") || !strings.Contains(res.Message, "node 'check' reached its iteration cap of 3 runs") {
		t.Errorf("message %q", res.Message)
	}
	if got := rec.summary(); got != "fix=PASS check=FAIL fix=PASS check=FAIL fix=PASS check=FAIL" {
		t.Errorf("evidence %s", got)
	}
	if _, ok := f.rcs["fix"][0].Bindings["error"]; ok {
		t.Error("the first run of fix has an error binding")
	}
	e := f.rcs["fix"][2].Bindings["error"].(map[string]any)
	if e["node"] != "check" || e["message"] != `{"exit_code":1,"stderr":"lint 2"}` || e["output"].(map[string]any)["stderr"] != "lint 2" {
		t.Errorf("fix's error binding %v", e)
	}
	if _, ok := f.rcs["check"][1].Bindings["error"]; ok {
		t.Error("the failed node itself got the error binding")
	}
}

// A handler combination that would loop forever (iteration_cap_exceeded →
// retry) is stopped by the global budget, RunBudgetPerNode × nodes node runs.
func TestGlobalBudgetStopsHandlerLoop(t *testing.T) {
	x := det("x")
	x.IterationCap = 2
	p := pbPlan([]pnode{x}, nil,
		runbook.ErrorHandler{On: runbook.EventIterationCapExceeded, Action: runbook.HandlerRetry},
		runbook.ErrorHandler{On: "x-failed", Action: runbook.HandlerRetry})
	f := newFake()
	f.fn["x"] = fails("no")
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunFailed || f.count("x") != 2 {
		t.Fatalf("%v %+v ran %d", err, res, f.count("x"))
	}
	want := fmt.Sprintf("execution budget of %d node runs exhausted", runbook.RunBudgetPerNode)
	if !strings.HasPrefix(res.Message, want) {
		t.Errorf("message %q, want %q…", res.Message, want)
	}
}

// Contracts. An edge's requires that does not hold fails To before it starts
// (contract_violation, handled by a contract_violation handler before "<id>-failed"); a node's
// ensures fails it after it ran; file: facts look under Engine.WorkDir; abort messages are
// templated with the bindings and the error.
func TestContractsFailNodesBeforeAndAfterTheyRun(t *testing.T) {
	abort := runbook.ErrorHandler{On: runbook.EventContractViolation, Action: runbook.HandlerAbort, Message: "contract broken at {{ error.node }} for {{ version }}"}
	other := runbook.ErrorHandler{On: "test-failed", Action: runbook.HandlerContinue}
	edge := []runbook.Edge{{From: "build", To: "test", Requires: []string{"dist-exists", "file:dist/app"}}}
	for _, tc := range []struct {
		name, want string
		dist       bool
		built      map[string]any
		ran        int
	}{
		{"output key false", "requires 'dist-exists' of edge build → test does not hold", true, map[string]any{"dist-exists": false}, 0},
		{"file missing", "requires 'file:dist/app' of edge build → test does not hold", false, map[string]any{"dist-exists": true}, 0},
		{"ensures", "ensures 'tests-passed' of node 'test' does not hold after it ran", true, map[string]any{"dist-exists": true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.dist {
				os.MkdirAll(filepath.Join(dir, "dist"), 0o755)
				os.WriteFile(filepath.Join(dir, "dist", "app"), []byte("x"), 0o644)
			}
			test := det("test")
			test.Ensures = []string{"tests-passed"}
			f := newFake()
			f.fn["build"] = func(context.Context, engine.RunContext, int) engine.Outcome {
				return engine.Outcome{Status: engine.StatusPass, Value: tc.built}
			}
			rec := &memRecorder{}
			e := pbEngine(pbPlan([]pnode{det("build"), test}, edge, other, abort), f, rec)
			e.WorkDir = dir
			res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"version": "1.2"}})
			if err != nil || res.Status != engine.RunFailed || res.Message != "contract broken at test for 1.2" {
				t.Fatalf("%v %+v", err, res)
			}
			ev := evOf(rec.ts, "test")
			if len(ev) != 1 || ev[0].Status != engine.StatusFail || !strings.HasPrefix(ev[0].Output, "contract_violation: "+tc.want) {
				t.Errorf("test's evidence %+v", ev)
			}
			if f.count("test") != tc.ran || len(find(rec.ts, engine.TransitionStepStarted, "test")) != tc.ran {
				t.Errorf("test ran %d times, want %d", f.count("test"), tc.ran)
			}
		})
	}
}

// Abort fails the run with the handler's message, templated; "<id>-failed"
// handlers win over node_failed ones.
func TestAbortMessageTemplated(t *testing.T) {
	p := pbPlan([]pnode{det("build"), det("test", "build"), det("publish", "test")}, nil,
		runbook.ErrorHandler{On: runbook.EventNodeFailed, Action: runbook.HandlerContinue},
		runbook.ErrorHandler{On: "test-failed", Action: runbook.HandlerAbort, Message: "Tests failed for {{ version }} after {{ build.n }} build: {{ error.message }}"})
	f := newFake()
	f.fn["test"] = fails("3 failing")
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"version": "2026.4.90"}})
	if err != nil || res.Status != engine.RunFailed || res.Message != "Tests failed for 2026.4.90 after 1 build: 3 failing" {
		t.Fatalf("%v %+v", err, res)
	}
	if got := rec.summary(); got != "build=PASS test=FAIL publish=SKIPPED" || f.count("publish") != 0 {
		t.Errorf("evidence %s", got)
	}
}

// fakeGate answers approval nodes: it records each request and returns the scripted answer.
type fakeGate struct {
	mu   sync.Mutex
	reqs []engine.GateRequest
	fn   func(ctx context.Context, req engine.GateRequest) (engine.Decision, error)
}

func (g *fakeGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	g.mu.Unlock()
	return g.fn(ctx, req)
}

// An approval node renders its prompt, opens the gate with the node id and
// the PolicyContext (commands of the guarded deterministic nodes up to the next approval,
// args rendered where their bindings exist, else raw), records gate_opened/gate_decided,
// and passes with {approved, by, reason, auto_passed, rule}; a rejection FAILs and handlers apply.
func TestApprovalNodeOpensGateAndBindsItsDecision(t *testing.T) {
	publish := det("publish", "review")
	publish.Command, publish.Args = "git", []string{"push", "origin", "v{{ version }}"}
	notify := det("notify", "publish")
	notify.Command, notify.Args = "curl", []string{"{{ publish.url }}"}
	tool := pnode{Node: runbook.Node{ID: "announce", Depends: []string{"publish"}, Agent: "rel", Skill: "post", IterationCap: 3}, typ: runbook.TypeAgentic}
	nodes := []pnode{det("build"), appr("review", "Publish {{ version }} built by {{ build.node }}?", "build"), publish, notify, tool,
		appr("final", "done?", "notify"), reads(det("after", "final"), "{{ review.approved }}", "{{ review.rule }}")}
	p := pbPlan(nodes, nil, runbook.ErrorHandler{On: "review-failed", Action: runbook.HandlerAbort, Message: "{{ error.node }} rejected"})

	g := &fakeGate{fn: func(_ context.Context, req engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Approved, By: "policy", Reason: "qa: read-only", Source: "policy",
			Policy: &engine.PolicyDecision{AutoPassed: true, Rule: "qa", Action: "auto-approve", Reason: "read-only"}}, nil
	}}
	f := newFake()
	rec := &memRecorder{}
	e := pbEngine(p, f, rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"version": "2.0"}})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
	req := g.reqs[0]
	if req.NodeID != "review" || req.StepName != "review" || req.Prompt != "Publish 2.0 built by build?" || req.PlanDigest != "hash" || time.Until(req.Deadline) <= 0 {
		t.Errorf("request %+v", req)
	}
	pc := req.Policy
	if pc == nil || !slices.Equal(pc.Commands, []string{"git push origin v2.0", "curl {{ publish.url }}"}) || !slices.Equal(pc.Tools, []string{"rel/post"}) ||
		pc.Node["id"] != "review" || pc.Node["prompt"] != "Publish 2.0 built by build?" || pc.Playbook["version"] != "1.0" || pc.Bindings["version"] != "2.0" {
		t.Fatalf("policy context %+v", pc)
	}
	if !slices.Equal(g.reqs[1].Policy.Commands, []string{"tool true qa"}) {
		t.Errorf("final's commands %v", g.reqs[1].Policy.Commands)
	}
	ev := evOf(rec.ts, "review")[0]
	if ev.Status != engine.StatusPass || *ev.Input != "Publish 2.0 built by build?" || ev.Output != `{"approved":true,"auto_passed":true,"by":"policy","reason":"qa: read-only","rule":"qa"}` {
		t.Errorf("review evidence %+v", ev)
	}
	dec := find(rec.ts, engine.TransitionGateDecided, "review")
	if len(find(rec.ts, engine.TransitionGateOpened, "review")) != 1 || len(dec) != 1 || !strings.Contains(dec[0].Message, "auto-passed by policy rule qa: read-only") {
		t.Errorf("gate transitions %+v", dec)
	}
	if b, _ := f.rcs["after"][0].Bindings["review"].(map[string]any); b["approved"] != true || b["rule"] != "qa" {
		t.Errorf("review binding %v", b)
	}

	g.fn = func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{Verdict: engine.Rejected, By: "ann", Reason: "not today", Source: "terminal"}, nil
	}
	f, rec = newFake(), &memRecorder{}
	e = pbEngine(p, f, rec)
	e.Gate = g
	res, _ = e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"version": "2.0"}})
	if res.Status != engine.RunFailed || res.Message != "review rejected" || f.count("publish") != 0 {
		t.Fatalf("rejected: %+v %s", res, rec.summary())
	}
	if ev := evOf(rec.ts, "review")[0]; ev.Status != engine.StatusFail || !strings.Contains(ev.Output, `"approved":false`) {
		t.Errorf("rejected evidence %+v", ev)
	}
}

// The confirm step's gate error rules hold for approval nodes: an unresolved
// gate halts the run resumable (no outcome, no handler), a deadline is TIMED_OUT.
func TestApprovalNodeUnresolvedGateHaltsAndDeadlineTimesOut(t *testing.T) {
	p := pbPlan([]pnode{appr("review", "ok?")}, nil, runbook.ErrorHandler{On: runbook.EventNodeFailed, Action: runbook.HandlerContinue})
	g := &fakeGate{fn: func(context.Context, engine.GateRequest) (engine.Decision, error) {
		return engine.Decision{}, fmt.Errorf("%w: control plane down", engine.ErrGateUnresolved)
	}}
	rec := &memRecorder{}
	e := pbEngine(p, newFake(), rec)
	e.Gate = g
	res, err := e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if !errors.Is(err, engine.ErrGateUnresolved) || res.Status != engine.RunInProgress || rec.summary() != "" {
		t.Fatalf("unresolved: %v %+v %s", err, res, rec.summary())
	}
	p.Steps[0].TimeoutSeconds = 1
	g.fn = func(ctx context.Context, _ engine.GateRequest) (engine.Decision, error) {
		<-ctx.Done()
		return engine.Decision{}, ctx.Err()
	}
	rec = &memRecorder{}
	e = pbEngine(p, newFake(), rec)
	e.Gate = g
	res, err = e.Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted || rec.summary() != "review=TIMED_OUT" || !strings.Contains(res.Message, "'review' (node_failed)") {
		t.Fatalf("deadline: %v %+v %s", err, res, rec.summary())
	}
}

// A signal mid-DAG cancels the running nodes' contexts and writes one
// final run_interrupted naming them (no outcome for them, nothing new starts); a resume from
// the recorded evidence does not re-run a recorded node, gets the bindings back from the
// evidence, and continues the sequence.
func TestCancelMidDAGThenResume(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("b", "a"), det("c", "a"), reads(det("d", "b", "c"), "{{ a.tag }}", "{{ b.from }}", "{{ v }}")}, nil)
	f := newFake()
	bothRunning := newBarrier(3)
	stopped := make(chan string, 2)
	block := func(ctx context.Context, _ engine.RunContext, _ int) engine.Outcome {
		bothRunning.arrive(ctx)
		<-ctx.Done()
		stopped <- "x"
		return engine.Outcome{Status: engine.StatusFail, Output: "stopped"}
	}
	f.fn["a"] = func(context.Context, engine.RunContext, int) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Value: map[string]any{"tag": "v9"}}
	}
	f.fn["b"], f.fn["c"] = block, block
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		bothRunning.arrive(context.Background())
		cancel(engine.Interrupted{Signal: "SIGTERM"})
	}()
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(ctx, engine.Start{RunID: "P", Fresh: true, Bindings: map[string]any{"v": "1"}})
	if err != nil || res.Status != engine.RunInProgress || len(stopped) != 2 {
		t.Fatalf("%v %+v, %d workers stopped", err, res, len(stopped))
	}
	last := rec.ts[len(rec.ts)-1]
	if last.Kind != engine.TransitionRunInterrupted || last.Message != "interrupted by SIGTERM during steps 'b' (index 1), 'c' (index 2); the steps were stopped" {
		t.Errorf("final record %+v", last)
	}
	finals := 0
	for _, tr := range rec.ts {
		if tr.Kind == engine.TransitionRunInterrupted || tr.Kind == engine.TransitionRunFinished {
			finals++
		}
	}
	if finals != 1 || rec.summary() != "a=PASS" || f.count("d") != 0 {
		t.Fatalf("%d finals, evidence %s, d ran %d", finals, rec.summary(), f.count("d"))
	}

	// Resume: b recorded PASS by now (say the operator's state had it); c and d run, a and b don't.
	prior := append(rec.evidence(), engine.Evidence{StepName: "b", Type: "deterministic", Output: `{"from":"b"}`, Status: engine.StatusPass})
	f2 := newFake()
	rec2 := &memRecorder{}
	res, err = pbEngine(p, f2, rec2).Run(context.Background(), engine.Start{RunID: "P", Seq: last.Seq, Evidence: prior, Bindings: map[string]any{"v": "1"}})
	if err != nil || res.Status != engine.RunCompleted || rec2.summary() != "c=PASS d=PASS" || f2.count("a")+f2.count("b") != 0 {
		t.Fatalf("resume: %v %+v %s", err, res, rec2.summary())
	}
	if rec2.ts[0].Seq != last.Seq+1 {
		t.Errorf("resume starts at seq %d, want %d", rec2.ts[0].Seq, last.Seq+1)
	}
	if b := f2.rcs["d"][0].Bindings; b["a"].(map[string]any)["tag"] != "v9" || b["b"].(map[string]any)["from"] != "b" || b["v"] != "1" {
		t.Errorf("d's bindings on resume %v", b)
	}
}

// A confirmed cancel from elsewhere mid-DAG ends the run CANCELLED with the
// CANCEL audit entry, once.
func TestCancelRequestMidDAG(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("b")}, nil)
	f := newFake()
	ctx, cancel := context.WithCancelCause(context.Background())
	bar := newBarrier(2)
	block := func(c context.Context, _ engine.RunContext, _ int) engine.Outcome {
		if bar.arrive(c) {
			cancel(engine.CancelRequest{By: "oncall"})
		}
		<-c.Done()
		return engine.Outcome{Status: engine.StatusFail, Output: "stopped"}
	}
	f.fn["a"], f.fn["b"] = block, block
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(ctx, engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCancelled || rec.summary() != "CANCEL=PASS" {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
}

// A node whose last recorded entry is FAIL is handed to the failure
// handling again on resume, with its counts rebuilt from the evidence: with two failures
// recorded and cap 3 it runs once more, then the run fails with iteration_cap_exceeded.
func TestResumeKeepsIterationCounts(t *testing.T) {
	p := pbPlan([]pnode{det("a"), det("x", "a")}, nil, runbook.ErrorHandler{On: "x-failed", Action: runbook.HandlerRetry})
	prior := []engine.Evidence{
		{StepName: "a", Type: "deterministic", Output: `{"k":1}`, Status: engine.StatusPass},
		{StepName: "x", Type: "deterministic", Output: "bad", Status: engine.StatusFail},
		{StepName: "x", Type: "deterministic", Output: "bad", Status: engine.StatusFail},
	}
	f := newFake()
	f.fn["x"] = fails("bad")
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Seq: 9, Evidence: prior})
	if err != nil || res.Status != engine.RunFailed || f.count("x") != 1 || f.count("a") != 0 || !strings.Contains(res.Message, "iteration_cap_exceeded") {
		t.Fatalf("%v %+v x ran %d, a %d", err, res, f.count("x"), f.count("a"))
	}
	if it := f.rcs["x"][0].Iteration; it != 3 {
		t.Errorf("x's iteration %d, want 3", it)
	}
}

// An agentic node that times out raises agentic_timeout, whose handler wins
// over node_failed; the engine records TIMED_OUT and the node's context is cancelled.
func TestAgenticTimeoutHandlerWinsOverNodeFailed(t *testing.T) {
	tool := pnode{Node: runbook.Node{ID: "ask", Agent: "a", Skill: "s", IterationCap: 3}, typ: runbook.TypeAgentic}
	p := pbPlan([]pnode{tool, det("next")}, nil,
		runbook.ErrorHandler{On: runbook.EventNodeFailed, Action: runbook.HandlerAbort, Message: "wrong handler"},
		runbook.ErrorHandler{On: runbook.EventAgenticTimeout, Action: runbook.HandlerContinue})
	p.Steps[0].TimeoutSeconds = 1
	f := newFake()
	f.fn["ask"] = func(ctx context.Context, _ engine.RunContext, _ int) engine.Outcome {
		<-ctx.Done()
		return engine.Outcome{Status: engine.StatusFail, Output: ctx.Err().Error()}
	}
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Fresh: true})
	if err != nil || res.Status != engine.RunCompleted || !strings.Contains(res.Message, "'ask' (agentic_timeout)") || evOf(rec.ts, "ask")[0].Status != engine.StatusTimedOut || f.count("next") != 1 {
		t.Fatalf("%v %+v %s", err, res, rec.summary())
	}
}

// A resume after an inject whose target already ran again re-runs only the
// failed node (the target is not executed a third time), and the counts stay bounded.
func TestResumeAfterInjectRerunsOnlyTheFailedNode(t *testing.T) {
	check := reads(det("check", "fix"), "{{ fix.n }}")
	check.OnFailure = &runbook.OnFailure{InjectInto: "fix"}
	p := pbPlan([]pnode{det("fix"), check}, nil)
	prior := []engine.Evidence{
		{StepName: "fix", Type: "deterministic", Output: `{"n":1}`, Status: engine.StatusPass},
		{StepName: "check", Type: "deterministic", Output: "lint", Status: engine.StatusFail},
		{StepName: "fix", Type: "deterministic", Output: `{"n":2}`, Status: engine.StatusPass},
	}
	f := newFake()
	rec := &memRecorder{}
	res, err := pbEngine(p, f, rec).Run(context.Background(), engine.Start{RunID: "P", Seq: 5, Evidence: prior})
	if err != nil || res.Status != engine.RunCompleted || f.count("fix") != 0 || f.count("check") != 1 || rec.summary() != "check=PASS" {
		t.Fatalf("%v %+v fix %d check %d %s", err, res, f.count("fix"), f.count("check"), rec.summary())
	}
	if rc := f.rcs["check"][0]; rc.Iteration != 2 || rc.Bindings["fix"].(map[string]any)["n"] != json.Number("2") {
		t.Errorf("check's iteration %d, bindings %v", rc.Iteration, rc.Bindings)
	}
}
