package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rbookhq/rbook-action/action/engine"
)

// The run's journal (docs/decisions/durability.md, "The journal"): an append-only file of
// the run's transitions beside the state file, made durable with one fdatasync per flush of
// the engine (a step's finish and the next step's start together). It is the run's durable record; the state file is a view of it that a resume
// rebuilds when its last write was lost.

// JournalSuffix ends the name of a run's journal, "<run_id>.journal.jsonl", which lives
// beside the state file and the evidence pack file.
const JournalSuffix = ".journal.jsonl"

// JournalFormat is the "journal" value of a journal's header line.
const JournalFormat = "rbook.journal.v1"

// JournalPath is the journal of run runID whose state file is statePath:
// "<folder of statePath>/<run_id>.journal.jsonl".
func JournalPath(statePath, runID string) string {
	return filepath.Join(filepath.Dir(statePath), runID+JournalSuffix)
}

// JournalHeader is a journal's first line. State is the run's state as it was before the
// first transition the journal holds (seq 0 for a run the journal saw start; a state file
// written before journals existed starts its journal at the resume that found it): the
// fields no transition carries (runbook name and hash, total steps, owner, inputs) come from
// it when a resume rebuilds the state file from the journal alone.
type JournalHeader struct {
	Journal   string `json:"journal"`
	RunID     string `json:"run_id"`
	StateFile string `json:"state_file"`
	State     *State `json:"state,omitempty"`
}

// JournalError is a journal that cannot be read as one: Line is 1-based (0 when the file
// as a whole is at fault).
type JournalError struct {
	Path   string
	Line   int
	Reason string
}

func (e *JournalError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("journal %s: %s; move it aside and run again", e.Path, e.Reason)
	}
	return fmt.Sprintf("journal %s:%d: %s; move it aside and run again", e.Path, e.Line, e.Reason)
}

// ReadJournal reads the journal at path: its header and its transitions in file order. A
// last line without its newline is a torn append (the executor died inside the write, before
// the fdatasync that would have acknowledged it) and is ignored; its byte offset is returned
// as end (the length of the intact part). Errors: fs.ErrNotExist (wrapped) when there is no
// file, *JournalError for a missing or foreign header or a line that is not a transition.
func ReadJournal(path string) (h *JournalHeader, ts []engine.Transition, end int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, 0, err
	}
	return DecodeJournal(path, data, false)
}

// DecodeJournal parses the bytes of a journal read from path (named in errors): the header
// line, then one transition per line, each of run h.RunID; a last line without its newline is
// left out (end is the length of the intact part). The data ends at its first NUL byte: a
// line never holds one (JSON escapes it), the space reserved ahead of the lines is NUL bytes,
// and a line being appended, or whose append a crash cut short, can show its end (its
// newline) before its start is there, with NUL bytes before it; such a line was never made
// durable, so it reads as not yet written (an auditor's reader says so: the bytes past end
// that are not NUL). Strict, as an auditor reads it
// (internal/evidenceverify): each line must be one JSON object with no field a transition does
// not have, no key twice (encoding/json would keep the last silently, so a line could read one
// way here and another elsewhere), a kind and a seq. Errors: *JournalError naming the line,
// whose Reason for a transition line starts "not a transition: "; Line 0 for a file with no
// header line.
func DecodeJournal(path string, data []byte, strict bool) (h *JournalHeader, ts []engine.Transition, end int64, err error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		data = data[:i]
	}
	for line := 1; ; line++ {
		i := bytes.IndexByte(data[end:], '\n')
		if i < 0 {
			break // what is left, if anything, is a torn last line
		}
		b := data[end : end+int64(i)+1]
		if line == 1 {
			h = new(JournalHeader)
			if json.Unmarshal(b, h) != nil || h.Journal != JournalFormat || h.RunID == "" {
				return nil, nil, 0, &JournalError{path, 1, fmt.Sprintf("the first line is not a %s header", JournalFormat)}
			}
		} else {
			t, err := decodeTransition(b, strict)
			if err != nil {
				return nil, nil, 0, &JournalError{path, line, "not a transition: " + err.Error()}
			}
			if t.RunID != h.RunID {
				return nil, nil, 0, &JournalError{path, line, fmt.Sprintf("a transition of run %s in the journal of run %s", t.RunID, h.RunID)}
			}
			ts = append(ts, t)
		}
		end += int64(len(b))
	}
	if h == nil {
		return nil, nil, 0, &JournalError{path, 0, "the file has no header line"}
	}
	return h, ts, end, nil
}

// decodeTransition decodes one journal line; strict as DecodeJournal says.
func decodeTransition(line []byte, strict bool) (engine.Transition, error) {
	var t engine.Transition
	if !strict {
		return t, json.Unmarshal(line, &t)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
		return t, errors.New("a transition is a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, err
	}
	if dec.More() {
		return t, errors.New("more than one JSON value on the line")
	}
	if err := CheckDuplicateKeys(line); err != nil {
		return t, err
	}
	if t.Kind == "" || t.Seq < 1 {
		return t, errors.New("it has no kind or no seq")
	}
	return t, nil
}

// journal appends a run's transitions to its journal file. On unix the file stays open from
// the first append to the one that makes the run final (close); on Windows it is closed at
// each sync (journalStaysOpen).
//
// Lines are written at off, into space reserved ahead of them: the file is grown in steps
// (reserve) by writing NUL bytes past its last line, so most syncs find the file's size
// unchanged and an fdatasync writes the new line's page alone, not also the inode
// (docs/decisions/durability.md, "The journal"). A reader takes a tail of NUL bytes for no
// line; the tail is cut off when the run becomes final (trim) and when a journal is
// prepared for appending.
type journal struct {
	path, runID string
	ready       bool
	f           *os.File
	// header is the header line a journal that does not exist yet starts with; nil once
	// the file exists.
	header []byte
	// off is where the next line goes (the end of the lines written), size the file's size
	// (off plus the reserved NUL bytes).
	off, size int64
	// datasyncs counts the fdatasyncs of appends, fsyncs the fsyncs (file and folder) of the
	// journal's creation: tests assert one fdatasync per durable group of transitions.
	datasyncs, fsyncs int
	// due says a line appended since the last fdatasync must be made durable by the next sync.
	due bool
}

// Reserved space of a journal: each reservation grows the file by its current size (at
// least journalReserveMin, at most journalReserveMax bytes), so a run of n lines reserves
// O(log n) times and never holds more than journalReserveMax NUL bytes.
const (
	journalReserveMin = 4 << 10
	journalReserveMax = 1 << 20
)

// prepare readies the journal of s's run (s is the state before the transition about to be
// appended). An existing journal of the same run is kept, its torn last line or reserved
// tail (if any) cut off so the next append starts a line of its own; one of another run is a
// *JournalError. When there is none, the header the first append creates it with is made
// from s.
func (j *journal) prepare(statePath string, s *State) error {
	j.close()
	j.path, j.runID, j.header, j.off, j.size = JournalPath(statePath, s.RunID), s.RunID, nil, 0, 0
	h, _, end, err := ReadJournal(j.path)
	switch {
	case err == nil && h.RunID != s.RunID:
		return &JournalError{j.path, 1, fmt.Sprintf("the journal of run %s, not %s", h.RunID, s.RunID)}
	case err == nil:
		if info, err := os.Stat(j.path); err == nil && info.Size() > end {
			if err := os.Truncate(j.path, end); err != nil {
				return fmt.Errorf("cut the torn last line of %s: %w", j.path, err)
			}
		}
		j.off, j.size = end, end
	case errors.Is(err, fs.ErrNotExist):
		snap := *s
		header, err := json.Marshal(JournalHeader{Journal: JournalFormat, RunID: s.RunID, StateFile: filepath.Base(statePath), State: &snap})
		if err != nil {
			return err
		}
		j.header = append(header, '\n')
	default:
		return err
	}
	j.ready = true
	return nil
}

// append writes line (one transition's JSON and its newline) to the journal, without
// waiting for the disk; durable says the next sync must make it durable. The append that
// creates the file (header and line) is made durable at once, with an fsync of the file and
// one of its folder, so the file's name survives a crash too.
func (j *journal) append(line []byte, durable bool) error {
	if j.f == nil {
		flag := os.O_WRONLY | oNoFollow
		if j.header != nil {
			flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL | oNoFollow
		}
		f, err := os.OpenFile(j.path, flag, 0o600)
		if err != nil {
			return err
		}
		j.f = f
	}
	if j.header != nil {
		line = append(j.header, line...)
	} else if err := j.reserve(int64(len(line))); err != nil {
		j.close()
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	if _, err := j.f.WriteAt(line, j.off); err != nil {
		j.close()
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	j.off += int64(len(line))
	j.size = max(j.size, j.off)
	if j.header == nil {
		j.due = j.due || durable
		return nil
	}
	if err := j.f.Sync(); err != nil {
		j.close()
		return fmt.Errorf("sync %s: %w", j.path, err)
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		return err
	}
	j.header = nil
	j.fsyncs += 2
	return nil
}

// zeros is the NUL bytes reserve writes.
var zeros [64 << 10]byte

// reserve grows the file with NUL bytes when n more bytes at off would not fit, by its
// size (journalReserveMin to journalReserveMax bytes) beyond what they need. The bytes are
// written, not just allocated: writing into an allocated but unwritten extent changes the
// file's metadata too.
func (j *journal) reserve(n int64) error {
	if j.off+n <= j.size {
		return nil
	}
	grow := min(max(j.size, journalReserveMin), journalReserveMax)
	to := j.off + n + grow
	for at := j.size; at < to; {
		k := min(int64(len(zeros)), to-at)
		if _, err := j.f.WriteAt(zeros[:k], at); err != nil {
			return err
		}
		at += k
	}
	j.size = to
	return nil
}

// trim cuts the reserved NUL bytes off the file: a final run's journal ends with its last line.
func (j *journal) trim() error {
	if j.f == nil || j.size <= j.off {
		return nil
	}
	if err := j.f.Truncate(j.off); err != nil {
		j.close()
		return fmt.Errorf("cut the reserved tail of %s: %w", j.path, err)
	}
	j.size = j.off
	j.due = true // the file's new size must be on disk with the last line
	return nil
}

// sync makes the lines appended since the last sync durable with one fdatasync when one of
// them was appended durable; lines that need not be reach the disk with the next such sync.
// On Windows the file is closed here (journalStaysOpen).
func (j *journal) sync() error {
	if j.f == nil {
		return nil
	}
	if j.due {
		if err := fdatasync(j.f); err != nil {
			j.close()
			return fmt.Errorf("sync %s: %w", j.path, err)
		}
		j.due = false
		j.datasyncs++
	}
	if !journalStaysOpen {
		j.close()
	}
	return nil
}

// close closes the journal file, if open; the next append opens it again.
func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// journalLine is t's journal line: its JSON (engine.Transition's encoding) and a newline.
func journalLine(t engine.Transition) ([]byte, error) {
	b, err := json.Marshal(t) // never a raw newline: strings escape theirs
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
