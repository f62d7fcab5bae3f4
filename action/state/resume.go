package state

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// OpenOptions tune Open.
type OpenOptions struct {
	// Now is the clock for run ids and started_utc; nil means time.Now.
	Now func() time.Time
	// StepIndex, when not nil, overrides where the run starts or resumes (0-based; the
	// step_index input of docs/spec/runbooks.md). It also lets an operator resume past a step in unknown state.
	StepIndex *int
	// AllowEdited resumes a run even though the runbook's content hash changed.
	AllowEdited bool
	// Lock, when set, is the caller's lock on the state file: Open then removes the stale
	// temp files an interrupted write left in the folder (Lock.RemoveStaleTemps).
	Lock *Lock
}

// Opened is the outcome of resume detection (docs/spec/runbooks.md, "Step 3").
type Opened struct {
	State *State
	// Resumed is true when an IN_PROGRESS run is continued; StartIndex is where it goes on.
	Resumed    bool
	StartIndex int
	// SkipOwedRollback is set when the operator chose to go on after a compensating rollback
	// that was in flight when the executor died: the run ends without running it again
	// (engine.Start.SkipOwedRollback).
	SkipOwedRollback bool
	// SkipNodes are playbook nodes in unknown state the operator chose to go on after
	// (--skip-node; OpenPlaybook): the run records each SKIPPED before anything else runs.
	SkipNodes []string
	// PrevPath is where KeepPrevious moves a final previous state file ("" when there is none).
	PrevPath string
	path     string
	taken    func(id string) bool
}

// KeepPrevious moves the final previous run's state file to PrevPath (docs/spec/runbooks.md, "Step 3"). Call it
// once nothing can refuse the new run any more, so a refused start changes nothing.
func (o *Opened) KeepPrevious() error {
	if o.PrevPath == "" || o.Resumed {
		return nil
	}
	if err := os.Rename(o.path, o.PrevPath); err != nil {
		return fmt.Errorf("keep the previous run: %w", err)
	}
	return nil
}

// EditedError refuses to resume a run whose runbook changed since it started (docs/runbooks.md, "State, resume and crashes").
type EditedError struct {
	RunID, Recorded, Current string
}

func (e *EditedError) Error() string {
	return fmt.Sprintf("run %s was started from runbook content %s, but the runbook (or its values) is now %s; resuming would run steps nobody reviewed together. Restore the runbook, or pass --allow-edited-runbook to resume anyway", e.RunID, e.Recorded, e.Current)
}

// UnknownStepError refuses to resume past a side-effecting step whose outcome was never
// recorded: a real deploy may have happened (docs/runbooks.md, "State, resume and crashes").
type UnknownStepError struct {
	RunID    string
	InFlight InFlight
}

func (e *UnknownStepError) Error() string {
	f := e.InFlight
	return fmt.Sprintf("step in unknown state: %s step '%s' (index %d) of run %s started at %s and its outcome was never recorded, so it may or may not have taken effect. Check the target, then resume with --step-index %d to run it again or --step-index %d to go on after it",
		f.StepType, f.StepName, f.StepIndex, e.RunID, f.StartedUTC, f.StepIndex, f.StepIndex+1)
}

