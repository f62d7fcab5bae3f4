package demorelease

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := NewServer().Connect(ctx, serverSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var structured map[string]any
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &structured); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, raw, err)
		}
	}
	return res, structured
}

func TestDemoReleaseIsHonestAboutBeingADemo(t *testing.T) {
	cs := connect(t)
	init := cs.InitializeResult()
	if init.ServerInfo.Name != ServerName || !strings.Contains(init.Instructions, "publishes nothing") {
		t.Errorf("server %q instructions %q", init.ServerInfo.Name, init.Instructions)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if !strings.HasPrefix(tool.Description, "Demo only:") {
			t.Errorf("tool %s description does not say it is a demo: %q", tool.Name, tool.Description)
		}
	}
	if got := strings.Join(names, ","); got != "flaky,release-publisher,summarize" {
		t.Errorf("tools %s", got)
	}
}

func TestDemoReleasePublisherPublishesNothing(t *testing.T) {
	cs := connect(t)
	for _, args := range []map[string]any{{"version": "2026.4.90"}, {}} {
		res, out := call(t, cs, ToolReleasePublisher, args)
		if res.IsError {
			t.Fatalf("isError for %v", args)
		}
		want, _ := args["version"].(string)
		if out["published"] != false || out["simulated"] != true || out["version"] != want || out["message"] != NothingPublished {
			t.Errorf("args %v: result %v", args, out)
		}
	}
}

func TestDemoSummarizeCounts(t *testing.T) {
	cs := connect(t)
	_, out := call(t, cs, ToolSummarize, map[string]any{"b": []any{1, 2, 3}, "a": "xy", "c": false, "d": map[string]any{"k": 1}})
	if out["count"] != float64(4) || out["truthy"] != float64(3) {
		t.Errorf("counts %v", out)
	}
	if keys, _ := json.Marshal(out["keys"]); string(keys) != `["a","b","c","d"]` {
		t.Errorf("keys %s", keys)
	}
	if sizes, _ := json.Marshal(out["sizes"]); string(sizes) != `{"a":2,"b":3,"c":1,"d":1}` {
		t.Errorf("sizes %s", sizes)
	}
}

func TestDemoFlakyFailsThenSucceeds(t *testing.T) {
	cs := connect(t)
	for attempt := 1; attempt <= 2; attempt++ {
		res, _ := call(t, cs, ToolFlaky, map[string]any{"key": "k", "fail_times": 1})
		if !res.IsError {
			if attempt == 1 {
				t.Fatal("first call succeeded; want a planned failure")
			}
			continue
		}
		if attempt == 2 {
			t.Fatal("second call failed")
		}
	}
	if res, out := call(t, cs, ToolFlaky, map[string]any{"key": "other", "fail_times": 0}); res.IsError || out["attempt"] != float64(1) {
		t.Errorf("fail_times 0: isError %v, %v", res.IsError, out)
	}
	if res, _ := call(t, cs, ToolFlaky, map[string]any{"fail_times": MaxFlakyFailures + 1}); !res.IsError {
		t.Error("fail_times over the cap accepted")
	}
}
