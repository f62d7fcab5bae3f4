package mcp

import (
	"fmt"
	"os/exec"
	"strings"
)

// Use is one way a run reaches a server of its configuration: a runbook's check steps use the
// only server; a playbook's agentic node names its server (agent) or, with skill only, uses
// the only one.
type Use struct {
	// By says who uses the server, for messages: "a run's check steps", `agentic node "x"`.
	By string
	// Server is the server's name; "" means the configuration's only server.
	Server string
	// Several ends the message when Server is "" and the configuration has several servers:
	// why that stops the use and what to do ("a run's check steps use the only server of
	// their MCP config, so give this runbook a config with one").
	Several string
	// Line, Column and File locate the use for a server name that is not in the
	// configuration (an agentic node's agent); zero values point at the configuration itself.
	File         string
	Line, Column int
	Field        string
}

// Check reports what would stop uses from reaching their servers, cheaply and without
// starting a server or contacting a URL: a server name that is not in the configuration, ""
// on a configuration with several servers, and a stdio server whose command is not found
// the way the client's exec finds it when it starts the server (exec.LookPath from the
// working directory with rbook's PATH; "rbook" is this executable, see SelfCommand). Servers
// no use reaches are not looked at. It returns one *ConfigError per problem, each naming the
// file, line and field, in the order of uses; nil when every use can start its server.
//
// rbook validate and every run call it before the first step (a configuration that cannot
// serve a step is a setup error, not the step's FAIL).
func (c *Config) Check(uses []Use) []*ConfigError {
	var errs []*ConfigError
	checked := map[string]bool{}
	for _, u := range uses {
		srv, err := c.serverFor(u)
		if err != nil {
			if !containsErr(errs, err) {
				errs = append(errs, err)
			}
			continue
		}
		if checked[srv.Name] || !srv.Stdio() {
			checked[srv.Name] = true
			continue
		}
		checked[srv.Name] = true
		if err := srv.CommandFound(); err != nil {
			errs = append(errs, &ConfigError{Path: c.Path, Line: srv.Line, Column: srv.Column, Field: "mcpServers." + srv.Name + ".command",
				Msg: fmt.Sprintf("command %q is not found (on PATH, or as a path from the working directory); %s could not start this server", srv.Command, u.By)})
		}
	}
	return errs
}

// serverFor is the server u reaches, or the problem that stops it.
func (c *Config) serverFor(u Use) (*Server, *ConfigError) {
	if u.Server == "" {
		if len(c.Servers) == 1 {
			for _, s := range c.Servers {
				return s, nil
			}
		}
		return nil, &ConfigError{Path: c.Path, Field: "mcpServers",
			Msg: fmt.Sprintf("defines %d servers (%s); %s", len(c.Servers), strings.Join(c.Names(), ", "), u.Several)}
	}
	if s, ok := c.Servers[u.Server]; ok {
		return s, nil
	}
	path := u.File
	if path == "" {
		path = c.Path
	}
	return nil, &ConfigError{Path: path, Line: u.Line, Column: u.Column, Field: u.Field,
		Msg: fmt.Sprintf("%s names server %q, which %s does not define (it defines %s)", u.By, u.Server, c.Path, strings.Join(c.Names(), ", "))}
}

func containsErr(errs []*ConfigError, e *ConfigError) bool {
	for _, x := range errs {
		if *x == *e {
			return true
		}
	}
	return false
}

// CommandFound reports whether a stdio server's command would start: the resolved command
// (ResolvedCommand) is found by exec.LookPath, which is how exec.Command finds it when the
// server starts (PATH for a bare name, the working directory for a relative path; a bare
// name found only in the working directory is refused, as exec refuses it). It returns
// ResolvedCommand's or LookPath's error; nil for a url server.
func (s *Server) CommandFound() error {
	if !s.Stdio() {
		return nil
	}
	resolved, err := s.ResolvedCommand()
	if err != nil {
		return err
	}
	_, err = exec.LookPath(resolved)
	return err
}
