package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/runbook"
)

func newValidateCmd() *cobra.Command {
	var rules, dir, templates, mcpConfig string
	cmd := &cobra.Command{
		Use:   "validate [RUNBOOK|FILE...]",
		Short: "Check runbooks and everything a run needs; report every error (file:line:col: field: message)",
		Long: `Check, without running anything, that 'rbook run' would start: ok means the run loads.
For each runbook it checks
  - the runbook against the step-type rules (rules.yaml, or --rules FILE);
  - the values file the run uses, <name>.values.yaml. When it is missing, 'rbook run' stops
    with the ABORT line, so that is an error here too; the rest is then checked with
    <name>.values.yaml.example, and the output says so;
  - when a step is a check with a query: the MCP config the run uses (<dir>/<name>.mcp.json,
    or --mcp-config FILE) parses, names exactly one server (a run uses the only one), the
    server has command or url, and a stdio command is found as the run would start it (on
    PATH or as a path from the working directory, or "rbook": this executable). Servers are
    not started and url servers are not contacted;
  - the report templates, with the --templates DIR overrides, parse and render for sample
    runs (every step type and status, every run status, every field set and unset).
'rbook run' and 'rbook resume' make the same checks before the first step: what validate
refuses stops the run with exit 2, with nothing run or recorded.
It does not look at a run's state (use 'rbook status').

Every error of every file is reported at once, sorted by file, then line and column, as
file:line:col: field: message on stderr; one line per runbook on stdout says ok or how
many errors it has. RUNBOOK is a name in --dir (like 'rbook run RUNBOOK'); FILE is a path
ending in .yaml. Without arguments every runbook in --dir is checked; values files
(*.values.yaml) are skipped, since they are checked with their runbook.

Exit codes: 0 every runbook would start, 2 at least one error (or no runbook to check).`,
		Example: `  rbook validate                       # every runbook in runbooks/
  rbook validate prod                  # runbooks/prod.yaml, its values and MCP config
  rbook validate path/to/my.yaml --mcp-config ci.mcp.json --templates my-templates`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := validateArgs(cmd, dir, args)
			if err != nil {
				return err
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			all, summaries, bad := preflight.Runbooks(files, rules, templates, mcpConfig)
			for _, d := range all {
				fmt.Fprintln(errw, d.String())
			}
			for _, s := range summaries {
				fmt.Fprintln(out, s)
			}
			if bad > 0 {
				return &exitError{code: exitAborted, msg: fmt.Sprintf("%d of %d runbooks have errors", bad, len(files))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rules, "rules", "", "rules.yaml to validate against instead of the built-in one")
	cmd.Flags().StringVar(&dir, "dir", "runbooks", "folder of the runbooks (RUNBOOK arguments, or all of them when none is given)")
	cmd.Flags().StringVar(&templates, "templates", "", "folder whose templates/*.md and prompts/*.md override the built-in ones (as for rbook run)")
	cmd.Flags().StringVar(&mcpConfig, "mcp-config", "", "MCP config to check instead of <dir>/<name>.mcp.json (as for rbook run)")
	return cmd
}

// validateArgs is the runbook files rbook validate checks: args (RUNBOOK names in dir or
// FILE paths), else every *.yaml in dir; values files are skipped (checked with their
// runbook), as are playbooks the glob found. A playbook named in args is refused with the
// command that takes it; no file at all is refused too.
func validateArgs(cmd *cobra.Command, dir string, args []string) ([]string, error) {
	named := len(args) > 0
	if !named {
		found, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, abort("%v", err)
		}
		for _, f := range found {
			if !strings.HasSuffix(f, ".values.yaml") {
				args = append(args, f)
			}
		}
	}
	var files, playbooks []string
	for _, f := range args {
		if err := playbookGiven(dir, f, "validate"); err != nil {
			if !named { // found by the *.yaml glob: not what was asked for
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: skipped (a playbook: rbook playbook validate %s)\n", f, f)
				continue
			}
			playbooks = append(playbooks, err.Error())
			continue
		}
		if !strings.HasSuffix(f, ".yaml") && !strings.ContainsRune(f, filepath.Separator) {
			f = filepath.Join(dir, f+".yaml") // a runbook name, as 'rbook run' takes it
		}
		if strings.HasSuffix(f, ".values.yaml") {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: skipped (a values file is checked with its runbook)\n", f)
			continue
		}
		files = append(files, f)
	}
	if len(playbooks) > 0 {
		// A playbook named here gets its command, not runbook errors.
		return nil, abort("%s", strings.Join(playbooks, "\n"))
	}
	if len(files) == 0 {
		return nil, abort("no runbook files to validate in %s", dir)
	}
	return files, nil
}

// runbookMCPConfig is preflight.RunbookMCPConfig, the MCP check of every run's start.
func runbookMCPConfig(runbookPath, cfgPath, flag string) (*mcp.Config, []runbook.Diagnostic) {
	return preflight.RunbookMCPConfig(runbookPath, cfgPath, flag)
}

// setupRefused is the error of a run refused before its first step because of problems
// validate also reports (ds): each on its own line, then what to do. Nothing was run or
// recorded, so the same command runs once they are fixed.
func setupRefused(ds []runbook.Diagnostic, validateCmd string) error {
	runbook.SortDiagnostics(ds)
	lines := make([]string, 0, len(ds)+1)
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	lines = append(lines, fmt.Sprintf("Nothing was run or recorded: fix the above ('%s' lists every problem) and run the same command again.", validateCmd))
	return abort("%s", strings.Join(lines, "\n"))
}
