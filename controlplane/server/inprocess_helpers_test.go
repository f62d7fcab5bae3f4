package server_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// serveWith serves a server.Server with opts (Secret and Logger filled in when unset) on a
// fresh SQLite database in this process, over h2c, and returns its URL; closed when t ends.
func serveWith(t testing.TB, opts server.Options) string {
	t.Helper()
	return serveHandler(t, newInProcess(t, opts))
}

// newInProcess is a server.Server with opts (Secret and Logger filled in when unset) on a
// fresh SQLite database, not listening; the store is closed when t ends.
func newInProcess(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Secret == nil {
		opts.Secret = []byte(testSecret)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h, err := server.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// serveHandler serves h on a loopback port over HTTP/1.1 and h2c and returns its URL; h and
// the listener are closed when t ends (before the cleanups registered earlier, such as the
// store's close).
func serveHandler(t testing.TB, h *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		h2cTransport.CloseIdleConnections()
		h.Close()
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String()
}
