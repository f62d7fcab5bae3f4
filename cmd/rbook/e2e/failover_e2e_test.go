package e2e

// End-to-end tests of executor failover (the executor takes several control-plane URLs, or one
// behind a load balancer, and moves to the next on failure: docs/decisions/control-plane-urls.md)
// with the real binary. Two `rbook serve` on one SQLite file are refused by
// design (TestControlPlane_OneServerPerDatabase: "another control plane is serving"), so
// "replica A" here is a TCP front to the one `rbook serve` that the test kills the way a
// crashed replica stops: its port refuses connections and every open connection is cut.

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// tcpFront forwards every connection on a loopback port to backend (host:port), byte for
// byte (h2c passes through), until kill.
type tcpFront struct {
	ln    net.Listener
	url   string
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func newTCPFront(t *testing.T, backend string) *tcpFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFront{ln: ln, url: "http://" + ln.Addr().String()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			if !f.track(in, out) {
				continue
			}
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(f.kill)
	return f
}

// track remembers a forwarded pair for kill; after kill it closes them and reports false.
func (f *tcpFront) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	f.conns = append(f.conns, cs...)
	return true
}

// kill closes the port and cuts every forwarded connection.
func (f *tcpFront) kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead = true
	f.ln.Close()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// closedURL is an http:// URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// TestFailoverDeadURLThenKilledReplica: `rbook run demo` with
// --control-plane "DEAD, A, B" skips the dead URL (one progress line), runs through A to its
// gate, and when A is killed while the gate waits moves to B (one more line); `rbook approve`
// with "A,B" moves too and approves through B; the run completes, and the control plane
// holds every transition once, seq 1..N, with the state file's outbox empty.
func TestFailoverDeadURLThenKilledReplica(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	cp := startServe(t, dir)
	front := newTCPFront(t, cp.addr)
	dead := closedURL(t)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	list := dead + ", " + front.url + "," + cp.url()
	p := start(t, dir, "run", "demo", "--control-plane", list)
	p.waitFor(t, "control plane: "+dead+" unreachable; using "+front.url)
	tok := tokenFrom(t, p)
	// The hint repeats the list in one shell word, as the state file records it.
	norm := dead + "," + front.url + "," + cp.url()
	if !strings.Contains(p.output(), "--control-plane "+norm+"\n") {
		t.Fatalf("the approve hint does not name the list %s as one word:\n%s", norm, p.output())
	}

	front.kill()
	p.waitFor(t, "control plane: "+front.url+" unreachable; using "+cp.url())
	out, code := run(t, dir, "", "approve", tok, "--control-plane", front.url+","+cp.url())
	if code != 0 || !strings.Contains(out, "approved") || !strings.Contains(out, "control plane: "+front.url+" unreachable; using "+cp.url()) {
		t.Fatalf("rbook approve through the list: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	if n := strings.Count(p.output(), " unreachable; using "); n != 2 {
		t.Fatalf("%d progress lines about moving, want 2 (dead → A, A → B):\n%s", n, p.output())
	}
	s := readState(t, dir)
	resp := getRun(t, cp.url(), s.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if int64(len(resp.GetTransitions())) != s.Seq {
		t.Fatalf("the control plane holds %d transitions, the state file's seq is %d", len(resp.GetTransitions()), s.Seq)
	}
	if s.ControlPlane != norm {
		t.Fatalf("the state file records control_plane %q, want %q", s.ControlPlane, norm)
	}
	if len(s.EvidencePack) != 6 || len(s.Outbox) != 0 || s.RunStatus != "COMPLETED" {
		t.Fatalf("state: %d evidence entries, %d unsent, status %s; want 6, 0, COMPLETED", len(s.EvidencePack), len(s.Outbox), s.RunStatus)
	}
}

// TestFailoverBadListRefused: an empty item or one without http(s):// is
// refused before anything runs, naming the flag (or variable) and the item.
func TestFailoverBadListRefused(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	for _, tc := range []struct {
		args      []string
		env, want string
	}{
		{[]string{"run", "demo", "--control-plane", "http://127.0.0.1:7070,,http://127.0.0.1:7071"}, "",
			"--control-plane URL 2 is empty: separate control plane URLs with single commas"},
		{[]string{"run", "demo", "--control-plane", "http://127.0.0.1:7070, 127.0.0.1:7071"}, "",
			`--control-plane URL 2 "127.0.0.1:7071" is not a control plane URL: give its scheme (http:// or https://) and host, as in http://127.0.0.1:7071`},
		{[]string{"runs"}, "http://127.0.0.1:7070,ftp://x",
			`RBOOK_CONTROL_PLANE URL 2 "ftp://x" is not a control plane URL`},
	} {
		t.Setenv("RBOOK_CONTROL_PLANE", tc.env)
		out, code := run(t, dir, "", tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("rbook %s (RBOOK_CONTROL_PLANE=%q): exit %d, want 2 and %q\n%s", strings.Join(tc.args, " "), tc.env, code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", "demo.state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused list left a state file (stat: %v)", err)
	}
}
