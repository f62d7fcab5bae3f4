package state

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// RecoveryNotice is where Open and OpenPlaybook say, in one line, that they rebuilt a state
// file from its run's journal (docs/decisions/durability.md, "The journal"). It is os.Stderr;
// tests point it elsewhere.
var RecoveryNotice io.Writer = os.Stderr

// runIDField finds the run id at the start of a state file cut anywhere after it: run_id is
// the file's first field.
var runIDField = lazyregexp.New(`^\{\s*"run_id":\s*"([^"\\]+)"`)

// recoverFromJournal is readPrevious's repair of a state file whose last writes were lost
// (docs/decisions/durability.md, "The journal"). prev and readErr are Read's result. When the
// run's journal holds transitions past prev (a write lost by a crash of the machine, which
// leaves the previous version), or prev could not be read (truncated, empty, not JSON:
// readErr a *CorruptError) or is missing (ErrNotExist) while a journal of an unfinished run
// names this state file, the state is rebuilt from the journal (Apply over its transitions),
// written durably to path, said on RecoveryNotice, and returned as read back. Otherwise prev
// and readErr are returned as they came. With write false the rebuilt state is returned as
// it is, and nothing is written or said. Errors: the journal's (*JournalError), a failed
// write of the rebuilt file (*NotWritableError), Read's.
func recoverFromJournal(path string, prev *State, readErr error, write bool) (*State, error) {
	var corrupt *CorruptError
	switch {
	case prev != nil:
		h, ts, _, err := ReadJournal(JournalPath(path, prev.RunID))
		if errors.Is(err, fs.ErrNotExist) {
			return prev, nil
		} else if err != nil {
			return nil, err
		}
		from := prev.Seq
		if advanced, written := replay(prev, h, ts); !advanced || !written {
			// Only transitions the state file never holds (a safe step's start) were
			// past it: the state is as the file says, its seq the journal's.
			return prev, nil
		}
		if !write {
			return prev, nil
		}
		return rewriteRecovered(path, prev, JournalPath(path, h.RunID), fmt.Sprintf("held the run up to seq %d but its journal goes on to seq %d (the file's last write was lost)", from, prev.Seq))
	case errors.Is(readErr, ErrNotExist), errors.As(readErr, &corrupt) && torn(path):
	default:
		return nil, readErr
	}
	jp, h, ts, err := findJournal(path)
	if err != nil || h == nil || h.State == nil {
		return nil, cmpErr(err, readErr)
	}
	s := *h.State
	if advanced, _ := replay(&s, h, ts); !advanced || errors.Is(readErr, ErrNotExist) && s.RunStatus.Final() {
		// A finished run's state file is moved aside by the next run (KeepPrevious): a
		// missing one is not a lost write.
		return nil, readErr
	}
	if !write {
		return &s, nil
	}
	why := "is missing"
	if corrupt != nil {
		why = "could not be read (" + corrupt.Reason + ")"
	}
	return rewriteRecovered(path, &s, jp, why)
}

// torn reports whether the state file at path has the shape a lost write leaves: empty,
// or not JSON (cut short, or blocks that never reached the disk). A file that is JSON but
// corrupt (a duplicate key, a value out of range) was not left by a crash and is not
// rebuilt: it is refused, as before journals.
func torn(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && (len(data) == 0 || !json.Valid(data))
}

// cmpErr is err when there is one, else fallback.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// replay applies the journal's transitions past s.Seq to s, as Record applied them, and
// reports whether there were any (advanced) and whether one of them is of a kind Record
// writes to the state file (written). Those of a run with a control plane join the outbox:
// whether the control plane acknowledged them was in the lost write, and a transition sent
// again is stored once (the control plane deduplicates on run id and seq).
func replay(s *State, h *JournalHeader, ts []engine.Transition) (advanced, written bool) {
	if h.RunID != s.RunID {
		return false, false
	}
	from := s.Seq
	for _, t := range ts {
		if t.Seq <= s.Seq {
			continue
		}
		if s.ControlPlane != "" && !slices.ContainsFunc(s.Outbox, func(o engine.Transition) bool { return o.Seq == t.Seq }) {
			s.Outbox = append(s.Outbox, t)
		}
		w, err := apply(s, t)
		if err != nil {
			break
		}
		written = written || w
		s.Seq = t.Seq // a playbook's apply sets it too; a runbook's always does
	}
	return s.Seq > from, written
}

