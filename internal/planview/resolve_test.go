package planview

import (
	"path/filepath"
	"testing"

	"github.com/rbookhq/rbook-action/action/runbook"
)

func TestPlaybookPlanShowsTheCallAndCommandsTheRunResolves(t *testing.T) {
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "relay", "relay.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := runbook.ValidatePlaybookInputs(plan, map[string]string{"ticket": "T-42"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Build(plan, Options{Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join("testdata", "relay", "bin")
	for _, tc := range []struct{ node, input, resolves string }{
		{"prepare", "stub-tool prepare", "stub-tool is " + filepath.Join(bin, "stub-tool") + " (the playbook's " + bin + " is first on PATH)"},
		{"list", "go version", "go is looked up on PATH with the playbook's " + bin + " first"},
		{"relay", `{"agent":"relay-server","skill":"relay-ticket","arguments":{"ticket":"T-42"}}`,
			"MCP server relay-server of " + filepath.Join("testdata", "relay", "relay.mcp.json")},
	} {
		s := stepNamed(t, v, tc.node)
		if s.Input != tc.input || s.Resolves != tc.resolves {
			t.Errorf("%s:\n got input %q, resolves %q\nwant input %q, resolves %q", tc.node, s.Input, s.Resolves, tc.input, tc.resolves)
		}
	}
}
