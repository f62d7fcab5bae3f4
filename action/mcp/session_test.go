//go:build unix

package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rbookhq/rbook-action/action/engine"
	rmcp "github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/mcp/demoinventory"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
)

// serverModeEnv makes the re-executed test binary act as a stdio MCP server.
const serverModeEnv = "RBOOK_MCP_TEST_SERVER"

// environFileEnv names the file the "environ-file" server writes its environment to.
const environFileEnv = "RBOOK_MCP_TEST_ENVIRON"

func TestMain(m *testing.M) {
	switch os.Getenv(serverModeEnv) {
	case "":
		os.Exit(m.Run())
	case "demo":
	case "demo-with-child":
		// A child that ignores SIGTERM and would outlive the server by a minute, unless the
		// process group is killed. Its output goes to /dev/null, not the MCP pipe.
		child := exec.Command("sh", "-c", "trap '' TERM; sleep 60")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	case "environ-file":
		// Writes its environment, one entry a line, to the file $RBOOK_MCP_TEST_ENVIRON
		// names, then serves the demo inventory.
		if err := os.WriteFile(os.Getenv(environFileEnv), []byte(strings.Join(os.Environ(), "\n")), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	case "mute":
		runMuteServer()
	case "flood":
		runFloodServer()
	default:
		fmt.Fprintln(os.Stderr, "unknown", serverModeEnv)
		os.Exit(2)
	}
	if err := demoinventory.RunStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "demo server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// stdioConfig starts this test binary (command "rbook" = os.Executable) as a demo server.
func stdioConfig(t *testing.T, mode string) *rmcp.Config {
	t.Helper()
	cfg, err := rmcp.ParseConfig("test.mcp.json", []byte(fmt.Sprintf(
		`{"mcpServers": {"demo": {"command": "rbook", "env": {%q: %q}}}}`, serverModeEnv, mode)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func httpConfig(t *testing.T, url string, headers string) *rmcp.Config {
	t.Helper()
	cfg, err := rmcp.ParseConfig("test.mcp.json", []byte(fmt.Sprintf(
		`{"mcpServers": {"demo": {"url": %q, "headers": %s}}}`, url, headers)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// requireBearer serves next only to requests carrying the expected Authorization header.
func requireBearer(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func demoHTTPServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return demoinventory.NewServer() }, nil)
	srv := httptest.NewServer(requireBearer(token, handler))
	t.Cleanup(srv.Close)
	return srv
}

func checkStep(query string, timeoutSeconds int) runbook.Step {
	return runbook.Step{Name: "check", Type: runbook.TypeCheck, Input: &query, OnFail: runbook.OnFailContinue, TimeoutSeconds: timeoutSeconds}
}

var demoRun = engine.RunContext{RunID: "RBOOK-test", StepNumber: 1, StepCount: 1, Plan: &runbook.Plan{
	Name: "demo", Subscriptions: []string{demoinventory.SubscriptionProd, demoinventory.SubscriptionDev}}}

// exerciseDemo runs checks through a dialled session against the demo inventory.
func exerciseDemo(t *testing.T, s *rmcp.Session) {
	t.Helper()
	tests := []struct {
		name, query string
		check       steps.Check
		wantStatus  engine.StepStatus
		wantOutput  string
	}{
		{"violations found", "Resources | where isempty(tags.owner) | project name", steps.Check{Session: s},
			engine.StatusFail, `{"count":2,"data":[{"name":"app-legacy-api"},{"name":"stscratchdev"}]}`},
		{"clean", "Resources | where type =~ 'microsoft.keyvault/vaults' and properties.enableSoftDelete == false", steps.Check{Session: s},
			engine.StatusPass, `{"count":0,"data":[]}`},
		{"scoped to one subscription", "Resources | where isempty(tags.owner) | project name",
			steps.Check{Session: s, Subscriptions: []string{demoinventory.SubscriptionDev}},
			engine.StatusFail, `{"count":1,"data":[{"name":"stscratchdev"}]}`},
		{"unsupported query fails validation", "Resources | where name has 'x'", steps.Check{Session: s},
			engine.StatusFail, `{"tool":"validate_query","error":"query not supported by the demo inventory: column 24: unsupported comparison \"has\" (the demo supports ==, !=, =~, !~, in, in~)"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.check.Execute(context.Background(), checkStep(tt.query, 10), demoRun)
			if out.Status != tt.wantStatus || out.Output != tt.wantOutput {
				t.Errorf("got %s %s\nwant %s %s", out.Status, out.Output, tt.wantStatus, tt.wantOutput)
			}
		})
	}
	t.Run("unknown tool is an MCP error", func(t *testing.T) {
		out := steps.Check{Session: s, ExecuteTool: "no_such_tool"}.Execute(context.Background(), checkStep("Resources", 10), demoRun)
		if out.Status != engine.StatusFail || !strings.Contains(out.Output, `"tool":"no_such_tool"`) || !strings.Contains(out.Output, "no_such_tool") {
			t.Errorf("got %s %s, want FAIL naming no_such_tool", out.Status, out.Output)
		}
	})
}

func TestStdioDemoEndToEnd(t *testing.T) {
	t.Parallel()
	s, err := rmcp.Dial(context.Background(), stdioConfig(t, "demo"), "")
	if err != nil {
		t.Fatal(err)
	}
	pgid := rmcp.ServerPID(s)
	self, _ := os.Executable()
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pgid)); err == nil && filepath.Clean(exe) != filepath.Clean(self) {
		t.Errorf("command rbook ran %s, want this executable %s", exe, self)
	}
	if s.Server() != "demo" {
		t.Errorf("Server() = %q", s.Server())
	}
	exerciseDemo(t, s)
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v, want nil for a server that exits when stdin closes", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
}

func TestStreamableHTTPDemoEndToEnd(t *testing.T) {
	t.Parallel()
	srv := demoHTTPServer(t, "s3cret")
	s, err := rmcp.Dial(context.Background(), httpConfig(t, srv.URL, `{"Authorization": "Bearer s3cret"}`), "demo")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exerciseDemo(t, s)
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func TestHTTPErrorsKeepSecretsOut(t *testing.T) {
	t.Parallel()
	srv := demoHTTPServer(t, "right-token")
	cfg := httpConfig(t, srv.URL+"/?api-key=hunter2", `{"Authorization": "Bearer hunter3"}`)
	s, err := rmcp.Dial(context.Background(), cfg, "")
	if err == nil {
		s.Close()
		t.Fatal("Dial with a wrong token succeeded")
	}
	if !strings.Contains(err.Error(), `mcp server "demo"`) {
		t.Errorf("error %q does not name the server", err)
	}
	for _, secret := range []string{"hunter2", "hunter3"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q leaks %s", err, secret)
		}
	}
}

// TestSlowCheckTimesOut: a check whose MCP call would answer only after 60 s ends
// TIMED_OUT at the step deadline, and the server's handler sees its context cancelled.
func TestSlowCheckTimesOut(t *testing.T) {
	t.Parallel()
	handlerStarted := make(chan struct{})
	handlerCancelled := make(chan error, 1)
	server := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "validate_query"}, func(context.Context, *sdk.CallToolRequest, demoinventory.QueryInput) (*sdk.CallToolResult, any, error) {
		return nil, map[string]any{"valid": true}, nil
	})
	sdk.AddTool(server, &sdk.Tool{Name: "execute_query"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ demoinventory.QueryInput) (*sdk.CallToolResult, any, error) {
		close(handlerStarted)
		select {
		case <-ctx.Done():
			handlerCancelled <- ctx.Err()
			return nil, nil, ctx.Err()
		case <-time.After(60 * time.Second):
			return nil, map[string]any{"count": 0, "data": []any{}}, nil
		}
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer srv.Close()
	s, err := rmcp.Dial(context.Background(), httpConfig(t, srv.URL, `{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// The case's 3 s deadline, shortened: the behaviour matters, not the number.
	const deadline = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	out := steps.Check{Session: s}.Execute(ctx, checkStep("Resources", 1), demoRun)
	elapsed := time.Since(start)

	want := `{"tool":"execute_query","error":"no answer within max_timeout_seconds (1 s); not retried: mcp server \"demo\": tool execute_query: context deadline exceeded"}`
	if out.Status != engine.StatusTimedOut || out.Output != want {
		t.Errorf("got %s %s\nwant TIMED_OUT %s", out.Status, out.Output, want)
	}
	if limit := deadline + 5*time.Second; elapsed > limit { // generous: "3 s plus a short grace"
		t.Errorf("Check returned after %v, want under %v", elapsed, limit)
	}
	select {
	case <-handlerStarted:
	default:
		t.Fatal("execute_query never reached the server: the deadline passed too early to test cancellation")
	}
	select {
	case err := <-handlerCancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler context was not cancelled")
	}
}

func TestCloseKillsServerProcessGroup(t *testing.T) {
	t.Parallel()
	s, err := rmcp.Dial(context.Background(), stdioConfig(t, "demo-with-child"), "")
	if err != nil {
		t.Fatal(err)
	}
	pgid := rmcp.ServerPID(s)
	if n := len(groupMembers(t, pgid)); n < 2 {
		t.Fatalf("process group %d has %d members, want the server and its child", pgid, n)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
}

func TestDialContextEndKillsServerProcessGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := rmcp.Dial(ctx, stdioConfig(t, "demo"), "")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pgid := rmcp.ServerPID(s)
	cancel()
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
	if _, err := s.CallTool(context.Background(), "validate_query", map[string]any{"query": "Resources"}); err == nil {
		t.Error("CallTool succeeded after the session's context ended")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after ctx end = %v, want nil (rbook stopped the server on purpose)", err)
	}
}

func TestDialErrors(t *testing.T) {
	t.Parallel()
	two, err := rmcp.ParseConfig("two.json", []byte(`{"mcpServers": {"b": {"command": "x"}, "a": {"url": "http://127.0.0.1:1/"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	missing, err := rmcp.ParseConfig("m.json", []byte(`{"mcpServers": {"gone": {"command": "/nonexistent/rbook-test-server"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    *rmcp.Config
		server string
		want   string
	}{
		{"several servers, none named", two, "", "mcp config two.json defines several servers (a, b); name the one to use"},
		{"unknown server", two, "c", `mcp config two.json has no server "c" (it defines a, b)`},
		{"no config", nil, "", "mcp: no MCP servers configured"},
		{"command not found", missing, "", `mcp server "gone": connect: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rmcp.Dial(context.Background(), tt.cfg, tt.server)
			if err == nil {
				s.Close()
				t.Fatal("Dial succeeded")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %q, want prefix %q", err, tt.want)
			}
		})
	}
}

// groupMembers lists the pids whose process group is pgid, from /proc.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, err := syscall.Getpgid(pid); err == nil && got == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestStdioServersDoNotInheritRbooksCredentials: a stdio server gets rbook's environment
// without rbook's own credentials (docs/decisions/mcp-config.md, "Environment"); other
// variables reach it, and so does a credential its config's env names on purpose.
func TestStdioServersDoNotInheritRbooksCredentials(t *testing.T) {
	for name, value := range map[string]string{
		"RBOOK_TOKEN": "tok-inherited", "RBOOK_SIGNING_KEY": "key-inherited",
		"Rbook_Github_Secret": "gh-inherited", "RBOOK_SERVER": "http://cp.example", "DEPLOY_TOKEN": "cloud-token",
	} {
		t.Setenv(name, value)
	}
	file := filepath.Join(t.TempDir(), "environ")
	cfg, err := rmcp.ParseConfig("test.mcp.json", []byte(fmt.Sprintf(
		`{"mcpServers": {"demo": {"command": "rbook", "env": {%q: "environ-file", %q: %q, "RBOOK_APPROVAL_SECRET": "given-on-purpose"}}}}`,
		serverModeEnv, environFileEnv, file)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := rmcp.Dial(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data, err := os.ReadFile(file) // written before the server answered the handshake
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, kv := range strings.Split(string(data), "\n") {
		got[kv] = true
	}
	for kv, want := range map[string]bool{
		"RBOOK_TOKEN=tok-inherited": false, "RBOOK_SIGNING_KEY=key-inherited": false, "Rbook_Github_Secret=gh-inherited": false,
		"RBOOK_SERVER=http://cp.example": true, "DEPLOY_TOKEN=cloud-token": true, "RBOOK_APPROVAL_SECRET=given-on-purpose": true,
	} {
		if got[kv] != want {
			t.Errorf("the server's environment has %q: %v, want %v", kv, got[kv], want)
		}
	}
}
