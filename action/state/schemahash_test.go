package state

import (
	"path/filepath"
	"testing"
)

// A run in flight when rules.yaml changed (so schema_hash8 did) resumes under its own run
// id: the state file records it, and only runs started afterwards carry the new hash
// (docs/approver-inputs.md, "Runbook confirm steps").
func TestResumeKeepsTheRunIDOfAnOlderSchemaHash(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	old := writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
	newer := testPlan()
	newer.SchemaHash8 = "2e8ae9b8"
	o, err := Open(newer, p, OpenOptions{Now: clock})
	if err != nil || !o.Resumed || o.State.RunID != old.RunID || o.State.SchemaHash8 != "a1b2c3d4" || o.StartIndex != 1 {
		t.Fatalf("Open = %+v, %v; want the run %s resumed at step 1 under its recorded hash", o, err, old.RunID)
	}
}
