package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// Agentic executes playbook agentic nodes (runbook.TypeAgentic; docs/spec/playbooks.md, "Nodes") as one call
// of an MCP tool: Node.Agent names the server in the mcpServers config, Node.Skill the tool,
// and the arguments are Node.Inputs with every string rendered by runbook.RenderValue against
// RunContext.Bindings (every missing variable named, nothing called).
//
// Defaults when only one is set: only skill → the config must hold exactly one server, which
// is used (else an error listing the servers that says to set agent); only agent → the server
// must offer exactly one tool, which is called (else an error listing its tools that says to
// set skill).
//
// Outcomes: the tool's structuredContent is the node's Value (an object as is; any other JSON
// value as {"value": v}); without one, Value is {"text": the joined text content}. A result
// with isError → FAIL (Value as above, Output the tool's text); ctx deadline (also during the
// connect) → TIMED_OUT with Event runbook.EventAgenticTimeout; transport or protocol errors →
// FAIL. Nothing is retried (an error_handlers retry is a new execution). Sessions come from
// Pool: one per server per run, closed by whoever closes the pool at the end of the run.
type Agentic struct {
	// Pool holds the run's MCP sessions and the mcpServers config they are dialled from.
	Pool *mcp.Pool
}

// agenticCall is a node's call after templating.
type agenticCall struct {
	Agent     string         `json:"agent"`
	Skill     string         `json:"skill,omitempty"`
	Arguments map[string]any `json:"arguments"`
}

// prepare renders the node's inputs and picks its server (not its tool, which may need the
// server's tool list).
func (a Agentic) prepare(step runbook.Step, run engine.RunContext) (*agenticCall, error) {
	n := step.Node
	if n == nil || n.Agent == "" && n.Skill == "" {
		return nil, fmt.Errorf("agentic node %q needs skill or agent", step.Name)
	}
	args := map[string]any{}
	if n.Inputs != nil {
		v, err := runbook.RenderValue(n.Inputs, run.Bindings)
		if err != nil {
			return nil, fmt.Errorf("agentic node %q: inputs: %w", step.Name, err)
		}
		args = v.(map[string]any) // RenderValue returns a map for a map
	}
	if a.Pool == nil || a.Pool.Config() == nil {
		return nil, fmt.Errorf("agentic node %q: no mcpServers config is loaded for agentic nodes", step.Name)
	}
	agent, err := AgentOf(step, a.Pool.Config())
	if err != nil {
		return nil, err
	}
	return &agenticCall{Agent: agent, Skill: n.Skill, Arguments: args}, nil
}

// AgentOf is the server of cfg (the mcpServers config) that agentic node step calls: its
// agent, or the config's only server when it names only a skill. Error (naming the node, the
// config file and its servers): the agent is not a server of cfg, or the node has no agent
// and cfg has several servers. rbook plan shows the call with it, as the run makes it.
func AgentOf(step runbook.Step, cfg *mcp.Config) (string, error) {
	n := step.Node
	switch {
	case n == nil || cfg == nil:
		return "", fmt.Errorf("agentic node %q: no mcpServers config is loaded for agentic nodes", step.Name)
	case n.Agent != "":
		if _, ok := cfg.Servers[n.Agent]; !ok {
			return "", fmt.Errorf("agentic node %q: agent %q is not a server in %s (it defines %s)", step.Name, n.Agent, cfg.Path, strings.Join(cfg.Names(), ", "))
		}
		return n.Agent, nil
	case len(cfg.Servers) == 1:
		return cfg.Names()[0], nil
	}
	return "", fmt.Errorf("agentic node %q: skill %q has no agent and %s defines %d servers (%s); set agent to the server that offers it", step.Name, n.Skill, cfg.Path, len(cfg.Servers), strings.Join(cfg.Names(), ", "))
}

// RunInput is the call as JSON, {"agent": server, "skill": tool, "arguments": {...}}, the
// evidence input of an agentic node (engine.InputRewriter; docs/decisions/two-renderings.md).
// skill is absent when the node names only agent (the tool is then the server's only one,
// known once it is listed); nil when the node's inputs cannot be rendered or its server
// cannot be picked (the output says why).
func (a Agentic) RunInput(step runbook.Step, run engine.RunContext) *string {
	call, err := a.prepare(step, run)
	if err != nil {
		return nil
	}
	return jsonInput(call)
}

// Execute runs one agentic node; see Agentic.
func (a Agentic) Execute(ctx context.Context, step runbook.Step, run engine.RunContext) engine.Outcome {
	call, err := a.prepare(step, run)
	if err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: err.Error()}
	}
	sess, err := a.Pool.Session(ctx, call.Agent)
	if err != nil {
		return agenticFailure(ctx, step, err)
	}
	if call.Skill == "" {
		tools, err := sess.ListTools(ctx)
		if err != nil {
			return agenticFailure(ctx, step, err)
		}
		if len(tools) != 1 {
			return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("agentic node %q: agent %q has no skill and server %q offers %d tools (%s); set skill to the tool to call", step.Name, call.Agent, call.Agent, len(tools), strings.Join(tools, ", "))}
		}
		call.Skill = tools[0]
	}
	res, err := sess.CallTool(ctx, call.Skill, call.Arguments)
	if err != nil {
		return agenticFailure(ctx, step, err)
	}
	value, err := resultValue(res)
	if err != nil {
		return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("agentic node %q: tool %s/%s: %v", step.Name, call.Agent, call.Skill, err)}
	}
	if res.IsError {
		return engine.Outcome{Status: engine.StatusFail, Value: value, Output: fmt.Sprintf("tool %s/%s reported an error: %s", call.Agent, call.Skill, toolErrorText(res))}
	}
	return engine.Outcome{Status: engine.StatusPass, Value: value, Output: compactJSON(value)}
}

// agenticFailure is TIMED_OUT with Event agentic_timeout when the node's deadline passed,
// FAIL otherwise.
func agenticFailure(ctx context.Context, step runbook.Step, err error) engine.Outcome {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return engine.Outcome{
			Status: engine.StatusTimedOut,
			Event:  runbook.EventAgenticTimeout,
			Output: fmt.Sprintf("agentic node %q: no answer within the node's timeout (%d s); not retried: %v", step.Name, step.TimeoutSeconds, err),
		}
	}
	return engine.Outcome{Status: engine.StatusFail, Output: fmt.Sprintf("agentic node %q: %v", step.Name, err)}
}

// resultValue is a tool result as a node's Value: structured content (an object as is, other
// JSON as {"value": v}; numbers as json.Number), else {"text": text}.
func resultValue(res mcp.Result) (map[string]any, error) {
	if len(res.Structured) == 0 {
		return map[string]any{"text": res.Text}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(res.Structured))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("structured content is not JSON: %w", err)
	}
	if jsonDepth(v, 1) > MaxOutputDepth {
		return nil, fmt.Errorf("structured content nests deeper than %d levels (MaxOutputDepth)", MaxOutputDepth)
	}
	if obj, ok := v.(map[string]any); ok {
		return obj, nil
	}
	return map[string]any{"value": v}, nil
}
