package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// pbRecorder records a playbook run's transitions with consecutive seqs.
type pbRecorder struct {
	t   *testing.T
	s   *Store
	run string
	seq int64
}

func newPlaybookRun(t *testing.T, s *Store, id, bindings string) *pbRecorder {
	t.Helper()
	nr := newRun(id)
	nr.Kind, nr.Bindings, nr.EpicID, nr.SessionID = KindPlaybook, json.RawMessage(bindings), "T889", "ses_xyz"
	mustStart(t, s, nr)
	return &pbRecorder{t: t, s: s, run: id}
}

// rec records one transition of node (index, type) with the given kind; ev is the evidence of
// a step_finished (nil otherwise); status is the executor's run status.
func (r *pbRecorder) rec(kind TransitionKind, index int, node, typ string, ev *Evidence, status ExecStatus) RunProgress {
	r.t.Helper()
	r.seq++
	x := Transition{RunID: r.run, Seq: r.seq, Kind: kind, At: t0.Add(time.Duration(r.seq) * time.Second),
		StepIndex: index, StepName: node, StepType: typ, RunStatus: status, Evidence: ev}
	if ev != nil {
		ev.StepName, ev.Type, ev.At = node, typ, x.At
	}
	return mustRecord(r.t, r.s, x).Progress
}

func (r *pbRecorder) start(index int, node, typ string) RunProgress {
	return r.rec(KindStepStarted, index, node, typ, nil, ExecInProgress)
}

func (r *pbRecorder) finish(index int, node, typ string, status StepStatus, output string) RunProgress {
	return r.rec(KindStepFinished, index, node, typ, &Evidence{Output: output, Status: status}, ExecInProgress)
}

func (r *pbRecorder) row() Run {
	r.t.Helper()
	run, err := r.s.Run(context.Background(), r.run)
	if err != nil {
		r.t.Fatal(err)
	}
	return run
}

