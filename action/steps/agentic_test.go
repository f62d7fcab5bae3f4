package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/mcp/demorelease"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// testPool starts this test binary as real stdio MCP servers (command "rbook" means
// os.Executable): each name maps to a helper mode of TestMain.
func testPool(t *testing.T, servers map[string]string) *mcp.Pool {
	t.Helper()
	var entries []string
	for name, mode := range servers {
		entries = append(entries, fmt.Sprintf(`%q: {"command": "rbook", "env": {%q: %q}}`, name, helperModeEnv, mode))
	}
	cfg, err := mcp.ParseConfig("test.mcp.json", []byte(`{"mcpServers": {`+strings.Join(entries, ",")+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	pool := mcp.NewPool(cfg)
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

func agNode(id, agent, skill string, inputs map[string]any) runbook.Step {
	return runbook.Step{Name: id, Type: runbook.TypeAgentic, TimeoutSeconds: 30,
		Node: &runbook.Node{ID: id, Agent: agent, Skill: skill, Inputs: inputs}}
}

func runAg(t *testing.T, a Agentic, step runbook.Step, bindings map[string]any) engine.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return a.Execute(ctx, step, engine.RunContext{RunID: "RBOOK-test", Bindings: bindings, Iteration: 1})
}

// TestAgenticCallsDemoReleaseServer: with only skill and one server, the node calls
// the demo server (a real subprocess) with its templated inputs; the structured result is the
// Value, the evidence input names server, tool and arguments.
func TestAgenticCallsDemoReleaseServer(t *testing.T) {
	a := Agentic{Pool: testPool(t, map[string]string{"demo-release": "demo-release"})}
	step := agNode("publish", "", demorelease.ToolReleasePublisher, map[string]any{"version": "{{ version }}"})
	bindings := map[string]any{"version": "2026.4.90"}
	out := runAg(t, a, step, bindings)
	want := map[string]any{"published": false, "simulated": true, "version": "2026.4.90", "message": demorelease.NothingPublished}
	if out.Status != engine.StatusPass || fmt.Sprint(out.Value) != fmt.Sprint(want) {
		t.Fatalf("outcome %s %#v (%s)", out.Status, out.Value, out.Output)
	}
	if b, _ := json.Marshal(want); out.Output != string(b) {
		t.Errorf("output %s, want %s", out.Output, b)
	}
	in := a.RunInput(step, engine.RunContext{Bindings: bindings})
	if in == nil || *in != `{"agent":"demo-release","skill":"release-publisher","arguments":{"version":"2026.4.90"}}` {
		t.Errorf("RunInput %v", in)
	}
	// No inputs: {} arguments, and the spec's publish node (skill only) works as written.
	out = runAg(t, a, agNode("publish", "", demorelease.ToolReleasePublisher, nil), bindings)
	if out.Status != engine.StatusPass || out.Value["version"] != "" || out.Value["published"] != false {
		t.Errorf("no inputs: %s %#v", out.Status, out.Value)
	}
	// Numbers in a structured result are json.Number, lists stay lists.
	out = runAg(t, a, agNode("sum", "demo-release", demorelease.ToolSummarize, map[string]any{"a": "{{ version }}", "b": []any{"x", "y"}}), bindings)
	if out.Status != engine.StatusPass || out.Value["count"] != json.Number("2") || out.Value["truthy"] != json.Number("2") {
		t.Errorf("summarize: %s %#v", out.Status, out.Value)
	}
}

// TestAgenticMissingVarNamed: missing variables in inputs are all named and no tool
// is called.
func TestAgenticMissingVarNamed(t *testing.T) {
	a := Agentic{Pool: testPool(t, map[string]string{"demo-release": "demo-release"})}
	step := agNode("publish", "demo-release", demorelease.ToolFlaky, map[string]any{"key": "{{ a.b }}", "nested": []any{"{{ c }}"}})
	out := runAg(t, a, step, map[string]any{"a": map[string]any{}})
	want := (&runbook.MissingVarError{Names: []string{"a.b", "c"}}).Error()
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, want) {
		t.Fatalf("outcome %s %q, want it to contain %q", out.Status, out.Output, want)
	}
	// flaky counts calls per server process: had the failed node called it, this first real
	// call would succeed (fail_times 1 fails exactly one call).
	out = runAg(t, a, agNode("f", "demo-release", demorelease.ToolFlaky, map[string]any{"key": ""}), nil)
	if out.Status != engine.StatusFail {
		t.Errorf("first flaky call after the refused node: %s %q; the refused node called the tool", out.Status, out.Output)
	}
}

// TestAgenticToolErrorFailsAndSessionIsShared: isError → FAIL; the next node on the
// same server reuses the run's session (the same server process: flaky's counter goes on).
func TestAgenticToolErrorFailsAndSessionIsShared(t *testing.T) {
	a := Agentic{Pool: testPool(t, map[string]string{"demo-release": "demo-release"})}
	step := agNode("flaky", "demo-release", demorelease.ToolFlaky, map[string]any{"key": "retry-demo"})
	out := runAg(t, a, step, nil)
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, "reported an error") || !strings.Contains(out.Output, "fails on purpose") {
		t.Fatalf("first call: %s %q", out.Status, out.Output)
	}
	out = runAg(t, a, step, nil)
	if out.Status != engine.StatusPass || out.Value["attempt"] != json.Number("2") || out.Value["ok"] != true {
		t.Fatalf("second call: %s %#v %q", out.Status, out.Value, out.Output)
	}
}

