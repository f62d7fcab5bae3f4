// Package runner is the runner-native output of one rbook run in a GitHub Actions job: the
// whole log of the run goes through one github.Log, so every untrusted text is inside a
// stop-commands block; each step is a log group; a gate says, outside any group, how to
// decide it; failing steps become error annotations on the runbook; secret-looking values and
// approval tokens are masked; the job summary gets the report, a Mermaid graph and links; the
// step outputs are written with random heredoc delimiters. Outside a runner none of this runs
// (Streams returns a nil *Output).
package runner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// maxAnnotationMessage caps an error annotation's message (runes): the first line of the
// step's output, cut; the whole output is in the log, the report and the evidence pack.
const maxAnnotationMessage = 300

// stderrChunk is the most of one MCP server stderr line the log copy holds at a time (bytes);
// a longer line is written in pieces of this size.
const stderrChunk = 64 << 10

// Output is the runner output of one `rbook run`. Its methods are safe for concurrent use
// by the engine's workers and gates.
type Output struct {
	log *github.Log
	// stopStderr ends the copy of MCP servers' stderr into the log.
	stopStderr func()

	mu   sync.Mutex
	plan *runbook.Plan
	// cpURL is the run's control plane ("" for none); embedded says it is rbook's own.
	cpURL    string
	embedded bool
	// group is the step index whose log group is open, -1 for none; gated holds the gates
	// whose group ended at the gate (their result is printed outside a group).
	group int
	gated map[int]bool
	// gates maps a gate's step index to what is known of it; last is the step index of the
	// last gate the run reached (the step outputs approval-*), -1 for none.
	gates map[int]*gateRecord
	last  int
	// anonymous is true when the executor sends the control plane no credentials
	// (cpclient.Client.Credentialed); deadline is the open gate's.
	anonymous bool
	deadline  time.Time
	// summaryBase is the size of $GITHUB_STEP_SUMMARY when rbook started (bytes): what was
	// there before is kept, what rbook wrote during the run is replaced at the gate and at
	// the end (the summary file belongs to this job step alone).
	summaryBase int64
}

// Streams is the writers `rbook run` prints to and the run's Output. Outside a runner they
// are out and errw and the Output is nil. In one, both go through one github.Log on out (the
// runner reads one ordered stream, so a stop-commands block can never be ended by a line of
// the other stream); with output "json" stdout keeps only the JSON and the log goes to errw.
// It also sends MCP servers' stderr into the log until Close.
func Streams(out, errw io.Writer, output string) (io.Writer, io.Writer, *Output) {
	if !github.InRunner() {
		return out, errw, nil
	}
	sink := out
	if output == "json" {
		sink = errw
	}
	c := newOutput(github.NewLog(sink))
	c.summaryBase = github.SummarySize(os.Getenv("GITHUB_STEP_SUMMARY"))
	c.stopStderr = c.copyServerStderr()
	if output == "json" {
		return out, c.log, c
	}
	return c.log, c.log, c
}

// newOutput is an Output on log with no step group open and no gate seen.
func newOutput(log *github.Log) *Output {
	return &Output{log: log, stopStderr: func() {}, group: -1, last: -1, gated: map[int]bool{}, gates: map[int]*gateRecord{}}
}

// Log is the run's log stream: whatever is written to it is wrapped in stop-commands.
func (c *Output) Log() *github.Log { return c.log }

// Close ends the MCP stderr copy and the log's open stop-commands block.
func (c *Output) Close() {
	c.stopStderr()
	c.log.Close()
}

// copyServerStderr points mcp.ServerStderr at a pipe whose lines are written to the log;
// the returned func closes it and waits (briefly: a server's orphan may hold it) for the copy.
// It reads to the end whatever the servers write: a line longer than stderrChunk goes to the
// log in pieces (a copy that stopped at a long line would leave the server blocked on a full
// pipe until its step timed out).
func (c *Output) copyServerStderr() func() {
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	mcp.ServerStderr = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReaderSize(r, stderrChunk)
		for {
			piece, err := br.ReadSlice('\n')
			if len(piece) > 0 {
				c.log.Write(piece)
			}
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
		}
	}()
	return func() {
		mcp.ServerStderr = os.Stderr
		w.Close()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
}

