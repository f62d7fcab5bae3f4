package run

// Delivering a state file's outbox: the transitions a run recorded locally that its control
// plane has not acknowledged. A final run's outbox is delivered before anything else happens
// in its folder — by `rbook run`, `rbook status` and `rbook cancel` — because the next run
// would move the state file (and its outbox) away to .prev-<run_id>.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
)

// VerbDeliverTimeout is the default --control-plane-timeout of `rbook status` and
// `rbook cancel`: how long they try to deliver an outbox before they report it undelivered.
// Shorter than a run's (cpclient.DefaultDeadline): a person is waiting at the terminal.
const VerbDeliverTimeout = 10 * time.Second

// UndeliveredError says that a state file's outbox could not be delivered.
type UndeliveredError struct {
	RunID  string
	Status engine.RunStatus
	// Left is how many transitions are still in the outbox; URL is where they belong ("" when
	// no control plane is known).
	Left int
	URL  string
	Err  error
}

func (e *UndeliveredError) Error() string {
	where := "its control plane"
	if e.URL != "" {
		where = "the control plane " + e.URL
	}
	return fmt.Sprintf("run %s is %s, but %d of its transitions have not reached %s: %v", e.RunID, e.Status, e.Left, where, e.Err)
}

func (e *UndeliveredError) Unwrap() error { return e.Err }

// OutboxTarget returns the URL of the control plane that st's outbox belongs to, and a func
// that stops what it started for the delivery: the embedded control plane of this folder when
// the run used it (its URL changes every start), else the URL recorded in the state file,
// else the configured one (c.ControlPlane; unset means the embedded one). Errors: no control
// plane is known ("off"), the embedded one cannot start.
func (c *Config) OutboxTarget(ctx context.Context, st *state.State) (string, func(), error) {
	switch {
	case st.ControlPlaneEmbedded:
		return c.embeddedTarget(ctx)
	case st.ControlPlane != "":
		return st.ControlPlane, func() {}, nil
	}
	if c.invalid != nil {
		return "", nil, c.invalid
	}
	switch c.ControlPlane {
	case "off":
		return "", nil, errors.New("the state file does not say which control plane they belong to, and --control-plane is off")
	case "":
		return c.embeddedTarget(ctx)
	}
	return c.ControlPlane, func() {}, nil
}

// embeddedTarget starts this folder's embedded control plane for a delivery (quietly: the
// run's own start-up prints the one the run uses), or finds the address of the one another
// rbook process in this folder serves (c.Embedded.URLFile).
func (c *Config) embeddedTarget(ctx context.Context) (string, func(), error) {
	if c.Embedded == nil {
		return "", nil, errors.New("no embedded control plane can start here")
	}
	url, stop, err := c.Embedded.Start(ctx, io.Discard)
	if err != nil {
		return "", nil, err
	}
	if url != "" {
		return url, stop, nil
	}
	data, err := os.ReadFile(c.Embedded.URLFile)
	if err != nil {
		return "", nil, fmt.Errorf("another rbook process in this folder serves the embedded control plane, but its address (%s) is missing: %v", c.Embedded.URLFile, err)
	}
	return strings.TrimSpace(string(data)), func() {}, nil
}

// Deliver sends the outbox of fileRec's state to the control plane at url, oldest first
// (RecordTransition is idempotent on run_id + seq, so a transition the control plane already
// holds is harmless), drops each acknowledged one from the outbox, and writes the state file
// once at the end — also after a failure, so what was delivered is not sent again. The
// caller holds the state file's lock. It returns how many transitions were acknowledged;
// the error is the client's (*cpclient.UnreachableError past c.Timeout, or a refusal naming
// its code).
func (c *Config) Deliver(ctx context.Context, fileRec *state.FileRecorder, url string) (int, error) {
	before := fileRec.Unacked()
	cl, err := c.client(url, fileRec.State.ControlPlaneEmbedded)
	if err != nil {
		return 0, err
	}
	// The run's own lease: the state file kept the owner id and epoch it wrote with.
	cl.SetFence(fileRec.State.OwnerID, fileRec.State.LeaseEpoch)
	rec := &cpclient.Recorder{C: cl, Acked: fileRec.Ack}
	err = rec.SendOutbox(ctx, append([]engine.Transition(nil), fileRec.State.Outbox...))
	if serr := fileRec.Sync(); serr != nil {
		return before - fileRec.Unacked(), serr
	}
	return before - fileRec.Unacked(), err
}

// DeliverFinal delivers the outbox of the final run in the state file at statePath, if it has
// one, and says so on errw. It returns *UndeliveredError when transitions are left; nil when
// there was nothing to do — also when the state file is missing or unreadable, which the
// caller reports in its own terms. The caller holds the lock.
func (c *Config) DeliverFinal(ctx context.Context, statePath string, errw io.Writer) error {
	// As Open will find it: a run whose last transition reached only the journal (the state
	// file's rewrite was lost) is final here too, and its outbox goes first.
	st, err := state.ReadRecovered(statePath)
	if err != nil || !st.RunStatus.Final() || len(st.Outbox) == 0 {
		return nil
	}
	undelivered := func(url string, err error) error {
		return &UndeliveredError{RunID: st.RunID, Status: st.RunStatus, Left: len(st.Outbox), URL: url, Err: err}
	}
	url, stop, err := c.OutboxTarget(ctx, st)
	if err != nil {
		return undelivered("", err)
	}
	defer stop()
	fileRec := &state.FileRecorder{Path: statePath, State: st, KeepOutbox: true}
	n, err := c.Deliver(ctx, fileRec, url)
	if n > 0 {
		fmt.Fprintf(errw, "Delivered %d transition(s) of run %s (%s) to the control plane %s; its executor had stopped before they were acknowledged.\n", n, st.RunID, st.RunStatus, url)
	}
	if err != nil {
		return undelivered(url, err)
	}
	return nil
}

// refuseNewRun is how a new run of name (a runbook's name or a playbook's) at statePath
// reports a final run's outbox DeliverFinal could not deliver: transitions left undelivered
// refuse the run (exit 2, saying why a new run does not start); any other error aborts with
// its text.
func refuseNewRun(statePath, name string) func(error) error {
	return func(err error) error {
		var ue *UndeliveredError
		if errors.As(err, &ue) {
			return abort("%v\nNot starting a new run: it would move %s away with them, and the control plane's record of run %s would stay incomplete. "+
				"Run the same command again once the control plane is reachable ('rbook status %s' shows what is left to deliver); to give them up, move the state file aside first.",
				ue, statePath, ue.RunID, name)
		}
		return abort("%v", err)
	}
}
