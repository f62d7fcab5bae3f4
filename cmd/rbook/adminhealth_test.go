package main

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/grpchealth"
)

// healthServer serves grpc.health.v1 with the given overall status, over h2c or, with tls,
// HTTP/2 over TLS with httptest's certificate (issued for 127.0.0.1, ::1 and example.com).
func healthServer(t *testing.T, status grpchealth.Status, useTLS bool) *httptest.Server {
	t.Helper()
	checker := grpchealth.NewStaticChecker()
	checker.SetStatus("", status)
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(checker))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	if useTLS {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// runRbook runs the command tree with args in process and returns stdout, stderr and the
// exit code.
func runRbook(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(args)
	code := execute(root, &errw)
	return out.String(), errw.String(), code
}

// TestAdminHealthExitsZeroOnlyWhenServing: rbook admin health asks grpc.health.v1 over h2c
// or TLS and exits 0 with one SERVING line, 1 with the reason otherwise; a HOST:PORT finds
// the scheme by itself; a TLS server's certificate is checked against RBOOK_CA_FILE, and
// only --insecure-skip-verify waives the check (rbook admin health --help).
func TestAdminHealthExitsZeroOnlyWhenServing(t *testing.T) {
	plain := healthServer(t, grpchealth.StatusServing, false)
	down := healthServer(t, grpchealth.StatusNotServing, false)
	secure := healthServer(t, grpchealth.StatusServing, true)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hostPort := func(s *httptest.Server) string {
		return strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
	}
	secureLocalhost := fmt.Sprintf("https://localhost:%d", secure.Listener.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name     string
		ca       string
		args     []string
		code     int
		stdout   string
		inStderr string
	}{
		{name: "h2c URL", args: []string{"--addr", plain.URL}, code: 0, stdout: plain.URL + " answers SERVING\n"},
		{name: "h2c HOST:PORT", args: []string{"--addr", hostPort(plain)}, code: 0, stdout: plain.URL + " answers SERVING\n"},
		{name: "wildcard host is loopback", args: []string{"--addr", "0.0.0.0:" + plain.URL[len("http://127.0.0.1:"):]}, code: 0, stdout: plain.URL + " answers SERVING\n"},
		{name: "not serving", args: []string{"--addr", down.URL}, code: 1, inStderr: "rbook admin health: " + down.URL + " answers NOT_SERVING: its database is unreachable or it is shutting down"},
		{name: "unknown service", args: []string{"--addr", plain.URL, "--service", "nope.v1.Nothing"}, code: 1, inStderr: `has no health status for --service "nope.v1.Nothing"`},
		{name: "nothing listening", args: []string{"--addr", "127.0.0.1:1"}, code: 1, inStderr: "rbook admin health: 127.0.0.1:1 did not answer: dial tcp 127.0.0.1:1"},
		{name: "https to plain", args: []string{"--addr", "https://" + hostPort(plain)}, code: 1, inStderr: "speaks plain HTTP, not TLS: use --addr http://" + hostPort(plain)},
		{name: "TLS, CA from RBOOK_CA_FILE", ca: caFile, args: []string{"--addr", secure.URL}, code: 0, stdout: secure.URL + " answers SERVING\n"},
		{name: "TLS found from HOST:PORT", ca: caFile, args: []string{"--addr", hostPort(secure)}, code: 0, stdout: secure.URL + " answers SERVING\n"},
		{name: "TLS, CA unknown", args: []string{"--addr", secure.URL}, code: 1, inStderr: "its TLS certificate is not trusted"},
		{name: "TLS, name not in certificate", ca: caFile, args: []string{"--addr", secureLocalhost}, code: 1, inStderr: "its TLS certificate is not trusted"},
		{name: "TLS, verification skipped on request", args: []string{"--addr", secureLocalhost, "--insecure-skip-verify"}, code: 0, stdout: secureLocalhost + " answers SERVING\n"},
		{name: "CA file missing", ca: filepath.Join(t.TempDir(), "none.pem"), args: []string{"--addr", secure.URL}, code: 2, inStderr: "rbook admin health: RBOOK_CA_FILE: open "},
		{name: "bad scheme", args: []string{"--addr", "ftp://127.0.0.1:7070"}, code: 2, inStderr: `--addr "ftp://127.0.0.1:7070": want http://HOST:PORT`},
		{name: "bad timeout", args: []string{"--addr", plain.URL, "--timeout", "0s"}, code: 2, inStderr: "--timeout 0s: want a positive duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("RBOOK_CA_FILE", c.ca)
			t.Setenv("RBOOK_ADDR", "")
			out, errOut, code := runRbook(t, append([]string{"admin", "health"}, c.args...)...)
			if code != c.code || out != c.stdout || !strings.Contains(errOut, c.inStderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q", code, out, errOut, c.code, c.stdout, c.inStderr)
			}
			if c.code == 1 && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("stderr has more than one line: %q", errOut)
			}
		})
	}
}

// TestAdminHealthDefaultsToRBOOK_ADDR: without --addr the check goes where rbook serve's
// RBOOK_ADDR says it listens, so a container's HEALTHCHECK follows the server's address.
func TestAdminHealthDefaultsToRBOOK_ADDR(t *testing.T) {
	plain := healthServer(t, grpchealth.StatusServing, false)
	t.Setenv("RBOOK_ADDR", "0.0.0.0:"+plain.URL[len("http://127.0.0.1:"):])
	out, errOut, code := runRbook(t, "admin", "health")
	if code != 0 || out != plain.URL+" answers SERVING\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the SERVING line", code, out, errOut)
	}
}
