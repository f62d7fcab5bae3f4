//go:build unix

package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rmcp "github.com/rbookhq/rbook-action/action/mcp"
)

// pidFifoEnv names the fifo a "mute" server writes its pid to once it runs.
const pidFifoEnv = "RBOOK_MCP_TEST_PID_FIFO"

// runMuteServer is a stdio server that never answers: it ignores SIGTERM and stdin, starts a
// child that ignores SIGTERM too, reports its pid on the fifo and waits to be killed.
func runMuteServer() {
	signal.Ignore(syscall.SIGTERM)
	child := exec.Command("sh", "-c", "trap '' TERM; sleep 60")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := os.WriteFile(os.Getenv(pidFifoEnv), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	select {}
}

// muteConfig configures a mute server and returns the fifo it reports its pid on.
func muteConfig(t *testing.T) (*rmcp.Config, string) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := rmcp.ParseConfig("mute.mcp.json", []byte(fmt.Sprintf(
		`{"mcpServers": {"mute": {"command": "rbook", "env": {%q: "mute", %q: %q}}}}`, serverModeEnv, pidFifoEnv, fifo)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, fifo
}

// TestConnectEndKillsMuteServer: a server that never answers initialize is given up when the
// connect context ends, or when the session's lifetime ends first, and its whole process
// group is killed, although it ignores SIGTERM and stdin closing.
func TestConnectEndKillsMuteServer(t *testing.T) {
	for _, end := range []string{"connect", "lifetime"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			cfg, fifo := muteConfig(t)
			connectCtx, endConnect := context.WithCancel(context.Background())
			defer endConnect()
			lifetime, endLifetime := context.WithCancel(context.Background())
			defer endLifetime()
			dialed := make(chan error, 1)
			go func() {
				s, err := rmcp.DialWithLifetime(connectCtx, lifetime, cfg, "")
				if err == nil {
					s.Close()
				}
				dialed <- err
			}()
			pidc := make(chan string, 1)
			go func() {
				data, _ := os.ReadFile(fifo) // blocks until the server writes its pid
				pidc <- string(data)
			}()
			var pidText string
			select {
			case pidText = <-pidc:
			case err := <-dialed:
				t.Fatalf("Dial returned %v before the server ran", err)
			}
			pgid, err := strconv.Atoi(pidText)
			if err != nil {
				t.Fatalf("server pid %q: %v", pidText, err)
			}
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			if n := len(groupMembers(t, pgid)); n < 2 {
				t.Fatalf("process group %d has %d members, want the server and its child", pgid, n)
			}

			if end == "connect" {
				endConnect()
			} else {
				endLifetime()
			}
			err = <-dialed
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), `mcp server "mute": connect: `) {
				t.Errorf("Dial = %v, want a connect error naming the server and wrapping context.Canceled", err)
			}
			if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSessionOutlivesConnectContext: the connect context bounds only the handshake; the
// session keeps working after it ends, until its lifetime ends.
func TestSessionOutlivesConnectContext(t *testing.T) {
	t.Parallel()
	connectCtx, endConnect := context.WithCancel(context.Background())
	lifetime, endLifetime := context.WithCancel(context.Background())
	defer endLifetime()
	s, err := rmcp.DialWithLifetime(connectCtx, lifetime, stdioConfig(t, "demo"), "")
	endConnect()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pgid := rmcp.ServerPID(s)
	res, err := s.CallTool(context.Background(), "validate_query", map[string]any{"query": "Resources"})
	if err != nil || res.IsError {
		t.Fatalf("CallTool after the connect context ended = %+v, %v", res, err)
	}
	endLifetime()
	if err := procgroup.AwaitGone(pgid, 10*time.Second); err != nil {
		t.Error(err)
	}
	if _, err := s.CallTool(context.Background(), "validate_query", map[string]any{"query": "Resources"}); err == nil {
		t.Error("CallTool succeeded after the session's lifetime ended")
	}
}

func TestDialWithEndedContexts(t *testing.T) {
	t.Parallel()
	ended, end := context.WithCancel(context.Background())
	end()
	for name, ctxs := range map[string][2]context.Context{
		"connect":  {ended, context.Background()},
		"lifetime": {context.Background(), ended},
	} {
		s, err := rmcp.DialWithLifetime(ctxs[0], ctxs[1], stdioConfig(t, "demo"), "")
		if err == nil {
			s.Close()
		}
		if want := `mcp server "demo": context canceled`; err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
			t.Errorf("%s context ended: Dial = %v, want %q", name, err, want)
		}
	}
}
