package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
)

// copyFixture copies testdata/impossible/<name>.json to a new temp folder as the state file
// and returns its path.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "impossible", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImpossibleStateFilesAreRefusedAsCorrupt: a state file whose values no executor writes
// (out of range whatever the runbook, or naming steps the runbook does not have) is refused
// as *CorruptError, by Read when the runbook is not needed to see it and by Open/OpenPlaybook
// otherwise, and never resumed. The values the engine does write (current_step_index ==
// total_steps after the last step, a CANCEL entry, an owed rollback) stay valid.
func TestImpossibleStateFilesAreRefusedAsCorrupt(t *testing.T) {
	cases := []struct {
		fixture  string
		playbook bool
		// atRead: refused by Read (no runbook needed); else only by Open.
		atRead bool
		reason string // "" for a valid file
	}{
		{fixture: "valid-resumable"},
		{fixture: "valid-after-last-step"},
		{fixture: "valid-cancel-entry"},
		{fixture: "valid-rollback-verb"},
		{fixture: "valid-chained"},
		{fixture: "chain-head-malformed", atRead: true, reason: `chain_head "sha256:ABC" is not sha256: and 64 lowercase hex digits`},
		{fixture: "chain-head-without-seq", atRead: true, reason: "chain_head is set but seq is 0"},
		{fixture: "negative-seq", atRead: true, reason: "seq -1 is negative"},
		{fixture: "negative-lease-epoch", atRead: true, reason: "lease_epoch -3 is negative"},
		{fixture: "total-steps-negative", atRead: true, reason: "total_steps -2 is negative"},
		{fixture: "current-step-index-negative", atRead: true, reason: "current_step_index -1 is outside 0..3"},
		{fixture: "current-step-index-past-end", atRead: true, reason: "current_step_index 4 is outside 0..3"},
		{fixture: "last-completed-past-end", atRead: true, reason: "last_completed_step_index 3 is outside -1..2"},
		{fixture: "in-flight-past-end", atRead: true, reason: "in_flight.step_index 7 is outside 0..2"},
		{fixture: "gate-past-end", atRead: true, reason: "awaiting_confirmation.step_index 3 is outside 0..2"},
		{fixture: "evidence-no-step-name", atRead: true, reason: "evidence_pack[1] has no step_name"},
		{fixture: "evidence-bad-status", atRead: true, reason: `evidence_pack[1] (step "deploy-app") has status "MAYBE"`},
		{fixture: "evidence-ghost-step", reason: `evidence_pack[2] is for step "ghost", which runbook "demo" does not have`},
		{fixture: "total-steps-mismatch", reason: `total_steps is 5 (runbook "demo" has 3 steps)`},
		{fixture: "in-flight-wrong-step", reason: `in_flight names step "confirm-app" at index 1`},
		{fixture: "gate-unknown-step", reason: `awaiting_confirmation names step "approve-ghost" at index 2`},
		{fixture: "rollback-for-unknown-step", reason: `rollback_for names step "ghost"`},
		{fixture: "playbook-valid-resumable", playbook: true},
		{fixture: "playbook-evidence-ghost-node", playbook: true, reason: `evidence_pack[1] is for step "ghost", which playbook "diamond" does not have`},
		{fixture: "playbook-in-flight-ghost-node", playbook: true, reason: `in_flight_nodes[0] names step "ghost" at index 2`},
		{fixture: "playbook-count-ghost-node", playbook: true, reason: `iteration_counts counts node "ghost"`},
		{fixture: "playbook-binding-ghost-node", playbook: true, reason: `bindings hold "ghost", which is neither a node nor an input`},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			p := copyFixture(t, c.fixture)
			_, readErr := Read(p)
			var err error
			if c.playbook {
				_, err = OpenPlaybook(testPlaybookPlan(), p, PlaybookOpenOptions{Inputs: map[string]any{"version": "1"}})
			} else {
				_, err = Open(testPlan(), p, OpenOptions{Now: clock})
			}
			if c.reason == "" {
				if readErr != nil || err != nil {
					t.Fatalf("a state file the engine writes is refused: read %v, open %v", readErr, err)
				}
				return
			}
			if c.atRead {
				var ce *CorruptError
				if !errors.As(readErr, &ce) || !strings.Contains(readErr.Error(), c.reason) {
					t.Fatalf("Read: %v; want *CorruptError with %q", readErr, c.reason)
				}
			} else if readErr != nil {
				t.Fatalf("Read refused what only the runbook can judge: %v", readErr)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Open: %v; want *CorruptError with %q", err, c.reason)
			}
			if ce.Path != p {
				t.Errorf("the error names %q, not the state file %q", ce.Path, p)
			}
		})
	}
}

