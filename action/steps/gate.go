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
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// MaxLineBytes caps one line of gate input (4 KiB). A longer line is cut at the limit (at a
// character boundary) and the rest of that line is discarded; the lines after it are read as
// usual. The cleaned line (CleanInput) is held to the same limit.
const MaxLineBytes = 4 << 10

// ErrNoInput means the input stream ended (stdin closed, EOF): nobody can answer here.
var ErrNoInput = fmt.Errorf("%w: standard input is closed (no input)", engine.ErrNoAnswer)

// Lines reads an input stream line by line in one goroutine, so every gate and cancel prompt
// of a run shares it and a line typed for one prompt is never lost to a timed-out other.
type Lines struct {
	ch   chan string
	done chan struct{}
	once sync.Once
}

// NewLines starts reading r. Each line loses its line ending ("\n" or "\r\n"), is cut at
// MaxLineBytes and is cleaned with CleanInput, so no typed control character or escape
// sequence reaches a decision, the report or the evidence pack. A final line without a line
// ending counts; a read error ends the stream like EOF.
func NewLines(r io.Reader) *Lines {
	l := &Lines{ch: make(chan string), done: make(chan struct{})}
	go func() {
		defer l.once.Do(func() { close(l.done) })
		br := bufio.NewReader(r)
		for {
			line, ok, err := readLine(br)
			if ok {
				l.ch <- cutAtRune(CleanInput(line), MaxLineBytes)
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

// readLine reads one line without its line ending, keeping at most MaxLineBytes of it (cut
// at a character boundary) and discarding the rest. ok is false when the stream ended (err
// set) before any byte of a new line.
func readLine(br *bufio.Reader) (line string, ok bool, err error) {
	// A few bytes past the limit, so that cutAtRune can find the character boundary.
	const keep = MaxLineBytes + utf8.UTFMax
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		ok = ok || len(chunk) > 0
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		line = strings.TrimSuffix(string(buf), "\n")
		line = strings.TrimSuffix(line, "\r")
		return cutAtRune(line, MaxLineBytes), ok, err
	}
}

// cutAtRune returns s cut to at most n bytes without splitting a UTF-8 sequence.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > n-utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = n // not valid UTF-8 here anyway
	}
	return s[:i]
}

// CleanInput makes typed text safe to print and to store (case L4: typed input must not drive
// the terminal that shows the report): invalid UTF-8, every escape sequence (ESC or a C1
// introducer with what follows, such as CSI "ESC[2J" or OSC "ESC]0;title BEL"), every other C0
// or C1 control character and DEL, and the bidirectional embedding, override and isolate
// characters (U+202A–U+202E, U+2066–U+2069) each become one U+FFFD, so the record shows that
// something was removed. A tab becomes a space.
func CleanInput(s string) string {
	s = strings.ToValidUTF8(s, replacement)
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == esc || (r >= 0x80 && r <= 0x9f):
			b.WriteString(replacement)
			size = escapeLen(s[i:])
		case r < 0x20 || r == 0x7f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			b.WriteString(replacement)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

const (
	esc         = 0x1b
	bel         = 0x07
	replacement = "\uFFFD"
)

// escapeLen returns the byte length of the escape sequence or C1 control at the start of s
// (ECMA-48): CSI runs to its final byte 0x40–0x7E; OSC, DCS, SOS, PM and APC run to BEL or
// the string terminator (ESC \ or U+009C); any other ESC takes its intermediate bytes
// 0x20–0x2F and one final byte 0x30–0x7E. An unfinished sequence runs to the end of s.
func escapeLen(s string) int {
	r, i := utf8.DecodeRuneInString(s)
	kind := r
	if r == esc {
		if i == len(s) {
			return i
		}
		switch s[i] {
		case '[':
			kind = 0x9b
		case ']':
			kind = 0x9d
		case 'P', 'X', '^', '_':
			kind = 0x90 // a control string, like DCS
		default:
			for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
				i++
			}
			if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
				i++
			}
			return i
		}
		i++
	}
	switch kind {
	case 0x9b: // CSI: parameter and intermediate bytes, then the final byte
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	case 0x90, 0x98, 0x9d, 0x9e, 0x9f: // control strings: DCS, SOS, OSC, PM, APC
		for i < len(s) {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == bel || r == 0x9c:
				return i + size
			case r == esc && i+1 < len(s) && s[i+1] == '\\':
				return i + 2
			}
			i += size
		}
		return i
	}
	return i // any other C1 control stands alone
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

// Answer classifies a typed gate answer (docs/spec/runbooks.md, "Step 5", "confirm"; docs/decisions/confirm-gates.md): yes or confirm
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
	// Render, when set, draws the whole prompt for req (a box on a terminal,
	// docs/decisions/two-renderings.md) instead of req.Prompt and the plain instructions. Await prints "> " after it.
	Render func(req engine.GateRequest) string
	// Now is the clock for the deadline sentence; nil means time.Now.
	Now func() time.Time
	// NoAnswer, when set, says why nobody can answer here (stdin is /dev/null or closed) and
	// no other source can decide the gate: Await says the gate fails now, instead of prompting
	// as if it waited, and returns ErrNoInput (messages that are true).
	NoAnswer string
}