func jsonMap(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Bindings start with the inputs and gather each PASS node's output under its own id; a node
// whose output has the same keys as another's never overwrites it; a non-object output is
// kept as {"output": text}; a FAIL leaves the bindings alone. iteration_counts count every
// step_started; current_node lists both active nodes in step_index order.
func TestBindingsIterationCountsAndActiveNodes(t *testing.T) {
	s, _ := openTest(t)
	r := newPlaybookRun(t, s, "PB1", `{"version":"2026.4.90"}`)
	if got := r.row(); string(got.Bindings) != `{"version":"2026.4.90"}` || got.EpicID != "T889" || got.SessionID != "ses_xyz" {
		t.Fatalf("first bindings / links = %s %q %q", got.Bindings, got.EpicID, got.SessionID)
	}
	r.rec(KindRunStarted, -1, "", "", nil, ExecInProgress)
	r.start(0, "build", "deterministic")
	r.finish(0, "build", "deterministic", StepPass, `{"stdout":"built","exit_code":0,"version":"x"}`)
	// Two nodes run at once: c (index 2) starts before b (index 1); current_node is in plan order.
	r.start(2, "c", "deterministic")
	p := r.start(1, "b", "deterministic")
	if p.CurrentNode != "b,c" || p.Status != RunRunning {
		t.Fatalf("progress = %q %s, want b,c running", p.CurrentNode, p.Status)
	}
	if got := r.row(); got.CurrentNode != "b,c" || strings.Join(got.ActiveNodes, ",") != "b,c" {
		t.Fatalf("row current_node %q active %q", got.CurrentNode, got.ActiveNodes)
	}
	r.finish(1, "b", "deterministic", StepFail, `{"stdout":"","stderr":"boom","exit_code":1}`)
	r.start(1, "b", "deterministic") // a retry
	r.finish(1, "b", "deterministic", StepPass, "plain text, not JSON")
	p = r.finish(2, "c", "deterministic", StepPass, `{"stdout":"other","exit_code":0}`)
	if p.CurrentNode != "" {
		t.Fatalf("current_node %q after all finished, want none", p.CurrentNode)
	}
	got := r.row()
	want := map[string]any{
		"version": "2026.4.90",
		"build":   map[string]any{"stdout": "built", "exit_code": 0.0, "version": "x"},
		"b":       map[string]any{"output": "plain text, not JSON"},
		"c":       map[string]any{"stdout": "other", "exit_code": 0.0},
	}
	if g, w := mustJSON(t, jsonMap(t, got.Bindings)), mustJSON(t, want); g != w {
		t.Fatalf("bindings = %s\nwant       %s", g, w)
	}
	if g := mustJSON(t, jsonMap(t, got.IterationCounts)); g != `{"b":2,"build":1,"c":1}` {
		t.Fatalf("iteration_counts = %s", g)
	}
	if got.CurrentNode != "" || got.ActiveNodes != nil {
		t.Fatalf("current_node %q active %q", got.CurrentNode, got.ActiveNodes)
	}
	var null *string
	if err := s.reader.QueryRow(`SELECT current_node FROM playbook_runs WHERE run_id = 'PB1'`).Scan(&null); err != nil || null != nil {
		t.Fatalf("current_node column = %v, %v; want NULL", null, err)
	}
	// Final: completed_at, status succeeded.
	p = r.rec(KindRunFinished, -1, "", "", nil, ExecCompleted)
	got = r.row()
	if got.Status != RunSucceeded || !got.CompletedAt.Equal(t0.Add(time.Duration(r.seq)*time.Second)) || got.ErrorContext != nil {
		t.Fatalf("final row: %s completed %v error_context %s", got.Status, got.CompletedAt, got.ErrorContext)
	}
	// NodeStates from the transitions.
	run, err := s.RunWithNodes(context.Background(), "PB1")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, n := range run.Nodes {
		lines = append(lines, n.NodeID+"/"+n.Type+"/"+n.Status+"/"+string(rune('0'+n.Iterations)))
	}
	if g := strings.Join(lines, " "); g != "build/deterministic/PASS/1 b/deterministic/PASS/2 c/deterministic/PASS/1" {
		t.Fatalf("nodes = %s", g)
	}
	if b := run.Nodes[1]; b.Note != "plain text, not JSON" || b.StartedAt.IsZero() || !b.FinishedAt.After(b.StartedAt) {
		t.Fatalf("node b = %+v", b)
	}
}

// A run with two active nodes, one of them waiting at its gate, is paused; the other node
// finishing does not make it running; the gate's decision does; the approval node stays
// active (in current_node) until its step_finished.
func TestPausedWhileAnyGateIsOpen(t *testing.T) {
	s, _ := openTest(t)
	r := newPlaybookRun(t, s, "PB2", "")
	if got := r.row(); string(got.Bindings) != "{}" {
		t.Fatalf("empty bindings stored as %s", got.Bindings)
	}
	r.start(0, "work", "deterministic")
	r.start(1, "review", "approval")
	p := r.rec(KindGateOpened, 1, "review", "approval", nil, ExecInProgress)
	if p.Status != RunPaused || p.CurrentNode != "work,review" {
		t.Fatalf("after gate_opened: %s %q", p.Status, p.CurrentNode)
	}
	run, err := s.RunWithNodes(context.Background(), "PB2")
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Nodes) != 2 || run.Nodes[1].Status != "waiting" || run.Nodes[0].Status != "running" {
		t.Fatalf("nodes = %+v", run.Nodes)
	}
	p = r.finish(0, "work", "deterministic", StepPass, `{"ok":true}`)
	if p.Status != RunPaused || p.CurrentNode != "review" {
		t.Fatalf("another node finished while the gate is open: %s %q, want paused review", p.Status, p.CurrentNode)
	}
	if got := r.row(); got.Status != RunPaused {
		t.Fatalf("row status %s", got.Status)
	}
	p = r.rec(KindGateDecided, 1, "review", "approval", nil, ExecInProgress)
	if p.Status != RunRunning || p.CurrentNode != "review" {
		t.Fatalf("after gate_decided: %s %q", p.Status, p.CurrentNode)
	}
	r.finish(1, "review", "approval", StepPass, `{"approved":true,"by":"alice","reason":"ok","auto_passed":false,"rule":""}`)
	if b := jsonMap(t, r.row().Bindings); mustJSON(t, b["review"]) != `{"approved":true,"auto_passed":false,"by":"alice","reason":"ok","rule":""}` {
		t.Fatalf("review binding = %v", b["review"])
	}
	// Fail: error_context names the failed node; completed_at is set; current_node is NULL.
	r.start(2, "publish", "agentic")
	r.finish(2, "publish", "agentic", StepFail, "tool failed")
	r.rec(KindRunFinished, -1, "", "", nil, ExecFailed)
	got := r.row()
	ec := jsonMap(t, got.ErrorContext)
	if got.Status != RunFailed || ec["node"] != "publish" || got.CompletedAt.IsZero() || got.CurrentNode != "" {
		t.Fatalf("failed row: %s error_context %s completed %v current %q", got.Status, got.ErrorContext, got.CompletedAt, got.CurrentNode)
	}
}

