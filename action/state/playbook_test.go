package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// testPlaybookPlan is a diamond a → b, a → c, b+c → d of deterministic nodes.
func testPlaybookPlan() *runbook.Plan {
	p := &runbook.Plan{Name: "diamond", Path: "diamond.cantbook", ContentHash: strings.Repeat("ab", 32), SchemaHash8: "0123abcd", Kind: runbook.KindPlaybook, Playbook: &runbook.Playbook{Version: "1.0"}}
	for i, id := range []string{"a", "b", "c", "d"} {
		p.Steps = append(p.Steps, runbook.Step{Index: i, Name: id, Type: runbook.TypeDeterministic, Node: &runbook.Node{ID: id}})
	}
	return p
}

func tr(seq int64, kind engine.TransitionKind, idx int, name string, ev *engine.Evidence) engine.Transition {
	return engine.Transition{RunID: "RBOOK-20260101-diamond-0123abcd", Seq: seq, Kind: kind, Time: time.Date(2026, 1, 1, 0, 0, int(seq), 0, time.UTC),
		StepIndex: idx, StepName: name, StepType: string(runbook.TypeDeterministic), Evidence: ev, RunStatus: engine.RunInProgress}
}

// TestStatePlaybookNodesInFlightAtOnce: two side-effecting nodes in flight at once
// are both recorded (in_flight_nodes), the end of one keeps the other, every step_started
// counts in iteration_counts, a PASS's JSON output becomes the node's bindings, and the
// file is valid JSON with the specification's fields after every write.
func TestStatePlaybookNodesInFlightAtOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "diamond.playbook.state.json")
	plan := testPlaybookPlan()
	o, err := OpenPlaybook(plan, path, PlaybookOpenOptions{Inputs: map[string]any{"version": "2026.4.90"}, PlaybookPath: plan.Path, EpicID: "T889"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &FileRecorder{Path: path, State: o.State}
	pass := func(name, out string) *engine.Evidence {
		return &engine.Evidence{StepName: name, Type: "deterministic", Output: out, Status: engine.StatusPass, TimestampUTC: "2026-01-01T00:00:00Z"}
	}
	steps := []engine.Transition{
		{RunID: o.State.RunID, Seq: 1, Kind: engine.TransitionRunStarted, StepIndex: -1, RunStatus: engine.RunInProgress},
		tr(2, engine.TransitionStepStarted, 0, "a", nil),
		tr(3, engine.TransitionStepFinished, 0, "a", pass("a", `{"stdout":"built","exit_code":0}`)),
		tr(4, engine.TransitionStepStarted, 1, "b", nil),
		tr(5, engine.TransitionStepStarted, 2, "c", nil),
	}
	for _, s := range steps {
		s.RunID = o.State.RunID
		if err := rec.Record(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(path, data); err != nil {
			t.Fatalf("after seq %d: %v", s.Seq, err)
		}
	}
	st, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != KindPlaybook || st.EpicID != "T889" || st.PlaybookPath != "diamond.cantbook" {
		t.Errorf("kind %q epic %q path %q", st.Kind, st.EpicID, st.PlaybookPath)
	}
	if got := nodeList(st.InFlightNodes); got != "b, c" {
		t.Errorf("in_flight_nodes = %s, want b, c", got)
	}
	if st.InFlight == nil || st.InFlight.StepName != "b" {
		t.Errorf("in_flight = %+v, want b (the first in flight)", st.InFlight)
	}
	if st.IterationCounts["a"] != 1 || st.IterationCounts["b"] != 1 || st.IterationCounts["c"] != 1 {
		t.Errorf("iteration_counts = %v", st.IterationCounts)
	}
	a, _ := st.Bindings["a"].(map[string]any)
	if a["stdout"] != "built" || st.Bindings["version"] != "2026.4.90" {
		t.Errorf("bindings = %v", st.Bindings)
	}
	// c ends first: b stays in flight.
	ev := tr(6, engine.TransitionStepFinished, 2, "c", pass("c", "not json"))
	ev.RunID = o.State.RunID
	if err := rec.Record(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	if st, err = Read(path); err != nil {
		t.Fatal(err)
	}
	if got := nodeList(st.InFlightNodes); got != "b" {
		t.Errorf("after c ended, in_flight_nodes = %s, want b", got)
	}
	if _, ok := st.Bindings["c"]; ok {
		t.Errorf("a non-JSON output became bindings: %v", st.Bindings["c"])
	}

	// A resume with b in flight is refused, naming b and the overrides.
	_, err = OpenPlaybook(plan, path, PlaybookOpenOptions{Inputs: map[string]any{"version": "2026.4.90"}})
	var ue *UnknownNodesError
	if !errors.As(err, &ue) || len(ue.Nodes) != 1 || ue.Nodes[0].StepName != "b" {
		t.Fatalf("resume with b in flight: %v", err)
	}
	for _, want := range []string{"node in unknown state", "deterministic node 'b'", "--rerun-node ID", "--skip-node ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// An answer for a node that is not in unknown state is refused, naming it.
	if _, err := OpenPlaybook(plan, path, PlaybookOpenOptions{RerunNodes: []string{"a"}}); err == nil || !strings.Contains(err.Error(), "node 'a'") {
		t.Errorf("--rerun-node a: %v", err)
	}
	// Other inputs than the run's are refused.
	var ie *InputsChangedError
	if _, err := OpenPlaybook(plan, path, PlaybookOpenOptions{Inputs: map[string]any{"version": "2026.5.1"}, RerunNodes: []string{"b"}}); !errors.As(err, &ie) || ie.Name != "version" {
		t.Errorf("changed input: %v", err)
	}
	// A changed playbook is refused, naming both hashes.
	edited := testPlaybookPlan()
	edited.ContentHash = strings.Repeat("cd", 32)
	_, err = OpenPlaybook(edited, path, PlaybookOpenOptions{RerunNodes: []string{"b"}})
	var ee *PlaybookEditedError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), plan.ContentHash) || !strings.Contains(err.Error(), edited.ContentHash) {
		t.Errorf("edited playbook: %v", err)
	}
	// --skip-node b resumes the same run, with its bindings and counts, and asks to skip b.
	o2, err := OpenPlaybook(plan, path, PlaybookOpenOptions{Inputs: map[string]any{"version": "2026.4.90"}, SkipNodes: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if !o2.Resumed || o2.State.RunID != o.State.RunID || len(o2.SkipNodes) != 1 || o2.SkipNodes[0] != "b" || len(o2.State.InFlightNodes) != 0 {
		t.Errorf("resumed %v run %s skip %v in flight %v", o2.Resumed, o2.State.RunID, o2.SkipNodes, o2.State.InFlightNodes)
	}
	if o2.State.IterationCounts["b"] != 1 || o2.State.Inputs["version"] != "2026.4.90" {
		t.Errorf("resumed counts %v inputs %v", o2.State.IterationCounts, o2.State.Inputs)
	}
	raw, _ := os.ReadFile(path)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_id", "runbook_name", "run_status", "current_step_index", "last_completed_step_index", "total_steps", "evidence_pack", "started_utc", "schema_hash8", "kind", "bindings", "iteration_counts", "in_flight_nodes", "inputs"} {
		if _, ok := m[k]; !ok {
			t.Errorf("state file lacks %s", k)
		}
	}
}

// TestStatePlaybookRefusesRunbookStateFile: a playbook never resumes a runbook's
// unfinished run that shares its state file.
func TestStatePlaybookRefusesRunbookStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	st := &State{RunID: "RBOOK-20260101-diamond-0123abcd", RunbookName: "diamond", RunStatus: engine.RunInProgress, LastCompletedStepIndex: -1, TotalSteps: 4, EvidencePack: []engine.Evidence{}, StartedUTC: "2026-01-01T00:00:00Z", SchemaHash8: "0123abcd"}
	if err := Write(path, st); err != nil {
		t.Fatal(err)
	}
	_, err := OpenPlaybook(testPlaybookPlan(), path, PlaybookOpenOptions{})
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a playbook run") {
		t.Errorf("got %v", err)
	}
}
