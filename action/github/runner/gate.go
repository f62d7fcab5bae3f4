package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/github"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// Gate outcomes: the step output approval-status and the summary's Gates table. A gate the
// run stopped at while it waited is "withdrawn" when it was open on a control plane
// (recording run_interrupted withdraws its approval; rbook github post does it for a killed
// job), else "interrupted".
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

// gateRecord is what the runner output knows of one gate of the run.
type gateRecord struct {
	req engine.GateRequest
	// id is the approval id ("" without a control plane); approval its latest state seen.
	id       string
	approval *rbookv1.Approval
	// decided is the engine's decision when there was one; outcome one of the outcome* words.
	decided *engine.Decision
	outcome string
}

// deciders is who decided the gate and why: for an approved gate its approvers ("alice,
// bob"), for a rejected one the rejecter, for a terminal answer the terminal's user; "" when
// nobody did (timed out, withdrawn, interrupted). The step outputs approved-by and
// approval-comment.
func (r *gateRecord) deciders() (by, reason string) {
	if r.decided == nil {
		return "", ""
	}
	return r.decided.By, r.decided.Reason
}

// Gate wraps the run's gate g so the output learns each gate's outcome and, when cp (the
// control plane's gate inside g, nil for none) is set, its approval: the token is masked and
// the gate announced (Opened), each vote reported while it waits (Progress), its votes kept
// for the summary (Decided). cpURL is the run's control plane, embedded says it is rbook's
// own (the summary's links say so).
func (c *Output) Gate(g engine.Gate, cp *cpclient.Gate, cpURL string, embedded bool) engine.Gate {
	c.cpURL, c.embedded = cpURL, embedded
	if cp != nil {
		c.anonymous = !cp.C.Credentialed()
	}
	return &gate{inner: g, ci: c, cp: cp}
}

// gate is an engine.Gate that tells the runner output about the gate it decides.
type gate struct {
	inner engine.Gate
	ci    *Output
	cp    *cpclient.Gate // nil for a gate without a control plane
}

// Await implements engine.Gate.
func (g *gate) Await(ctx context.Context, req engine.GateRequest) (engine.Decision, error) {
	c := g.ci
	rec := &gateRecord{req: req}
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
	rec.outcome = outcome(ctx, d, err, rec.id != "")
	if err == nil {
		rec.decided = &d
	}
	return d, err
}

// outcome names how a gate's Await ended (one of the outcome* words): the decision's verdict,
// its own deadline, a run stopped while it waited (withdrawn when the gate was open on a
// control plane), no answer, or another failure.
func outcome(ctx context.Context, d engine.Decision, err error, open bool) string {
	switch {
	case err == nil:
		return map[engine.Verdict]string{engine.Approved: outcomeApproved, engine.Rejected: outcomeRejected, engine.Cancelled: outcomeCancelled}[d.Verdict]
	case errors.Is(err, context.DeadlineExceeded) && (ctx.Err() == nil || errors.Is(context.Cause(ctx), context.DeadlineExceeded)):
		return outcomeTimedOut
	case ctx.Err() != nil && open:
		return outcomeWithdrawn
	case ctx.Err() != nil:
		return outcomeInterrupted
	case errors.Is(err, engine.ErrNoAnswer):
		return outcomeUnanswered
	}
	return outcomeUnresolved
}

// ShowToken reports whether the job asked for approval tokens in its log (RBOOK_SHOW_TOKEN=1,
// for a job whose log is private).
func ShowToken() bool { return os.Getenv("RBOOK_SHOW_TOKEN") == "1" }

// approverPrefix starts the approve and reject commands printed at a gate: an approver runs
// them with their own token of the control plane's auth file.
const approverPrefix = "RBOOK_TOKEN=<your approver token> "

// decideCommands are the approve and reject commands printed at the gate id on cpURL: by
// approval id, or with the gate's token when the job shows tokens.
func decideCommands(id, token, cpURL string, show bool) (approve, reject string) {
	if show {
		return fmt.Sprintf("rbook approve %s --control-plane %s", token, cpURL),
			fmt.Sprintf("rbook reject %s --control-plane %s --reason \"…\"", token, cpURL)
	}
	return fmt.Sprintf("%srbook approve %s --control-plane %s", approverPrefix, id, cpURL),
		fmt.Sprintf("%srbook reject %s --control-plane %s --reason \"…\"", approverPrefix, id, cpURL)
}

// opened masks an approval's token (unless RBOOK_SHOW_TOKEN=1) and says, outside any group,
// in the log and in the job summary, how to decide the gate: the approval id, how many
// approvals it needs and from whom, the approve and reject commands, the control plane and
// the deadline. When the executor sends the control plane no credentials, that control plane
// very likely has no auth file, where a gate cannot be decided by approval id: the
// announcement says so and how to decide instead. The token is printed only with
// RBOOK_SHOW_TOKEN=1. Every name and text from the control plane or the runbook goes to the
// log inside its stop-commands wrapping.
func (c *Output) opened(rec *gateRecord, a *rbookv1.Approval, token string, deadline time.Time) {
	show := ShowToken()
	if !show {
		c.log.Mask(token)
	}
	c.mu.Lock()
	rec.id, rec.approval, c.deadline = a.GetApprovalId(), a, deadline
	anonymous := c.anonymous
	c.mu.Unlock()
	id, req := a.GetApprovalId(), rec.req
	approve, reject := decideCommands(id, token, c.cpURL, show)
	note := ""
	switch {
	case show:
		note = "the approval token is printed because RBOOK_SHOW_TOKEN=1: whoever reads this log can decide the gate"
	case anonymous:
		note = unauthenticatedNote
	}
	dl := deadline.UTC().Format(time.RFC3339)
	mins := int(time.Until(deadline).Round(time.Minute) / time.Minute)
	needs := NeedsText(a)
	// The job summary and the approval-url output first, then the log: whoever reads the
	// announcement in the log (a person, or a test synchronising on it) finds both written.
	c.mu.Lock()
	c.writeLiveSummary(rec)
	c.mu.Unlock()
	c.writeURLOutput(a)
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
		fmt.Fprintf(c.log, "%s\n", ProgressText(req.StepName, a))
	}
	if !show {
		// The notice (an annotation, shown on the run's page) never carries a token.
		msg := fmt.Sprintf("Approval %s needs %s: %s (deadline %s)", id, needs, approve, dl)
		if u := a.GetApprovalUrl(); u != "" {
			msg += "; page: " + u
		}
		c.log.Command("notice", map[string]string{"title": "rbook: a gate waits for a decision"}, msg)
	}
}

