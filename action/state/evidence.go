package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
)

// EvidenceSuffix ends the name of a run's evidence pack file, "<run_id>.evidence.json",
// which lives beside the state file (seed runbook-executor, Step 9.3).
const EvidenceSuffix = ".evidence.json"

// EvidencePath is the evidence pack file of run runID whose state file is statePath:
// "<folder of statePath>/<run_id>.evidence.json".
func EvidencePath(statePath, runID string) string {
	return filepath.Join(filepath.Dir(statePath), runID+EvidenceSuffix)
}

// EvidencePackJSON is the evidence pack as an indented JSON array in execution order, no
// trailing comma, "[]" when empty, HTML characters not escaped (seed "Output contract"). It
// is the one encoding of the pack: the evidence file and the rendered report both use it.
func EvidencePackJSON(ev []engine.Evidence) ([]byte, error) {
	if ev == nil {
		ev = []engine.Evidence{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteEvidence writes s's evidence pack to EvidencePath(statePath, s.RunID) atomically
// (WriteFileAtomic) and returns that path. An existing file is replaced only when it holds
// an earlier form of this run's pack (its entries are the first entries of s's: a pack only
// grows); a file that holds anything else is another run's and is never overwritten (issue 9
// UX, item 1): the error is *EvidenceTakenError. Other errors name the path.
func WriteEvidence(statePath string, s *State) (string, error) {
	p := EvidencePath(statePath, s.RunID)
	if err := checkEvidenceOurs(p, s.EvidencePack); err != nil {
		return p, err
	}
	data, err := EvidencePackJSON(s.EvidencePack)
	if err == nil {
		err = WriteFileAtomic(p, data)
	}
	return p, err
}

// EvidenceTakenError: the evidence pack file of a run id holds another run's pack, which a
// write must not replace (issue 9 UX, item 1).
type EvidenceTakenError struct{ Path, RunID string }

func (e *EvidenceTakenError) Error() string {
	return fmt.Sprintf("%s holds the evidence pack of another run with id %s; it is not overwritten (move it aside, or give this run's state file its own folder)", e.Path, e.RunID)
}

// checkEvidenceOurs returns *EvidenceTakenError when the file at p exists and its entries
// are not the first entries of pack; nil when it does not exist or is an earlier form of pack.
func checkEvidenceOurs(p string, pack []engine.Evidence) error {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var old []engine.Evidence
	if err := json.Unmarshal(data, &old); err != nil || len(old) > len(pack) {
		return &EvidenceTakenError{Path: p, RunID: strings.TrimSuffix(filepath.Base(p), EvidenceSuffix)}
	}
	for i := range old {
		a, _ := json.Marshal(old[i])
		b, _ := json.Marshal(pack[i])
		if !bytes.Equal(a, b) {
			return &EvidenceTakenError{Path: p, RunID: strings.TrimSuffix(filepath.Base(p), EvidenceSuffix)}
		}
	}
	return nil
}

// EnsureEvidence guarantees that a final run has its evidence pack file (issue 6, item 1.7):
// when s is final and EvidencePath(statePath, s.RunID) does not exist, the file is rebuilt
// from s and rebuilt is true. It never replaces an existing file, even one written at the
// same moment by another process (the new file is linked into place, not renamed). For a run
// that is not final it returns "" and does nothing: the pack is written when the run ends.
func EnsureEvidence(statePath string, s *State) (path string, rebuilt bool, err error) {
	if !s.RunStatus.Final() {
		return "", false, nil
	}
	path = EvidencePath(statePath, s.RunID)
	if _, err := os.Lstat(path); err == nil {
		return path, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return path, false, err
	}
	data, err := EvidencePackJSON(s.EvidencePack)
	if err != nil {
		return path, false, err
	}
	created, err := writeFileExclusive(path, data)
	return path, created, err
}

// evidenceWriter writes a final run's evidence pack before the state write that makes (or
// keeps) the run final, skipping the write when the pack has not changed since. The pack
// only grows, so its run id and length identify what was written.
type evidenceWriter struct {
	runID string
	n     int
}

func (w *evidenceWriter) before(statePath string, s *State) error {
	if !s.RunStatus.Final() || (w.runID == s.RunID && w.n == len(s.EvidencePack)) {
		return nil
	}
	if _, err := WriteEvidence(statePath, s); err != nil {
		return err
	}
	w.runID, w.n = s.RunID, len(s.EvidencePack)
	return nil
}