// StartRun refuses bindings that are not a JSON object or are over 1 MiB, and writes nothing.
func TestStartRunBindingsValidated(t *testing.T) {
	s, _ := openTest(t)
	for _, tc := range []struct{ bindings, want string }{
		{`{"version":`, "bindings is not valid JSON"},
		{`["a"]`, "bindings must be a JSON object"},
		{`"text"`, "bindings must be a JSON object"},
		{`{"v":"` + strings.Repeat("x", MaxTextBytes) + `"}`, "over the limit of 1048576"},
	} {
		nr := newRun("BAD")
		nr.Kind, nr.Bindings = KindPlaybook, json.RawMessage(tc.bindings)
		_, _, err := s.StartRun(context.Background(), nr)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bindings %.40q: err = %v, want %q", tc.bindings, err, tc.want)
		}
	}
	if _, err := s.Run(context.Background(), "BAD"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused StartRun stored a run: %v", err)
	}
}

// ListRuns filters by kind.
func TestListRunsKindFilter(t *testing.T) {
	s, _ := openTest(t)
	mustStart(t, s, newRun("RB1"))
	newPlaybookRun(t, s, "PB1", `{}`)
	mustStart(t, s, newRun("RB2"))
	for _, tc := range []struct {
		kind RunKind
		want string
	}{{"", "RB2,RB1,PB1"}, {KindPlaybook, "PB1"}, {KindRunbook, "RB2,RB1"}} {
		page, err := s.ListRuns(context.Background(), RunFilter{Kind: tc.kind})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range page.Runs {
			ids = append(ids, r.RunID)
		}
		if g := strings.Join(ids, ","); g != tc.want {
			t.Errorf("kind %q: %s, want %s", tc.kind, g, tc.want)
		}
	}
	if _, err := s.ListRuns(context.Background(), RunFilter{Kind: "other"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad kind: %v", err)
	}
}

// A node output that would take the bindings over MaxBindingsBytes is stored as a note.
func TestBindingsCap(t *testing.T) {
	big := `{"v":"` + strings.Repeat("y", MaxBindingsBytes-20) + `"}`
	out, err := withBinding(`{"a":{"x":1}}`, "big", json.RawMessage(big))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > MaxBindingsBytes {
		t.Fatalf("%d bytes over the cap", len(out))
	}
	m := jsonMap(t, json.RawMessage(out))
	if note, _ := m["big"].(map[string]any)["omitted"].(string); !strings.Contains(note, "would take the run's bindings over") {
		t.Fatalf("big = %.200v", m["big"])
	}
	if mustJSON(t, m["a"]) != `{"x":1}` {
		t.Fatalf("a = %v", m["a"])
	}
}

// The auto-pass decision is stored on the approval row (policy_json) and read back; an
// auto-passed gate is created approved by the policy.
func TestApprovalStoresPolicyDecision(t *testing.T) {
	s, _ := openTest(t)
	newPlaybookRun(t, s, "PB3", `{}`)
	na := newApproval("A1", "PB3", "review")
	na.AutoPassed, na.Reason = true, "default-read-only: only read-only or QA commands"
	na.Policy = &AutoPassDecision{AutoPassed: true, Rule: "default-read-only", Action: "auto-approve", Reason: "only read-only or QA commands"}
	a := mustCreateApproval(t, s, na)
	got, err := s.GetApproval(context.Background(), a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ApprovalApproved || !got.AutoPassed || got.Approver != SourcePolicy || got.DecidedBySource != SourcePolicy ||
		got.Policy == nil || *got.Policy != *na.Policy || got.DecidedAt.IsZero() {
		t.Fatalf("approval = %+v policy %+v", got, got.Policy)
	}
	bad := newApproval("A2", "PB3", "other")
	bad.Policy = &AutoPassDecision{AutoPassed: true, Action: "auto-approve", Shadow: true}
	bad.AutoPassed = true
	if _, _, err := s.CreateApproval(context.Background(), bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a shadow auto-pass: %v", err)
	}
}
