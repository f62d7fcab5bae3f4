package planview

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/preflight"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
)

// resolver says where a playbook's commands and tools are found, as `rbook playbook run`
// finds them: deterministic nodes with the playbook folder's bin/ first on PATH
// (steps.PlaybookBinDirs), agentic nodes on the server of <folder>/<base>.mcp.json that
// steps.AgentOf picks.
type resolver struct {
	bin    string // the playbook folder's bin/ as shown (relative when the file was), "" for none
	cfg    *mcp.Config
	cfgErr string
}

// newResolver is the resolver of playbook plan.
func newResolver(plan *runbook.Plan) *resolver {
	r := &resolver{}
	if len(steps.PlaybookBinDirs(plan.Path)) > 0 {
		r.bin = filepath.Join(filepath.Dir(plan.Path), "bin")
	}
	if preflight.HasAgentic(plan) {
		cfg, ds := preflight.PlaybookMCPConfig(plan, plan.Path, "")
		r.cfg = cfg
		if cfg == nil && len(ds) > 0 {
			r.cfgErr = ds[0].Message
		}
	}
	return r
}

// command says where a deterministic node's argv[0] is looked up.
func (r *resolver) command(argv []string) string {
	if len(argv) == 0 || r.bin == "" {
		return ""
	}
	name := argv[0]
	if strings.ContainsAny(name, `/\`) {
		return ""
	}
	if st, err := os.Stat(filepath.Join(r.bin, name)); err == nil && !st.IsDir() {
		return fmt.Sprintf("%s is %s (the playbook's %s is first on PATH)", name, filepath.Join(r.bin, name), r.bin)
	}
	return fmt.Sprintf("%s is looked up on PATH with the playbook's %s first", name, r.bin)
}

// agentic sets s's input to the call the run sends, {"agent","skill","arguments"} (the
// evidence input, steps.Agentic.RunInput), and says which server it goes to; when the server
// cannot be picked, s keeps the node's words and Resolves says why.
func (r *resolver) agentic(st runbook.Step, s *Step) {
	if r.cfg == nil {
		if r.cfgErr != "" {
			s.Resolves = r.cfgErr
		}
		return
	}
	agent, err := steps.AgentOf(st, r.cfg)
	if err != nil {
		s.Resolves = err.Error()
		return
	}
	args := s.Params
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	b, _ := json.Marshal(struct {
		Agent     string          `json:"agent"`
		Skill     string          `json:"skill,omitempty"`
		Arguments json.RawMessage `json:"arguments"`
	}{agent, st.Node.Skill, args})
	s.Input, s.Params = string(b), nil
	s.Resolves = fmt.Sprintf("MCP server %s of %s", agent, r.cfg.Path)
}