// Attach binds the output to the run's plan and masks the values whose key looks secret
// (github.LooksSecret) before anything prints them.
func (c *Output) Attach(plan *runbook.Plan) {
	c.plan = plan
	for _, t := range github.SecretTexts(plan.ValueTexts) {
		c.log.Mask(t)
	}
}

// Local is the terminal source of a control plane's gate in a runner: nobody reads a CI log
// to type into it, so when standard input is not a terminal the prompt ("Type yes (or
// confirm) …>") is not printed — an answer piped in is still read — and when it can give no
// answer at all (noInput says why) there is no terminal source (nil). On a terminal it is g.
func (c *Output) Local(tg *steps.TerminalGate, g engine.Gate, stdinIsTerminal bool, noInput string) engine.Gate {
	if stdinIsTerminal {
		return g
	}
	if noInput != "" {
		return nil
	}
	tg.Out = io.Discard
	return g
}

// Before runs before the run's view records t: a step's log group starts when it starts (or,
// for a step that finishes without starting, such as a SKIPPED rollback, when it finishes),
// and ends at its gate, so the gate's prompt is outside any group.
func (c *Output) Before(t engine.Transition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.plan.Steps)
	switch t.Kind {
	case engine.TransitionStepStarted:
		c.endGroup()
		c.group = t.StepIndex
		c.log.Group(fmt.Sprintf("step %d/%d · %s '%s'", t.StepIndex+1, n, t.StepType, t.StepName))
	case engine.TransitionGateOpened:
		c.endGroup()
		c.gated[t.StepIndex] = true
	case engine.TransitionStepFinished:
		if c.group != t.StepIndex && !c.gated[t.StepIndex] {
			c.endGroup()
			c.group = t.StepIndex
			c.log.Group(fmt.Sprintf("step %d/%d · %s '%s'", t.StepIndex+1, n, t.StepType, t.StepName))
		}
	case engine.TransitionRunFinished, engine.TransitionRunInterrupted:
		c.endGroup()
	}
}

// After runs after the run's view recorded t: a finished step's group ends, and a failed or
// timed-out step becomes an error annotation on the runbook at the step's line (at most
// github.MaxAnnotations).
func (c *Output) After(t engine.Transition) {
	if t.Kind != engine.TransitionStepFinished {
		return
	}
	c.mu.Lock()
	if c.group == t.StepIndex {
		c.endGroup()
	}
	delete(c.gated, t.StepIndex)
	c.mu.Unlock()
	e := t.Evidence
	if e == nil || e.Status != engine.StatusFail && e.Status != engine.StatusTimedOut {
		return
	}
	line := 0
	onFail := ""
	if t.StepIndex >= 0 && t.StepIndex < len(c.plan.Steps) {
		line, onFail = c.plan.Steps[t.StepIndex].Line, string(c.plan.Steps[t.StepIndex].OnFail)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(e.Output), "\n")
	msg := fmt.Sprintf("step %d of %d '%s' (%s) ended %s; on_fail: %s. %s", t.StepIndex+1, len(c.plan.Steps), e.StepName, e.Type, e.Status, onFail, termui.CutRunes(first, maxAnnotationMessage))
	c.log.Annotate(github.WorkspacePath(c.plan.Path), line, fmt.Sprintf("rbook: step '%s' %s", e.StepName, e.Status), msg)
}

// endGroup ends the open log group (c.mu held).
func (c *Output) endGroup() {
	if c.group >= 0 {
		c.log.EndGroup()
		c.group = -1
	}
}

// MarkdownCode is s as a Markdown code span (backticks and line breaks cannot end it).
func MarkdownCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s) + "`"
}

// MarkdownCell is s in a Markdown table cell: a pipe cannot end the cell, a line break the
// row, nor an angle bracket start HTML.
func MarkdownCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
