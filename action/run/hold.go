package run

// How every entry point starts on a run's state file: `rbook run`, `rbook playbook run`,
// `rbook resume`, `rbook cancel`, `rollback` and the post step take the state file's lock
// through hold, which delivers a final run's outbox first where the verb needs it and reads
// the run under the lock (state.ReadRecovered: a run whose last transition reached only its
// journal is read as the journal shows it). The engine of every verb is built by newEngine.

import (
	"context"
	"errors"
	"io"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// verb is what an entry point needs from hold.
type verb struct {
	// role is the lock holder's role ("run", "cancel", "rollback", "post"), which a contender's
	// message names.
	role string
	// name is the runbook's or playbook's name, in messages.
	name string
	// fail turns a failure to take the lock, to deliver or to read into the verb's error
	// (nil: exit 2 with its message); lockErr and undelivered, when set, take the first two
	// instead.
	fail, lockErr, undelivered func(error) error
	// deliverFirst delivers a final run's outbox before anything else (Config.DeliverFinal).
	deliverFirst bool
	// read is how the run is read under the lock: readNone leaves it to the verb (state.Open
	// opens a run's state), readPresent refuses a missing state file (exit 2).
	read readMode
	// discard: a refused verb leaves no lock file or folder behind (state.Lock.Discard).
	discard bool
}

// readMode is how hold reads the run under the lock.
type readMode int

const (
	readNone    readMode = iota // the verb opens the state itself (state.Open, state.OpenPlaybook)
	readPresent                 // state.ReadRecovered; a missing state file is refused (exit 2)
	readAny                     // state.ReadRecovered; errors are the verb's
)

// held is a verb's hold on the state file at path: its lock, and the run read under it (nil
// with readNone).
type held struct {
	path    string
	lock    *state.Lock
	st      *state.State
	discard bool
}

// hold is the one start of every entry point on the state file at path: it takes the lock
// for v.role, delivers a final run's outbox first when v asks, and reads the run under the
// lock as v.read says. The caller releases the hold (held.release) when it returns nil.
func (c *Config) hold(ctx context.Context, path string, v verb, errw io.Writer) (*held, error) {
	fail := v.fail
	if fail == nil {
		fail = func(err error) error { return abort("%v", err) }
	}
	lock, err := state.Acquire(path, v.role)
	if err != nil {
		return nil, or(v.lockErr, fail)(err)
	}
	h := &held{path: path, lock: lock, discard: v.discard}
	if v.deliverFirst {
		if err := c.DeliverFinal(ctx, path, errw); err != nil {
			h.release()
			return nil, or(v.undelivered, fail)(err)
		}
	}
	switch v.read {
	case readPresent:
		h.st, err = readExisting(path, v.name, state.ReadRecovered)
	case readAny:
		if h.st, err = state.ReadRecovered(path); err != nil {
			err = fail(err)
		}
	}
	if err != nil {
		h.release()
		return nil, err
	}
	return h, nil
}

// release lets go of the lock; a hold that discards leaves no lock file when nothing was
// recorded.
func (h *held) release() {
	if h.discard {
		h.lock.Discard()
		return
	}
	h.lock.Release()
}

// recorder is the state file's recorder of the held run; keepOutbox keeps each transition in
// the outbox until a control plane acknowledged it.
func (h *held) recorder(keepOutbox bool) *state.FileRecorder {
	return &state.FileRecorder{Path: h.path, State: h.st, KeepOutbox: keepOutbox}
}

// readExisting is the run in the state file at path of runbook name, read with read; a missing
// one is refused (exit 2), saying so.
func readExisting(path, name string, read func(string) (*state.State, error)) (*state.State, error) {
	st, err := read(path)
	if errors.Is(err, state.ErrNotExist) {
		return nil, abort("no run recorded for runbook %s (%s does not exist)", name, path)
	}
	if err != nil {
		return nil, abort("%v", err)
	}
	return st, nil
}

// newEngine is the one engine builder of every entry point: the plan and its recorders (the
// state file's first), and what the verb adds (withExecutors, withGate; a run adds its
// prompts, attempt.engine).
func newEngine(plan *runbook.Plan, recorders []engine.Recorder, with ...func(*engine.Engine)) *engine.Engine {
	eng := &engine.Engine{Plan: plan, Recorders: recorders}
	for _, w := range with {
		w(eng)
	}
	return eng
}

// withExecutors sets the engine's executors.
func withExecutors(execs map[runbook.StepType]engine.Executor) func(*engine.Engine) {
	return func(e *engine.Engine) { e.Executors = execs }
}

// withGate sets the engine's gate.
func withGate(g engine.Gate) func(*engine.Engine) {
	return func(e *engine.Engine) { e.Gate = g }
}

// or is f, or else g when f is nil.
func or(f, g func(error) error) func(error) error {
	if f != nil {
		return f
	}
	return g
}
