package main

// Runner-native output of `rbook run` in a GitHub Actions job (issue 7, item 3; the gate
// announcement of item 4): the whole log of the run goes through one github.Log, so every
// untrusted text is inside a stop-commands block; each step is a log group; a gate says,
// outside any group, how to decide it; failing steps become error annotations on the
// runbook; secret-looking values and approval tokens are masked; the job summary gets the
// report, a Mermaid graph and links; the step outputs are written with random heredoc
// delimiters. Outside a runner none of this runs (ciStreams returns nil).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// maxAnnotationMessage caps an error annotation's message (runes): the first line of the
// step's output, cut; the whole output is in the log, the report and the evidence pack.
const maxAnnotationMessage = 300

// stderrChunk is the most of one MCP server stderr line the log copy holds at a time (bytes);
// a longer line is written in pieces of this size.
const stderrChunk = 64 << 10

// ciOut is this process's runner output, set by ciStreams; nil outside a runner. execute
// prints a failed command's message through it (ciErrWriter), so an error that quotes a
// runbook string or an MCP answer is wrapped too.
var ciOut *ciOutput

// ciOutput is the runner output of one `rbook run`.
type ciOutput struct {
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
	// approvals maps a gate's step index to its approval id; decisions to its decision.
	approvals map[int]string
	decisions map[int]engine.Decision
	// last is the step index of the last decided gate, -1 for none.
	last int
}

// ciStreams is the writers `rbook run` prints to. Outside a runner they are out and errw.
// In one, both go through one github.Log on out (the runner reads one ordered stream, so a
// stop-commands block can never be ended by a line of the other stream); with -o json
// stdout keeps only the JSON and the log goes to errw. It also sends MCP servers' stderr
// into the log.
func ciStreams(out, errw io.Writer, output string) (io.Writer, io.Writer, *ciOutput) {
	if !github.InRunner() {
		return out, errw, nil
	}
	sink := out
	if output == "json" {
		sink = errw
	}
	c := &ciOutput{log: github.NewLog(sink), group: -1, last: -1, gated: map[int]bool{}, approvals: map[int]string{}, decisions: map[int]engine.Decision{}}
	c.stopStderr = c.copyServerStderr()
	ciOut = c
	if output == "json" {
		return out, c.log, c
	}
	return c.log, c.log, c
}

