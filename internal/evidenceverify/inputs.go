package evidenceverify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// The files of a run beside its evidence pack (docs/evidence-verify.md, "What it reads").
const (
	packSuffix        = ".evidence.json"
	journalSuffix     = ".journal.jsonl"
	attestationSuffix = ".attestation.json"
	journalFormat     = "rbook.journal.v1"
)

// InputError is an input that cannot be read or is not what it should be: the exit code is
// ExitUnreadable, and the message names the file (and line) and what to do.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErr(format string, a ...any) error { return &InputError{Msg: fmt.Sprintf(format, a...)} }

// Input is what one verification reads: the pack's bytes and entries, the run id its file
// name carries, the journal's transitions (and where they came from, for messages), the
// attestation envelope (nil: none), the public keys (none: the signature is not checked) and the head kept
// elsewhere ("" when none was given).
type Input struct {
	PackPath     string
	Pack         []byte
	Entries      []engine.Evidence
	RunID        string
	Transitions  []engine.Transition
	JournalFrom  string
	Envelope     []byte
	EnvelopeFrom string
	Keys         []attest.PublicKey
	KeysFrom     string
	// NoKeys says why there are no keys though some were asked for ("" otherwise): a
	// control plane that publishes none.
	NoKeys string
	Head   string
}

// readPack reads the evidence pack at path: its exact bytes, its entries and the run id of its
// file name ("<run_id>.evidence.json"). Errors are *InputError.
func readPack(path string) (data []byte, entries []engine.Evidence, runID string, err error) {
	base := filepath.Base(path)
	runID, ok := strings.CutSuffix(base, packSuffix)
	if !ok || runID == "" {
		return nil, nil, "", inputErr("%s: an evidence pack's file is named <run_id>%s (the run id is read from the name); give the pack the run wrote, under its own name", path, packSuffix)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, "", inputErr("the evidence pack cannot be read: %v", err)
	}
	if err := json.Unmarshal(data, &entries); err != nil || entries == nil {
		return nil, nil, "", inputErr("%s: not an evidence pack (a JSON array of entries): %v", path, err)
	}
	return data, entries, runID, nil
}

// journalHeader is a journal's first line.
type journalHeader struct {
	Journal   string `json:"journal"`
	RunID     string `json:"run_id"`
	StateFile string `json:"state_file"`
}

// readJournal reads the journal at path: its header (which must name runID) and one
// transition per line after it. A last line without its newline is a write a crash tore and
// is ignored, as the executor ignores it. Errors are *InputError naming path:line.
func readJournal(path, runID string) ([]engine.Transition, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inputErr("no journal at %s: the chain is checked against the run's journal (<run_id>%s beside its state file). Give it with --journal FILE, or read the chain from the control plane with --control-plane URL", path, journalSuffix)
	} else if err != nil {
		return nil, inputErr("the journal cannot be read: %v", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		data = data[:i+1] // a torn last line
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	var out []engine.Transition
	for line := 1; sc.Scan(); line++ {
		if line == 1 {
			var h journalHeader
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Journal != journalFormat {
				return nil, inputErr("%s:1: not an rbook journal (the first line is the header {\"journal\":%q,…})", path, journalFormat)
			}
			if h.RunID != runID {
				return nil, inputErr("%s:1: run_id: the journal is of run %s, the pack of run %s: give the journal of the pack's run (--journal FILE)", path, h.RunID, runID)
			}
			continue
		}
		var t engine.Transition
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, inputErr("%s:%d: not a transition: %v", path, line, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, inputErr("%s: %v", path, err)
	}
	if len(data) == 0 {
		return nil, inputErr("%s: the journal is empty (not even its header)", path)
	}
	return out, nil
}

// readOptional reads path, or returns nil when it does not exist and was not named
// explicitly (given false). Other errors are *InputError.
func readOptional(path string, given bool, what string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !given {
		return nil, nil
	}
	if err != nil {
		return nil, inputErr("the %s cannot be read: %v", what, err)
	}
	return data, nil
}

// beside is the file of run runID with suffix in the pack's folder.
func beside(packPath, runID, suffix string) string {
	return filepath.Join(filepath.Dir(packPath), runID+suffix)
}
