//go:build unix

package mcp_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	rmcp "github.com/rbookhq/rbook-action/action/mcp"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
)

// TestPoolOneSessionPerServer: parallel nodes asking for the same server share one
// session (one connect); ListTools names the server's tools; Close ends the server's whole
// process group and later asks get ErrPoolClosed.
func TestPoolOneSessionPerServer(t *testing.T) {
	pool := rmcp.NewPool(stdioConfig(t, "demo-with-child"))
	t.Cleanup(func() { _ = pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]*rmcp.Session, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = pool.Session(ctx, "demo") })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("session %d: %p %v, want the one session %p", i, got[i], errs[i], got[0])
		}
	}
	tools, err := got[0].ListTools(ctx)
	if err != nil || strings.Join(tools, ",") != "execute_query,validate_query" {
		t.Errorf("ListTools = %q, %v", tools, err)
	}
	if _, err := pool.Session(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `has no server "nope"`) {
		t.Errorf("unknown server: %v", err)
	}
	pgid := rmcp.ServerPID(got[0])
	if err := pool.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
	if _, err := pool.Session(ctx, "demo"); !errors.Is(err, rmcp.ErrPoolClosed) {
		t.Errorf("after Close: %v, want ErrPoolClosed", err)
	}
	if err := pool.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