// writeURLOutput sets the step output approval-url to the open gate's page when the control
// plane has a public URL (docs/console-links.md): written when the gate opens, so a later step
// that runs after this one was stopped or timed out at the gate still has it. The link
// carries no secret.
func (c *Output) writeURLOutput(a *rbookv1.Approval) {
	u, p := a.GetApprovalUrl(), os.Getenv("GITHUB_OUTPUT")
	if u == "" || p == "" {
		return
	}
	if err := github.WriteFileCommand(p, []github.Output{{Name: "approval-url", Value: u}}); err != nil {
		fmt.Fprintf(c.log, "warning: the step output approval-url was not written: %v\n", err)
	}
}

// unauthenticatedNote is the gate announcement's note when the executor sends the control
// plane no credentials (no RBOOK_TOKEN, no OIDC token).
const unauthenticatedNote = "this run sends the control plane no credentials, so it very likely runs without --auth-file, " +
	"and there a gate cannot be decided by its approval id (E_UNAUTHENTICATED). Decide it with its approval token instead: " +
	"set RBOOK_SHOW_TOKEN=1 for the job (only where its log is private) and run the approve command with the token it then prints; " +
	"or run the control plane with --auth-file and give this job RBOOK_TOKEN (input control-plane-token) or `permissions: id-token: write`"

// NeedsText says how many approvals a gate needs and who may give them: "2 approvals from
// group:sre; not from whoever started the run".
func NeedsText(a *rbookv1.Approval) string {
	m := max(int(a.GetApprovalsRequired()), 1)
	s := termui.Plural(m, "approval", "approvals")
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

// ProgressText is a pending M-of-N gate's tally: "gate confirm-rollout: 1 of 2 approvals
// (alice); waiting for 1 more".
func ProgressText(gate string, a *rbookv1.Approval) string {
	m := max(int(a.GetApprovalsRequired()), 1)
	var by []string
	for _, v := range a.GetVotes() {
		if v.GetVerdict() == rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
			by = append(by, v.GetApprover())
		}
	}
	return fmt.Sprintf("gate %s: %d of %s (%s); waiting for %d more", gate, len(by), termui.Plural(m, "approval", "approvals"), strings.Join(by, ", "), max(m-len(by), 0))
}

// progress prints a vote that arrived while the gate waits (cpclient.Gate.Progress), inside
// the log's stop-commands wrapping (approver names are untrusted), and updates the gate's
// block in the job summary.
func (c *Output) progress(rec *gateRecord, a *rbookv1.Approval) {
	c.mu.Lock()
	rec.approval = a
	c.writeLiveSummary(rec) // the summary first, as at the announcement
	c.mu.Unlock()
	fmt.Fprintf(c.log, "%s\n", ProgressText(rec.req.StepName, a))
}

// writeLiveSummary makes the job summary what it was when rbook started plus the waiting
// gate's block (how to decide it, the votes so far): the summary file belongs to this job
// step alone, so an earlier gate's block, now decided, does not stay. c.mu held.
func (c *Output) writeLiveSummary(rec *gateRecord) {
	path := os.Getenv("GITHUB_STEP_SUMMARY")
	if path == "" {
		return
	}
	a, req := rec.approval, rec.req
	id := a.GetApprovalId()
	approve, reject := decideCommands(id, "", c.cpURL, false)
	dl := c.deadline.UTC().Format(time.RFC3339)
	mins := int(time.Until(c.deadline).Round(time.Minute) / time.Minute)
	var b strings.Builder
	fmt.Fprintf(&b, "\n### rbook: gate %s (step %d of %d) waits for a decision\n\n"+
		"| | |\n|---|---|\n| Approval id | `%s` |\n%s| Needs | %s |\n| Approve | `%s` |\n| Reject | `%s` |\n| Control plane | %s |\n| Deadline | %s (in %d minutes) |\n",
		MarkdownCode(req.StepName), req.StepIndex+1, req.StepCount, id, pageRow(a), MarkdownCell(NeedsText(a)), approve, reject, c.cpURL, dl, mins)
	if len(a.GetVotes()) > 0 {
		fmt.Fprintf(&b, "| Votes so far | %s |\n", MarkdownCell(ProgressText(req.StepName, a)))
	}
	if c.anonymous && !ShowToken() {
		fmt.Fprintf(&b, "\n> **Note:** %s.\n", MarkdownCell(unauthenticatedNote))
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
		return "| Page | " + MarkdownCell(u) + " |\n"
	}
	return ""
}
