package mcp

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFindsWhatWouldStopARunBeforeItsFirstStep: Check refuses, with the file, line and
// field, every use that could not reach a server (a command that is not found, "the only
// server" of a config with several, a server name the config lacks) and passes the uses that
// can, without starting anything; servers no use reaches are not looked at.
func TestCheckFindsWhatWouldStopARunBeforeItsFirstStep(t *testing.T) {
	checks := Use{By: "a run's check steps", Several: "a run's check steps use the only server of their MCP config, so give this runbook a config with one"}
	named := func(server string) Use {
		return Use{By: `agentic node "plan"`, Server: server, File: "release.cantbook", Line: 12, Column: 5, Field: "nodes[1].agent", Several: "set agent"}
	}
	tests := []struct {
		name, file string
		uses       []Use
		want       []string
	}{
		{"the only server, found (rbook is this executable)", "one-server.mcp.json", []Use{checks}, nil},
		{"a command that is not on PATH", "missing-command.mcp.json", []Use{checks},
			[]string{`testdata/missing-command.mcp.json:3:5: mcpServers.inventory.command: command "no-such-mcp-server-xyz" is not found (on PATH, or as a path from the working directory); a run's check steps could not start this server`}},
		{"a relative path that does not exist from the working directory", "relative-command.mcp.json", []Use{{By: "x", Server: "local"}},
			[]string{`testdata/relative-command.mcp.json:3:5: mcpServers.local.command: command "./no-such-dir/server" is not found (on PATH, or as a path from the working directory); x could not start this server`}},
		{"a url server is not contacted", "relative-command.mcp.json", []Use{{By: "x", Server: "remote"}}, nil},
		{"the only server of a config with two", "two-servers.mcp.json", []Use{checks},
			[]string{`testdata/two-servers.mcp.json: mcpServers: defines 2 servers (inventory, release); a run's check steps use the only server of their MCP config, so give this runbook a config with one`}},
		{"a named server of a config with two", "two-servers.mcp.json", []Use{named("release")}, nil},
		{"a name the config does not define", "two-servers.mcp.json", []Use{named("nope")},
			[]string{`release.cantbook:12:5: nodes[1].agent: agentic node "plan" names server "nope", which testdata/two-servers.mcp.json does not define (it defines inventory, release)`}},
		{"an unused broken server is not looked at", "mixed.mcp.json", []Use{named("inventory"), named("remote")}, nil},
		{"a broken server used twice is reported once", "mixed.mcp.json", []Use{named("broken"), named("broken")},
			[]string{`testdata/mixed.mcp.json:3:5: mcpServers.broken.command: command "no-such-mcp-server-xyz" is not found (on PATH, or as a path from the working directory); agentic node "plan" could not start this server`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range cfg.Check(tt.uses) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Check:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