// rewriteRecovered writes the rebuilt state s to path durably, says so on RecoveryNotice,
// and returns the file as Read gives it. A final s has its evidence pack written first, as
// every final write does (FileRecorder: no final run without its evidence pack); another
// run's pack in the way is *EvidenceTakenError.
func rewriteRecovered(path string, s *State, journalPath, why string) (*State, error) {
	if s.RunStatus.Final() {
		if _, err := WriteEvidence(path, s); err != nil {
			var taken *EvidenceTakenError
			if errors.As(err, &taken) {
				return nil, taken
			}
			return nil, &NotWritableError{Err: fmt.Errorf("rebuild the evidence pack of run %s from the journal %s: %w", s.RunID, journalPath, err)}
		}
	}
	data, err := new(Pack).Encode(s)
	if err == nil {
		err = WriteFileAtomic(path, data)
	}
	if err != nil {
		return nil, &NotWritableError{Err: fmt.Errorf("rebuild %s from the journal %s: %w", path, journalPath, err)}
	}
	fmt.Fprintf(RecoveryNotice, "rbook: the state file %s %s; rebuilt it from the journal %s (run %s, seq %d, %s)\n", path, why, journalPath, s.RunID, s.Seq, s.RunStatus)
	return Read(path)
}

// findJournal finds the journal of the run whose state file path could not be read: the one
// named by the run id at the start of the file when it is cut after it, else the newest
// (last modified) journal in the folder whose header names this state file, leaving out runs
// whose state file was moved aside as finished (path + ".prev-" + run id). It returns the
// journal read (ReadJournal), or a nil header when there is none.
func findJournal(path string) (jp string, h *JournalHeader, ts []engine.Transition, err error) {
	if data, err := readHead(path, 4096); err == nil {
		if m := runIDField.FindStringSubmatch(string(data)); m != nil && runIDPattern.MatchString(m[1]) {
			jp = JournalPath(path, m[1])
			if h, ts, _, err := ReadJournal(jp); err == nil {
				return jp, h, ts, nil
			}
		}
	}
	matches, err := filepath.Glob(filepath.Join(globEscape(filepath.Dir(path)), "*"+JournalSuffix))
	if err != nil {
		return "", nil, nil, err
	}
	var newest time.Time
	jp = ""
	for _, m := range matches {
		info, err := os.Lstat(m)
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().After(newest) {
			continue
		}
		hd, err := readJournalHeader(m)
		if err != nil || hd.StateFile != filepath.Base(path) {
			continue
		}
		if _, err := os.Lstat(path + ".prev-" + hd.RunID); err == nil {
			continue
		}
		newest, jp = info.ModTime(), m
	}
	if jp == "" {
		return "", nil, nil, nil
	}
	h, ts, _, err = ReadJournal(jp)
	return jp, h, ts, err
}

// readHead returns up to n bytes from the start of the file at path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return b[:k], err
}

// readJournalHeader reads only the first line of a journal.
func readJournalHeader(path string) (*JournalHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	var h JournalHeader
	if json.Unmarshal(line, &h) != nil || h.Journal != JournalFormat {
		return nil, &JournalError{path, 1, fmt.Sprintf("the first line is not a %s header", JournalFormat)}
	}
	return &h, nil
}

// ReadRecovered reads the state file at path as Open would find it: a file behind its run's
// journal, cut short or missing while an unfinished run's journal names it is first rebuilt
// from the journal (and rewritten durably), so a run the journal shows final is final here
// too (docs/decisions/durability.md, "The journal"). The caller holds the state file's lock.
// Errors: Read's (ErrNotExist when there is neither file nor journal), the journal's
// (*JournalError), *NotWritableError when the rebuilt file cannot be written.
func ReadRecovered(path string) (*State, error) {
	prev, err := Read(path)
	return recoverFromJournal(path, prev, err, true)
}

// ReadCurrent is ReadRecovered for a reader that does not hold the state file's lock (status,
// a cancel's prompt, resume's checks): the state as the journal shows it, rebuilt in memory
// only, so the file is left as it is for the next executor's Open to repair. Errors: Read's
// (ErrNotExist when there is neither file nor journal), the journal's (*JournalError).
func ReadCurrent(path string) (*State, error) {
	prev, err := Read(path)
	return recoverFromJournal(path, prev, err, false)
}
