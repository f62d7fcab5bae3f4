package evidenceverify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/attest"
)

// The files of a run beside its evidence pack (docs/evidence-verify.md, "Usage").
const (
	packSuffix        = ".evidence.json"
	attestationSuffix = ".attestation.json"
)

// The size limits of what the verifier reads (docs/evidence-verify.md, "Size limits"): a
// larger input is refused before it is read whole, so a file that never ends (a device
// linked in place of the journal) cannot exhaust memory. The pack is the state file's
// evidence, capped as the state file is (state.MaxFileBytes); the journal carries every
// entry again with the transitions around them, so twice that.
const (
	MaxPackBytes        = state.MaxFileBytes
	MaxJournalBytes     = 2 * state.MaxFileBytes
	MaxAttestationBytes = 16 << 20
	MaxKeyFileBytes     = 1 << 20
)

// readLimited reads the file at path (what names it in errors) unless it is over limit
// bytes. The error of a missing file wraps fs.ErrNotExist.
func readLimited(path, what string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: the %s is over the limit of %d MiB rbook reads (docs/evidence-verify.md, \"Size limits\"): give the run's own file", path, what, limit>>20)
	}
	return data, nil
}

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
	// Record is the control plane's current record of the run (nil: none was read).
	Record *Record
	// Notes are what the report shows with "·" before its checks: a torn last journal line.
	Notes []string
}

// Record is a control plane's current record of a run: where it was read, its last seq and
// its chain head.
type Record struct {
	From    string
	LastSeq int64
	Head    string
}

// readPack reads the evidence pack at path: its exact bytes, its entries and the run id of its
// file name ("<run_id>.evidence.json"). Errors are *InputError.
func readPack(path string) (data []byte, entries []engine.Evidence, runID string, err error) {
	base := filepath.Base(path)
	runID, ok := strings.CutSuffix(base, packSuffix)
	if !ok || runID == "" {
		return nil, nil, "", inputErr("%s: an evidence pack's file is named <run_id>%s (the run id is read from the name); give the pack the run wrote, under its own name", path, packSuffix)
	}
	data, err = readLimited(path, "evidence pack", MaxPackBytes)
	if err != nil {
		return nil, nil, "", inputErr("the evidence pack cannot be read: %v", err)
	}
	if err := json.Unmarshal(data, &entries); err != nil || entries == nil {
		return nil, nil, "", inputErr("%s: not an evidence pack (a JSON array of entries): %v", path, err)
	}
	return data, entries, runID, nil
}

// readJournal reads the journal at path: its header (which must name runID) and one
// transition per line after it, decoded strictly (state.DecodeJournal). A last line without
// its newline is a write a crash tore and is ignored, as the executor ignores it; torn says so
// ("" when none; NUL bytes after the last line are reserved space, not a torn line). Errors are *InputError naming path:line.
func readJournal(path, runID string) (ts []engine.Transition, torn string, err error) {
	data, err := readLimited(path, "journal", MaxJournalBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", inputErr("no journal at %s: the chain is checked against the run's journal (<run_id>%s beside its state file). Give it with --journal FILE, or read the chain from the control plane with --control-plane URL", path, state.JournalSuffix)
	} else if err != nil {
		return nil, "", inputErr("the journal cannot be read: %v", err)
	}
	if len(data) == 0 {
		return nil, "", inputErr("%s: the journal is empty (not even its header)", path)
	}
	h, ts, end, err := state.DecodeJournal(path, data, true)
	var je *state.JournalError
	switch {
	case errors.As(err, &je) && je.Line <= 1:
		return nil, "", inputErr("%s:1: not an rbook journal (the first line is the header {\"journal\":%q,…})", path, state.JournalFormat)
	case errors.As(err, &je):
		return nil, "", inputErr("%s:%d: line %d is %s", path, je.Line, je.Line, je.Reason)
	case err != nil:
		return nil, "", inputErr("%s: %v", path, err)
	case h.RunID != runID:
		return nil, "", inputErr("%s:1: run_id: the journal is of run %s, the pack of run %s: give the journal of the pack's run (--journal FILE)", path, h.RunID, runID)
	}
	// NUL bytes after the last line are space the executor reserved for the next lines
	// (docs/decisions/durability.md, "The journal"), not a torn write.
	switch rest := bytes.TrimRight(data[end:], "\x00"); {
	case len(rest) == 0:
	case bytes.IndexByte(rest, 0) >= 0:
		// A line's end reached the disk before its start (DecodeJournal stops at the NUL).
		torn = fmt.Sprintf("%s:%d: the line is not whole, NUL bytes where its start should be (a write a crash tore); it and what follows were left out, as the executor leaves them out", path, bytes.Count(data[:end], []byte{'\n'})+1)
	default:
		torn = fmt.Sprintf("%s:%d: the last line has no newline (a write a crash tore); it was left out, as the executor leaves it out", path, bytes.Count(data, []byte{'\n'})+1)
	}
	return ts, torn, nil
}

// readOptional reads path (at most limit bytes), or returns nil when it does not exist and
// was not named explicitly (given false). Other errors are *InputError.
func readOptional(path string, given bool, what string, limit int64) ([]byte, error) {
	data, err := readLimited(path, what, limit)
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