// TestAgenticDefaults: only skill needs exactly one server; only agent needs a server
// with exactly one tool, which is then called; the errors list what there is and say what to set.
func TestAgenticDefaults(t *testing.T) {
	a := Agentic{Pool: testPool(t, map[string]string{"demo-release": "demo-release", "one": "one-tool"})}
	out := runAg(t, a, agNode("p", "", "release-publisher", nil), nil)
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, "defines 2 servers (demo-release, one); set agent") {
		t.Errorf("skill only, two servers: %s %q", out.Status, out.Output)
	}
	out = runAg(t, a, agNode("p", "demo-release", "", nil), nil)
	if want := `agent "demo-release" has no skill and server "demo-release" offers 3 tools (flaky, release-publisher, summarize); set skill to the tool to call`; out.Status != engine.StatusFail || !strings.Contains(out.Output, want) {
		t.Errorf("agent only, three tools: %s %q, want %q", out.Status, out.Output, want)
	}
	out = runAg(t, a, agNode("p", "nope", "x", nil), nil)
	if out.Status != engine.StatusFail || !strings.Contains(out.Output, `agent "nope" is not a server in test.mcp.json (it defines demo-release, one)`) {
		t.Errorf("unknown agent: %s %q", out.Status, out.Output)
	}
	// Only agent, one tool: that tool ("wait") is called; it blocks, so the node's deadline
	// ends it as an agentic timeout. The session is dialled first so the deadline hits the call.
	if _, err := a.Pool.Session(context.Background(), "one"); err != nil {
		t.Fatal(err)
	}
	step := agNode("w", "one", "", nil)
	step.TimeoutSeconds = 1
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	out = a.Execute(ctx, step, engine.RunContext{})
	if out.Status != engine.StatusTimedOut || out.Event != runbook.EventAgenticTimeout || !strings.Contains(out.Output, "no answer within the node's timeout") {
		t.Errorf("timeout: %s event %q %q", out.Status, out.Event, out.Output)
	}
	if in := a.RunInput(step, engine.RunContext{}); in == nil || *in != `{"agent":"one","arguments":{}}` {
		t.Errorf("RunInput agent only: %v", in)
	}
	// No pool: a clear error, not a panic.
	if out := runAg(t, Agentic{}, agNode("p", "", "x", nil), nil); out.Status != engine.StatusFail || !strings.Contains(out.Output, "no mcpServers config") {
		t.Errorf("no pool: %s %q", out.Status, out.Output)
	}
}

// TestShippedMCPConfigsReachDemoRelease: runbooks/release.mcp.json and
// runbooks/fanout.mcp.json parse, name the one server demo-release started as "rbook mcp
// demo-release", and the spec's publish node (skill: release-publisher, no agent) runs with them.
func TestShippedMCPConfigsReachDemoRelease(t *testing.T) {
	for _, name := range []string{"release", "fanout"} {
		cfg, err := mcp.LoadConfig(filepath.Join("..", "..", "runbooks", name+".mcp.json"))
		if err != nil {
			t.Fatal(err)
		}
		srv := cfg.Servers["demo-release"]
		if len(cfg.Servers) != 1 || srv == nil || srv.Command != mcp.SelfCommand || strings.Join(srv.Args, " ") != "mcp demo-release" {
			t.Fatalf("%s.mcp.json: %+v", name, cfg.Servers)
		}
		pool := mcp.NewPool(cfg)
		out := runAg(t, Agentic{Pool: pool}, agNode("publish", "", demorelease.ToolReleasePublisher, nil), map[string]any{"version": "2026.4.90"})
		if out.Status != engine.StatusPass || out.Value["message"] != demorelease.NothingPublished || out.Value["simulated"] != true {
			t.Errorf("%s: %s %#v %q", name, out.Status, out.Value, out.Output)
		}
		if err := pool.Close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
}
