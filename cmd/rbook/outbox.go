package main

// Delivering a state file's outbox: the transitions a run recorded locally that its control
// plane has not acknowledged (issue 6, item 1.1). A final run's outbox is delivered before
// anything else happens in its folder — by `rbook run`, `rbook status` and `rbook cancel` —
// because the next run would move the state file (and its outbox) away to .prev-<run_id>.

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

// verbDeliverTimeout is the default --control-plane-timeout of `rbook status` and
// `rbook cancel`: how long they try to deliver an outbox before they report it undelivered.
// Shorter than a run's (cpclient.DefaultDeadline): a person is waiting at the terminal.
const verbDeliverTimeout = 10 * time.Second

// undeliveredError says that a state file's outbox could not be delivered.
type undeliveredError struct {
	RunID  string
	Status engine.RunStatus
	// Left is how many transitions are still in the outbox; URL is where they belong ("" when
	// no control plane is known).
	Left int
	URL  string
	Err  error
}

func (e *undeliveredError) Error() string {
	where := "its control plane"
	if e.URL != "" {
		where = "the control plane " + e.URL
	}
	return fmt.Sprintf("run %s is %s, but %d of its transitions have not reached %s: %v", e.RunID, e.Status, e.Left, where, e.Err)
}

func (e *undeliveredError) Unwrap() error { return e.Err }

// outboxTarget returns the URL of the control plane that st's outbox belongs to, and a func
// that stops what it started for the delivery: the embedded control plane of this folder when
// the run used it (its URL changes every start), else the URL recorded in the state file,
// else the configured one (flag, then $RBOOK_CONTROL_PLANE; unset means the embedded one).
// Errors: no control plane is known ("off"), the embedded one cannot start.
func outboxTarget(ctx context.Context, st *state.State, flag string) (string, func(), error) {
	switch {
	case st.ControlPlaneEmbedded:
		return embeddedTarget(ctx)
	case st.ControlPlane != "":
		return st.ControlPlane, func() {}, nil
	}
	u, from := cpURLFrom(flag)
	if err := checkCPURLs(u, from); err != nil {
		return "", nil, err
	}
	switch u {
	case "off":
		return "", nil, errors.New("the state file does not say which control plane they belong to, and --control-plane is off")
	case "":
		return embeddedTarget(ctx)
	}
	return u, func() {}, nil
}

// embeddedTarget starts this folder's embedded control plane for a delivery (quietly: the
// run's own start-up prints the one the run uses), or finds the address of the one another
// rbook process in this folder serves (.rbook/controlplane.url).
func embeddedTarget(ctx context.Context) (string, func(), error) {
	url, stop, err := startEmbedded(ctx, io.Discard)
	if err != nil {
		return "", nil, err
	}
	if url != "" {
		return url, stop, nil
	}
	data, err := os.ReadFile(embeddedURLFile)
	if err != nil {
		return "", nil, fmt.Errorf("another rbook process in this folder serves the embedded control plane, but its address (%s) is missing: %v", embeddedURLFile, err)
	}
	return strings.TrimSpace(string(data)), func() {}, nil
}

// deliver sends the outbox of fileRec's state to the control plane at url, oldest first
// (RecordTransition is idempotent on run_id + seq, so a transition the control plane already
// holds is harmless), drops each acknowledged one from the outbox, and writes the state file
// once at the end — also after a failure, so what was delivered is not sent again. The
// caller holds the state file's lock. It returns how many transitions were acknowledged;
// the error is the client's (*cpclient.UnreachableError past timeout, or a refusal naming
// its code).
func deliver(ctx context.Context, fileRec *state.FileRecorder, url string, timeout time.Duration) (int, error) {
	before := fileRec.Unacked()
	c, err := newCPClient(url, fileRec.State.ControlPlaneEmbedded)
	if err != nil {
		return 0, err
	}
	c.Deadline = timeout
	// The run's own lease: the state file kept the owner id and epoch it wrote with.
	c.SetFence(fileRec.State.OwnerID, fileRec.State.LeaseEpoch)
	rec := &cpclient.Recorder{C: c, Acked: fileRec.Ack}
	err = rec.Flush(ctx, append([]engine.Transition(nil), fileRec.State.Outbox...))
	if serr := fileRec.Sync(); serr != nil {
		return before - fileRec.Unacked(), serr
	}
	return before - fileRec.Unacked(), err
}

// deliverFinal delivers the outbox of the final run in the state file at statePath, if it has
// one (issue 6, item 1.1), and says so on errw. It returns *undeliveredError when transitions
// are left; nil when there was nothing to do — also when the state file is missing or
// unreadable, which the caller reports in its own terms. The caller holds the lock.
func deliverFinal(ctx context.Context, statePath, flag string, timeout time.Duration, errw io.Writer) error {
	st, err := state.Read(statePath)
	if err != nil || !st.RunStatus.Final() || len(st.Outbox) == 0 {
		return nil
	}
	undelivered := func(url string, err error) error {
		return &undeliveredError{RunID: st.RunID, Status: st.RunStatus, Left: len(st.Outbox), URL: url, Err: err}
	}
	url, stop, err := outboxTarget(ctx, st, flag)
	if err != nil {
		return undelivered("", err)
	}
	defer stop()
	fileRec := &state.FileRecorder{Path: statePath, State: st, KeepOutbox: true}
	n, err := deliver(ctx, fileRec, url, timeout)
	if n > 0 {
		fmt.Fprintf(errw, "Delivered %d transition(s) of run %s (%s) to the control plane %s; its executor had stopped before they were acknowledged.\n", n, st.RunID, st.RunStatus, url)
	}
	if err != nil {
		return undelivered(url, err)
	}
	return nil
}

// haltUndelivered is how `rbook run` refuses to start over an undelivered final run.
func haltUndelivered(ue *undeliveredError, statePath, name string) error {
	return &exitError{code: exitAborted, msg: fmt.Sprintf("%v\nNot starting a new run: it would move %s away with them, and the control plane's record of run %s would stay incomplete. "+
		"Run the same command again once the control plane is reachable ('rbook status %s' shows what is left to deliver); to give them up, move the state file aside first.",
		ue, statePath, ue.RunID, name)}
}

// deliverFinalFirst is deliverFinal before a new run of name (a runbook's name or a
// playbook's) starts at statePath: transitions left undelivered refuse the run
// (haltUndelivered, exit 2); any other error aborts with its text (issue 6, item 1.1).
func deliverFinalFirst(ctx context.Context, statePath, flag string, timeout time.Duration, errw io.Writer, name string) error {
	if err := deliverFinal(ctx, statePath, flag, timeout, errw); err != nil {
		var ue *undeliveredError
		if errors.As(err, &ue) {
			return haltUndelivered(ue, statePath, name)
		}
		return abort("%v", err)
	}
	return nil
}