// Open decides whether plan's run is resumed or started fresh (docs/spec/runbooks.md, "Step 2" to "Step 4", docs/decisions/run-ids.md) and
// returns the State to record into. The caller must hold the Lock. A fresh State is not
// written yet: the engine's run_started transition writes it. A final previous run whose
// evidence pack file is missing gets it rebuilt from its state (EnsureEvidence; docs/spec/runbooks.md, "Step 7") before anything else happens. Errors: *CorruptError, *SymlinkError,
// *EditedError, *UnknownStepError, *NotWritableError (the evidence pack could not be
// rebuilt), or a file-system error naming the path.
func Open(plan *runbook.Plan, path string, opts OpenOptions) (*Opened, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	prev, err := readPrevious(plan, path, opts.Lock)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.RunStatus == engine.RunInProgress {
		if prev.Kind == KindPlaybook {
			// A runbook whose state_file_path is an unfinished playbook run's state file
			// (.rbook/<name>.playbook.state.json) must not resume that run as its own steps,
			// not even with --allow-edited-runbook (the mirror of OpenPlaybook's check: a
			// run is resumed only by the format that started it).
			return nil, &CorruptError{path, fmt.Sprintf("it holds an unfinished playbook run (%s of %q), not a runbook run; give the runbook its own state_file_path", prev.RunID, prev.RunbookName)}
		}
		if prev.RunbookName != plan.Name {
			return nil, &CorruptError{path, fmt.Sprintf("it holds runbook %q, not %q; two runbooks must not share a state_file_path", prev.RunbookName, plan.Name)}
		}
		if prev.RunbookHash != plan.ContentHash && !opts.AllowEdited {
			return nil, &EditedError{RunID: prev.RunID, Recorded: prev.RunbookHash, Current: plan.ContentHash}
		}
		if prev.RunbookHash == plan.ContentHash {
			// Against an edited runbook (--allow-edited-runbook) the recorded steps may
			// rightly be gone; against the same one, a step it does not have is impossible.
			if err := checkAgainstPlan(path, prev, plan); err != nil {
				return nil, err
			}
		}
		if prev.InFlight != nil && opts.StepIndex == nil {
			return nil, &UnknownStepError{RunID: prev.RunID, InFlight: *prev.InFlight}
		}
		start := prev.LastCompletedStepIndex + 1
		skipRollback := false
		if opts.StepIndex != nil {
			start = *opts.StepIndex
			// "go on after it" for a compensating rollback whose outcome is unknown: the
			// operator checked the target, so the rollback is not run again (docs/runbooks.md, "State, resume and crashes").
			f := prev.InFlight
			skipRollback = f != nil && prev.RollbackFor != "" && f.StepType == string(runbook.TypeRollback) && start > f.StepIndex
			prev.InFlight = nil
		}
		if start < 0 || start > len(plan.Steps) {
			return nil, fmt.Errorf("--step-index %d is outside 0..%d", start, len(plan.Steps))
		}
		prev.TotalSteps = len(plan.Steps)
		prev.RunbookHash = plan.ContentHash
		if prev.OwnerID == "" || !sameWorkspace(prev, path) {
			// A state file copied from another workspace does not make this executor the
			// run's owner (docs/decisions/leases-and-fencing.md): it needs --take-over, which waits for the lease.
			prev.OwnerID = NewOwnerID()
		}
		prev.OwnerWorkspace = WorkspaceID(path)
		return &Opened{State: prev, Resumed: true, StartIndex: start, SkipOwedRollback: skipRollback}, nil
	}
	start := 0
	if opts.StepIndex != nil {
		start = *opts.StepIndex
		if start < 0 || start >= len(plan.Steps) {
			return nil, fmt.Errorf("--step-index %d is outside 0..%d", start, len(plan.Steps)-1)
		}
	}
	t := now().UTC()
	taken := takenRunIDs(path, prev)
	id := RunID(plan, t)
	for taken(id) {
		id = NextRunID(id)
	}
	o := &Opened{StartIndex: start, path: path, taken: taken}
	if prev != nil {
		o.PrevPath = path + ".prev-" + prev.RunID
	}
	o.State = &State{
		RunID: id, RunbookName: plan.Name, RunStatus: engine.RunInProgress,
		CurrentStepIndex: start, LastCompletedStepIndex: start - 1, TotalSteps: len(plan.Steps),
		EvidencePack: []engine.Evidence{}, StartedUTC: engine.FormatTime(t), SchemaHash8: plan.SchemaHash8,
		RunbookHash: plan.ContentHash, OwnerID: NewOwnerID(), OwnerWorkspace: WorkspaceID(path),
	}
	// One workspace is one owner (docs/decisions/leases-and-fencing.md): a run that died between StartRun and its first
	// state write is found again as its own, even when the state file was already moved to
	// its .prev- name.
	if owner := workspaceOwner(path, prev); owner != "" {
		o.State.OwnerID = owner
	}
	return o, nil
}

