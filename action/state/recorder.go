package state

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// FileRecorder is the engine.GroupRecorder that keeps the run's journal and the state file
// (docs/spec/runbooks.md, "Step 4" and "Step 6"; docs/decisions/durability.md, "The journal").
// Append writes each transition to the journal (`<run_id>.journal.jsonl` beside the state
// file) and applies it to the State it holds in memory; Flush makes the lines appended since
// the last one durable with one fdatasync when one of them changes what a resume would do,
// then rewrites the state file once (temp file and rename, no fsync: a resume rebuilds it
// from the journal when that write was lost). The engine flushes before a step runs, so a
// step's finish and the next step's start share one fdatasync and one rewrite, and a
// side-effecting step's start (deploy, rollback, deterministic, agentic: in_flight) is on
// disk before the step runs (docs/runbooks.md, "State, resume and crashes"). A safe step's
// step_started (check, confirm, a playbook approval node) and a gate_decided need no sync of
// their own: resume re-runs such steps anyway. Record is Append and Flush.
//
// No final run without its evidence pack (docs/spec/runbooks.md, "Step 7"): every write of a state whose
// run_status is final is preceded by writing the evidence pack file
// (EvidencePath(Path, run_id), atomically) whenever the pack changed since the last such
// write, so a state file that says COMPLETED, FAILED or CANCELLED always has its
// `<run_id>.evidence.json` with the same entries, whenever the executor dies.
type FileRecorder struct {
	Path  string
	State *State
	// KeepOutbox queues every transition in State.Outbox until Ack, for a control plane.
	KeepOutbox bool
	pack       Pack
	evidence   evidenceWriter
	// outboxWritten is len(State.Outbox) at the last write, and acked says Ack dropped
	// transitions since then: Sync writes when either shows the file is behind.
	outboxWritten int
	acked         bool
	// writes counts the state-file writes made (each one temp file and rename, no fsync:
	// the journal is the durable record): tests assert which transitions are durable
	// (docs/decisions/durability.md).
	writes int
	// journal is the run's journal, appended to by Record before the state file is rewritten.
	journal journal
	// appended, when set (tests), is called after t's journal line is written, before the
	// state file is.
	appended func(t engine.Transition)
	// writeDue says the state file is behind the State: a transition it holds was appended
	// since the last Flush.
	writeDue bool
	// durable makes the state-file writes fsync (temp file and folder), for a write no
	// journal line backs (CloseFromRecord).
	durable bool
	// OverlapWrites lets the state-file rewrite of a Flush that recorded steps' starts run
	// while those steps run, instead of before: the journal already holds everything that
	// write holds (its fdatasync came first), so the rewrite need not delay the step
	// (docs/decisions/durability.md, "The journal"). Every other write, and every write after
	// it, waits for it first; Wait waits for it at the end.
	OverlapWrites bool
	// overlapped is the rewrite left running (nil when none): its error is reported by the
	// next write, Flush or Wait. lastKind is the kind of the last transition appended.
	overlapped chan error
	lastKind   engine.TransitionKind
	// ReuseFiles lets a rewrite write into the version of the state file before the last
	// one instead of a new temp file, where the system can tell no reader has it open (Linux:
	// rewriter, docs/decisions/durability.md, "The journal"); that version is kept under a
	// temp name until a final write or Wait removes it. For an executor that calls Wait when
	// it stops.
	ReuseFiles bool
	rw         rewriter
	// lost is the error of a journal append, cut or sync that failed: the State then holds a
	// transition the journal may not hold (or hold in part, or not durably), so nothing more
	// is written, to the journal or the state file, by this recorder; every later write returns it. A resume
	// reads the journal, cuts a torn last line and goes on from what it holds
	// (docs/decisions/durability.md, "The journal").
	lost error
	// mu guards State against Ack, which an asynchronous control-plane sender calls.
	mu sync.Mutex
}

// Wait waits for a state-file rewrite that Flush left running (OverlapWrites), removes the
// older version ReuseFiles keeps, and returns the rewrite's error (*NotWritableError), nil
// when there is none.
func (r *FileRecorder) Wait() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.settle()
	r.rw.close()
	return err
}

// settle waits for the overlapped rewrite, if any.
func (r *FileRecorder) settle() error {
	if r.overlapped == nil {
		return nil
	}
	err := <-r.overlapped
	r.overlapped = nil
	if err != nil {
		return &NotWritableError{Err: err}
	}
	return nil
}

// Sync writes the file if acknowledgements changed the outbox since the last write (or since
// the State was read), so a run that ended cleanly, or a delivered outbox, leaves an empty
// outbox behind.
func (r *FileRecorder) Sync() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.State.Outbox) == r.outboxWritten && !r.acked {
		return nil
	}
	return r.write()
}