// copyServerStderr points mcp.ServerStderr at a pipe whose lines are written to the log;
// the returned func closes it and waits (briefly: a server's orphan may hold it) for the copy.
// It reads to the end whatever the servers write: a line longer than stderrChunk goes to the
// log in pieces (a copy that stopped at a long line would leave the server blocked on a full
// pipe until its step timed out).
func (c *ciOutput) copyServerStderr() func() {
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

// ciErrWriter is execute's error stream: the runner log when there is one, else os.Stderr.
type ciErrWriter struct{}

func (ciErrWriter) Write(p []byte) (int, error) {
	if ciOut != nil {
		return ciOut.log.Write(p)
	}
	return os.Stderr.Write(p)
}

// ciClose ends the runner log's open stop-commands block and the MCP stderr copy.
func ciClose() {
	if ciOut != nil {
		ciOut.stopStderr()
		ciOut.log.Close()
	}
}

// attach binds the runner output to the run's view and masks the values whose key looks
// secret (github.LooksSecret) before anything prints them. Nil-safe.
func (c *ciOutput) attach(v *view, plan *runbook.Plan) {
	if c == nil {
		return
	}
	v.ci = c
	c.plan = plan
	for k, texts := range plan.ValueTexts {
		if github.LooksSecret(k) {
			for _, t := range texts {
				c.log.Mask(t)
			}
		}
	}
}

// gate wraps the run's gate so the runner output learns each decision, and, for a control
// plane's gate, each approval (to mask its token and announce it). Nil-safe.
func (c *ciOutput) gate(g engine.Gate, cpURL string, embedded bool, cpGate func(func(id, token string, deadline time.Time))) engine.Gate {
	if c == nil {
		return g
	}
	c.cpURL, c.embedded = cpURL, embedded
	return &ciGate{inner: g, ci: c, setOpened: cpGate}
}

// ciGate is an engine.Gate that tells the runner output about the gate it decides.
type ciGate struct {
	inner     engine.Gate
	ci        *ciOutput
	setOpened func(func(id, token string, deadline time.Time))
}

// Await implements engine.Gate.
func (g *ciGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	if g.setOpened != nil {
		g.setOpened(func(id, token string, deadline time.Time) { g.ci.opened(req, id, token, deadline) })
	}
	d, err := g.inner.Await(ctx, req)
	if err == nil {
		g.ci.mu.Lock()
		g.ci.decisions[req.StepIndex], g.ci.last = d, req.StepIndex
		g.ci.mu.Unlock()
	}
	return d, err
}

// opened masks an approval's token and says, outside any group, in the log and in the job
// summary, how to decide the gate: the approval id, the approve and reject commands, the
// control plane and the deadline (issue 7, item 4). The token is never printed.
func (c *ciOutput) opened(req engine.GateRequest, id, token string, deadline time.Time) {
	c.log.Mask(token)
	c.mu.Lock()
	c.approvals[req.StepIndex] = id
	c.mu.Unlock()
	approve := fmt.Sprintf("rbook approve %s --control-plane %s", id, c.cpURL)
	reject := fmt.Sprintf("rbook reject %s --control-plane %s --reason \"…\"", id, c.cpURL)
	dl := deadline.UTC().Format(time.RFC3339)
	mins := int(time.Until(deadline).Round(time.Minute) / time.Minute)
	fmt.Fprintf(c.log, "\nGate '%s' (step %d of %d) of run %s waits for a decision.\n"+
		"  Approval id    %s\n  Approve        %s\n  Reject         %s\n  Control plane  %s\n  Deadline       %s (in %d minutes)\n",
		req.StepName, req.StepIndex+1, req.StepCount, req.RunID, id, approve, reject, c.cpURL, dl, mins)
	c.log.Command("notice", map[string]string{"title": "rbook: a gate waits for a decision"},
		fmt.Sprintf("Approval %s: %s (deadline %s)", id, approve, dl))
	md := fmt.Sprintf("\n### rbook: gate %s (step %d of %d) waits for a decision\n\n"+
		"| | |\n|---|---|\n| Approval id | `%s` |\n| Approve | `%s` |\n| Reject | `%s` |\n| Control plane | %s |\n| Deadline | %s (in %d minutes) |\n\n",
		mdCode(req.StepName), req.StepIndex+1, req.StepCount, id, approve, reject, c.cpURL, dl, mins)
	if _, err := github.AppendSummary(os.Getenv("GITHUB_STEP_SUMMARY"), md); err != nil {
		fmt.Fprintf(c.log, "warning: %v\n", err)
	}
}

// mdCode is s as a Markdown code span (backticks and line breaks cannot end it).
func mdCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s) + "`"
}

// mdCell is s in a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ").Replace(s)
}

