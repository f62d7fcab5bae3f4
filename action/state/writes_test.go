package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// gateFunc adapts a function to engine.Gate.
type gateFunc func(context.Context, engine.GateRequest) (engine.Decision, error)

func (f gateFunc) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	return f(ctx, req)
}

// flushHook is a GroupRecorder placed after a FileRecorder in an engine's recorders: appended
// sees each transition as the engine appends it, flushed runs after the FileRecorder's Flush
// (the state file on disk then equals its State).
type flushHook struct {
	appended func(t engine.Transition)
	flushed  func()
}

func (h flushHook) Record(ctx context.Context, t engine.Transition) error {
	_ = h.Append(ctx, t)
	return h.Flush(ctx)
}

func (h flushHook) Append(_ context.Context, t engine.Transition) error {
	if h.appended != nil {
		h.appended(t)
	}
	return nil
}

func (h flushHook) Flush(context.Context) error {
	if h.flushed != nil {
		h.flushed()
	}
	return nil
}

// TestOnlySideEffectingStartsAreDurable: one state write per step, made when the engine
// flushes the step's start with the previous step's finish, before the step runs: a deploy's
// step_started is on disk, with in_flight, before the deploy executor is called; a check's
// or confirm's start is written with that flush too but need not be durable (resume re-runs
// such a step anyway). Asserted from inside the executors on the file itself.
func TestOnlySideEffectingStartsAreDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.state.json")
	plan := testPlan() // check-pre, deploy-app, confirm-app
	o, err := Open(plan, path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State}
	var group, writesPerFlush []string
	lastWrites := 0
	log := flushHook{
		appended: func(t engine.Transition) {
			group = append(group, strings.TrimSpace(fmt.Sprintf("%s %s %s", t.Kind, t.StepType, t.StepName)))
		},
		flushed: func() {
			if len(group) > 0 {
				writesPerFlush = append(writesPerFlush, fmt.Sprintf("%s: %d", strings.Join(group, ", "), fr.writes-lastWrites))
			}
			group, lastWrites = nil, fr.writes
		},
	}
	var inside []string
	onDisk := func(step string) {
		st, err := Read(path)
		if err != nil {
			t.Fatalf("inside %s: %v", step, err)
		}
		inflight := "none"
		if st.InFlight != nil {
			inflight = st.InFlight.StepName + "/" + st.InFlight.StepType
		}
		inside = append(inside, fmt.Sprintf("%s: seq %d, current %d, in_flight %s, evidence %d", step, st.Seq, st.CurrentStepIndex, inflight, len(st.EvidencePack)))
	}
	exec := engine.ExecutorFunc(func(_ context.Context, s runbook.Step, _ engine.RunContext) engine.Outcome {
		onDisk(s.Name)
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count": 0}`}
	})
	gate := gateFunc(func(_ context.Context, req engine.GateRequest) (engine.Decision, error) {
		onDisk("gate " + req.StepName)
		return engine.Decision{Verdict: engine.Approved, By: "token:t", Input: "yes", Source: "test"}, nil
	})
	e := &engine.Engine{Plan: plan, Gate: gate, Recorders: []engine.Recorder{fr, log},
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: exec, runbook.TypeDeploy: exec}}
	res, err := e.Run(t.Context(), engine.Start{RunID: o.State.RunID, Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	wantInside := []string{
		// run_started and check-pre's step_started (seq 2), written in one flush.
		"check-pre: seq 2, current 0, in_flight none, evidence 0",
		// deploy-app's step_started (seq 4) is, with in_flight, before the deploy runs.
		"deploy-app: seq 4, current 1, in_flight deploy-app/deploy, evidence 1",
		// the gate is announced (gate_opened, seq 7: written) before it waits.
		"gate confirm-app: seq 7, current 2, in_flight none, evidence 2",
	}
	if strings.Join(inside, "\n") != strings.Join(wantInside, "\n") {
		t.Errorf("state file seen from inside the steps:\n%s\nwant\n%s", strings.Join(inside, "\n"), strings.Join(wantInside, "\n"))
	}
	wantWrites := []string{
		"run_started, step_started check check-pre: 1",
		"step_finished check check-pre, step_started deploy deploy-app: 1",
		"step_finished deploy deploy-app, step_started confirm confirm-app: 1",
		"gate_opened confirm confirm-app: 1",
		"gate_decided confirm confirm-app: 0",
		"step_finished confirm confirm-app, run_finished: 1",
	}
	if strings.Join(writesPerFlush, "\n") != strings.Join(wantWrites, "\n") {
		t.Errorf("writes per flush:\n%s\nwant\n%s", strings.Join(writesPerFlush, "\n"), strings.Join(wantWrites, "\n"))
	}
	st, err := Read(path)
	if err != nil || st.Seq != 10 || st.RunStatus != engine.RunCompleted || len(st.EvidencePack) != 3 || st.InFlight != nil {
		t.Fatalf("final state: %v %+v", err, st)
	}
}

// TestPlaybookApprovalStartNotDurable: in a playbook, an approval node's
// step_started is not written (it asks again on resume), a deterministic or agentic node's
// is, with in_flight_nodes.
func TestPlaybookApprovalStartNotDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "diamond.playbook.state.json")
	plan := testPlaybookPlan()
	o, err := OpenPlaybook(plan, path, PlaybookOpenOptions{PlaybookPath: plan.Path})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State}
	typed := func(tr engine.Transition, typ runbook.StepType) engine.Transition {
		tr.RunID, tr.StepType = o.State.RunID, string(typ)
		return tr
	}
	steps := []struct {
		t      engine.Transition
		writes int
	}{
		{engine.Transition{RunID: o.State.RunID, Seq: 1, Kind: engine.TransitionRunStarted, StepIndex: -1, RunStatus: engine.RunInProgress}, 1},
		{typed(tr(2, engine.TransitionStepStarted, 0, "a", nil), runbook.TypeApproval), 0},
		{typed(tr(3, engine.TransitionGateOpened, 0, "a", nil), runbook.TypeApproval), 1},
		{typed(tr(4, engine.TransitionGateDecided, 0, "a", nil), runbook.TypeApproval), 0},
		{typed(tr(5, engine.TransitionStepFinished, 0, "a", &engine.Evidence{StepName: "a", Type: "approval", Status: engine.StatusPass, TimestampUTC: "t"}), runbook.TypeApproval), 1},
		{typed(tr(6, engine.TransitionStepStarted, 1, "b", nil), runbook.TypeDeterministic), 1},
		{typed(tr(7, engine.TransitionStepStarted, 2, "c", nil), runbook.TypeAgentic), 1},
	}
	for _, s := range steps {
		before := fr.writes
		if err := fr.Record(t.Context(), s.t); err != nil {
			t.Fatal(err)
		}
		if got := fr.writes - before; got != s.writes {
			t.Errorf("%s of %s (%s): %d writes, want %d", s.t.Kind, s.t.StepName, s.t.StepType, got, s.writes)
		}
	}
	st, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeList(st.InFlightNodes); got != "b, c" || st.Seq != 7 || st.IterationCounts["a"] != 1 {
		t.Errorf("on disk: in_flight_nodes %s, seq %d, iteration_counts %v", got, st.Seq, st.IterationCounts)
	}
}