func (r *FileRecorder) write() error {
	if r.lost != nil {
		return r.lost
	}
	if err := r.settle(); err != nil {
		return err
	}
	err := r.evidence.before(r.Path, r.State)
	var parts [3][]byte
	if err == nil {
		parts, err = r.pack.parts(r.State)
	}
	if err == nil && r.durable {
		err = writeFileAtomic(r.Path, true, parts[:]...)
	} else if err == nil {
		r.rw.keep = r.ReuseFiles && !r.State.RunStatus.Final()
		err = r.rw.write(r.Path, r.pack.gen, parts)
		if !r.rw.keep {
			r.rw.close()
		}
	}
	var taken *EvidenceTakenError
	if errors.As(err, &taken) {
		return taken // the state file is writable: another run's pack is in the way
	} else if err != nil {
		return &NotWritableError{Err: err}
	}
	r.writes++
	r.outboxWritten, r.acked = len(r.State.Outbox), false
	return nil
}

// Ack drops the transitions up to seq from the outbox: the control plane has stored them.
// The change reaches the file with the next write — or at once when the run is parked at a
// gate and this acknowledgement emptied the outbox: a parked run makes no further write, and
// an executor killed there must not leave delivered transitions listed as undelivered
// (docs/decisions/leases-and-fencing.md: a final outbox is delivered first; one write per gate). A failed
// write here is left to the next one.
func (r *FileRecorder) Ack(seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ob := r.State.Outbox
	i := 0
	for i < len(ob) && ob[i].Seq <= seq {
		i++
	}
	r.State.Outbox = ob[i:]
	r.acked = r.acked || i > 0
	if i > 0 && len(r.State.Outbox) == 0 && r.State.AwaitingConfirmation != nil {
		_ = r.write()
	}
}

// Recorded reports whether the journal holds every transition the State does: false once
// an append, or the sync that makes appends durable, failed (the recorder then writes
// nothing more). A halted run whose State is
// final and Recorded is over: the next run of its state file rebuilds what is missing from
// the journal and starts a new one, rather than resuming it.
func (r *FileRecorder) Recorded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost == nil
}

// Unacked is how many transitions the outbox holds: recorded here, not yet acknowledged by
// the control plane.
func (r *FileRecorder) Unacked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.State.Outbox)
}

// Record applies t to the State, makes it durable in the journal and writes the state file
// when needed (engine.Recorder): Append, then Flush. It returns an error naming the path when
// a file cannot be written; the engine then stops the run.
func (r *FileRecorder) Record(ctx context.Context, t engine.Transition) error {
	if err := r.Append(ctx, t); err != nil {
		return err
	}
	return r.Flush(ctx)
}

// Append applies t to the State and writes its journal line without waiting for the disk
// (engine.GroupRecorder): it survives the process's death at once, and the machine's after the
// next Flush, which also rewrites the state file. Errors are Record's.
func (r *FileRecorder) Append(_ context.Context, t engine.Transition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost != nil {
		return r.lost
	}
	s := r.State
	if t.Seq <= s.Seq && t.Kind != engine.TransitionRunStarted {
		return nil // already recorded: transitions are idempotent on (run_id, seq)
	}
	jt := t
	if jt.RunID == "" { // the engine always names the run; a hand-made transition may not
		jt.RunID = s.RunID
	}
	line, err := journalLine(jt)
	if err != nil {
		return err
	}
	if !r.journal.ready || r.journal.runID != s.RunID {
		if err := r.flushLocked(); err != nil { // another run's journal: what it holds first
			return err
		}
		if err := r.journal.prepare(r.Path, s); err != nil {
			return &NotWritableError{Err: err}
		}
	}
	if r.KeepOutbox {
		s.Outbox = append(s.Outbox, t)
	}
	write, err := apply(s, t)
	if err != nil {
		return err
	}
	// The journal first: once its line is on disk the transition is recorded, whatever
	// becomes of the state file's rewrite (docs/decisions/durability.md).
	if err := r.journal.append(line, write); err != nil {
		r.lost = &NotWritableError{Err: err}
		return r.lost
	}
	r.writeDue = r.writeDue || write
	r.lastKind = t.Kind
	if r.appended != nil {
		r.appended(t)
	}
	return nil
}

// Flush makes the journal lines appended since the last Flush durable with one fdatasync
// when one of them must be (a transition the state file holds), then rewrites the state file
// once for all of them (engine.GroupRecorder). The journal of a final run is closed: it
// records nothing more, unless a rollback reopens it.
func (r *FileRecorder) Flush(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushLocked()
}

func (r *FileRecorder) flushLocked() error {
	if r.lost != nil {
		return r.lost
	}
	final := r.State.RunStatus.Final()
	if final {
		if err := r.journal.trim(); err != nil {
			r.lost = &NotWritableError{Err: err}
			return r.lost
		}
	}
	if err := r.journal.sync(); err != nil {
		// What the failed fdatasync was to make durable may never reach the disk (and a
		// second one may report success without writing it): as a failed append.
		r.lost = &NotWritableError{Err: err}
		return r.lost
	}
	if final {
		r.journal.close()
	}
	if !r.writeDue {
		return nil
	}
	if r.OverlapWrites && !final && !r.durable && r.lastKind == engine.TransitionStepStarted {
		return r.overlap()
	}
	if err := r.write(); err != nil {
		return err
	}
	r.writeDue = false
	return nil
}

