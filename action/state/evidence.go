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
// which lives beside the state file (docs/spec/runbooks.md, "Step 9").
const EvidenceSuffix = ".evidence.json"

// EvidencePath is the evidence pack file of run runID whose state file is statePath:
// "<folder of statePath>/<run_id>.evidence.json".
func EvidencePath(statePath, runID string) string {
	return filepath.Join(filepath.Dir(statePath), runID+EvidenceSuffix)
}

// EvidencePackJSON is the evidence pack as an indented JSON array in execution order, no
// trailing comma, "[]" when empty, HTML characters not escaped (docs/spec/runbooks.md, "Output contract"). It
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
// (WriteFileAtomic) and returns that path. An existing file is replaced only when it is this
// run's: an earlier form of s's pack (its entries are the first entries of s's: a pack only
// grows), or a pack that ran ahead of s's state file as it was read (its entries begin with
// the pack the state file held; see ranAhead). A file that holds anything else is another
// run's and is never overwritten: the error is *EvidenceTakenError. Other errors name the
// path.
func WriteEvidence(statePath string, s *State) (string, error) {
	p := EvidencePath(statePath, s.RunID)
	if err := checkEvidenceOurs(p, s); err != nil {
		return p, err
	}
	data, err := EvidencePackJSON(s.EvidencePack)
	if err == nil {
		err = WriteFileAtomic(p, data)
	}
	return p, err
}

// EvidenceTakenError: the evidence pack file of a run id holds another run's pack, which a
// write must not replace. It is not a state-file write failure: the state file is intact and
// the run can finish once the other pack is moved aside.
type EvidenceTakenError struct{ Path, RunID string }

func (e *EvidenceTakenError) Error() string {
	return fmt.Sprintf("%s holds the evidence pack of another run that has the same id %s, so it is not overwritten; the state file is intact. "+
		"Move that file aside (e.g. mv %s %s.other) and run the same command again to finish this run, or give each run's state file its own folder",
		e.Path, e.RunID, e.Path, e.Path)
}

// checkEvidenceOurs returns *EvidenceTakenError when the file at p exists and is not s's run's
// pack; nil when it does not exist, is an earlier form of s's pack, or ran ahead of the state
// file s was read from. A file that cannot be read is an error naming it.
func checkEvidenceOurs(p string, s *State) error {
	old, exists, err := readPack(p)
	if err != nil || !exists {
		return err
	}
	if old == nil || !(packHasPrefix(s.EvidencePack, old) || s.ranAhead(old)) {
		return &EvidenceTakenError{Path: p, RunID: strings.TrimSuffix(filepath.Base(p), EvidenceSuffix)}
	}
	return nil
}

// readPack reads the evidence pack file at p. exists is false when there is none; old is nil
// (with exists true) when the file is not a JSON array of entries.
func readPack(p string) (old []engine.Evidence, exists bool, err error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	if json.Unmarshal(data, &old) != nil || old == nil {
		return nil, true, nil
	}
	return old, true, nil
}

// packHasPrefix reports whether the first len(prefix) entries of pack are prefix's entries.
func packHasPrefix(pack, prefix []engine.Evidence) bool {
	if len(prefix) > len(pack) {
		return false
	}
	for i := range prefix {
		a, _ := json.Marshal(prefix[i])
		b, _ := json.Marshal(pack[i])
		if !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

// ranAhead reports whether old, the evidence pack file of s's run id, is a pack this run's
// executor wrote ahead of the state file s was read from: the pack file is written before the
// state write that makes the run final (so that no final run lacks its pack), and an executor
// killed between the two leaves a file whose entries begin with the state file's pack and go
// on past it. Such a file is this run's own; the run is finished again from its state file and
// the file replaced by the pack the state file ends with. Only a State read from a file
// (Parse) knows which entries the file held.
func (s *State) ranAhead(old []engine.Evidence) bool {
	if !s.read || s.readPack > len(s.EvidencePack) {
		return false
	}
	return packHasPrefix(old, s.EvidencePack[:s.readPack])
}

// settleEvidence makes a final run's evidence pack file equal to the pack its state file
// holds, when the file is this run's (missing, behind, or ran ahead of the state file):
// EnsureEvidence for a missing one, an atomic rewrite for the others. A file that holds
// another run's pack is left alone (nil). The caller holds the state file's lock: a rollback
// of a final run grows its pack, and only under the lock is the file not mid-change.
func settleEvidence(statePath string, s *State) error {
	if !s.RunStatus.Final() {
		return nil
	}
	p := EvidencePath(statePath, s.RunID)
	old, exists, err := readPack(p)
	if err != nil {
		return err
	}
	if !exists {
		_, _, err := EnsureEvidence(statePath, s)
		return err
	}
	if old == nil || len(old) == len(s.EvidencePack) && packHasPrefix(old, s.EvidencePack) {
		return nil
	}
	if !packHasPrefix(s.EvidencePack, old) && !s.ranAhead(old) {
		return nil
	}
	data, err := EvidencePackJSON(s.EvidencePack)
	if err == nil {
		err = WriteFileAtomic(p, data)
	}
	return err
}

// EnsureEvidence guarantees that a final run has its evidence pack file (docs/spec/runbooks.md, "Step 7"):
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
