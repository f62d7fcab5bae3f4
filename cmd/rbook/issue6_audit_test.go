package main

// Tests of issue 6, items 2.1, 2.2, 2.4 and 3.2: what the record, the report and the
// messages say is what happened.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
)

// toolCall is one tools/call request as the MCP server received it.
type toolCall struct {
	Tool, Query string
}

// recordingMCP serves the demo inventory over streamable HTTP and records the arguments of
// every tools/call exactly as they arrived on the wire. It returns the server's MCP config
// file and a func that returns the calls so far.
func recordingMCP(t *testing.T, dir string) (string, func() []toolCall) {
	t.Helper()
	var mu sync.Mutex
	var calls []toolCall
	inner := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return demoinventory.NewServer() }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Query string `json:"query"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			mu.Lock()
			calls = append(calls, toolCall{msg.Params.Name, msg.Params.Arguments.Query})
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := filepath.Join(dir, "recording.mcp.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"rec": {"url": "`+srv.URL+`"}}}`), 0o644)
	return cfg, func() []toolCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]toolCall(nil), calls...)
	}
}

// Issue 6, item 2.1: a check's input in the state file, the evidence pack JSON, the step
// status output and the control plane's record is, byte for byte, the query the MCP server
// received in validate_query and execute_query (the scope filter injected); the runbook's
// text is kept as source_input.
func TestIssue6_2_1_EvidenceHoldsTheQueryThatRan(t *testing.T) {
	dir := workdir(t)
	url := serveCP(t, dir)
	cfg, calls := recordingMCP(t, dir)
	out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", url, "--mcp-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	got := calls()
	if len(got) != 6 {
		t.Fatalf("the MCP server received %d tool calls, want 6 (validate and execute for 3 checks): %v", len(got), got)
	}
	raw := readFile(t, filepath.Join(dir, ".rbook", "demo.state.json"))
	var st struct {
		RunID        string `json:"run_id"`
		EvidencePack []struct {
			StepName    string  `json:"step_name"`
			Type        string  `json:"type"`
			Input       *string `json:"input"`
			SourceInput *string `json:"source_input"`
		} `json:"evidence_pack"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	source := map[string]string{
		"web-apps-enforce-https":    "Resources | where resourceGroup == 'rg-web-prod' and type =~ 'microsoft.web/sites' and properties.httpsOnly == false | project name, resourceGroup",
		"resources-have-owner-tag":  "Resources | where isempty(tags.owner) | project name, type, resourceGroup",
		"app-running-after-rollout": "Resources | where type =~ 'microsoft.web/sites' and name == 'app-checkout' and properties.state != 'Running' | project name, properties.state",
	}
	var checks []string
	for _, e := range st.EvidencePack {
		if e.Type != "check" {
			if e.SourceInput != nil {
				t.Errorf("%s (%s) has source_input %q", e.StepName, e.Type, *e.SourceInput)
			}
			continue
		}
		if e.Input == nil || e.SourceInput == nil {
			t.Fatalf("check %s: input %v, source_input %v", e.StepName, e.Input, e.SourceInput)
		}
		if *e.SourceInput != source[e.StepName] {
			t.Errorf("check %s: source_input %q, want the runbook's text %q", e.StepName, *e.SourceInput, source[e.StepName])
		}
		if !strings.Contains(*e.Input, "| where subscriptionId in~ ('sub-demo-prod') | project") {
			t.Errorf("check %s: input %q has no injected scope filter", e.StepName, *e.Input)
		}
		checks = append(checks, *e.Input)
	}
	if len(checks) != 3 {
		t.Fatalf("%d check entries", len(checks))
	}
	for i, q := range checks {
		v, x := got[2*i], got[2*i+1]
		if v.Tool != "validate_query" || x.Tool != "execute_query" || v.Query != q || x.Query != q {
			t.Errorf("check %d: the server received %q / %q, the evidence says %q", i, v.Query, x.Query, q)
		}
		// The piped step status shows the same input as inline code.
		if !strings.Contains(out, "- Input: `"+q+"`") {
			t.Errorf("the step status output does not show input %q", q)
		}
	}
	var pack []struct {
		Type  string  `json:"type"`
		Input *string `json:"input"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".rbook", st.RunID+".evidence.json"))), &pack); err != nil {
		t.Fatal(err)
	}
	var inPack []string
	for _, e := range pack {
		if e.Type == "check" {
			inPack = append(inPack, *e.Input)
		}
	}
	if strings.Join(inPack, "\n") != strings.Join(checks, "\n") {
		t.Errorf("evidence pack inputs %q, want %q", inPack, checks)
	}
	var onCP []string
	for _, tr := range getRun(t, url, st.RunID).GetTransitions() {
		if e := tr.GetEvidence(); e != nil && e.GetType() == "check" {
			onCP = append(onCP, e.GetInput())
		}
	}
	if strings.Join(onCP, "\n") != strings.Join(checks, "\n") {
		t.Errorf("control plane inputs %q, want %q", onCP, checks)
	}
}
