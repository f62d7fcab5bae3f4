package main

// The line a person sees when a playbook's retry error handler fires (issue 9 UX, item 5):
// the handler's templated message was recorded on the re-run's step_started, but printed
// nowhere.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/steps"
)

// handlerLines is a Recorder that prints "↻ <node> failed; handler retry: <message>" (or,
// without a message, "↻ <node> failed (<event>); handler retry (on: <on>)") when a node is
// started again by a retry error handler. It only writes to w.
type handlerLines struct{ w io.Writer }

// Record prints the retry line of a step_started whose message starts with
// engine.RetryNotePrefix; it never fails.
func (h handlerLines) Record(_ context.Context, t engine.Transition) error {
	if t.Kind != engine.TransitionStepStarted || !strings.HasPrefix(t.Message, engine.RetryNotePrefix) {
		return nil
	}
	fmt.Fprintln(h.w, retryLine(steps.CleanInput(t.StepName), t.Message))
	return nil
}

// retryLine turns a retry note "retry (error handler on: ON) after EVENT[: MSG]" of node id
// into the printed line.
func retryLine(id, note string) string {
	rest := strings.TrimPrefix(note, engine.RetryNotePrefix)
	on, after, ok := strings.Cut(rest, ") after ")
	if !ok {
		return fmt.Sprintf("↻ %s failed; handler retry: %s", id, steps.CleanInput(note))
	}
	event, msg, hasMsg := strings.Cut(after, ": ")
	if hasMsg && msg != "" {
		return fmt.Sprintf("↻ %s failed; handler retry: %s", id, steps.CleanInput(msg))
	}
	return fmt.Sprintf("↻ %s failed (%s); handler retry (on: %s)", id, event, on)
}
