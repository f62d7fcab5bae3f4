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
	"errors"
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
	"github.com/rbookhq/rbook-action/action/steps"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
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
	// gates maps a gate's step index to what is known of it; last is the step index of the
	// last gate the run reached (the step outputs approval-*), -1 for none.
	gates map[int]*ciGateRecord
	last  int
	// anonymous is true when the executor sends the control plane no credentials
	// (cpclient.Client.Credentialed); deadline is the open gate's.
	anonymous bool
	deadline  time.Time
	// summaryBase is the size of $GITHUB_STEP_SUMMARY when rbook started (bytes): what was
	// there before is kept, what rbook wrote during the run is replaced at the gate and at
	// the end (the file is this step's own; NEWUSER7 finding 11).
	summaryBase int64
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
	c := &ciOutput{log: github.NewLog(sink), group: -1, last: -1, gated: map[int]bool{}, gates: map[int]*ciGateRecord{},
		summaryBase: github.SummarySize(os.Getenv("GITHUB_STEP_SUMMARY"))}
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
	for _, t := range github.SecretTexts(plan.ValueTexts) {
		c.log.Mask(t)
	}
}

// gate wraps the run's gate so the runner output learns each gate's outcome and, for a
// control plane's gate (*cpclient.Gate), its approval: the token is masked and the gate
// announced (Opened), each vote reported while it waits (Progress), its votes kept for the
// summary (Decided). Nil-safe.
func (c *ciOutput) gate(g engine.Gate, cpURL string, embedded bool) engine.Gate {
	if c == nil {
		return g
	}
	c.cpURL, c.embedded = cpURL, embedded
	// rbook resume reports the paused gate's approval; for rbook playbook run, the copy each
	// Await runs on keeps the Opened set here.
	cg := cpclient.GateOf(g)
	if cg != nil {
		c.anonymous = !cg.C.Credentialed()
	}
	return &ciGate{inner: g, ci: c, cp: cg}
}

// local is the terminal source of a control plane's gate in a runner (NEWUSER7 finding 10):
// nobody reads a CI log to type into it, so when standard input is not a terminal the
// prompt ("Type yes (or confirm) …>") is not printed — an answer piped in is still read —
// and when it can give no answer at all (noInput, from noInputReason) there is no terminal
// source (nil). Outside a runner (c nil) or on a terminal it is g. Nil-safe.
func (c *ciOutput) local(tg *steps.TerminalGate, g engine.Gate, stdinIsTerminal bool, noInput string) engine.Gate {
	if c == nil || stdinIsTerminal {
		return g
	}
	if noInput != "" {
		return nil
	}
	tg.Out = io.Discard
	return g
}

// ciGate is an engine.Gate that tells the runner output about the gate it decides.
type ciGate struct {
	inner engine.Gate
	ci    *ciOutput
	cp    *cpclient.Gate // nil for a gate without a control plane
}

// Gate outcomes: the step output approval-status and the summary's Gates table (NEWUSER7
// finding 5). A gate the run stopped at while it waited is "withdrawn" when it was open on a
// control plane (recording run_interrupted withdraws its approval; rbook github post does it
// for a killed job), else "interrupted".
const (
	outcomeApproved    = "approved"
	outcomeRejected    = "rejected"
	outcomeCancelled   = "cancelled"
	outcomeTimedOut    = "timed out"
	outcomeWithdrawn   = "withdrawn"
	outcomeInterrupted = "interrupted"
	outcomeUnanswered  = "not answered"
	outcomeUnresolved  = "unresolved"
)

// ciGateRecord is what the runner output knows of one gate of the run.
type ciGateRecord struct {
	req engine.GateRequest
	// id is the approval id ("" without a control plane); approval its latest state seen.
	id       string
	approval *rbookv1.Approval
	// decided is the engine's decision when there was one; outcome one of the outcome* words.
	decided *engine.Decision
	outcome string
}

