package runner

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/github/ghtest"
	"github.com/rbookhq/rbook-action/action/mcp"
)

// lockedBuffer is a bytes.Buffer safe to read while the log's copy goroutine writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLongMCPStderrLineDoesNotWedgeTheServer: an MCP server that writes a
// stderr line longer than any line buffer (3 MiB, say a JSON dump) is still read to the end:
// its writes complete (a copy that stopped reading would leave the server blocked on a full
// pipe until its step timed out) and the lines after it reach the log, inside stop-commands.
func TestLongMCPStderrLineDoesNotWedgeTheServer(t *testing.T) {
	saved := mcp.ServerStderr
	defer func() { mcp.ServerStderr = saved }()
	var buf lockedBuffer
	c := newOutput(github.NewLog(&buf))
	stop := c.copyServerStderr()
	w := mcp.ServerStderr
	wrote := make(chan error, 1)
	go func() {
		_, err := w.WriteString(strings.Repeat("A", 3<<20) + "\n::error::pwned\nafter the long line\n")
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's stderr write never completed: the copy stopped reading")
	}
	stop()
	c.log.Close()
	log := buf.String()
	if !strings.Contains(log, "\nafter the long line\n") || strings.Count(log, "A") < 3<<20 {
		t.Fatalf("the log lost stderr: %d bytes, tail %q", len(log), log[max(0, len(log)-200):])
	}
	if acted, _ := ghtest.ActedCommands(log); len(acted) != 0 {
		t.Errorf("stderr acted as workflow commands: %q", acted)
	}
}