// TestCachedEncodingIsByteExact: after many writes through one FileRecorder (its
// Pack reuses every evidence entry's and outbox transition's bytes; on Linux each rewrite is
// written into the version before last, in place), the file on disk is byte
// for byte what a fresh encoding of the same State gives, and that is json.MarshalIndent of
// the State in the file's layout: run_id and evidence_pack first, the outbox last.
// Acknowledgements drop outbox entries in between, so the outbox cache is exercised both ways.
func TestCachedEncodingIsByteExact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.state.json")
	in := "Resources | where name == '<b>&amp;' | project name"
	plan := &runbook.Plan{Name: "demo", SchemaHash8: "a1b2c3d4", ContentHash: "hash-1"}
	const n = 60
	for i := 0; i < n; i++ {
		typ := runbook.TypeCheck
		if i%4 == 1 {
			typ = runbook.TypeDeploy
		}
		plan.Steps = append(plan.Steps, runbook.Step{Index: i, Name: fmt.Sprintf("step-%02d", i), Type: typ, Input: &in, OnFail: runbook.OnFailContinue, TimeoutSeconds: 5})
	}
	o, err := Open(plan, path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State, KeepOutbox: true, ReuseFiles: true}
	checked := 0
	verify := func(at string) {
		disk, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := new(Pack).Encode(fr.State)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(disk, fresh) {
			t.Fatalf("%s: the cached encoding differs from a fresh one:\n%s\n----\n%s", at, disk, fresh)
		}
		if want := marshalIndentLayout(t, fr.State); !bytes.Equal(disk, want) {
			t.Fatalf("%s: the file is not json.MarshalIndent of the state:\n%s\n----\n%s", at, disk, want)
		}
		if _, err := Parse(path, disk); err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		checked++
	}
	var seen int64
	lastWrites := 0
	var last engine.Transition
	check := flushHook{
		appended: func(tr engine.Transition) {
			last = tr
			seen++
			if seen%3 == 0 { // the control plane acknowledges all but the last transition
				fr.Ack(tr.Seq - 1)
			}
		},
		flushed: func() {
			if fr.writes != lastWrites { // the flush wrote the file: disk equals memory
				verify(fmt.Sprintf("after seq %d (%s %s)", last.Seq, last.Kind, last.StepName))
				lastWrites = fr.writes
			}
		},
	}
	exec := engine.ExecutorFunc(func(_ context.Context, s runbook.Step, _ engine.RunContext) engine.Outcome {
		return engine.Outcome{Status: engine.StatusPass, Output: fmt.Sprintf("{\"count\": %d, \"data\": [\"<\\u00e9>\"]}\n", s.Index)}
	})
	e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{fr, check},
		Executors: map[runbook.StepType]engine.Executor{runbook.TypeCheck: exec, runbook.TypeDeploy: exec}}
	res, err := e.Run(t.Context(), engine.Start{RunID: o.State.RunID, Fresh: true})
	if err != nil || res.Status != engine.RunCompleted {
		t.Fatalf("run: %v %+v", err, res)
	}
	if err := fr.Sync(); err != nil {
		t.Fatal(err)
	}
	verify("after Sync")
	st, err := Read(path)
	if err != nil || len(st.EvidencePack) != n || len(st.Outbox) == 0 {
		t.Fatalf("final: %v, %d entries, outbox %d", err, len(st.EvidencePack), len(st.Outbox))
	}
	if checked < n { // one write per step at least
		t.Fatalf("only %d checks made", checked)
	}
}

// marshalIndentLayout is the reference encoding of the state file's layout (see Pack):
// json.MarshalIndent of the State with run_id and evidence_pack moved to the start, in that
// order, and the outbox (one json.Marshal line per transition) to the end.
func marshalIndentLayout(t *testing.T, s *State) []byte {
	t.Helper()
	c := *s
	c.RunID, c.Outbox, c.EvidencePack = "", nil, nil
	rest, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// run_id is the first field, evidence_pack (no omitempty) is there as null: take both out.
	rest = bytes.Replace(rest, []byte("\n  \"run_id\": \"\","), nil, 1)
	rest = bytes.Replace(rest, []byte(",\n  \"evidence_pack\": null"), nil, 1)
	id, err := json.Marshal(s.RunID)
	if err != nil {
		t.Fatal(err)
	}
	ev := s.EvidencePack
	if ev == nil {
		ev = []engine.Evidence{}
	}
	pack, err := json.MarshalIndent(ev, "  ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte("{\n  \"run_id\": "), id...)
	out = append(append(out, ",\n  \"evidence_pack\": "...), pack...)
	out = append(append(out, ','), rest[1:len(rest)-2]...) // without "{" and "\n}"
	if len(s.Outbox) > 0 {
		out = append(out, ",\n  \"outbox\": ["...)
		for i, tr := range s.Outbox {
			b, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, "\n    "...)
			out = append(out, b...)
		}
		out = append(out, "\n  ]"...)
	}
	return append(out, "\n}\n"...)
}

// TestPlaybookMapsCachedByteExact: a playbook's bindings and iteration_counts are
// encoded entry by entry and cached (packmap.go); after nodes are added, re-run (a binding
// replaced, a count bumped), and inputs of every JSON kind, each encoding equals
// json.MarshalIndent of the State in the file's layout byte for byte.
func TestPlaybookMapsCachedByteExact(t *testing.T) {
	s := &State{RunID: "RBOOK-20260101-diamond-0123abcd", RunbookName: "diamond", RunStatus: engine.RunInProgress, LastCompletedStepIndex: -1, TotalSteps: 40,
		EvidencePack: []engine.Evidence{}, Kind: KindPlaybook,
		Inputs:   map[string]any{"version": "2026.4.90", "n": 3.0, "flags": []any{"a", "<b>"}, "on": true, "none": nil},
		Bindings: map[string]any{}, IterationCounts: map[string]int{}}
	for k, v := range s.Inputs {
		s.Bindings[k] = v
	}
	var p Pack
	check := func(at string) {
		got, err := p.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshalIndentLayout(t, s); !bytes.Equal(got, want) {
			t.Fatalf("%s:\n%s\n----\n%s", at, got, want)
		}
		back, err := Parse("x", got)
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		if len(back.Bindings) != len(s.Bindings) || len(back.IterationCounts) != len(s.IterationCounts) {
			t.Fatalf("%s: read back %d bindings, %d counts", at, len(back.Bindings), len(back.IterationCounts))
		}
	}
	check("inputs only")
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("node-%02d", 39-i) // added out of order
		s.IterationCounts[name]++
		check("started " + name)
		s.Bindings[name] = map[string]any{"stdout": fmt.Sprintf("built %d &", i), "exit_code": float64(i), "nested": map[string]any{"k": []any{1.0, "x"}}}
		check("finished " + name)
		if i%7 == 3 { // a loop re-runs an earlier node: its binding is replaced, its count grows
			again := fmt.Sprintf("node-%02d", 39)
			s.IterationCounts[again]++
			s.Bindings[again] = map[string]any{"stdout": fmt.Sprintf("again %d", i)}
			check("re-ran " + again)
		}
	}
	s.Bindings["version"] = "2026.5.1" // a scalar replaced
	s.Outbox = []engine.Transition{{RunID: s.RunID, Seq: 9, Kind: engine.TransitionStepStarted, Time: day}}
	check("scalar replaced, with an outbox")
	delete(s.Bindings, "none")
	check("a key removed")
}

