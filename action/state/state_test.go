package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func testPlan() *runbook.Plan {
	in := "remediation/a.json"
	return &runbook.Plan{Name: "demo", SchemaHash8: "a1b2c3d4", ContentHash: "hash-1", Steps: []runbook.Step{
		{Index: 0, Name: "check-pre", Type: runbook.TypeCheck, Input: &in, OnFail: "halt", TimeoutSeconds: 5},
		{Index: 1, Name: "deploy-app", Type: runbook.TypeDeploy, Input: &in, OnFail: "rollback", TimeoutSeconds: 5},
		{Index: 2, Name: "confirm-app", Type: runbook.TypeConfirm, OnFail: "halt", TimeoutSeconds: 5},
	}}
}

var day = time.Date(2026, 5, 12, 8, 30, 0, 0, time.UTC)

func clock() time.Time { return day }

func TestWriteReadRoundTripAndSeedFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "s.json")
	o, err := Open(testPlan(), p, OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if o.State.RunID != "RBOOK-20260512-demo-a1b2c3d4" {
		t.Errorf("run_id %q", o.State.RunID)
	}
	if err := Write(p, o.State); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run_id", "runbook_name", "run_status", "current_step_index", "last_completed_step_index", "total_steps", "evidence_pack", "started_utc", "schema_hash8"} {
		if _, ok := m[k]; !ok {
			t.Errorf("state lacks specification field %s", k)
		}
	}
	if m["run_status"] != "IN_PROGRESS" || m["last_completed_step_index"] != -1.0 || m["started_utc"] != "2026-05-12T08:30:00.000000000Z" {
		t.Errorf("initial state %v", m)
	}
	if ev, ok := m["evidence_pack"].([]any); !ok || len(ev) != 0 {
		t.Errorf("evidence_pack %v, want []", m["evidence_pack"])
	}
	// Windows has no permission bits: Go reports any writable file as 0666.
	if info, _ := os.Stat(p); runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".s.json.tmp-*"))
	if len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

func TestCorruptIsNeverNoRun(t *testing.T) {
	good, _ := json.Marshal(State{RunID: "RBOOK-20260512-demo-a1b2c3d4", RunbookName: "demo", RunStatus: engine.RunInProgress, LastCompletedStepIndex: -1, TotalSteps: 3, EvidencePack: []engine.Evidence{}})
	for name, data := range map[string]string{
		"empty":          "",
		"truncated":      string(good[:len(good)/2]),
		"not json":       "run_status: IN_PROGRESS",
		"missing fields": `{"run_id":"x"}`,
		"bad status":     strings.Replace(string(good), "IN_PROGRESS", "RUNNING", 1),
		"path in run_id": strings.Replace(string(good), "RBOOK-20260512-demo-a1b2c3d4", "../../../tmp/PWNED", 1),
	} {
		p := filepath.Join(t.TempDir(), "s.json")
		os.WriteFile(p, []byte(data), 0o600)
		_, err := Open(testPlan(), p, OpenOptions{Now: clock})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err %v, want *CorruptError", name, err)
		}
		if after, _ := os.ReadFile(p); string(after) != data {
			t.Errorf("%s: the corrupt file was changed", name)
		}
	}
}

// writeRun records a run up to (and including) the given transitions with a FileRecorder.
func writeRun(t *testing.T, p string, kinds ...engine.Transition) *State {
	t.Helper()
	o, err := Open(testPlan(), p, OpenOptions{Now: clock})
	if err == nil {
		err = o.KeepPrevious()
	}
	if err != nil {
		t.Fatal(err)
	}
	r := &FileRecorder{Path: p, State: o.State}
	seq := int64(0)
	for _, tr := range append([]engine.Transition{{Kind: engine.TransitionRunStarted, StepIndex: -1}}, kinds...) {
		seq++
		tr.Seq, tr.RunID, tr.Time = seq, o.State.RunID, day
		if err := r.Record(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
	}
	return o.State
}

func finished(i int, name, typ string, status engine.StepStatus) engine.Transition {
	return engine.Transition{Kind: engine.TransitionStepFinished, StepIndex: i, StepName: name, StepType: typ, RunStatus: engine.RunInProgress,
		Evidence: &engine.Evidence{StepName: name, Type: typ, Status: status, TimestampUTC: "t"}}
}

// A resume must not repeat a side effect.
func TestResumeNeverRepeatsSideEffect(t *testing.T) {
	t.Run("killed after deploy recorded", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		writeRun(t, p, finished(0, "check-pre", "check", "PASS"),
			engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 1, StepName: "deploy-app", StepType: "deploy"},
			finished(1, "deploy-app", "deploy", "PASS"))
		o, err := Open(testPlan(), p, OpenOptions{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		if !o.Resumed || o.StartIndex != 2 || len(o.State.EvidencePack) != 2 || o.State.Seq != 4 {
			t.Errorf("resumed=%v start=%d evidence=%d seq=%d", o.Resumed, o.StartIndex, len(o.State.EvidencePack), o.State.Seq)
		}
	})
	t.Run("killed while deploy in flight", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		writeRun(t, p, finished(0, "check-pre", "check", "PASS"),
			engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 1, StepName: "deploy-app", StepType: "deploy"})
		_, err := Open(testPlan(), p, OpenOptions{Now: clock})
		var ue *UnknownStepError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "step in unknown state") || !strings.Contains(err.Error(), "--step-index 1") {
			t.Fatalf("err %v", err)
		}
		one := 2
		o, err := Open(testPlan(), p, OpenOptions{Now: clock, StepIndex: &one})
		if err != nil || o.StartIndex != 2 || o.State.InFlight != nil {
			t.Fatalf("operator override: %v %+v", err, o)
		}
	})
	t.Run("killed while a compensating rollback was in flight", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		st := writeRun(t, p, finished(0, "check-pre", "check", "PASS"),
			engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 1, StepName: "deploy-app", StepType: "deploy"},
			finished(1, "deploy-app", "deploy", "PASS"),
			engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 3, StepName: "rollback-app", StepType: "rollback", RollbackFor: "confirm-app"})
		plan := testPlan()
		plan.Steps = append(plan.Steps, runbook.Step{Index: 3, Name: "rollback-app", Type: runbook.TypeRollback, OnFail: "halt", TimeoutSeconds: 5})
		st.TotalSteps = len(plan.Steps)
		if err := Write(p, st); err != nil {
			t.Fatal(err)
		}
		for idx, skip := range map[int]bool{3: false, 4: true} {
			o, err := Open(plan, p, OpenOptions{Now: clock, StepIndex: &idx})
			if err != nil || o.SkipOwedRollback != skip || o.State.RollbackFor != "confirm-app" {
				t.Fatalf("--step-index %d: skip=%v rollback_for=%q, %v; want skip=%v", idx, o.SkipOwedRollback, o.State.RollbackFor, err, skip)
			}
		}
	})
	t.Run("killed while a check was running is simply re-run", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		writeRun(t, p, engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 0, StepName: "check-pre", StepType: "check"})
		o, err := Open(testPlan(), p, OpenOptions{Now: clock})
		if err != nil || o.StartIndex != 0 {
			t.Fatalf("%v %+v", err, o)
		}
	})
	t.Run("runbook edited", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
		edited := testPlan()
		edited.ContentHash = "hash-2"
		_, err := Open(edited, p, OpenOptions{Now: clock})
		if !strings.Contains(fmtErr(err), "hash-1") || !strings.Contains(fmtErr(err), "hash-2") {
			t.Fatalf("err %v does not name both hashes", err)
		}
		if _, err := Open(edited, p, OpenOptions{Now: clock, AllowEdited: true}); err != nil {
			t.Fatalf("with the flag: %v", err)
		}
	})
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Open alone changes nothing: a start refused after it leaves the previous run in place.
func TestOpenDoesNotMoveThePreviousRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	writeRun(t, p, engine.Transition{Kind: engine.TransitionRunFinished, StepIndex: -1, RunStatus: engine.RunCompleted})
	o, err := Open(testPlan(), p, OpenOptions{Now: clock})
	if err != nil || o.PrevPath == "" {
		t.Fatal(err, o)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Open moved the previous state: %v", err)
	}
	if err := o.KeepPrevious(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.PrevPath); err != nil {
		t.Fatalf("KeepPrevious: %v", err)
	}
}

