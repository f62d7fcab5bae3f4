package state

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
)

// TestEvidenceNeverOverwritesAnotherRun: WriteEvidence
// replaces an earlier form of the same run's pack, refuses a file that holds another run's
// pack, and a fresh run id that has an evidence pack beside the state file is taken.
func TestEvidenceNeverOverwritesAnotherRun(t *testing.T) {
	dir := t.TempDir()
	sp := filepath.Join(dir, "a.state.json")
	e1 := engine.Evidence{StepName: "a", Type: "deterministic", Output: "1", Status: engine.StatusPass, TimestampUTC: "2026-01-01T00:00:00Z"}
	e2 := engine.Evidence{StepName: "b", Type: "deterministic", Output: "2", Status: engine.StatusPass, TimestampUTC: "2026-01-01T00:00:01Z"}
	s := &State{RunID: "RBOOK-20260101-x-00000000", EvidencePack: []engine.Evidence{e1}}
	if _, err := WriteEvidence(sp, s); err != nil {
		t.Fatal(err)
	}
	s.EvidencePack = append(s.EvidencePack, e2) // the same run's pack grew: replaced
	p, err := WriteEvidence(sp, s)
	if err != nil {
		t.Fatal(err)
	}
	other := &State{RunID: s.RunID, EvidencePack: []engine.Evidence{e2}}
	var taken *EvidenceTakenError
	if _, err := WriteEvidence(filepath.Join(dir, "b.state.json"), other); !errors.As(err, &taken) || taken.Path != p {
		t.Fatalf("another run's pack: %v", err)
	}
	if got, _ := os.ReadFile(p); len(got) == 0 || !regexp.MustCompile(`"step_name": "b"`).Match(got) || !regexp.MustCompile(`"step_name": "a"`).Match(got) {
		t.Errorf("the pack was changed:\n%s", got)
	}
	if !takenRunIDs(filepath.Join(dir, "b.state.json"), nil)(s.RunID) {
		t.Error("a run id with an evidence pack in the folder is not taken")
	}
	if a, b := PlaybookRunID("x", time.Now()), PlaybookRunID("x", time.Now()); a == b || !regexp.MustCompile(`^RBOOK-\d{8}-x-[0-9a-f]{8}$`).MatchString(a) {
		t.Errorf("PlaybookRunID: %s, %s", a, b)
	}
}