// checkAgainstPlan refuses, as *CorruptError, an unfinished run's state whose recorded steps
// are not plan's, the runbook or playbook it was started from (same content hash): a
// total_steps other than its step count, an evidence entry, in-flight step, open gate or
// owed rollback naming a step it does not have (or naming it at another index; an owed
// rollback may also be engine.RollbackVerb's, asked for with `rbook rollback`), and for a
// playbook iteration counts and bindings of nodes it does not have. The run-level entry the
// engine writes itself (CANCEL, engine.PlaybookCancelStepName) is not a step and is valid.
func checkAgainstPlan(path string, s *State, plan *runbook.Plan) error {
	what, unit := "runbook", "steps"
	if plan.Playbook != nil {
		what, unit = "playbook", "nodes"
	}
	corrupt := func(format string, a ...any) error {
		return &CorruptError{path, fmt.Sprintf(format, a...) + fmt.Sprintf(" (%s %q has %d %s)", what, plan.Name, len(plan.Steps), unit)}
	}
	if s.TotalSteps != len(plan.Steps) {
		return corrupt("total_steps is %d", s.TotalSteps)
	}
	index := make(map[string]int, len(plan.Steps))
	for _, st := range plan.Steps {
		index[st.Name] = st.Index
	}
	for i, e := range s.EvidencePack {
		if _, ok := index[e.StepName]; !ok && e.StepName != engine.PlaybookCancelStepName {
			return corrupt("evidence_pack[%d] is for step %q, which %s %q does not have", i, e.StepName, what, plan.Name)
		}
	}
	atStep := func(field string, i int, name string) error {
		if at, ok := index[name]; !ok || at != i {
			return corrupt("%s names step %q at index %d, which %s %q does not have", field, name, i, what, plan.Name)
		}
		return nil
	}
	if f := s.InFlight; f != nil {
		if err := atStep("in_flight", f.StepIndex, f.StepName); err != nil {
			return err
		}
	}
	for i, f := range s.InFlightNodes {
		if err := atStep(fmt.Sprintf("in_flight_nodes[%d]", i), f.StepIndex, f.StepName); err != nil {
			return err
		}
	}
	if g := s.AwaitingConfirmation; g != nil {
		if err := atStep("awaiting_confirmation", g.StepIndex, g.StepName); err != nil {
			return err
		}
	}
	if _, ok := index[s.RollbackFor]; s.RollbackFor != "" && s.RollbackFor != engine.RollbackVerb && !ok {
		return corrupt("rollback_for names step %q, which %s %q does not have", s.RollbackFor, what, plan.Name)
	}
	for _, n := range slices.Sorted(maps.Keys(s.IterationCounts)) {
		if _, ok := index[n]; !ok {
			return corrupt("iteration_counts counts node %q, which %s %q does not have", n, what, plan.Name)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.Bindings)) {
		_, node := index[n]
		_, input := s.Inputs[n]
		if !node && !input {
			return corrupt("bindings hold %q, which is neither a node nor an input of %s %q", n, what, plan.Name)
		}
	}
	return nil
}

// NextFreeRunID is the next docs/decisions/run-ids.md suffix after id that no state file in this folder holds (the
// replaced file or a .prev- file): the id a fresh run tries when the control plane refuses
// id (docs/decisions/run-ids.md).
func (o *Opened) NextFreeRunID(id string) string {
	id = NextRunID(id)
	for o.taken != nil && o.taken(id) {
		id = NextRunID(id)
	}
	return id
}

// workspaceOwner is the owner id this folder's runs use: the state file's, else the newest
// .prev- file's; "" when the folder has none.
func workspaceOwner(path string, prev *State) string {
	if prev != nil && prev.OwnerID != "" {
		if !sameWorkspace(prev, path) {
			return ""
		}
		return prev.OwnerID
	}
	matches, _ := filepath.Glob(globEscape(path) + ".prev-*")
	var newest time.Time
	owner := ""
	for _, m := range matches {
		info, err := os.Lstat(m)
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().After(newest) {
			continue
		}
		if st, err := Read(m); err == nil && st.OwnerID != "" && sameWorkspace(st, path) {
			newest, owner = info.ModTime(), st.OwnerID
		}
	}
	return owner
}

// WorkspaceID names the workspace a state file lives in: the first 16 hex characters of
// SHA-256(host name, NUL, absolute state path). An owner id belongs to one workspace
// (docs/decisions/leases-and-fencing.md); a state file restored elsewhere (another runner, another folder) gets a new one.
func WorkspaceID(statePath string) string {
	host, _ := os.Hostname()
	abs, err := filepath.Abs(statePath)
	if err != nil {
		abs = statePath
	}
	sum := sha256.Sum256([]byte(host + "\x00" + abs))
	return hex.EncodeToString(sum[:8])
}