// Await implements engine.Gate.
func (g *ciGate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	c := g.ci
	rec := &ciGateRecord{req: req}
	c.mu.Lock()
	c.gates[req.StepIndex], c.last = rec, req.StepIndex
	c.mu.Unlock()
	if g.cp != nil {
		g.cp.Opened = func(a *rbookv1.Approval, token string, deadline time.Time) { c.opened(rec, a, token, deadline) }
		g.cp.Progress = func(a *rbookv1.Approval) { c.progress(rec, a) }
		g.cp.Decided = func(a *rbookv1.Approval) {
			c.mu.Lock()
			rec.approval = a
			c.mu.Unlock()
		}
	}
	d, err := g.inner.Await(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec.id == "" && rec.approval != nil {
		rec.id = rec.approval.GetApprovalId() // a gate rbook resume decided from the control plane's record
	}
	switch {
	case err == nil:
		rec.decided = &d
		rec.outcome = map[engine.Verdict]string{engine.Approved: outcomeApproved, engine.Rejected: outcomeRejected, engine.Cancelled: outcomeCancelled}[d.Verdict]
	case errors.Is(err, context.DeadlineExceeded) && (ctx.Err() == nil || errors.Is(context.Cause(ctx), context.DeadlineExceeded)):
		rec.outcome = outcomeTimedOut
	case ctx.Err() != nil && rec.id != "":
		rec.outcome = outcomeWithdrawn
	case ctx.Err() != nil:
		rec.outcome = outcomeInterrupted
	case errors.Is(err, engine.ErrNoAnswer):
		rec.outcome = outcomeUnanswered
	default:
		rec.outcome = outcomeUnresolved
	}
	return d, err
}

// showToken reports whether the job asked for approval tokens in its log (RBOOK_SHOW_TOKEN=1,
// for a job whose log is private; docs/action.md, "Runner-native output").
func showToken() bool { return os.Getenv("RBOOK_SHOW_TOKEN") == "1" }

// approverPrefix starts the approve and reject commands printed at a gate (docs/approvals.md,
// "Gates decided from CI": an approver runs them with their own token of the control plane's auth file).
const approverPrefix = "RBOOK_TOKEN=<your approver token> "

// opened masks an approval's token (unless RBOOK_SHOW_TOKEN=1) and says, outside any group,
// in the log and in the job summary, how to decide the gate: the approval id, how many
// approvals it needs and from whom, the approve and reject commands, the control plane and
// the deadline (issue 7, item 4; NEWUSER7 findings 2 and 10). When the executor sends the
// control plane no credentials, that control plane very likely has no auth file, where a
// gate cannot be decided by approval id: the announcement says so and how to decide instead.
// The token is printed only with RBOOK_SHOW_TOKEN=1. Every name and text from the control
// plane or the runbook goes to the log inside its stop-commands wrapping.
func (c *ciOutput) opened(rec *ciGateRecord, a *rbookv1.Approval, token string, deadline time.Time) {
	show := showToken()
	if !show {
		c.log.Mask(token)
	}
	c.mu.Lock()
	rec.id, rec.approval, c.deadline = a.GetApprovalId(), a, deadline
	anonymous := c.anonymous
	c.mu.Unlock()
	id, req := a.GetApprovalId(), rec.req
	approve := fmt.Sprintf("%srbook approve %s --control-plane %s", approverPrefix, id, c.cpURL)
	reject := fmt.Sprintf("%srbook reject %s --control-plane %s --reason \"…\"", approverPrefix, id, c.cpURL)
	note := ""
	switch {
	case show:
		approve = fmt.Sprintf("rbook approve %s --control-plane %s", token, c.cpURL)
		reject = fmt.Sprintf("rbook reject %s --control-plane %s --reason \"…\"", token, c.cpURL)
		note = "the approval token is printed because RBOOK_SHOW_TOKEN=1: whoever reads this log can decide the gate"
	case anonymous:
		note = unauthenticatedNote
	}
	dl := deadline.UTC().Format(time.RFC3339)
	mins := int(time.Until(deadline).Round(time.Minute) / time.Minute)
	needs := needsText(a)
	// The job summary first, then the log: whoever reads the announcement in the log (a
	// person, or a test synchronising on it) finds the summary already written.
	c.mu.Lock()
	c.writeLiveSummary(rec)
	c.mu.Unlock()
	page := ""
	if u := a.GetApprovalUrl(); u != "" {
		page = "  Page           " + u + "\n"
	}
	fmt.Fprintf(c.log, "\nGate '%s' (step %d of %d) of run %s waits for a decision.\n"+
		"  Approval id    %s\n%s  Needs          %s\n  Approve        %s\n  Reject         %s\n  Control plane  %s\n  Deadline       %s (in %d minutes)\n",
		req.StepName, req.StepIndex+1, req.StepCount, req.RunID, id, page, needs, approve, reject, c.cpURL, dl, mins)
	if note != "" {
		fmt.Fprintf(c.log, "  Note           %s\n", note)
	}
	if n := len(a.GetVotes()); n > 0 {
		fmt.Fprintf(c.log, "%s\n", progressText(req.StepName, a))
	}
	if !show {
		// The notice (an annotation, shown on the run's page) never carries a token.
		msg := fmt.Sprintf("Approval %s needs %s: %s (deadline %s)", id, needs, approve, dl)
		if u := a.GetApprovalUrl(); u != "" {
			msg += "; page: " + u
		}
		c.log.Command("notice", map[string]string{"title": "rbook: a gate waits for a decision"}, msg)
	}
	c.writeURLOutput(a)
}

// writeURLOutput sets the step output approval-url to the open gate's page when the control
// plane has a public URL (docs/console-links.md): written when the gate opens, so a later step
// that runs after this one was stopped or timed out at the gate still has it. The link
// carries no secret.
func (c *ciOutput) writeURLOutput(a *rbookv1.Approval) {
	u, p := a.GetApprovalUrl(), os.Getenv("GITHUB_OUTPUT")
	if u == "" || p == "" {
		return
	}
	if err := github.WriteFileCommand(p, []github.Output{{Name: "approval-url", Value: u}}); err != nil {
		fmt.Fprintf(c.log, "warning: the step output approval-url was not written: %v\n", err)
	}
}

// unauthenticatedNote is the gate announcement's note when the executor sends the control
// plane no credentials (no RBOOK_TOKEN, no OIDC token; NEWUSER7 finding 2).
const unauthenticatedNote = "this run sends the control plane no credentials, so it very likely runs without --auth-file, " +
	"and there a gate cannot be decided by its approval id (E_UNAUTHENTICATED). Decide it with its approval token instead: " +
	"set RBOOK_SHOW_TOKEN=1 for the job (only where its log is private) and run the approve command with the token it then prints; " +
	"or run the control plane with --auth-file and give this job RBOOK_TOKEN (input control-plane-token) or `permissions: id-token: write`"

// needsText says how many approvals a gate needs and who may give them: "2 approvals from
// group:sre; not from whoever started the run".
func needsText(a *rbookv1.Approval) string {
	m := max(int(a.GetApprovalsRequired()), 1)
	s := yamlerr.Plural(m, "approval", "approvals")
	if who := a.GetAllowedApprovers(); len(who) > 0 {
		s += " from " + strings.Join(who, ", ")
	} else {
		s += " from anyone with the approver role"
	}
	if a.GetStarterMayApprove() {
		return s + "; whoever started the run may approve too"
	}
	return s + "; not from whoever started the run"
}

// progressText is a pending M-of-N gate's tally: "gate confirm-rollout: 1 of 2 approvals
// (alice); waiting for 1 more".
func progressText(gate string, a *rbookv1.Approval) string {
	m := max(int(a.GetApprovalsRequired()), 1)
	by := approvedBy(a)
	return fmt.Sprintf("gate %s: %d of %s (%s); waiting for %d more", gate, len(by), yamlerr.Plural(m, "approval", "approvals"), strings.Join(by, ", "), max(m-len(by), 0))
}

// progress prints a vote that arrived while the gate waits (Gate.Progress; NEWUSER7 finding
// 10), inside the log's stop-commands wrapping (approver names are untrusted), and updates
// the gate's block in the job summary.
func (c *ciOutput) progress(rec *ciGateRecord, a *rbookv1.Approval) {
	c.mu.Lock()
	rec.approval = a
	c.writeLiveSummary(rec) // the summary first, as at the announcement
	c.mu.Unlock()
	fmt.Fprintf(c.log, "%s\n", progressText(rec.req.StepName, a))
}

// writeLiveSummary makes the job summary what it was when rbook started plus the waiting
// gate's block (how to decide it, the votes so far): the summary file is this step's own, so
// an earlier gate's block, now decided, does not stay (NEWUSER7 finding 11). c.mu held.
func (c *ciOutput) writeLiveSummary(rec *ciGateRecord) {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return
	}
	a, req := rec.approval, rec.req
	id := a.GetApprovalId()
	approve := fmt.Sprintf("%srbook approve %s --control-plane %s", approverPrefix, id, c.cpURL)
	reject := fmt.Sprintf("%srbook reject %s --control-plane %s --reason \"…\"", approverPrefix, id, c.cpURL)
	dl := c.deadline.UTC().Format(time.RFC3339)
	mins := int(time.Until(c.deadline).Round(time.Minute) / time.Minute)
	var b strings.Builder
	fmt.Fprintf(&b, "\n### rbook: gate %s (step %d of %d) waits for a decision\n\n"+
		"| | |\n|---|---|\n| Approval id | `%s` |\n%s| Needs | %s |\n| Approve | `%s` |\n| Reject | `%s` |\n| Control plane | %s |\n| Deadline | %s (in %d minutes) |\n",
		mdCode(req.StepName), req.StepIndex+1, req.StepCount, id, pageRow(a), mdCell(needsText(a)), approve, reject, c.cpURL, dl, mins)
	if len(a.GetVotes()) > 0 {
		fmt.Fprintf(&b, "| Votes so far | %s |\n", mdCell(progressText(req.StepName, a)))
	}
	if c.anonymous && !showToken() {
		fmt.Fprintf(&b, "\n> **Note:** %s.\n", mdCell(unauthenticatedNote))
	}
	b.WriteString("\n")
	if err := github.ResetSummary(path, c.summaryBase); err != nil {
		fmt.Fprintf(c.log, "warning: %v\n", err)
		return
	}
	if _, err := github.AppendSummary(path, b.String()); err != nil {
		fmt.Fprintf(c.log, "warning: %v\n", err)
	}
}

