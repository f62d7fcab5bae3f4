// Package run owns one run of a runbook or a playbook from start to end, for every entry point
// of the executor: `rbook run`, `rbook playbook run`, `rbook resume`, `rbook cancel`,
// `rbook rollback` and the Action's post step (`rbook github post`). The pipeline (Run) takes
// the state file's lock, delivers a final run's outbox first, opens or resumes the state,
// starts the run on the control plane under its lease, fans transitions out to the recorders,
// composes the gates (composeGates, the one place their order is written), runs the engine
// and ends the run. Every entry point starts the same way, through hold (hold.go): the lock,
// a final run's outbox first where the verb needs it, the run read under the lock; and every
// verb's engine comes from one builder (newEngine). Its ordering rules:
//
//   - refuse before touching state: everything that can refuse a run (the plan, the
//     configuration, the executors) is checked before the state folder is locked or written;
//   - deliver the final outbox first: a final run whose transitions never reached its control
//     plane has them delivered before a new run moves its state file away;
//   - lease before recording: nothing is recorded on the control plane before StartRun granted
//     the run's lease (owner id and epoch).
//
// The run's configuration is resolved once, into Config, before anything else: the
// control-plane value is checked there (Config.Resolve), and a resumed run's state file may
// override it in one place only (Config.stateControlPlane).
package run

import "fmt"

// Exit codes a run ends with (the CLI's --help lists them).
const (
	ExitCompleted = 0 // the run completed or paused at a gate (pause mode)
	ExitFailed    = 1 // the run failed, or a signal stopped it
	ExitAborted   = 2 // aborted before running, or halted: resumable
	ExitCancelled = 3 // the run was cancelled
)

// ExitError carries an exit code out of the pipeline; Msg (if any) is printed by the caller.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// abort is the error of a refused or halted run: exit 2 with the message.
func abort(format string, a ...any) error {
	return &ExitError{Code: ExitAborted, Msg: fmt.Sprintf(format, a...)}
}
