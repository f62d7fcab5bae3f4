package server_test

// Health and errors while the control plane's
// PostgreSQL database is unreachable. The database is cut by a TCP proxy between the
// server and PostgreSQL (its port refuses connections and every open connection is cut,
// as when PostgreSQL stops), then restored on the same port.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// pgProxy forwards a loopback port to a PostgreSQL server until cut; restore listens on the
// same port again.
type pgProxy struct {
	t       *testing.T
	addr    string
	backend string
	mu      sync.Mutex
	ln      net.Listener
	conns   []net.Conn
}

func newPGProxy(t *testing.T, backend string) *pgProxy {
	p := &pgProxy{t: t, backend: backend}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *pgProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.backend)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln {
				p.mu.Unlock()
				in.Close()
				out.Close()
				return
			}
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *pgProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *pgProxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestDatabaseDownIsNotServingAndUnavailable: with its PostgreSQL database
// cut, the control plane's health says NOT_SERVING, ListRuns fails with Unavailable /
// E_RETRY "the control plane's database is unreachable; retry later" (not E_INTERNAL), and
// the log has one "database connection lost" line however many calls failed; once the
// database is back, health says SERVING, calls work, and one "database connection
// restored" line is logged.
func TestDatabaseDownIsNotServingAndUnavailable(t *testing.T) {
	dsn := newPGDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	logs := &syncBuffer{}
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: u.String(),
		Options: server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ctx := context.Background()
	health := grpchealth.NewClient(h2cClient(), r.URL(), connect.WithGRPC())
	check := func() grpchealth.Status {
		t.Helper()
		resp, err := health.Check(ctx, &grpchealth.CheckRequest{})
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return resp.Status
	}
	c := newClients(r.URL())
	if st := check(); st != grpchealth.StatusServing {
		t.Fatalf("health with the database up = %v, want SERVING", st)
	}
	if _, err := c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{}); err != nil {
		t.Fatalf("ListRuns with the database up: %v", err)
	}

	proxy.cut()
	for i := range 3 {
		_, err := c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{})
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable || ce.Message() != "E_RETRY: the control plane's database is unreachable; retry later" {
			t.Fatalf("ListRuns %d with the database cut = %v; want unavailable: the control plane's database is unreachable; retry later", i, err)
		}
		if code := rbookCode(err); code != "E_RETRY" {
			t.Fatalf("ListRuns with the database cut: rbook code %q, want E_RETRY", code)
		}
	}
	if st := check(); st != grpchealth.StatusNotServing {
		t.Fatalf("health with the database cut = %v, want NOT_SERVING", st)
	}
	if n := strings.Count(logs.String(), "database connection lost"); n != 1 {
		t.Fatalf("%d \"database connection lost\" lines after 3 failed calls and a health check, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "storage failure") {
		t.Fatalf("a lost database was logged as a storage failure per call:\n%s", logs.String())
	}

	proxy.restore()
	deadline := time.Now().Add(30 * time.Second)
	for {
		changed := logs.Changed()
		if strings.Contains(logs.String(), "database connection restored") {
			break
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no \"database connection restored\" line within 30s of the database coming back:\n%s", logs.String())
		}
	}
	if st := check(); st != grpchealth.StatusServing {
		t.Fatalf("health after the database came back = %v, want SERVING", st)
	}
	if _, err := c.runs.ListRuns(ctx, &rbookv1.ListRunsRequest{}); err != nil {
		t.Fatalf("ListRuns after the database came back: %v", err)
	}
	if n := strings.Count(logs.String(), "database connection restored"); n != 1 {
		t.Fatalf("%d \"database connection restored\" lines, want 1:\n%s", n, logs.String())
	}
}
