package demoinventory

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

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestServerIsHonestAboutBeingADemo(t *testing.T) {
	cs := connect(t)
	init := cs.InitializeResult()
	if init.ServerInfo.Name != ServerName {
		t.Errorf("server name %q, want %q", init.ServerInfo.Name, ServerName)
	}
	for _, phrase := range []string{"fictional", "never contacts Azure or any other cloud"} {
		if !strings.Contains(init.Instructions, phrase) {
			t.Errorf("instructions lack %q: %s", phrase, init.Instructions)
		}
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range tools.Tools {
		got = append(got, tool.Name)
		if !strings.Contains(tool.Description, "fictional") || !strings.Contains(tool.Description, "Never touches a real cloud") {
			t.Errorf("tool %s description is not honest about the demo: %s", tool.Name, tool.Description)
		}
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s is not marked read-only", tool.Name)
		}
	}
	if strings.Join(got, ",") != "execute_query,validate_query" {
		t.Errorf("tools %v, want execute_query and validate_query", got)
	}
}

func TestExecuteQuery(t *testing.T) {
	cs := connect(t)
	res := call(t, cs, ToolExecuteQuery, map[string]any{
		"query":         "Resources | where isempty(tags.owner) | project name, subscriptionId",
		"subscriptions": []string{SubscriptionProd, SubscriptionDev},
	})
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	want := `{"count":2,"data":[{"name":"app-legacy-api","subscriptionId":"sub-demo-prod"},{"name":"stscratchdev","subscriptionId":"sub-demo-dev"}]}`
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if string(structured) != want {
		t.Errorf("structured content\n got %s\nwant %s", structured, want)
	}
	var fromText, fromStructured any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("text content is not JSON: %v", err)
	}
	_ = json.Unmarshal(structured, &fromStructured)
	if b1, b2 := mustJSON(t, fromText), mustJSON(t, fromStructured); b1 != b2 {
		t.Errorf("text content %s differs from structured content %s", b1, b2)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExecuteQueryScopesBySubscriptions(t *testing.T) {
	cs := connect(t)
	tests := []struct {
		subs []string
		want string
	}{
		{[]string{SubscriptionDev}, `{"count":1,"data":[{"name":"stscratchdev"}]}`},
		{[]string{"SUB-DEMO-PROD"}, `{"count":1,"data":[{"name":"app-legacy-api"}]}`},
		{nil, `{"count":2,"data":[{"name":"app-legacy-api"},{"name":"stscratchdev"}]}`},
	}
	for _, tt := range tests {
		args := map[string]any{"query": "Resources | where isempty(tags.owner) | project name"}
		if tt.subs != nil {
			args["subscriptions"] = tt.subs
		}
		res := call(t, cs, ToolExecuteQuery, args)
		if got := mustJSON(t, res.StructuredContent); res.IsError || got != tt.want {
			t.Errorf("subscriptions %v: got %s (error %v), want %s", tt.subs, got, res.IsError, tt.want)
		}
	}
}

func TestExecuteQueryEmptyResultIsAnEmptyArray(t *testing.T) {
	cs := connect(t)
	res := call(t, cs, ToolExecuteQuery, map[string]any{"query": "Resources | where name == 'nothing'", "subscriptions": []string{}})
	if got := mustJSON(t, res.StructuredContent); got != `{"count":0,"data":[]}` {
		t.Errorf("got %s", got)
	}
}

func TestValidateQuery(t *testing.T) {
	cs := connect(t)
	res := call(t, cs, ToolValidateQuery, map[string]any{"query": "Resources | where tags.env == 'prod' | project name"})
	if res.IsError || mustJSON(t, res.StructuredContent) != `{"valid":true}` {
		t.Errorf("valid query: error %v, %s", res.IsError, text(res))
	}
	tests := []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolValidateQuery, map[string]any{"query": "Resources | summarize count()"},
			`query not supported by the demo inventory: column 13: unsupported operator "summarize" (the demo supports where and project)`},
		{ToolExecuteQuery, map[string]any{"query": "Resources | where name has 'x'"},
			`query not supported by the demo inventory: column 24: unsupported comparison "has" (the demo supports ==, !=, =~, !~, in, in~)`},
		{ToolExecuteQuery, map[string]any{"query": "Resources", "subscriptions": []string{"0b1f6471-1bf0-4dda-aec3-111122223333"}},
			`subscription "0b1f6471-1bf0-4dda-aec3-111122223333" is not in the demo inventory (it has sub-demo-prod, sub-demo-dev)`},
	}
	for _, tt := range tests {
		res := call(t, cs, tt.tool, tt.args)
		if !res.IsError || text(res) != tt.want {
			t.Errorf("%s %v: error %v, text %q; want a tool error %q", tt.tool, tt.args, res.IsError, text(res), tt.want)
		}
	}
}