// TestStepsOfAnEditedRunbookAreNotJudgedAgainstIt: with --allow-edited-runbook the recorded
// steps are those of the old runbook, so an entry the new one lacks is not corruption.
func TestStepsOfAnEditedRunbookAreNotJudgedAgainstIt(t *testing.T) {
	p := copyFixture(t, "evidence-ghost-step")
	plan := testPlan()
	plan.ContentHash = "hash-2"
	o, err := Open(plan, p, OpenOptions{Now: clock, AllowEdited: true})
	if err != nil || !o.Resumed {
		t.Fatalf("resume of an edited runbook: %v", err)
	}
}

// killBeforeFinalState leaves what an executor killed between the evidence write and the
// final state write leaves: the state file with the steps before the last one, and the pack
// file with one entry more (the last step's, the run final). It returns the state file path.
func killBeforeFinalState(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.json")
	st := writeRun(t, p, finished(0, "check-pre", "check", "PASS"),
		engine.Transition{Kind: engine.TransitionStepStarted, StepIndex: 1, StepName: "deploy-app", StepType: "deploy"},
		finished(1, "deploy-app", "deploy", "PASS"))
	ahead := *st
	ahead.EvidencePack = append(append([]engine.Evidence{}, st.EvidencePack...),
		engine.Evidence{StepName: "confirm-app", Type: "confirm", Output: "yes (killed run)", Status: engine.StatusPass, TimestampUTC: "t0"})
	data, err := EvidencePackJSON(ahead.EvidencePack)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(EvidencePath(p, st.RunID), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvidenceAheadOfStateIsFinishedOnResume: a pack file of the run's own id whose entries
// begin with the state file's pack and go on past it (the executor was killed between the
// evidence write and the final state write) is this run's: the resume finishes the run, and
// the evidence file then equals the state's final pack.
func TestEvidenceAheadOfStateIsFinishedOnResume(t *testing.T) {
	p := killBeforeFinalState(t)
	o, err := Open(testPlan(), p, OpenOptions{Now: clock})
	if err != nil || !o.Resumed || o.StartIndex != 2 {
		t.Fatalf("resume: %v %+v", err, o)
	}
	r := &FileRecorder{Path: p, State: o.State}
	fin := finished(2, "confirm-app", "confirm", "PASS")
	fin.Seq, fin.RunID, fin.Time, fin.RunStatus = o.State.Seq+1, o.State.RunID, day, engine.RunCompleted
	fin.Evidence.Output = "yes (resumed run)"
	if err := r.Record(t.Context(), fin); err != nil {
		t.Fatalf("the final write of the resumed run: %v", err)
	}
	assertEvidenceIsStatePack(t, p)
}

// TestEvidenceAheadOfStateIsFinishedByCancel: the same kill, then a cancel (which reads the
// state file and records the cancel): the cancel ends the run and the evidence file equals
// its pack.
func TestEvidenceAheadOfStateIsFinishedByCancel(t *testing.T) {
	p := killBeforeFinalState(t)
	st, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	r := &FileRecorder{Path: p, State: st}
	audit := &engine.Evidence{StepName: "CANCEL", Type: "cancel", Output: "cancelled", Status: engine.StatusPass, TimestampUTC: "t1"}
	end := engine.Transition{Kind: engine.TransitionRunFinished, StepIndex: -1, Seq: st.Seq + 1, RunID: st.RunID, Time: day, RunStatus: engine.RunCancelled, Evidence: audit}
	if err := r.Record(t.Context(), end); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	assertEvidenceIsStatePack(t, p)
}

// TestFinalStateSettlesItsRanAheadEvidence: a final run whose pack file ran ahead of its
// state (a rollback of a finished run killed between its two writes) gets the file set back
// to the state's pack when the next run opens the folder.
func TestFinalStateSettlesItsRanAheadEvidence(t *testing.T) {
	p := killBeforeFinalState(t)
	st, _ := Read(p)
	st.RunStatus, st.CompletedUTC = engine.RunFailed, "2026-05-12T08:31:00Z"
	if err := Write(p, st); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testPlan(), p, OpenOptions{Now: clock}); err != nil {
		t.Fatal(err)
	}
	assertEvidenceIsStatePack(t, p)
}

// TestForeignEvidencePackIsNotOverwrittenNorCalledNotWritable: a pack file of the same run id that
// does not begin with the state's pack is another run's: it is kept byte for byte, and the error is
// *EvidenceTakenError, not the specification's "state_file_path not writable" (the state file is
// writable), saying how to go on.
func TestForeignEvidencePackIsNotOverwrittenNorCalledNotWritable(t *testing.T) {
	p := killBeforeFinalState(t)
	st, _ := Read(p)
	ev := EvidencePath(p, st.RunID)
	foreign := []byte(`[{"step_name":"other-run","type":"check","input":null,"output":"","status":"PASS","timestamp_utc":"t"}]` + "\n")
	if err := os.WriteFile(ev, foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &FileRecorder{Path: p, State: st}
	end := engine.Transition{Kind: engine.TransitionRunFinished, StepIndex: -1, Seq: st.Seq + 1, RunID: st.RunID, Time: day, RunStatus: engine.RunCompleted}
	err := r.Record(t.Context(), end)
	var taken *EvidenceTakenError
	var nw *NotWritableError
	if !errors.As(err, &taken) || errors.As(err, &nw) || strings.Contains(err.Error(), "not writable") {
		t.Fatalf("err %v; want *EvidenceTakenError alone", err)
	}
	if !strings.Contains(err.Error(), "mv "+ev) || !strings.Contains(err.Error(), "run the same command again") {
		t.Errorf("the message does not say what to do next: %v", err)
	}
	if got, _ := os.ReadFile(ev); string(got) != string(foreign) {
		t.Errorf("the other run's pack was changed:\n%s", got)
	}
}

// assertEvidenceIsStatePack fails unless the state file at p is final and its evidence pack
// file holds exactly its evidence_pack.
func assertEvidenceIsStatePack(t *testing.T, p string) {
	t.Helper()
	st, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if !st.RunStatus.Final() {
		t.Fatalf("run is %s, not final", st.RunStatus)
	}
	want, _ := EvidencePackJSON(st.EvidencePack)
	got, err := os.ReadFile(EvidencePath(p, st.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("evidence file:\n%s\nstate's pack:\n%s", got, want)
	}
}

// TestDiscardedLockLeavesTheFolderAsFound: a command refused before it recorded anything
// (no state file) removes the lock file and the folders its Acquire made, when empty; with a
// state file, or a folder that held something already, Discard is Release and removes only
// what it made.
func TestDiscardedLockLeavesTheFolderAsFound(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a", "b", "s.json")
	l, err := Acquire(p, "run")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Discard(); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(root); len(es) != 0 {
		t.Fatalf("left behind: %v", es)
	}

	other := filepath.Join(root, "kept", "notes.txt")
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("x"), 0o644)
	p = filepath.Join(root, "kept", "s.json")
	if l, err = Acquire(p, "run"); err != nil {
		t.Fatal(err)
	}
	l.Discard()
	if es, _ := os.ReadDir(filepath.Dir(p)); len(es) != 1 || es[0].Name() != "notes.txt" {
		t.Fatalf("folder that held a file: %v", es)
	}

	if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err = Acquire(p, "run"); err != nil {
		t.Fatal(err)
	}
	l.Discard()
	if _, err := os.Stat(LockPath(p)); err != nil {
		t.Fatalf("a lock file beside a state file was removed: %v", err)
	}
	// The kept lock file takes the next lock.
	if l, err = Acquire(p, "run"); err != nil {
		t.Fatal(err)
	}
	l.Release()
}
