package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// liveProbeTimeout bounds the check that the address in .rbook/controlplane.url still
// answers (a loopback connect: refused at once when nothing listens).
const liveProbeTimeout = time.Second

// listening reports whether something accepts connections at the control plane URL's
// host:port. A kill -9'd `rbook run` leaves .rbook/controlplane.url behind; this tells
// such a stale file from a live embedded control plane without touching its locks.
func listening(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	c, err := net.DialTimeout("tcp", host, liveProbeTimeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// anyListening is listening for a control-plane value that may list several URLs (D10-6):
// true when at least one of them accepts connections.
func anyListening(list string) bool {
	urls, err := cpclient.SplitURLs(list)
	if err != nil {
		return listening(list)
	}
	for _, u := range urls {
		if listening(u) {
			return true
		}
	}
	return false
}

// openLocalHistory serves the embedded control plane's database, opened read-only
// (store.OpenReadOnly), through the real RPC handlers in this process (issue 6, item 3.3):
// `rbook runs`, `get` and `approvals` then print exactly what they print against a running
// control plane. Nothing listens on a port, nothing is written, and a control plane that
// starts meanwhile is not blocked. The returned func closes it.
func openLocalHistory(ctx context.Context, dbPath string) (*cpclient.Client, func(), error) {
	st, err := store.OpenReadOnly(ctx, dbPath)
	if err != nil {
		return nil, nil, err
	}
	h, err := server.New(st, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	hc := &http.Client{Transport: handlerTransport{h}}
	const base = "http://local-database.invalid" // never dialled: handlerTransport answers
	c := &cpclient.Client{
		URL:       dbPath,
		Runs:      rbookv1connect.NewRunServiceClient(hc, base),
		Approvals: rbookv1connect.NewApprovalServiceClient(hc, base),
		Deadline:  10 * time.Second,
	}
	return c, func() { h.Close(); st.Close() }, nil
}

// handlerTransport is an http.RoundTripper that hands each request to an http.Handler in
// this process. It serves unary calls (the whole response is buffered), which is all that
// runs, get and approvals make.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}