// DeadlineText is the one sentence that says when a gate closes: "closes at 2026-05-12
// 08:35:00 UTC (in 5m0s)", and, for a reopened approval, that this is its original deadline
// (a resumed gate states one deadline).
func DeadlineText(req engine.GateRequest, now time.Time) string {
	left := max(req.Deadline.Sub(now), 0).Round(time.Second)
	s := fmt.Sprintf("closes at %s (in %s)", req.Deadline.UTC().Format("2006-01-02 15:04:05 UTC"), left)
	if req.Reopened {
		s += ", the original deadline of its approval, which was opened before rbook restarted"
	}
	return s
}

// Await prints the prompt and waits for one non-blank line. The Decision's Input is that line
// as Lines delivers it (cut at MaxLineBytes, cleaned by CleanInput), trimmed of spaces, and
// its verdict is judged on that same text. It returns ErrNoInput when stdin is closed, and
// ctx.Err() when the gate's deadline passes or the run stops.
func (g *TerminalGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if g.NoAnswer != "" {
		onFail := "" // a playbook approval node has no on_fail: its error handlers apply
		if req.OnFail != "" {
			onFail = " (on_fail: " + req.OnFail + ")"
		}
		fmt.Fprintf(g.Out, "Gate '%s' cannot be answered: %s and no control plane can decide it. It fails now%s.\n",
			req.StepName, g.NoAnswer, onFail)
		return engine.Decision{}, ErrNoInput
	}
	if g.Render != nil {
		fmt.Fprint(g.Out, g.Render(req)+"> ")
	} else {
		if req.Prompt != "" {
			fmt.Fprintln(g.Out, req.Prompt)
		}
		now := time.Now
		if g.Now != nil {
			now = g.Now
		}
		onFail := ""
		if req.OnFail != "" {
			onFail = " (on_fail: " + req.OnFail + ")"
		}
		fmt.Fprintf(g.Out, "Gate '%s' is waiting; it %s.\nType yes (or confirm) to continue, cancel to cancel the run; any other answer fails the gate%s.\n> ", req.StepName, DeadlineText(req, now()), onFail)
	}
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
	d := engine.Decision{Verdict: Answer(line), By: g.Who, Input: strings.TrimSpace(line), Source: "terminal"}
	if d.Verdict == engine.Approved && len(req.Inputs) > 0 {
		values, err := g.form(ctx, req.Inputs)
		if err != nil {
			return engine.Decision{}, err
		}
		d.InputValues = values
	}
	return d, nil
}

// form asks for each field of an approval's approver-input form after "yes", one line each
// (docs/approver-inputs.md, "Every channel"): an empty line takes the default, or no value for
// an optional field; a value gateinputs.Validate refuses is explained and asked again. It
// returns the validated values, or the error that stopped the reading (ErrNoInput, ctx's).
func (g *TerminalGate) form(ctx context.Context, fields []gateinputs.Field) (map[string]string, error) {
	fmt.Fprintf(g.Out, "This gate asks for %d input(s); press Enter to take the default shown in [ ].\n", len(fields))
	given := map[string]string{}
	for _, f := range fields {
		for {
			fmt.Fprint(g.Out, FieldPrompt(f))
			line, err := g.In.Next(ctx)
			if err != nil || !g.Echoed {
				fmt.Fprintln(g.Out)
			}
			if err != nil {
				return nil, err
			}
			v := strings.TrimSpace(line)
			if _, e := gateinputs.Validate([]gateinputs.Field{f}, map[string]string{f.Name: v}); e != nil {
				fmt.Fprintf(g.Out, "  %s\n", e.Msg)
				continue
			}
			if v != "" {
				given[f.Name] = v
			}
			break
		}
	}
	values, e := gateinputs.Validate(fields, given)
	if e != nil {
		return nil, e // each field was valid on its own, so this does not happen
	}
	return values, nil
}

// FieldPrompt is the terminal's question for one input field: its name, type, options or
// pattern, whether it is required, its description and default, e.g.
// "target (one of blue, green; required) — which slot: ".
func FieldPrompt(f gateinputs.Field) string {
	var about []string
	switch {
	case f.Type == gateinputs.TypeEnum:
		about = append(about, "one of "+strings.Join(f.Options, ", "))
	case f.Type == gateinputs.TypeBoolean:
		about = append(about, "true or false")
	case f.Type == gateinputs.TypeNumber:
		about = append(about, "a number")
	case f.Pattern != "":
		about = append(about, "matching "+f.Pattern)
	}
	if f.Required {
		about = append(about, "required")
	}
	s := f.Name
	if len(about) > 0 {
		s += " (" + strings.Join(about, "; ") + ")"
	}
	if f.Description != "" {
		s += " — " + f.Description
	}
	if f.HasDefault {
		s += " [" + f.Default + "]"
	}
	return s + ": "
}

// ConfirmCancel shows the cancel prompt (rendered prompts/cancel.prompt.md) and reads one line:
// yes or confirm proceed, anything else keeps the run going (docs/spec/runbooks.md, "Step 8").
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
