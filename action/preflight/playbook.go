package preflight

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// PrintParseError writes every issue of a playbook that does not load, one per line
// as file:line:col: field: message, and returns how many there were.
func PrintParseError(w io.Writer, path string, err error) int {
	var pe *runbook.PlaybookParseError
	if errors.As(err, &pe) {
		for _, d := range pe.Issues {
			fmt.Fprintln(w, d.String())
		}
		return len(pe.Issues)
	}
	fmt.Fprintf(w, "%s: %v\n", path, err)
	return 1
}

// Playbooks is what 'rbook playbook validate' checks each file with beyond the parser:
// MCPConfig (--mcp-config), the templates' problems (Templates, checked once for every file)
// and Warnings, the warnings of a playbook that loaded (the auto-pass policy's passes).
type Playbooks struct {
	MCPConfig string
	Templates []runbook.Diagnostic
	Warnings  func(plan *runbook.Plan, file string) []runbook.Diagnostic
}

// File validates the playbook at p: it loads, its MCP config and the templates pass what
// 'rbook playbook run' checks before the first node, and the auto-pass policy's passes are
// warnings. With text, every issue and warning is printed on errw and one summary line on
// out. The result is OK when there is no issue.
func (c Playbooks) File(p string, text bool, out, errw io.Writer) File {
	vf := File{File: p, Issues: []Issue{}, Warnings: []Issue{}}
	plan, err := runbook.LoadPlaybook(p)
	if err != nil {
		vf.Issues = IssuesOf(p, err)
		if text {
			n := PrintParseError(errw, p, err)
			fmt.Fprintf(out, "%s: %s\n", p, termui.Plural(n, "issue", "issues"))
		}
		return vf
	}
	vf.Name, vf.Nodes, vf.Hash = plan.Name, len(plan.Steps), plan.ContentHash
	_, ds := PlaybookMCPConfig(plan, p, c.MCPConfig)
	if ds = append(ds, c.Templates...); len(ds) > 0 {
		runbook.SortDiagnostics(ds)
		for _, d := range ds {
			vf.Issues = append(vf.Issues, IssueOf(d))
			if text {
				fmt.Fprintln(errw, d.String())
			}
		}
		if text {
			fmt.Fprintf(out, "%s: %s\n", p, termui.Plural(len(ds), "issue", "issues"))
		}
		return vf
	}
	vf.OK = true
	warnings := c.Warnings(plan, p)
	if plan.Playbook != nil {
		warnings = append(slices.Clone(plan.Playbook.Warnings), warnings...)
	}
	for _, d := range warnings {
		vf.Warnings = append(vf.Warnings, IssueOf(d))
		if text {
			fmt.Fprintln(errw, "warning: "+d.String())
		}
	}
	if text {
		fmt.Fprintf(out, "%s: ok (%d nodes, playbook %s, hash %s)\n", p, len(plan.Steps), plan.Name, plan.ContentHash)
	}
	return vf
}
