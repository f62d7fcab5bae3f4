package runner

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// PublishPaused writes the outputs of a paused run (its gate open on the control plane at cpURL): run-id, status
// (IN_PROGRESS), paused=true and approval-id, with the heredoc writer, and a job summary
// line. Nil-safe (outside a runner nothing is written).
func (c *Output) PublishPaused(st *state.State, pe *cpclient.PausedError, cpURL string) {
	if c == nil {
		return
	}
	c.log.Close()
	md := fmt.Sprintf("\n### rbook: run %s paused at gate %s\n\nApproval `%s` is open on %s; a later job continues the run with `verb: resume` once it is approved.\n",
		st.RunID, MarkdownCode(pe.StepName), pe.ApprovalID, cpURL)
	if pe.ApprovalURL != "" {
		md += "\nDecide it on its page: " + MarkdownCell(pe.ApprovalURL) + "\n"
	}
	if _, err := github.AppendSummary(os.Getenv("GITHUB_STEP_SUMMARY"), md); err != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", err)
	}
	outs := []github.Output{{Name: "run-id", Value: st.RunID}, {Name: "status", Value: string(st.RunStatus)},
		{Name: "paused", Value: "true"}, {Name: "approval-id", Value: pe.ApprovalID}}
	if pe.ApprovalURL != "" {
		outs = append(outs, github.Output{Name: "approval-url", Value: pe.ApprovalURL})
	}
	if st.ChainHead != "" { // the head so far, which the resumed run continues (docs/evidence-chain.md)
		outs = append(outs, github.Output{Name: "chain-head", Value: st.ChainHead})
	}
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		if err := github.WriteFileCommand(p, outs); err != nil {
			fmt.Fprintf(os.Stderr, "warning: the step outputs were not written: %v\n", err)
		}
	}
}

// VoteNotices are a control-plane gate's Opened and Progress for a run outside a runner
// (a runner's Output sets its own, gate.go): when the gate opens and needs more than one
// approval (an M-of-N gate policy), one line says how many and from whom; each vote that
// arrives while it waits gets a line with who voted, how, why, and where the tally stands.
// Names and reasons come from approvers, so control characters are replaced.
func VoteNotices(errw io.Writer) (opened func(*rbookv1.Approval, string, time.Time), progress func(*rbookv1.Approval)) {
	opened = func(a *rbookv1.Approval, _ string, _ time.Time) {
		if a.GetApprovalsRequired() > 1 {
			fmt.Fprintf(errw, "Gate '%s' needs %s.\n", steps.CleanInput(a.GetStepName()), NeedsText(a))
		}
	}
	progress = func(a *rbookv1.Approval) {
		votes := a.GetVotes()
		if len(votes) == 0 {
			return
		}
		v := votes[len(votes)-1]
		verdict := "approved"
		if v.GetVerdict() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
			verdict = "rejected"
		}
		line := fmt.Sprintf("Vote: %s %s", steps.CleanInput(v.GetApprover()), verdict)
		if r := v.GetReason(); r != "" {
			line += " (" + steps.CleanInput(r) + ")"
		}
		fmt.Fprintf(errw, "%s · %s\n", line, ProgressText(steps.CleanInput(a.GetStepName()), a))
	}
	return opened, progress
}