// before runs before the view records t: a step's log group starts when it starts (or, for
// a step that finishes without starting, such as a SKIPPED rollback, when it finishes),
// and ends at its gate, so the gate's prompt is outside any group.
func (c *ciOutput) before(t engine.Transition) {
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

// after runs after the view recorded t: a finished step's group ends, and a failed or
// timed-out step becomes an error annotation on the runbook at the step's line (at most
// github.MaxAnnotations).
func (c *ciOutput) after(t engine.Transition) {
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
	msg := fmt.Sprintf("step %d of %d '%s' (%s) ended %s; on_fail: %s. %s", t.StepIndex+1, len(c.plan.Steps), e.StepName, e.Type, e.Status, onFail, cutRunes(first, maxAnnotationMessage))
	c.log.Annotate(github.WorkspacePath(c.plan.Path), line, fmt.Sprintf("rbook: step '%s' %s", e.StepName, e.Status), msg)
}

// endGroup ends the open log group (c.mu held).
func (c *ciOutput) endGroup() {
	if c.group >= 0 {
		c.log.EndGroup()
		c.group = -1
	}
}

// publish ends a run in a runner (without a ciOutput, as for rbook cancel and rollback, it is
// github.Publish: the report and run-id/status, and nothing outside a runner):
// the job summary gets the report, the Mermaid graph of the steps with each gate's
// approver, and links; the step outputs are written (github.WriteFileCommand). A failure
// to write them is a warning in the log: the run's outcome stands. Nil-safe.
func (c *ciOutput) publish(v *view, rep string, st *state.State, evPath string) {
	if c == nil {
		if err := github.Publish(rep, st.RunID, string(st.RunStatus)); err != nil {
			fmt.Fprintf(v.errw, "warning: %v\n", err)
		}
		return
	}
	c.log.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	d := reportData(v.plan, st, "", evPath)
	var steps []github.GraphStep
	var gates strings.Builder
	for i, r := range d.Rows {
		g := github.GraphStep{Name: r.Name, Type: r.Type, Status: string(r.Status)}
		if dec, ok := c.decisions[i]; ok {
			g.Approver = dec.By
			fmt.Fprintf(&gates, "| %d | %s | %s | %s | %s | %s |\n", i+1, mdCode(r.Name), mdCell(c.approvals[i]), verdictText(dec.Verdict), mdCell(dec.By), mdCell(dec.Reason))
		}
		steps = append(steps, g)
	}
	var b strings.Builder
	b.WriteString(rep)
	b.WriteString("\n## Steps\n\n")
	b.WriteString(github.MermaidGraph(steps))
	if gates.Len() > 0 {
		b.WriteString("\n## Gates\n\n| Step | Name | Approval id | Decision | By | Reason |\n|---|---|---|---|---|---|\n")
		b.WriteString(gates.String())
	}
	if n := c.log.Suppressed(); n > 0 {
		fmt.Fprintf(&b, "\n%d more failed step(s) were not annotated (at most %d annotations per run); see the report above.\n", n, github.MaxAnnotations)
	}
	b.WriteString("\n## Links\n\n")
	if c.cpURL != "" {
		where := "control plane"
		if c.embedded {
			where = "embedded control plane (this job only)"
		}
		fmt.Fprintf(&b, "- Run on the %s: %s (`rbook get %s --control-plane %s`)\n", where, c.cpURL, st.RunID, c.cpURL)
	}
	if u := github.RunURL(); u != "" {
		fmt.Fprintf(&b, "- This workflow run: %s\n", u)
	}
	rb := github.WorkspacePath(v.plan.Path)
	if u := github.FileURL(rb, 0); u != "" {
		fmt.Fprintf(&b, "- Runbook: [%s](%s)\n", rb, u)
	} else {
		fmt.Fprintf(&b, "- Runbook: %s\n", rb)
	}
	if evPath != "" {
		fmt.Fprintf(&b, "- Evidence pack: %s\n", evPath)
	}
	if _, err := github.AppendSummary(os.Getenv("GITHUB_STEP_SUMMARY"), b.String()); err != nil {
		fmt.Fprintf(c.log, "warning: %v\n", err)
	}
	outs := []github.Output{{Name: "run-id", Value: st.RunID}, {Name: "status", Value: string(st.RunStatus)}}
	if v.reportPath != "" {
		outs = append(outs, github.Output{Name: "report-path", Value: v.reportPath})
	}
	if evPath != "" {
		outs = append(outs, github.Output{Name: "evidence-path", Value: evPath})
	}
	if dec, ok := c.decisions[c.last]; ok {
		if id := c.approvals[c.last]; id != "" {
			outs = append(outs, github.Output{Name: "approval-id", Value: id})
		}
		outs = append(outs, github.Output{Name: "approved-by", Value: dec.By}, github.Output{Name: "approval-comment", Value: dec.Reason})
	}
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		if err := github.WriteFileCommand(p, outs); err != nil {
			fmt.Fprintf(c.log, "warning: the step outputs were not written: %v\n", err)
		}
	}
}

// verdictText names a gate's verdict for the summary.
func verdictText(v engine.Verdict) string {
	switch v {
	case engine.Approved:
		return "approved"
	case engine.Rejected:
		return "rejected"
	case engine.Cancelled:
		return "cancelled"
	}
	return "?"
}

// cpOpened is how ciOutput.gate hooks a control plane's gate: it sets the gate's Opened; nil
// for any other gate.
func cpOpened(g engine.Gate) func(func(id, token string, deadline time.Time)) {
	cg, ok := g.(*cpclient.Gate)
	if !ok {
		return nil
	}
	return func(f func(id, token string, deadline time.Time)) { cg.Opened = f }
}
