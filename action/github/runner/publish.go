package runner

import (
	"fmt"
	"os"
	"strings"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/state"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Files are the paths of an ended run's files that the summary links and the step outputs
// name ("" for a file the run has not got).
type Files struct {
	// Runbook is the runbook or playbook file; Report is --report FILE; Evidence the
	// evidence pack; Attestation the control plane's signed attestation of the run and KeyID
	// the id of the key that signed it (docs/attestations.md).
	Runbook, Report, Evidence, Attestation, KeyID string
}

// Publish ends a run in a runner: the job summary gets the report rep, the Mermaid graph of
// the steps (d.Rows, with each gate's approver), the gates and their votes, and links; the
// step outputs are written (github.WriteFileCommand). A failure to write them is a warning in
// the log: the run's outcome stands.
func (c *Output) Publish(rep string, d report.Report, st *state.State, files Files) {
	c.log.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString(rep)
	c.writeGraphAndGates(&b, d.Rows)
	if n := c.log.Suppressed(); n > 0 {
		fmt.Fprintf(&b, "\n%d more failed step(s) were not annotated (at most %d annotations per run); see the report above.\n", n, github.MaxAnnotations)
	}
	c.writeLinks(&b, d.Rows, st.RunID, files)
	// The gate blocks written during the run are replaced by this final summary; what the
	// file held before rbook started stays.
	if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
		if err := github.ResetSummary(p, c.summaryBase); err != nil {
			fmt.Fprintf(c.log, "warning: %v\n", err)
		} else if _, err := github.AppendSummary(p, b.String()); err != nil {
			fmt.Fprintf(c.log, "warning: %v\n", err)
		}
	}
	if p := os.Getenv("GITHUB_OUTPUT"); p != "" {
		if err := github.WriteFileCommand(p, c.outputs(st, files)); err != nil {
			fmt.Fprintf(c.log, "warning: the step outputs were not written: %v\n", err)
		}
	}
}

// writeGraphAndGates writes the summary's step graph (the report has its own "## Steps"
// table; this is the same steps as a graph) and, when the run reached a gate, its Gates and
// Votes tables. c.mu held.
func (c *Output) writeGraphAndGates(b *strings.Builder, rows []report.Row) {
	var graph []github.GraphStep
	var gates, votes strings.Builder
	for i, r := range rows {
		g := github.GraphStep{Name: r.Name, Type: r.Type, Status: string(r.Status)}
		if rec, ok := c.gates[i]; ok {
			by, reason := rec.deciders()
			g.Approver = by
			if rec.outcome == outcomeWithdrawn || rec.outcome == outcomeInterrupted {
				g.Status = github.GraphWithdrawn
			}
			fmt.Fprintf(&gates, "| %d | %s | %s | %s | %s | %s |\n", i+1, MarkdownCode(r.Name), MarkdownCell(rec.id), rec.outcome, MarkdownCell(by), MarkdownCell(reason))
			for _, vt := range rec.approval.GetVotes() {
				verified := "yes"
				if !vt.GetVerified() {
					verified = "no"
				}
				fmt.Fprintf(&votes, "| %s | %s | %s | %s | %s |\n", MarkdownCode(r.Name), MarkdownCell(vt.GetApprover()), voteVerdict(vt.GetVerdict()), MarkdownCell(vt.GetReason()), verified)
			}
		}
		graph = append(graph, g)
	}
	b.WriteString("\n## Step graph\n\n")
	b.WriteString(github.MermaidGraph(graph))
	if gates.Len() > 0 {
		b.WriteString("\n## Gates\n\n| Step | Name | Approval id | Outcome | Decided by | Reason |\n|---|---|---|---|---|---|\n")
		b.WriteString(gates.String())
	}
	if votes.Len() > 0 {
		b.WriteString("\n### Votes\n\n| Gate | Approver | Vote | Reason | Verified identity |\n|---|---|---|---|---|\n")
		b.WriteString(votes.String())
	}
}

// writeLinks writes the summary's Links: the run on its control plane, each gate's page, this
// workflow run, the runbook and the evidence pack. c.mu held.
func (c *Output) writeLinks(b *strings.Builder, rows []report.Row, runID string, files Files) {
	b.WriteString("\n## Links\n\n")
	if c.cpURL != "" {
		where := "control plane"
		if c.embedded {
			where = "embedded control plane (this job only)"
		}
		fmt.Fprintf(b, "- Run on the %s: %s (`rbook get %s --control-plane %s`)\n", where, c.cpURL, runID, c.cpURL)
	}
	for i := range rows {
		if rec, ok := c.gates[i]; ok && rec.approval.GetApprovalUrl() != "" {
			fmt.Fprintf(b, "- Gate %s: %s\n", MarkdownCode(rec.req.StepName), MarkdownCell(rec.approval.GetApprovalUrl()))
		}
	}
	if u := github.RunURL(); u != "" {
		fmt.Fprintf(b, "- This workflow run: %s\n", u)
	}
	rb := github.WorkspacePath(files.Runbook)
	if u := github.FileURL(rb, 0); u != "" {
		fmt.Fprintf(b, "- Runbook: [%s](%s)\n", rb, u)
	} else {
		fmt.Fprintf(b, "- Runbook: %s\n", rb)
	}
	if files.Evidence != "" {
		fmt.Fprintf(b, "- Evidence pack: %s\n", files.Evidence)
	}
	if files.Attestation != "" {
		fmt.Fprintf(b, "- Attestation: %s, signed by key `%s` (check it with `rbook evidence verify`, docs/evidence-verify.md)\n", files.Attestation, files.KeyID)
	}
}

// outputs are the step outputs of an ended run: run-id, status, chain-head, report-path,
// evidence-path, attestation-path ("" when the control plane signed none) and, for the last
// gate the run reached (decided or not), approval-id, approval-url,
// approval-status, approved-by and approval-comment. c.mu held.
func (c *Output) outputs(st *state.State, files Files) []github.Output {
	outs := []github.Output{{Name: "run-id", Value: st.RunID}, {Name: "status", Value: string(st.RunStatus)}}
	if st.ChainHead != "" {
		outs = append(outs, github.Output{Name: "chain-head", Value: st.ChainHead})
	}
	if files.Report != "" {
		outs = append(outs, github.Output{Name: "report-path", Value: files.Report})
	}
	if files.Evidence != "" {
		outs = append(outs, github.Output{Name: "evidence-path", Value: files.Evidence})
	}
	outs = append(outs, github.Output{Name: "attestation-path", Value: files.Attestation})
	rec, ok := c.gates[c.last]
	if !ok {
		return outs
	}
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
	return outs
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