// sameWorkspace reports whether st was written in the workspace of statePath; a state file
// from before workspaces were recorded counts as this workspace's.
func sameWorkspace(st *State, statePath string) bool {
	return st.OwnerWorkspace == "" || st.OwnerWorkspace == WorkspaceID(statePath)
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NewOwnerID returns a random executor owner id: "o-" and 26 base32 characters (128 bits),
// the shape StartRunRequest.owner_id accepts (docs/decisions/leases-and-fencing.md).
func NewOwnerID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "o-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// RunID is the specification's run id: "RBOOK-" + UTC date YYYYMMDD + "-" + runbook_name + "-" +
// schema_hash8 (docs/spec/runbooks.md, "Step 2").
func RunID(plan *runbook.Plan, t time.Time) string {
	return "RBOOK-" + t.UTC().Format("20060102") + "-" + plan.Name + "-" + plan.SchemaHash8
}

// PlaybookRunID is a playbook run's id: "RBOOK-" + UTC date YYYYMMDD + "-" + playbook name +
// "-" + 8 random lowercase hex characters (docs/spec/playbooks.md, "Run ids"). The specification's runbook id ends in
// the schema hash, which every run of every playbook shares, so two runs of one playbook on one
// day (another --state-file, another control plane) would get one id and one evidence pack
// file; the random part makes each fresh run's id its own. It is made once, at the fresh start,
// and kept in the state file, so a resume keeps it.
func PlaybookRunID(name string, t time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "RBOOK-" + t.UTC().Format("20060102") + "-" + name + "-" + hex.EncodeToString(b)
}

// takenRunIDs reports the run ids a run in this folder already has: the file being replaced,
// a .prev- file (docs/decisions/run-ids.md), or an evidence pack file "<id>.evidence.json" or journal
// "<id>.journal.jsonl" beside the state file — another run's, whatever state file it used
// (docs/playbooks.md: a run never overwrites another run's evidence pack).
func takenRunIDs(path string, prev *State) func(string) bool {
	return func(id string) bool {
		if prev != nil && prev.RunID == id {
			return true
		}
		if _, err := os.Lstat(EvidencePath(path, id)); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if _, err := os.Lstat(JournalPath(path, id)); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
		_, err := os.Stat(path + ".prev-" + id)
		return !errors.Is(err, fs.ErrNotExist)
	}
}

// NextRunID returns the run id with the next docs/decisions/run-ids.md suffix: X → X.2, X.2 → X.3.
func NextRunID(id string) string {
	if i := strings.LastIndexByte(id, '.'); i > 0 {
		if n, err := strconv.Atoi(id[i+1:]); err == nil && n >= 2 {
			return fmt.Sprintf("%s.%d", id[:i], n+1)
		}
	}
	return id + ".2"
}

// readPrevious is the first half of Open and OpenPlaybook: with lock held (nil in tests that
// hold none) it removes the stale temporary files of plan's runs, then reads the state at
// path: nil when there is none. A state file behind its run's journal, unreadable, or missing
// while an unfinished run's journal names it is rebuilt from the journal first
// (recoverFromJournal). A final previous run whose evidence pack file is missing,
// behind or ahead of its state file gets it rebuilt from its state (settleEvidence). Errors: Read's (except
// ErrNotExist), *NotWritableError (the pack could not be rebuilt), or RemoveStaleTemps's.
func readPrevious(plan *runbook.Plan, path string, lock *Lock) (*State, error) {
	if lock != nil {
		if _, err := lock.RemoveStaleTemps(plan.Name); err != nil {
			return nil, err
		}
	}
	prev, err := Read(path)
	if prev, err = recoverFromJournal(path, prev, err, true); err != nil && !errors.Is(err, ErrNotExist) {
		return nil, err
	}
	if prev != nil {
		if err := settleEvidence(path, prev); err != nil {
			return nil, &NotWritableError{Err: fmt.Errorf("rebuild the evidence pack of run %s: %w", prev.RunID, err)}
		}
	}
	return prev, nil
}