// pageRow is the job summary's table row with the gate's page (Approval.approval_url), or ""
// when the control plane has no public URL.
func pageRow(a *rbookv1.Approval) string {
	if u := a.GetApprovalUrl(); u != "" {
		return "| Page | " + mdCell(u) + " |\n"
	}
	return ""
}

// mdCode is s as a Markdown code span (backticks and line breaks cannot end it).
func mdCode(s string) string {
	return "`" + strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s) + "`"
}

// mdCell is s in a Markdown table cell: a pipe cannot end the cell, a line break the row,
// nor an angle bracket start HTML.
func mdCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;").Replace(s)
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
	var gates, votes strings.Builder
	for i, r := range d.Rows {
		g := github.GraphStep{Name: r.Name, Type: r.Type, Status: string(r.Status)}
		if rec, ok := c.gates[i]; ok {
			by, reason := rec.deciders()
			g.Approver = by
			if rec.outcome == outcomeWithdrawn || rec.outcome == outcomeInterrupted {
				g.Status = github.GraphWithdrawn
			}
			fmt.Fprintf(&gates, "| %d | %s | %s | %s | %s | %s |\n", i+1, mdCode(r.Name), mdCell(rec.id), rec.outcome, mdCell(by), mdCell(reason))
			for _, vt := range rec.approval.GetVotes() {
				verified := "yes"
				if !vt.GetVerified() {
					verified = "no"
				}
				fmt.Fprintf(&votes, "| %s | %s | %s | %s | %s |\n", mdCode(r.Name), mdCell(vt.GetApprover()), voteVerdict(vt.GetVerdict()), mdCell(vt.GetReason()), verified)
			}
		}
		steps = append(steps, g)
	}
	var b strings.Builder
	b.WriteString(rep)
	// The report has its own "## Steps" table; this is the same steps as a graph.
	b.WriteString("\n## Step graph\n\n")
	b.WriteString(github.MermaidGraph(steps))
	if gates.Len() > 0 {
		b.WriteString("\n## Gates\n\n| Step | Name | Approval id | Outcome | Decided by | Reason |\n|---|---|---|---|---|---|\n")
		b.WriteString(gates.String())
	}
	if votes.Len() > 0 {
		b.WriteString("\n### Votes\n\n| Gate | Approver | Vote | Reason | Verified identity |\n|---|---|---|---|---|\n")
		b.WriteString(votes.String())
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
	for i := range d.Rows {
		if rec, ok := c.gates[i]; ok && rec.approval.GetApprovalUrl() != "" {
			fmt.Fprintf(&b, "- Gate %s: %s\n", mdCode(rec.req.StepName), mdCell(rec.approval.GetApprovalUrl()))
		}
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
	// The gate blocks written during the run are replaced by this final summary; what the
	// file held before rbook started stays.
	if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
		if err := github.ResetSummary(p, c.summaryBase); err != nil {
			fmt.Fprintf(c.log, "warning: %v\n", err)
		} else if _, err := github.AppendSummary(p, b.String()); err != nil {
			fmt.Fprintf(c.log, "warning: %v\n", err)
		}
	}
	outs := []github.Output{{Name: "run-id", Value: st.RunID}, {Name: "status", Value: string(st.RunStatus)}}
	if v.reportPath != "" {
		outs = append(outs, github.Output{Name: "report-path", Value: v.reportPath})
	}
	if evPath != "" {
		outs = append(outs, github.Output{Name: "evidence-path", Value: evPath})
	}
	if rec, ok := c.gates[c.last]; ok {
		// The last gate the run reached, decided or not (NEWUSER7 finding 5).
		if rec.id != "" {
			outs = append(outs, github.Output{Name: "approval-id", Value: rec.id})
		}
		if u := rec.approval.GetApprovalUrl(); u != "" {
			outs = append(outs, github.Output{Name: "approval-url", Value: u})
		}
		outs = append(outs, github.Output{Name: "approval-status", Value: rec.outcome})
		if by, reason := rec.deciders(); by != "" {
			outs = append(outs, github.Output{Name: "approved-by", Value: by}, github.Output{Name: "approval-comment", Value: reason})
		}
	}
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		if err := github.WriteFileCommand(p, outs); err != nil {
			fmt.Fprintf(c.log, "warning: the step outputs were not written: %v\n", err)
		}
	}
}

// deciders is who decided the gate and why: for an approved gate its approvers ("alice,
// bob"), for a rejected one the rejecter, for a terminal answer the terminal's user; "" when
// nobody did (timed out, withdrawn, interrupted). The step outputs approved-by and
// approval-comment (NEWUSER7 finding 5).
func (r *ciGateRecord) deciders() (by, reason string) {
	if r.decided == nil {
		return "", ""
	}
	return r.decided.By, r.decided.Reason
}

// voteVerdict names a vote's verdict for the summary's Votes table.
func voteVerdict(v rbookv1.ApprovalStatus) string {
	switch v {
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED:
		return "approve"
	case rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED:
		return "reject"
	}
	return v.String()
}