func TestFinalRunIsKeptAndIDsStayUnique(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	ids := map[string]bool{}
	for i := 0; i < 3; i++ {
		st := writeRun(t, p, engine.Transition{Kind: engine.TransitionRunFinished, StepIndex: -1, RunStatus: engine.RunCompleted})
		if ids[st.RunID] {
			t.Fatalf("run id %s reused", st.RunID)
		}
		ids[st.RunID] = true
		if st.CompletedUTC == "" {
			t.Errorf("completed_utc not set")
		}
	}
	for _, want := range []string{"RBOOK-20260512-demo-a1b2c3d4", "RBOOK-20260512-demo-a1b2c3d4.2", "RBOOK-20260512-demo-a1b2c3d4.3"} {
		if !ids[want] {
			t.Errorf("missing run id %s in %v", want, ids)
		}
	}
	for _, id := range []string{"RBOOK-20260512-demo-a1b2c3d4", "RBOOK-20260512-demo-a1b2c3d4.2"} {
		if _, err := os.Stat(p + ".prev-" + id); err != nil {
			t.Errorf("previous run %s not kept: %v", id, err)
		}
	}
}

// At the state level, exactly one of two executors takes the run; a dead holder does not block.
func TestOneExecutorHoldsTheRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	l1, err := Acquire(p, "run")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(p, "run")
	var he *HeldError
	if !errors.As(err, &he) || he.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "held by another executor") {
		t.Fatalf("second Acquire: %v", err)
	}
	if held, h, _ := Probe(p); !held || h.PID != os.Getpid() {
		t.Errorf("Probe while held: %v %+v", held, h)
	}
	l1.Release()
	if held, _, _ := Probe(p); held {
		t.Errorf("Probe after release says held")
	}
	l2, err := Acquire(p, "run")
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	l2.Release()
}

func TestNotWritable(t *testing.T) {
	dir := t.TempDir()
	// A regular file where the state folder should be: not writable even for root.
	os.WriteFile(filepath.Join(dir, "blocker"), nil, 0o600)
	p := filepath.Join(dir, "blocker", "s.json")
	o, err := Open(testPlan(), filepath.Join(dir, "s.json"), OpenOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	err = (&FileRecorder{Path: p, State: o.State}).Record(t.Context(), engine.Transition{Kind: engine.TransitionRunStarted, Seq: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "ABORT: state_file_path not writable — cannot persist state.\n") {
		t.Fatalf("err %v", err)
	}
}

// The incremental encoding must equal plain encoding, byte for byte in meaning.
func TestPackEncodeMatchesJSON(t *testing.T) {
	in := "q"
	s := &State{RunID: "RBOOK-20260512-demo-a1b2c3d4", RunbookName: "demo", RunStatus: engine.RunInProgress, LastCompletedStepIndex: -1, TotalSteps: 3, EvidencePack: []engine.Evidence{}}
	var p Pack
	for i := 0; i < 4; i++ {
		data, err := p.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("x", data)
		if err != nil {
			t.Fatalf("after %d entries: %v\n%s", i, err, data)
		}
		want, _ := json.Marshal(s)
		got, _ := json.Marshal(back)
		if string(got) != string(want) {
			t.Fatalf("after %d entries:\n got %s\nwant %s", i, got, want)
		}
		s.EvidencePack = append(s.EvidencePack, engine.Evidence{StepName: fmt.Sprint("s", i), Type: "check", Input: &in, Output: "o\n\"x\"", Status: engine.StatusPass, TimestampUTC: "t"})
	}
	s.EvidencePack = s.EvidencePack[:1] // a different pack: the cache must start over
	data, _ := p.Encode(s)
	if back, err := Parse("x", data); err != nil || len(back.EvidencePack) != 1 {
		t.Fatalf("after shrinking: %v", err)
	}
}

func TestPackEncodesOutbox(t *testing.T) {
	s := &State{RunID: "RBOOK-20260512-demo-a1b2c3d4", RunbookName: "demo", RunStatus: engine.RunInProgress, LastCompletedStepIndex: -1, TotalSteps: 3, EvidencePack: []engine.Evidence{}}
	var p Pack
	for seq := int64(1); seq <= 3; seq++ {
		s.Outbox = append(s.Outbox, engine.Transition{RunID: "r", Seq: seq, Kind: engine.TransitionStepStarted, Time: day})
		if seq == 3 {
			s.Outbox = s.Outbox[2:] // acknowledged
		}
		data, err := p.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("x", data)
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		want, _ := json.Marshal(s)
		got, _ := json.Marshal(back)
		if string(got) != string(want) {
			t.Fatalf("seq %d:\n got %s\nwant %s", seq, got, want)
		}
	}
}
