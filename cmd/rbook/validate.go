package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/report"
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
			named := len(args) > 0
			if !named {
				found, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
				if err != nil {
					return abort("%v", err)
				}
				for _, f := range found {
					if !strings.HasSuffix(f, ".values.yaml") {
						args = append(args, f)
					}
				}
			}
			var files []string
			var playbooks []string
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
				// A playbook named here gets its command, not runbook errors (issue 9 UX, item 6).
				return abort("%s", strings.Join(playbooks, "\n"))
			}
			if len(files) == 0 {
				return abort("no runbook files to validate in %s", dir)
			}
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			// The templates are shared by every runbook: checked once.
			tmplDiags := checkTemplates(templates)
			var all []runbook.Diagnostic
			var summaries []string
			bad := 0
			for _, f := range files {
				res := runbook.Validate(f, rules)
				ds := res.Diagnostics
				mcpDiags, mcpNote := checkMCP(f, res, mcpConfig)
				ds = append(ds, mcpDiags...)
				ds = append(ds, tmplDiags...)
				all = append(all, ds...)
				line := f + ": ok"
				if len(ds) > 0 {
					bad++
					line = fmt.Sprintf("%s: %d error(s)", f, len(ds))
				}
				notes := []string{"values " + res.ValuesPath}
				if res.ExampleUsed {
					notes[0] = fmt.Sprintf("checked with %s because %s is missing: 'rbook run' stops there", res.ValuesPath, strings.TrimSuffix(res.ValuesPath, ".example"))
				}
				if mcpNote != "" {
					notes = append(notes, mcpNote)
				}
				summaries = append(summaries, line+" ("+strings.Join(notes, "; ")+")")
			}
			runbook.SortDiagnostics(all)
			for i, d := range all {
				if i > 0 && d == all[i-1] {
					continue // a template shared by several runbooks
				}
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

// checkTemplates parses the report templates with the overrides in dir, as every verb that
// prints a report does (report.New), and returns one diagnostic per problem.
func checkTemplates(dir string) []runbook.Diagnostic {
	var ds []runbook.Diagnostic
	_, err := report.New(dir) // a missing or non-folder dir is its one error, as for run
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var te *report.TemplateError
		if errors.As(e, &te) {
			ds = append(ds, runbook.Diagnostic{File: te.Path, Line: te.Line, Message: te.Msg})
		} else {
			ds = append(ds, runbook.Diagnostic{File: dir, Message: e.Error()})
		}
	}
	return ds
}

// checkMCP is what 'rbook validate' says about the MCP configuration a run of the runbook at
// path would use: runbookMCPConfig's problems, and a note for the summary line that says
// what was found.
func checkMCP(path string, res runbook.ValidateResult, flag string) ([]runbook.Diagnostic, string) {
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	cfgPath := mcpConfigPath(filepath.Dir(path), name, flag)
	if !res.NeedsMCP {
		return nil, "no check step queries an MCP server, so no MCP config is read"
	}
	cfg, ds := runbookMCPConfig(path, cfgPath, flag)
	if cfg == nil {
		return ds, ""
	}
	var found []string
	for _, n := range cfg.Names() {
		srv := cfg.Servers[n]
		switch {
		case !srv.Stdio():
			found = append(found, fmt.Sprintf("%s: url, not contacted", n))
		case srv.CommandFound() == nil:
			found = append(found, fmt.Sprintf("%s: stdio command %s found", n, srv.Command))
		}
	}
	slices.Sort(found)
	if len(found) == 0 {
		return ds, "MCP " + cfgPath
	}
	return ds, fmt.Sprintf("MCP %s: %s", cfgPath, strings.Join(found, ", "))
}

// runbookMCPConfig loads the MCP configuration at cfgPath that the check steps of the runbook
// at runbookPath query (flag is --mcp-config, "" for the default file) and checks it with
// mcp.Config.Check: check steps use the only server, and a stdio server's command must be
// found. It starts no server and contacts no URL. It is the one check of 'rbook validate'
// and of every run's start (executors): a configuration that validate refuses stops the run
// before its first step. The config is nil when it does not load; the diagnostics list every
// problem with file, line and field.
func runbookMCPConfig(runbookPath, cfgPath, flag string) (*mcp.Config, []runbook.Diagnostic) {
	cfg, ds := loadMCPConfig(cfgPath, flag, func() string { return missingMCPConfig(runbookPath, cfgPath) })
	if cfg == nil {
		return nil, ds
	}
	errs := cfg.Check([]mcp.Use{{By: "a run's check steps",
		Several: "a run's check steps use the only server of their MCP config, so give this runbook a config with one"}})
	return cfg, append(ds, mcpDiagnostics(errs)...)
}

// loadMCPConfig loads the MCP configuration at cfgPath as a diagnostic: a default file
// (flag "") that does not exist is missing(), a file that does not load is its
// mcp.ConfigError (file:line:col: field) or read error.
func loadMCPConfig(cfgPath, flag string, missing func() string) (*mcp.Config, []runbook.Diagnostic) {
	if _, err := os.Stat(cfgPath); flag == "" && errors.Is(err, fs.ErrNotExist) {
		return nil, []runbook.Diagnostic{{File: cfgPath, Message: missing()}}
	}
	cfg, err := mcp.LoadConfig(cfgPath)
	if err != nil {
		var ce *mcp.ConfigError
		if errors.As(err, &ce) {
			return nil, mcpDiagnostics([]*mcp.ConfigError{ce})
		}
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, []runbook.Diagnostic{{File: cfgPath, Message: msg}}
	}
	return cfg, nil
}

// mcpDiagnostics turns MCP configuration errors into validate's diagnostics.
func mcpDiagnostics(errs []*mcp.ConfigError) []runbook.Diagnostic {
	ds := make([]runbook.Diagnostic, 0, len(errs))
	for _, ce := range errs {
		ds = append(ds, runbook.Diagnostic{File: ce.Path, Line: ce.Line, Column: ce.Column, Field: ce.Field, Message: ce.Msg})
	}
	return ds
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
