package steps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
)

// MaxLineBytes caps one line of gate input (4 KiB); longer input is cut at the limit.
const MaxLineBytes = 4 << 10

// ErrNoInput means the input stream ended (stdin closed, EOF): nobody can answer here.
var ErrNoInput = errors.New("no input: standard input is closed, so nobody can answer here")

// Lines reads an input stream line by line in one goroutine, so every gate and cancel prompt
// of a run shares it and a line typed for one prompt is never lost to a timed-out other.
type Lines struct {
	ch   chan string
	done chan struct{}
	once sync.Once
}

// NewLines starts reading r. Lines are trimmed of their line ending only.
func NewLines(r io.Reader) *Lines {
	l := &Lines{ch: make(chan string), done: make(chan struct{})}
	go func() {
		defer l.once.Do(func() { close(l.done) })
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 256), MaxLineBytes)
		for sc.Scan() {
			l.ch <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	return l
}

// Next returns the next line, ErrNoInput once the stream has ended, or ctx's error.
func (l *Lines) Next(ctx context.Context) (string, error) {
	select {
	case s := <-l.ch:
		return s, nil
	case <-l.done:
		return "", ErrNoInput
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Answer classifies a typed gate answer (seed Step 5, confirm; DESIGN D8): yes or confirm
// (trimmed, any case) approve, cancel starts the cancel flow, anything else rejects.
func Answer(line string) engine.Verdict {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "yes", "confirm":
		return engine.Approved
	case "cancel":
		return engine.Cancelled
	}
	return engine.Rejected
}

// TerminalGate decides confirm steps from typed lines (the terminal, or stdin when it is not
// a terminal). It prints the gate's prompt and how to answer to Out.
type TerminalGate struct {
	In  *Lines
	Out io.Writer
	// Who is recorded as the decider (the local user name).
	Who string
	// Echoed is true when In is a terminal: the user's Enter already ended the prompt line.
	Echoed bool
}

// Await prints the prompt and waits for one line. It returns ErrNoInput when stdin is
// closed, and ctx.Err() when the gate's deadline passes or the run stops.
func (g *TerminalGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if req.Prompt != "" {
		fmt.Fprintln(g.Out, req.Prompt)
	}
	left := time.Until(req.Deadline).Round(time.Second)
	onFail := ""
	if req.OnFail != "" {
		onFail = " (on_fail: " + req.OnFail + ")"
	}
	fmt.Fprintf(g.Out, "Gate '%s' is waiting; it closes in %s.\nType yes (or confirm) to continue, cancel to cancel the run; any other answer fails the gate%s.\n> ", req.StepName, left, onFail)
	var line string
	for {
		var err error
		line, err = g.In.Next(ctx)
		if err != nil || !g.Echoed {
			fmt.Fprintln(g.Out)
		}
		if err != nil {
			return engine.Decision{}, err
		}
		if strings.TrimSpace(line) != "" {
			break
		}
		fmt.Fprint(g.Out, "> ") // an empty line is no answer: ask again
	}
	return engine.Decision{Verdict: Answer(line), By: g.Who, Input: strings.TrimSpace(line), Source: "terminal"}, nil
}

// ConfirmCancel shows the cancel prompt (rendered prompts/cancel.prompt.md) and reads one line:
// yes or confirm proceed, anything else keeps the run going (seed Step 8.2–8.3).
// render gets the deployment name and returns the prompt text.
func ConfirmCancel(in *Lines, out io.Writer, render func(deploy string) string) func(ctx context.Context, deploy string) (bool, error) {
	return func(ctx context.Context, deploy string) (bool, error) {
		fmt.Fprintln(out, render(deploy))
		fmt.Fprint(out, "Type yes to cancel the run; anything else keeps it going.\n> ")
		line, err := in.Next(ctx)
		if err != nil {
			fmt.Fprintln(out)
			return false, err
		}
		return Answer(line) == engine.Approved, nil
	}
}
