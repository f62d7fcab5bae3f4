// Package demorelease is rbook's demo MCP server for playbooks (docs/spec/playbooks.md, "Nodes"): the agentic
// nodes of runbooks/release.cantbook and runbooks/fanout.cantbook call its tools, so the
// playbook demos run on any machine. It publishes nothing, contacts no registry and no
// network, and says so in its instructions, its tool descriptions and every result.
package demorelease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/demostdio"
)

// ServerName is the MCP server name the demo announces.
const ServerName = "rbook-demo-release"

// The demo's tool names.
const (
	// ToolReleasePublisher is the skill of the spec's publish node (docs/spec/playbooks.md,
	// "Document format": skill: release-publisher).
	ToolReleasePublisher = "release-publisher"
	// ToolSummarize counts its arguments: the fan-in node of the fan-out demo.
	ToolSummarize = "summarize"
	// ToolFlaky fails its first calls and then succeeds: the retry of the fan-out demo.
	ToolFlaky = "flaky"
)

// NothingPublished is the message of every release-publisher result.
const NothingPublished = "demo: nothing was published"

// MaxFlakyFailures caps flaky's fail_times (a demo never needs more than a few failures).
const MaxFlakyFailures = 10

const instructions = "rbook demo release server. Its tools only pretend: release-publisher " +
	"publishes nothing and contacts no registry or network (every result says \"" + NothingPublished +
	"\" and simulated: true); summarize only counts its arguments; flaky fails on purpose to show a " +
	"retry. It exists so rbook's playbook demos run on any machine."

// PublishInput is release-publisher's arguments; every field is optional.
type PublishInput struct {
	Version string `json:"version,omitempty" jsonschema:"the version that would be published, e.g. 2026.4.90"`
}

// PublishOutput is release-publisher's structured result. Published is always false and
// Simulated always true: the demo publishes nothing.
type PublishOutput struct {
	Published bool   `json:"published"`
	Simulated bool   `json:"simulated"`
	Version   string `json:"version"`
	Message   string `json:"message"`
}

// SummarizeOutput is summarize's structured result: Count arguments, Truthy of them truthy
// (not null, false, 0, "", [] or {}), Keys their names sorted, Sizes each argument's size
// (a list's or an object's length, a string's length in bytes, 1 for anything else, 0 for null).
type SummarizeOutput struct {
	Count   int            `json:"count"`
	Truthy  int            `json:"truthy"`
	Keys    []string       `json:"keys"`
	Sizes   map[string]int `json:"sizes"`
	Demo    bool           `json:"demo"`
	Message string         `json:"message"`
}

// FlakyInput is flaky's arguments: FailTimes (default 1, at most MaxFlakyFailures) is how many
// calls with the same Key fail before one succeeds, counted per server process.
type FlakyInput struct {
	Key       string `json:"key,omitempty" jsonschema:"which counter to use; calls with different keys are counted apart"`
	FailTimes *int   `json:"fail_times,omitempty" jsonschema:"how many calls fail before one succeeds (default 1, at most 10)"`
}

// FlakyOutput is flaky's structured result once it succeeds: Attempt is the 1-based call
// number for Key in this server process.
type FlakyOutput struct {
	OK      bool   `json:"ok"`
	Attempt int    `json:"attempt"`
	Demo    bool   `json:"demo"`
	Message string `json:"message"`
}

// NewServer returns the demo release server with release-publisher, summarize and flaky.
// Each server has its own flaky counters.
func NewServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{
		Name:    ServerName,
		Title:   "rbook demo release server (publishes nothing)",
		Version: "1",
	}, &mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	closedWorld := false
	mcp.AddTool(server, &mcp.Tool{
		Name: ToolReleasePublisher,
		Description: "Demo only: pretends to publish a release. Publishes nothing and contacts no registry " +
			"or network. Answers {\"published\": false, \"simulated\": true, \"version\": ..., \"message\": \"" + NothingPublished + "\"}.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closedWorld},
	}, publish)
	mcp.AddTool(server, &mcp.Tool{
		Name: ToolSummarize,
		Description: "Demo only: counts its arguments (any names, any JSON values) and answers " +
			"{\"count\", \"truthy\", \"keys\", \"sizes\"}. Sends nothing anywhere.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closedWorld},
	}, summarize)
	f := &flaky{calls: map[string]int{}}
	mcp.AddTool(server, &mcp.Tool{
		Name: ToolFlaky,
		Description: "Demo only: fails on purpose for its first fail_times calls (default 1) per key in this " +
			"server process, then succeeds with {\"ok\": true, \"attempt\": n}; shows a playbook retry.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closedWorld},
	}, f.call)
	return server
}

// RunStdio serves NewServer over stdin/stdout until the client closes stdin (nil) or ctx ends
// (ctx's error). Other transport errors are returned.
func RunStdio(ctx context.Context) error {
	return demostdio.Run(ctx, NewServer())
}

func publish(_ context.Context, _ *mcp.CallToolRequest, in PublishInput) (*mcp.CallToolResult, PublishOutput, error) {
	return nil, PublishOutput{Published: false, Simulated: true, Version: in.Version, Message: NothingPublished}, nil
}

func summarize(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, SummarizeOutput, error) {
	out := SummarizeOutput{Keys: []string{}, Sizes: map[string]int{}, Demo: true}
	for k, v := range in {
		out.Keys = append(out.Keys, k)
		out.Sizes[k] = size(v)
		if truthy(v) {
			out.Truthy++
		}
	}
	slices.Sort(out.Keys)
	out.Count = len(out.Keys)
	out.Message = fmt.Sprintf("demo: summarized %d inputs (%s); nothing was sent anywhere", out.Count, strings.Join(out.Keys, ", "))
	return nil, out, nil
}

func size(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	case string:
		return len(x)
	}
	return 1
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string, []any, map[string]any:
		return size(x) > 0
	}
	return true
}

type flaky struct {
	mu    sync.Mutex
	calls map[string]int
}

func (f *flaky) call(_ context.Context, _ *mcp.CallToolRequest, in FlakyInput) (*mcp.CallToolResult, FlakyOutput, error) {
	failTimes := 1
	if in.FailTimes != nil {
		failTimes = *in.FailTimes
	}
	if failTimes < 0 || failTimes > MaxFlakyFailures {
		return nil, FlakyOutput{}, fmt.Errorf("fail_times must be in 0..%d", MaxFlakyFailures)
	}
	f.mu.Lock()
	f.calls[in.Key]++
	attempt := f.calls[in.Key]
	f.mu.Unlock()
	if attempt <= failTimes {
		return nil, FlakyOutput{}, fmt.Errorf("demo: flaky fails on purpose (attempt %d of %d planned failures)", attempt, failTimes)
	}
	return nil, FlakyOutput{OK: true, Attempt: attempt, Demo: true, Message: fmt.Sprintf("demo: succeeded on attempt %d", attempt)}, nil
}
