// Package preflight is the checks a run makes before anything is recorded, which
// 'rbook validate' and 'rbook playbook validate' report: the report templates with their
// overrides, the MCP configuration a runbook's check steps or a playbook's agentic nodes use
// (it loads, names the servers they use, and a stdio server's command is found; no server is
// started and no URL contacted). Each problem is a runbook.Diagnostic with file, line and
// field.
package preflight

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// MCPConfigPath is the MCP configuration a run of runbook name uses: the --mcp-config flag's
// file when set, else <dir>/<name>.mcp.json.
func MCPConfigPath(dir, name, flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(dir, name+".mcp.json")
}

// MissingMCPConfig is the message for a runbook with check steps and no MCP config file.
func MissingMCPConfig(runbookPath, configPath string) string {
	return fmt.Sprintf("%s has check steps, which query an MCP server, but %s does not exist; create it in the mcpServers JSON shape (see docs/runbooks.md) or pass --mcp-config FILE", runbookPath, configPath)
}

// Runbooks checks each runbook file as 'rbook run' would before its first step: the runbook
// against the step-type rules (rules, "" for the built-in ones) and its values file, its MCP
// configuration (mcpConfig is --mcp-config), and the report templates with the overrides in
// templates (checked once: they are shared). It returns every diagnostic sorted, without the
// repeats of a shared template; one summary line per file ("FILE: ok (values …; MCP …)" or
// "FILE: N error(s) (…)"); and how many files have errors.
func Runbooks(files []string, rules, templates, mcpConfig string) (all []runbook.Diagnostic, summaries []string, bad int) {
	tmplDiags := Templates(templates)
	for _, f := range files {
		res := runbook.Validate(f, rules)
		ds := res.Diagnostics
		mcpDiags, mcpNote := MCPCheck(f, res, mcpConfig)
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
	return slices.Compact(all), summaries, bad
}

// Templates parses the report templates with the overrides in dir, as every verb that
// prints a report does (report.New), and returns one diagnostic per problem.
func Templates(dir string) []runbook.Diagnostic {
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

// MCPCheck is what 'rbook validate' says about the MCP configuration a run of the runbook at
// path would use (flag is --mcp-config, "" for the default file): RunbookMCPConfig's
// problems, and a note for the summary line that says what was found.
func MCPCheck(path string, res runbook.ValidateResult, flag string) ([]runbook.Diagnostic, string) {
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	cfgPath := MCPConfigPath(filepath.Dir(path), name, flag)
	if !res.NeedsMCP {
		return nil, "no check step queries an MCP server, so no MCP config is read"
	}
	cfg, ds := RunbookMCPConfig(path, cfgPath, flag)
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

// RunbookMCPConfig loads the MCP configuration at cfgPath that the check steps of the runbook
// at runbookPath query (flag is --mcp-config, "" for the default file) and checks it with
// mcp.Config.Check: check steps use the only server, and a stdio server's command must be
// found. It starts no server and contacts no URL. It is the one check of 'rbook validate'
// and of every run's start: a configuration that validate refuses stops the run
// before its first step. The config is nil when it does not load; the diagnostics list every
// problem with file, line and field.
func RunbookMCPConfig(runbookPath, cfgPath, flag string) (*mcp.Config, []runbook.Diagnostic) {
	cfg, ds := LoadMCPConfig(cfgPath, flag, func() string { return MissingMCPConfig(runbookPath, cfgPath) })
	if cfg == nil {
		return nil, ds
	}
	errs := cfg.Check([]mcp.Use{{By: "a run's check steps",
		Several: "a run's check steps use the only server of their MCP config, so give this runbook a config with one"}})
	return cfg, append(ds, MCPDiagnostics(errs)...)
}

// LoadMCPConfig loads the MCP configuration at cfgPath as a diagnostic: a default file
// (flag "") that does not exist is missing(), a file that does not load is its
// mcp.ConfigError (file:line:col: field) or read error.
func LoadMCPConfig(cfgPath, flag string, missing func() string) (*mcp.Config, []runbook.Diagnostic) {
	if _, err := os.Stat(cfgPath); flag == "" && errors.Is(err, fs.ErrNotExist) {
		return nil, []runbook.Diagnostic{{File: cfgPath, Message: missing()}}
	}
	cfg, err := mcp.LoadConfig(cfgPath)
	if err != nil {
		var ce *mcp.ConfigError
		if errors.As(err, &ce) {
			return nil, MCPDiagnostics([]*mcp.ConfigError{ce})
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

// MCPDiagnostics turns MCP configuration errors into validate's diagnostics.
func MCPDiagnostics(errs []*mcp.ConfigError) []runbook.Diagnostic {
	ds := make([]runbook.Diagnostic, 0, len(errs))
	for _, ce := range errs {
		ds = append(ds, runbook.Diagnostic{File: ce.Path, Line: ce.Line, Column: ce.Column, Field: ce.Field, Message: ce.Msg})
	}
	return ds
}

// PlaybookMCPPath is the MCP configuration a run of the playbook at file uses: mcpConfig
// (--mcp-config) when set, else <playbook folder>/<playbook base>.mcp.json.
func PlaybookMCPPath(file, mcpConfig string) string {
	return MCPConfigPath(filepath.Dir(file), strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), mcpConfig)
}

// PlaybookMCPConfig loads and checks the MCP configuration the agentic nodes of plan (the
// playbook at file) use, with mcp.Config.Check: each node's agent is a server of the config
// (a node with skill only needs a config with one server), and each server a node uses has a
// command that is found. No server is started. The config is nil (with no diagnostics) when
// the playbook has no agentic node, and nil with diagnostics when it does not load; the
// diagnostics name file, line and field. 'rbook playbook validate' and 'rbook playbook run'
// both call it, so a config that one refuses the other refuses too.
func PlaybookMCPConfig(plan *runbook.Plan, file, mcpConfig string) (*mcp.Config, []runbook.Diagnostic) {
	var uses []mcp.Use
	for i, s := range plan.Steps {
		if s.Type != runbook.TypeAgentic || s.Node == nil {
			continue
		}
		by := fmt.Sprintf("agentic node %q", s.Name)
		uses = append(uses, mcp.Use{By: by, Server: s.Node.Agent, File: file, Line: s.Line, Column: s.Column, Field: fmt.Sprintf("nodes[%d].agent", i),
			Several: fmt.Sprintf("%s has skill %q and no agent, so set agent to the server that offers it", by, s.Node.Skill)})
	}
	if len(uses) == 0 {
		return nil, nil
	}
	path := PlaybookMCPPath(file, mcpConfig)
	cfg, ds := LoadMCPConfig(path, mcpConfig, func() string {
		return fmt.Sprintf("%s has agentic nodes, which call a tool of an MCP server, but %s does not exist; create it in the mcpServers JSON shape (see docs/playbooks.md) or pass --mcp-config FILE", file, path)
	})
	if cfg == nil {
		return nil, ds
	}
	return cfg, append(ds, MCPDiagnostics(cfg.Check(uses))...)
}

// HasAgentic reports whether plan has an agentic node.
func HasAgentic(plan *runbook.Plan) bool {
	return slices.ContainsFunc(plan.Steps, func(s runbook.Step) bool { return s.Type == runbook.TypeAgentic })
}
