package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

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
// (WriteFileAtomic) and returns that path. Errors name the path.
func WriteEvidence(statePath string, s *State) (string, error) {
	p := EvidencePath(statePath, s.RunID)
	data, err := EvidencePackJSON(s.EvidencePack)
	if err == nil {
		err = WriteFileAtomic(p, data)
	}
	return p, err
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
