package planview

import (
	"fmt"
	"io"
	"strings"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// Help is the --help text of `rbook plan`, its exit codes included (the CLI keeps only its
// wiring; docs/plan.md says the same at more length).
const Help = `Show, without running or recording anything, what 'rbook run RUNBOOK' or 'rbook playbook
run FILE.cantbook' would do: the steps (or the playbook's nodes, in the order their depends
allow) with their inputs rendered (values and --input substituted; secret-looking values
masked as "***", exactly as the plan a run sends its control plane), the commands that would
run (a node's argv, a check's MCP tools, a deploy or rollback template and params), which
gates need a person and which the auto-pass policy would pass, who may decide each (M of N,
people and groups, whether the run's starter may), and the plan digest every decision of the
run is bound to.

The policies are the files 'rbook serve' reads: --gate-policy FILE (default: one approval by
anyone but the run's starter) and --playbook-policy FILE (its rules, then the built-in ones;
default: the built-in rules). With a control plane (--control-plane URL or
$RBOOK_CONTROL_PLANE), the gates are shown as its policies would decide them (it is asked,
and records nothing); when it cannot be asked, the local files are shown and the plan says so.

-o text (default), markdown (for a job summary) or json (docs/plan.md, "JSON"). --summary
appends the Markdown to $GITHUB_STEP_SUMMARY instead and prints one line (the Action's plan
input).

RUNBOOK is a runbook name in --dir (default: prod, as for 'rbook run') or, as for 'rbook
validate', a path ending in .yaml (its folder then holds its values file); a playbook is
given by its path.

Exit codes: 0 shown, 2 a runbook, playbook, inputs or policy file that does not load
(file:line:col: field: message, as 'rbook validate' prints it).`

// Examples are `rbook plan`'s --help examples.
const Examples = `  rbook plan demo
  rbook plan runbooks/demo.yaml
  rbook plan runbooks/release.cantbook --input version=2026.4.90
  rbook plan prod --gate-policy gates.yaml -o markdown
  rbook plan release.cantbook --inputs inputs.yaml --playbook-policy policy.yaml -o json`

// AppendToSummary appends v's Markdown to the job summary file at path ($GITHUB_STEP_SUMMARY)
// and says so in one line on out: nothing from the runbook reaches the job's log, where a line
// could be read as a workflow command. Errors: path empty (not in a job), or the file cannot
// be appended to.
func AppendToSummary(out io.Writer, v *View, path string) error {
	if path == "" {
		return fmt.Errorf("--summary: $GITHUB_STEP_SUMMARY is not set (a GitHub Actions job sets it); use -o markdown to print the Markdown")
	}
	var b strings.Builder
	Markdown(&b, v)
	if _, err := github.AppendSummary(path, b.String()+"\n"); err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	fmt.Fprintf(out, "The plan of %s (%s, plan digest %s) is in the job summary.\n", v.Name, termui.Plural(len(v.Steps), "step", "steps"), v.Digest)
	return nil
}