// deployChain is a plan of n deploy steps.
func deployChain(n int) *runbook.Plan {
	in := "remediation/a.json"
	plan := &runbook.Plan{Name: "demo", SchemaHash8: "a1b2c3d4", ContentHash: "hash-1"}
	for i := range n {
		plan.Steps = append(plan.Steps, runbook.Step{Index: i, Name: fmt.Sprintf("deploy-%d", i), Type: runbook.TypeDeploy, Input: &in, OnFail: runbook.OnFailHalt, TimeoutSeconds: 5})
	}
	return plan
}

// TestOverlappedRewritesLeaveTheFileAsRecorded: with OverlapWrites the rewrite made before
// each step runs goes on while the step runs, one write per step as before; when the run
// returns the state file on disk is byte for byte the final State's encoding.
func TestOverlappedRewritesLeaveTheFileAsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.state.json")
	fr := runChainWith(t, path, deployChain(20), chainOpts{overlapWrites: true}, nil)
	if fr.writes != 21 { // one per step (with its start) and the last with run_finished
		t.Errorf("%d state-file writes for 20 steps, want 21", fr.writes)
	}
	if left := temps(t, path); len(left) != 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}

// TestAFailedOverlappedRewriteStopsTheRunAtTheNextFlush: an overlapped rewrite that fails is
// reported by the next flush, which stops the run with the specification's ABORT line before
// the next step runs. The step whose start that rewrite recorded has run by then, and the
// journal holds it all.
func TestAFailedOverlappedRewriteStopsTheRunAtTheNextFlush(t *testing.T) {
	if runtime.GOOS == "windows" {
		// The rewrite is made to fail by moving the folder away from the open journal; on
		// Windows the journal is closed after each flush (journalStaysOpen), so its next
		// append, not the rewrite, is what fails there.
		t.Skip("the folder cannot be moved away from an open journal on Windows")
	}
	dir := filepath.Join(t.TempDir(), "runs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "demo.state.json")
	plan := deployChain(4)
	o, err := Open(plan, path, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	fr := &FileRecorder{Path: path, State: o.State, OverlapWrites: true}
	var ran []string
	exec := engine.ExecutorFunc(func(_ context.Context, s runbook.Step, _ engine.RunContext) engine.Outcome {
		ran = append(ran, s.Name)
		if s.Index == 1 { // from the next flush on, no temp file can be made beside the state file
			if err := fr.Wait(); err != nil {
				t.Errorf("the rewrite before deploy-1: %v", err)
			}
			// The folder moves away (the open journal goes with it) and a file takes its name.
			if err := os.Rename(dir, dir+".moved"); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
		return engine.Outcome{Status: engine.StatusPass, Output: `{"count": 0}`}
	})
	e := &engine.Engine{Plan: plan, Recorders: []engine.Recorder{fr}, Executors: map[runbook.StepType]engine.Executor{runbook.TypeDeploy: exec}}
	_, err = e.Run(t.Context(), engine.Start{RunID: o.State.RunID, Fresh: true})
	var nw *NotWritableError
	if !errors.As(err, &nw) || !strings.HasPrefix(err.Error(), "ABORT: state_file_path not writable") {
		t.Fatalf("Run error %v, want *NotWritableError", err)
	}
	if got := strings.Join(ran, " "); got != "deploy-0 deploy-1 deploy-2" {
		t.Errorf("steps run: %s; want deploy-0 deploy-1 deploy-2 (the failure is seen at the flush after deploy-2's start)", got)
	}
	_, ts, _, err := ReadJournal(JournalPath(filepath.Join(dir+".moved", "demo.state.json"), o.State.RunID))
	// run_started, three steps' start and finish, and deploy-3's start, which that flush
	// held: deploy-3 never ran, and a resume finds it in flight (never repeated silently).
	if err != nil || len(ts) != 8 || ts[6].Kind != engine.TransitionStepFinished || ts[6].StepName != "deploy-2" ||
		ts[7].Kind != engine.TransitionStepStarted || ts[7].StepName != "deploy-3" {
		t.Fatalf("journal: %v, %d transitions; want run_started, three steps' start and finish, deploy-3's start", err, len(ts))
	}
}
