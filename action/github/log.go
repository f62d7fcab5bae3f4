package github

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/sethvargo/go-githubactions"
)

// MaxAnnotations is how many error annotations one rbook process writes at most (docs/action.md, "Runner-native output": "at most a few per run"). GitHub shows at most 10 error annotations per step
// anyway; the failures past the cap are still in the log and the job summary, which says
// how many were not annotated (see Log.Suppressed).
const MaxAnnotations = 10

// EscapeData escapes a workflow command's message as the runner unescapes it
// (% → %25, CR → %0D, LF → %0A; actions/toolkit command.ts escapeData), with go-githubactions'
// own encoder, so a message can never end the command line and start another.
func EscapeData(s string) string {
	return strings.TrimPrefix((&githubactions.Command{Name: "x", Message: s}).String(), "::x::")
}

// EscapeProperty escapes a workflow command's property value (EscapeData plus : → %3A and
// , → %2C; actions/toolkit command.ts escapeProperty), with go-githubactions' encoder.
func EscapeProperty(s string) string {
	p := githubactions.CommandProperties{"p": s}
	return strings.TrimPrefix(p.String(), "p=")
}

// CommandLine is one workflow command, "::name k=v,…::message" with its properties sorted
// and escaped (go-githubactions Command.String), without the line break.
func CommandLine(name string, props map[string]string, message string) string {
	return (&githubactions.Command{Name: name, Properties: props, Message: message}).String()
}

// Log is a GitHub runner's log as rbook writes it (docs/action.md, "Runner-native output"). Everything written
// with Write is untrusted text — MCP rows, command output, approver comments, runbook
// strings, error messages quoting them — and the runner must never take it for a workflow
// command, so Log wraps it in a stop-commands block:
//
//	::stop-commands::<token>
//	…the text…
//	::<token>::
//
// with a fresh token of 128 crypto-random bits per block (never one that occurs in the
// text). rbook's own commands (Group, EndGroup, Mask, Annotate) end the open block first,
// so they act. A Log is safe for concurrent use; all of it goes to one writer, so the
// runner sees one ordered stream. Close ends the open block.
type Log struct {
	mu sync.Mutex
	w  io.Writer
	// token is the open block's token, "" when no block is open.
	token string
	// midLine is true when the last byte written was not a line break.
	midLine bool
	masked  map[string]bool
	// annotations counts the annotations written; suppressed those refused by the cap.
	annotations, suppressed int
	// newToken makes a block's token (tests replace it).
	newToken func() string
}

// NewLog returns a Log writing to w (os.Stdout in a runner).
func NewLog(w io.Writer) *Log {
	return &Log{w: w, masked: map[string]bool{}, newToken: RandomToken}
}

// RandomToken is 128 bits from crypto/rand as 32 lowercase hex characters: a stop-commands
// token or a heredoc delimiter's suffix. It panics only if the system's random source fails.
func RandomToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// Write writes untrusted text inside a stop-commands block, opening one if none is open; it
// always reports len(p) written unless the underlying writer fails.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if l.token != "" && bytes.Contains(p, []byte(l.token)) {
		// Never seen in practice (the token is random and fresh), but text that names the
		// open token must not end its own block: start another one.
		if err := l.endBlock(); err != nil {
			return 0, err
		}
	}
	if l.token == "" {
		tok := l.newToken()
		for bytes.Contains(p, []byte(tok)) {
			tok = l.newToken()
		}
		if err := l.raw(CommandLine("stop-commands", nil, tok) + "\n"); err != nil {
			return 0, err
		}
		l.token = tok
	}
	if _, err := l.w.Write(p); err != nil {
		return 0, err
	}
	l.midLine = p[len(p)-1] != '\n'
	return len(p), nil
}

// raw writes s as is, after a line break when the last write ended mid-line.
func (l *Log) raw(s string) error {
	if l.midLine {
		s = "\n" + s
		l.midLine = false
	}
	_, err := io.WriteString(l.w, s)
	return err
}

// endBlock ends the open stop-commands block, if any.
func (l *Log) endBlock() error {
	if l.token == "" {
		return nil
	}
	tok := l.token
	l.token = ""
	return l.raw("::" + tok + "::\n")
}

// Command writes one workflow command (CommandLine) that the runner acts on: the open
// stop-commands block ends first. name and the property names are rbook's own; message and
// property values are escaped.
func (l *Log) Command(name string, props map[string]string, message string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.command(name, props, message)
}

func (l *Log) command(name string, props map[string]string, message string) error {
	if err := l.endBlock(); err != nil {
		return err
	}
	return l.raw(CommandLine(name, props, message) + "\n")
}

// Group starts a log group (::group::title); the title is escaped, so a step name cannot
// end the line.
func (l *Log) Group(title string) error { return l.Command("group", nil, title) }

// EndGroup ends the log group (::endgroup::).
func (l *Log) EndGroup() error { return l.Command("endgroup", nil, "") }

// Mask tells the runner to print value as *** from now on (::add-mask::), before anything
// prints it. A value with line breaks is masked whole and line by line (the runner matches
// masks within a line). Empty values and values masked before are skipped.
func (l *Log) Mask(value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range MaskParts(value) {
		if l.masked[v] {
			continue
		}
		if err := l.command("add-mask", nil, v); err != nil {
			return err
		}
		l.masked[v] = true
	}
	return nil
}

// MaskParts is what masking value hides, as the runner matches masks within a line: value
// itself and, when it has line breaks, each of its lines; blank parts are left out (masking
// them would hide every space).
func MaskParts(value string) []string {
	var parts []string
	add := func(v string) {
		if strings.TrimSpace(v) != "" {
			parts = append(parts, v)
		}
	}
	add(value)
	if strings.ContainsAny(value, "\r\n") {
		for _, line := range strings.FieldsFunc(value, func(r rune) bool { return r == '\n' || r == '\r' }) {
			add(line)
		}
	}
	return parts
}

// Annotate writes an error annotation on file at line (::error file=…,line=…,title=…::message),
// at most MaxAnnotations per Log; it reports whether it wrote one. file "" or line < 1 leave
// those properties out.
func (l *Log) Annotate(file string, line int, title, message string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.annotations >= MaxAnnotations {
		l.suppressed++
		return false, nil
	}
	props := map[string]string{}
	if file != "" {
		props["file"] = file
		if line > 0 {
			props["line"] = fmt.Sprint(line)
		}
	}
	if title != "" {
		props["title"] = title
	}
	l.annotations++
	return true, l.command("error", props, message)
}

// Suppressed is how many annotations the MaxAnnotations cap refused.
func (l *Log) Suppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suppressed
}

// Close ends the open stop-commands block; the Log stays usable.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.endBlock()
}
