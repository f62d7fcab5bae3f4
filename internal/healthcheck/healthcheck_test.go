package healthcheck

import (
	"context"
	"encoding/pem"
	"errors"
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
	"time"

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

// check runs Check with o (a Timeout of 0 is rbook admin health's default, 5s) and returns
// the line it prints, the exit code rbook admin health maps its error to (0 SERVING, 2 a
// *UsageError or *SetupError, else 1) and the error.
func check(o Options) (line string, code int, err error) {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	o.DefaultAddr = "127.0.0.1:7070"
	line, err = Check(context.Background(), o)
	var ue *UsageError
	var se *SetupError
	switch {
	case err == nil:
		return line, 0, nil
	case errors.As(err, &ue), errors.As(err, &se):
		return line, 2, err
	}
	return line, 1, err
}

// TestAdminHealthExitsZeroOnlyWhenServing: the check asks grpc.health.v1 over h2c or TLS and
// gives one SERVING line (rbook admin health exits 0), else the reason (exit 1, or 2 for bad
// options or TLS files); a HOST:PORT finds the scheme by itself; a TLS server's certificate
// is checked against RBOOK_CA_FILE, and only --insecure-skip-verify waives the check (rbook
// admin health --help).
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
	missingCA := filepath.Join(t.TempDir(), "none.pem")
	cases := []struct {
		name   string
		ca     string
		o      Options
		code   int
		stdout string
		inErr  string
	}{
		{name: "h2c URL", o: Options{Addr: plain.URL}, code: 0, stdout: plain.URL + " answers SERVING"},
		{name: "h2c HOST:PORT", o: Options{Addr: hostPort(plain)}, code: 0, stdout: plain.URL + " answers SERVING"},
		{name: "wildcard host is loopback", o: Options{Addr: "0.0.0.0:" + plain.URL[len("http://127.0.0.1:"):]}, code: 0, stdout: plain.URL + " answers SERVING"},
		{name: "not serving", o: Options{Addr: down.URL}, code: 1, inErr: down.URL + " answers NOT_SERVING: its database is unreachable or it is shutting down"},
		{name: "unknown service", o: Options{Addr: plain.URL, Service: "nope.v1.Nothing"}, code: 1, inErr: `has no health status for --service "nope.v1.Nothing"`},
		{name: "nothing listening", o: Options{Addr: "127.0.0.1:1"}, code: 1, inErr: "127.0.0.1:1 did not answer: dial tcp 127.0.0.1:1"},
		{name: "https to plain", o: Options{Addr: "https://" + hostPort(plain)}, code: 1, inErr: "speaks plain HTTP, not TLS: use --addr http://" + hostPort(plain)},
		{name: "TLS, CA from RBOOK_CA_FILE", ca: caFile, o: Options{Addr: secure.URL}, code: 0, stdout: secure.URL + " answers SERVING"},
		{name: "TLS found from HOST:PORT", ca: caFile, o: Options{Addr: hostPort(secure)}, code: 0, stdout: secure.URL + " answers SERVING"},
		{name: "TLS, CA unknown", o: Options{Addr: secure.URL}, code: 1, inErr: "its TLS certificate is not trusted"},
		{name: "TLS, name not in certificate", ca: caFile, o: Options{Addr: secureLocalhost}, code: 1, inErr: "its TLS certificate is not trusted"},
		{name: "TLS, verification skipped on request", o: Options{Addr: secureLocalhost, InsecureSkipVerify: true}, code: 0, stdout: secureLocalhost + " answers SERVING"},
		{name: "CA file missing", ca: missingCA, o: Options{Addr: secure.URL}, code: 2, inErr: "RBOOK_CA_FILE " + missingCA + ": open "},
		{name: "bad scheme", o: Options{Addr: "ftp://127.0.0.1:7070"}, code: 2, inErr: `--addr "ftp://127.0.0.1:7070": want http://HOST:PORT`},
		{name: "bad timeout", o: Options{Addr: plain.URL, Timeout: -time.Second}, code: 2, inErr: "--timeout -1s: want a positive duration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("RBOOK_CA_FILE", c.ca)
			t.Setenv("RBOOK_ADDR", "")
			out, code, err := check(c.o)
			msg := fmt.Sprint(err)
			if code != c.code || out != c.stdout || (c.inErr != "" && !strings.Contains(msg, c.inErr)) {
				t.Fatalf("exit %d, line %q, error %q; want exit %d, line %q, error containing %q", code, out, msg, c.code, c.stdout, c.inErr)
			}
			if code == 1 && strings.Contains(msg, "\n") {
				t.Errorf("the error has more than one line: %q", msg)
			}
		})
	}
	var ue *UsageError
	if _, err := Check(context.Background(), Options{Addr: plain.URL}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--timeout 0s: want a positive duration") {
		t.Errorf("no timeout: %v; want a usage error asking for a positive duration", err)
	}
}

// TestAdminHealthDefaultsToRBOOK_ADDR: without an address the check goes where rbook serve's
// RBOOK_ADDR says it listens, so a container's HEALTHCHECK follows the server's address.
func TestAdminHealthDefaultsToRBOOK_ADDR(t *testing.T) {
	plain := healthServer(t, grpchealth.StatusServing, false)
	t.Setenv("RBOOK_ADDR", "0.0.0.0:"+plain.URL[len("http://127.0.0.1:"):])
	out, code, err := check(Options{})
	if code != 0 || out != plain.URL+" answers SERVING" {
		t.Fatalf("exit %d, line %q, error %v; want 0 and the SERVING line", code, out, err)
	}
}
