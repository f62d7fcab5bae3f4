//go:build unix

package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	rmcp "github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/steps"
)

// rawRequest is the part of a JSON-RPC request the flood server looks at.
type rawRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Name            string `json:"name"`
		Arguments       struct {
			Bytes int `json:"bytes"`
		} `json:"arguments"`
	} `json:"params"`
}

// floodAnswer writes the answer to req as one line, without the newline: initialize is
// answered properly; tool "sized" returns a text of arguments.bytes bytes; validate_query
// says the query is valid; execute_query (and any other tool) starts a text that never ends,
// written until the reader goes away. It returns the write error that ended it.
func floodAnswer(w io.Writer, req rawRequest) error {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":`, req.ID)
	switch {
	case req.Method == "initialize":
		_, err := fmt.Fprintf(w, `%s{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}}`, head, req.Params.ProtocolVersion)
		return err
	case req.Method != "tools/call":
		_, err := fmt.Fprintf(w, `%s{}}`, head)
		return err
	case req.Params.Name == "validate_query":
		_, err := fmt.Fprintf(w, `%s{"content":[{"type":"text","text":"{\"valid\":true}"}]}}`, head)
		return err
	case req.Params.Name == "sized":
		_, err := fmt.Fprintf(w, `%s{"content":[{"type":"text","text":"%s"}]}}`, head, strings.Repeat("a", req.Params.Arguments.Bytes))
		return err
	}
	if _, err := fmt.Fprintf(w, `%s{"content":[{"type":"text","text":"`, head); err != nil {
		return err
	}
	chunk := []byte(strings.Repeat("a", 64<<10))
	for {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// runFloodServer is the stdio flood server (serverModeEnv "flood").
func runFloodServer() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	w := bufio.NewWriter(os.Stdout)
	for sc.Scan() {
		var req rawRequest
		if json.Unmarshal(sc.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue // a notification
		}
		if floodAnswer(w, req) != nil {
			os.Exit(0)
		}
		w.WriteString("\n")
		w.Flush()
	}
	os.Exit(0)
}

// floodHTTPServer serves the flood answers over streamable HTTP, as JSON bodies or, with
// sse, as one event per answer.
func floodHTTPServer(t *testing.T, sse bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req rawRequest
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "POST JSON-RPC only", http.StatusMethodNotAllowed)
			return
		}
		if len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			floodAnswer(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: ")
		if floodAnswer(w, req) == nil {
			io.WriteString(w, "\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A message from an MCP server is capped at MaxResponseBytes while it is
// read; a server that streams more gets its check step a clear FAIL (not an executor out of
// memory), over stdio and streamable HTTP (JSON and event-stream answers); a message under
// the cap is read whole.
func TestMCPResponseCapped(t *testing.T) {
	if rmcp.MaxResponseBytes != 8<<20 {
		t.Fatalf("MaxResponseBytes = %d, want 8 MiB", rmcp.MaxResponseBytes)
	}
	configs := map[string]func(t *testing.T) *rmcp.Config{
		"stdio":     func(t *testing.T) *rmcp.Config { return stdioConfig(t, "flood") },
		"http json": func(t *testing.T) *rmcp.Config { return httpConfig(t, floodHTTPServer(t, false).URL, `{}`) },
		"http sse":  func(t *testing.T) *rmcp.Config { return httpConfig(t, floodHTTPServer(t, true).URL, `{}`) },
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := rmcp.Dial(ctx, cfg(t), "")
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close after the cap: %v (rbook cut the server off; that is not its failure)", err)
				}
			}()

			// Under the cap (with room for the JSON around the text): read whole.
			const under = rmcp.MaxResponseBytes - 1024
			res, err := s.CallTool(ctx, "sized", map[string]any{"bytes": under})
			if err != nil || len(res.Text) != under {
				t.Fatalf("a %d-byte answer: %v (%d bytes read)", under, err, len(res.Text))
			}

			// A check step whose execute_query answer never ends: FAIL, saying why.
			out := steps.Check{Session: s}.Execute(ctx, checkStep("Resources | project name", 60), demoRun)
			want := `{"tool":"execute_query","error":"mcp server \"demo\" sent a message larger than 8388608 bytes (MaxResponseBytes, 8 MiB); rbook stopped reading it and closed the session"}`
			if out.Status != engine.StatusFail || out.Output != want {
				t.Fatalf("check step: %s %s\nwant FAIL %s", out.Status, out.Output, want)
			}
			if ctx.Err() != nil {
				t.Fatal("the check ran into the test's deadline instead of the cap")
			}
			// The session stays refused, with the same error.
			_, err = s.CallTool(ctx, "sized", map[string]any{"bytes": 1})
			var tl *rmcp.ResponseTooLargeError
			if !errors.As(err, &tl) || tl.Limit != rmcp.MaxResponseBytes || tl.Server != "demo" {
				t.Fatalf("a call after the cap: %v", err)
			}
		})
	}
}
