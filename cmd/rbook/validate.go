package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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
    server has command or url, and a stdio command is found (on PATH, or "rbook": this
    executable). Servers are not started and url servers are not contacted;
  - the report templates, with the --templates DIR overrides, parse.
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

// checkMCP checks the MCP configuration the run of the runbook at path would use (see
// executors): it is read only when a step is a check with a query; it must parse, name
// exactly one server (the run dials the only one), and a stdio server's command must be
// found the way exec finds it (PATH, or this executable for "rbook"). It starts no server
// and contacts no URL. The note says what was found, for the summary line.
func checkMCP(path string, res runbook.ValidateResult, flag string) ([]runbook.Diagnostic, string) {
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	cfgPath := mcpConfigPath(filepath.Dir(path), name, flag)
	if !res.NeedsMCP {
		return nil, "no check step queries an MCP server, so no MCP config is read"
	}
	if _, err := os.Stat(cfgPath); flag == "" && errors.Is(err, fs.ErrNotExist) {
		return []runbook.Diagnostic{{File: cfgPath, Message: missingMCPConfig(path, cfgPath)}}, ""
	}
	cfg, err := mcp.LoadConfig(cfgPath)
	if err != nil {
		var ce *mcp.ConfigError
		if errors.As(err, &ce) {
			return []runbook.Diagnostic{{File: ce.Path, Line: ce.Line, Column: ce.Column, Field: ce.Field, Message: ce.Msg}}, ""
		}
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return []runbook.Diagnostic{{File: cfgPath, Message: msg}}, ""
	}
	var ds []runbook.Diagnostic
	names := cfg.Names()
	if len(names) > 1 {
		ds = append(ds, runbook.Diagnostic{File: cfgPath, Field: "mcpServers",
			Message: fmt.Sprintf("defines %d servers (%s); a run's check steps use the only server of their MCP config, so give this runbook a config with one", len(names), strings.Join(names, ", "))})
	}
	var found []string
	for _, n := range names {
		srv := cfg.Servers[n]
		if !srv.Stdio() {
			found = append(found, fmt.Sprintf("%s: url, not contacted", n))
			continue
		}
		resolved, err := srv.ResolvedCommand()
		if err == nil {
			_, err = exec.LookPath(resolved)
		}
		if err != nil {
			ds = append(ds, runbook.Diagnostic{File: cfgPath, Line: srv.Line, Column: srv.Column, Field: "mcpServers." + n + ".command",
				Message: fmt.Sprintf("command %q is not found (on PATH, or as a path from the working directory); a run's check steps could not start this server", srv.Command)})
			continue
		}
		found = append(found, fmt.Sprintf("%s: stdio command %s found", n, srv.Command))
	}
	slices.Sort(found)
	if len(found) == 0 {
		return ds, "MCP " + cfgPath
	}
	return ds, fmt.Sprintf("MCP %s: %s", cfgPath, strings.Join(found, ", "))
}
