package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/console"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// TestServerServesTheConsoleBesideItsServices mounts the console at "/" of server.New's
// handler, which rbook serve and the embedded control plane of rbook run both use: the pages
// come back with the CSP, and the Connect services still answer at their own paths.
func TestServerServesTheConsoleBesideItsServices(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h, err := server.New(st, server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	for _, p := range []string{"/", "/approvals/a-1", "/runs", "/runs/r-1", "/signin"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<main id="main"`) {
			t.Errorf("GET %s: status %d, want the console's page", p, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("GET %s: Content-Security-Policy = %q", p, got)
		}
	}

	c := rbookv1connect.NewRunServiceClient(http.DefaultClient, srv.URL)
	if _, err := c.ListRuns(ctx, &rbookv1.ListRunsRequest{}); err != nil {
		t.Errorf("ListRuns beside the console: %v", err)
	}
}