// overlap starts the rewrite of the state file (no final state: no evidence pack goes
// first) and returns without waiting for it (OverlapWrites). The bytes are encoded here, so
// the State may change while they are written.
func (r *FileRecorder) overlap() error {
	if r.lost != nil {
		return r.lost
	}
	if err := r.settle(); err != nil {
		return err
	}
	parts, err := r.pack.parts(r.State)
	if err != nil {
		return &NotWritableError{Err: err}
	}
	r.rw.keep = r.ReuseFiles
	done := make(chan error, 1)
	go func(path string, gen uint64) { done <- r.rw.write(path, gen, parts) }(r.Path, r.pack.gen)
	r.overlapped = done
	r.writes++
	r.outboxWritten, r.acked, r.writeDue = len(r.State.Outbox), false, false
	return nil
}

// Apply applies t to s as the FileRecorder does, without writing anything or touching the
// outbox: `rbook resume` replays a paused run's transitions from the control plane into a
// fresh State, which then equals the state file the run's executor kept (docs/approvals.md, "Pause mode").
// A transition at or below s.Seq is ignored (except run_started). Errors: an unknown kind.
func Apply(s *State, t engine.Transition) error {
	if t.Seq <= s.Seq && t.Kind != engine.TransitionRunStarted {
		return nil
	}
	_, err := apply(s, t)
	return err
}

// apply is Record's change of the State; write says the change must reach the file.
func apply(s *State, t engine.Transition) (write bool, err error) {
	if t.Hash != "" {
		s.ChainHead = t.Hash
	}
	if s.Kind == KindPlaybook {
		return applyPlaybook(s, t)
	}
	s.Seq = t.Seq
	if t.Kind != engine.TransitionRunInterrupted {
		s.Interrupted = nil
	}
	if t.Kind != engine.TransitionGateOpened {
		s.AwaitingConfirmation = nil
	}
	write = true
	switch t.Kind {
	case engine.TransitionRunStarted:
		s.RunStatus = engine.RunInProgress
	case engine.TransitionStepStarted:
		if t.RollbackFor == "" {
			s.CurrentStepIndex = t.StepIndex
		}
		if runbook.StepType(t.StepType).SideEffecting() {
			s.InFlight = &InFlight{StepIndex: t.StepIndex, StepName: t.StepName, StepType: t.StepType, StartedUTC: engine.FormatTime(t.Time)}
		} else {
			write = false
		}
	case engine.TransitionGateOpened:
		// Written (one write per gate), so `rbook status` can say the run waits at a gate, as
		// the control plane does (docs/decisions/status-words.md).
		s.AwaitingConfirmation = &Gate{StepIndex: t.StepIndex, StepName: t.StepName, SinceUTC: engine.FormatTime(t.Time)}
	case engine.TransitionGateDecided:
		write = false
	case engine.TransitionStepFinished:
		if t.Evidence != nil {
			s.EvidencePack = append(s.EvidencePack, *t.Evidence)
		}
		s.InFlight = nil
		if t.RollbackFor == "" && t.StepIndex >= 0 {
			s.LastCompletedStepIndex = t.StepIndex
			s.CurrentStepIndex = t.StepIndex + 1
		}
	case engine.TransitionRunFinished:
		if t.Evidence != nil {
			s.EvidencePack = append(s.EvidencePack, *t.Evidence)
		}
		s.InFlight = nil
	case engine.TransitionRunInterrupted:
		s.Interrupted = &Interruption{AtUTC: engine.FormatTime(t.Time), Reason: t.Message}
	default:
		return false, fmt.Errorf("state: unknown transition kind %q", t.Kind)
	}
	s.RollbackFor = t.RollbackFor
	if t.LastDeployName != "" {
		s.LastDeployName = t.LastDeployName
	}
	if t.RunStatus != "" {
		s.RunStatus = t.RunStatus
	}
	if s.RunStatus.Final() {
		s.RollbackFor = ""
		if s.CompletedUTC == "" {
			s.CompletedUTC = engine.FormatTime(t.Time)
		}
	}
	return write, nil
}

// NotWritableError is a failed state-file write. Its message starts with the specification's line
// "ABORT: state_file_path not writable — cannot persist state." (docs/spec/runbooks.md, "Failure handling").
type NotWritableError struct{ Err error }

func (e *NotWritableError) Error() string {
	return "ABORT: state_file_path not writable — cannot persist state.\n" + e.Err.Error()
}

// Unwrap returns the underlying write error.
func (e *NotWritableError) Unwrap() error { return e.Err }
