package e2e

// A fault-injecting reverse proxy for the end-to-end tests of the executor's control-plane calls:
// it stands between an executor and `rbook serve`, speaks HTTP/1.1 and h2c like the server,
// and per call can delay, hang, reset the connection, answer 502/503/504 itself, forward the
// call and lose the answer, or cut an answer short in the middle of a Connect envelope.

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// fault is what the proxy does with one call.
type fault int

const (
	pass       fault = iota // forward it
	status502               // answer 502 Bad Gateway without forwarding
	status503               // answer 503 Service Unavailable without forwarding
	status504               // answer 504 Gateway Timeout without forwarding
	dropAnswer              // forward it, then answer 502: the server acted, its answer is lost
	truncate                // forward it, pass 3 bytes of the answer (inside the 5-byte envelope prefix), reset the stream
	reset                   // reset the TCP connection the call came on (and every stream on it)
	hang                    // never answer: hold the call until the client gives up
	delay                   // wait proxyDelay, then forward
)

// proxyDelay is how long a delay fault holds a call before it forwards it.
const proxyDelay = 300 * time.Millisecond

// call is one RPC the proxy saw.
type call struct {
	// Method is the RPC's name ("RecordTransitions"); N counts the calls of that method, from 1.
	Method string
	N      int
	// Kind is a RecordTransition's transition kind, or the kind of a RecordTransitions batch's
	// last transition (a run_finished is always last), with the Connect protocol and the proto
	// codec.
	Kind  rbookv1.TransitionKind
	Fault fault
}

type faultProxy struct {
	t     *testing.T
	url   string
	rp    *httputil.ReverseProxy
	mu    sync.Mutex
	rule  func(call) fault
	calls []call
	count map[string]int
	// changed is closed and replaced whenever a call is logged.
	changed chan struct{}
}

type connKey struct{}

// newFaultProxy starts a proxy to the control plane at backend (http://host:port) on a free
// loopback port. Every call passes until setRule says otherwise.
func newFaultProxy(t *testing.T, backend string) *faultProxy {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Transport{Protocols: new(http.Protocols)}
	up.Protocols.SetUnencryptedHTTP2(true)
	p := &faultProxy{t: t, count: map[string]int{}, changed: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     up,
		FlushInterval: -1, // streams (WatchApproval) pass message by message
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler: p, Protocols: protocols, ErrorLog: log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); up.CloseIdleConnections() })
	p.url = "http://" + ln.Addr().String()
	return p
}

// setRule makes rule decide every later call (nil: pass them all).
func (p *faultProxy) setRule(rule func(call) fault) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

// seen returns the calls logged so far that match.
func (p *faultProxy) seen(match func(call) bool) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// mark is the number of calls logged so far, for waitCall's from.
func (p *faultProxy) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// waitCall blocks until a call logged after the first from matches (or 60 s pass) and
// returns it. match runs under the proxy's lock: it must not call the proxy.
func (p *faultProxy) waitCall(what string, from int, match func(call) bool) call {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		p.mu.Lock()
		changed := p.changed
		for _, c := range p.calls[from:] {
			if match(c) {
				p.mu.Unlock()
				return c
			}
		}
		p.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("the proxy saw no %s within 60s; it saw %v", what, p.seen(func(call) bool { return true }))
		}
	}
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	c := call{Method: path.Base(r.URL.Path)}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/proto") {
		switch c.Method {
		case "RecordTransition":
			var req rbookv1.RecordTransitionRequest
			if proto.Unmarshal(body, &req) == nil {
				c.Kind = req.GetTransition().GetKind()
			}
		case "RecordTransitions":
			var req rbookv1.RecordTransitionsRequest
			if proto.Unmarshal(body, &req) == nil && len(req.GetTransitions()) > 0 {
				c.Kind = req.GetTransitions()[len(req.GetTransitions())-1].GetKind()
			}
		}
	}
	p.mu.Lock()
	p.count[c.Method]++
	c.N = p.count[c.Method]
	if p.rule != nil {
		c.Fault = p.rule(c)
	}
	p.calls = append(p.calls, c)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()

	switch c.Fault {
	case status502:
		http.Error(w, "bad gateway (injected)", http.StatusBadGateway)
	case status503:
		http.Error(w, "service unavailable (injected)", http.StatusServiceUnavailable)
	case status504:
		http.Error(w, "gateway timeout (injected)", http.StatusGatewayTimeout)
	case dropAnswer:
		p.rp.ServeHTTP(&discard{header: http.Header{}}, r)
		http.Error(w, "bad gateway (injected after forwarding)", http.StatusBadGateway)
	case truncate:
		p.rp.ServeHTTP(&cutWriter{ResponseWriter: w, left: 3}, r)
	case reset:
		if conn, ok := r.Context().Value(connKey{}).(*net.TCPConn); ok {
			conn.SetLinger(0) // close with RST
			conn.Close()
		}
		panic(http.ErrAbortHandler)
	case hang:
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	case delay:
		select {
		case <-time.After(proxyDelay):
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
		p.rp.ServeHTTP(w, r)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// discard is a ResponseWriter that drops the answer.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// cutWriter passes the first left bytes of a body, then fails every write: the reverse proxy
// then aborts the stream (http.ErrAbortHandler), so the client reads an incomplete envelope.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.ErrClosedPipe
	}
	n := min(len(b), c.left)
	c.left -= n
	c.ResponseWriter.Write(b[:n])
	http.NewResponseController(c.ResponseWriter).Flush()
	if n < len(b) {
		return n, io.ErrClosedPipe
	}
	return n, nil
}

func (c *cutWriter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }
