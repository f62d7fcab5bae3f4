package cpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/tlsfiles/tlstest"
)

// httpsServer is an HTTPS server with a certificate of ca that asks for client certificates
// of clientCA and answers with the protocol and the client certificate's common name.
func httpsServer(t *testing.T, ca, clientCA *tlstest.CA) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	issued := ca.Server(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	pair, err := tls.LoadX509KeyPair(issued.CertFile, issued.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := "-"
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, r.Proto+" "+cn)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA != nil {
		pool, err := os.ReadFile(clientCA.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		srv.TLS.ClientCAs = poolOf(t, pool)
		srv.TLS.ClientAuth = tls.VerifyClientCertIfGiven
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get sends one GET through a new Client's endpoint for url, as every call does.
func get(url string) (string, error) {
	c := New(url, "")
	req, _ := http.NewRequest(http.MethodGet, url+"/", nil)
	res, err := router{c}.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// An https:// control plane whose certificate a private CA signed is trusted through
// RBOOK_CA_FILE, spoken to over HTTP/2, and shown the client certificate of
// RBOOK_CLIENT_CERT and RBOOK_CLIENT_KEY; without RBOOK_CA_FILE the failure is definite (no
// retries for a minute) and says to set it.
func TestHTTPSControlPlaneTrustedThroughTheCAFile(t *testing.T) {
	ca, clientCA := tlstest.NewCA(t, "private CA"), tlstest.NewCA(t, "client CA")
	srv := httpsServer(t, ca, clientCA)
	t.Setenv(EnvCAFile, "")
	t.Setenv(EnvClientCert, "")
	t.Setenv(EnvClientKey, "")
	_, err := get(srv.URL)
	var te *tlsError
	if !errors.As(err, &te) || Retryable(err) || !strings.Contains(err.Error(), "set RBOOK_CA_FILE to that CA's PEM file") {
		t.Fatalf("an untrusted certificate: %v (Retryable %v); want a definite failure naming RBOOK_CA_FILE", err, Retryable(err))
	}

	t.Setenv(EnvCAFile, ca.CertFile)
	if got, err := get(srv.URL); err != nil || got != "HTTP/2.0 -" {
		t.Fatalf("with RBOOK_CA_FILE: %q, %v; want HTTP/2.0 without a client certificate", got, err)
	}
	bot := clientCA.Client(t, "build-bot")
	t.Setenv(EnvClientCert, bot.CertFile)
	t.Setenv(EnvClientKey, bot.KeyFile)
	if got, err := get(srv.URL); err != nil || got != "HTTP/2.0 build-bot" {
		t.Fatalf("with a client certificate: %q, %v; want HTTP/2.0 build-bot", got, err)
	}
}

// Wrong TLS settings fail every call to an https:// URL at once, naming the variable and its
// file; http:// URLs do not use them.
func TestTLSEnvironmentErrorsNameTheVariableAndFile(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name          string
		ca, cert, key string
		want          string
	}{
		{"missing CA file", missing, "", "", "RBOOK_CA_FILE " + missing + ": open " + missing},
		{"CA file without a certificate", notPEM, "", "", "RBOOK_CA_FILE " + notPEM + ": no PEM certificate"},
		{"certificate without key", "", notPEM, "", "RBOOK_CLIENT_CERT is set but RBOOK_CLIENT_KEY is not"},
		{"key without certificate", "", "", notPEM, "RBOOK_CLIENT_KEY is set but RBOOK_CLIENT_CERT is not"},
		{"pair that does not load", "", notPEM, notPEM, "RBOOK_CLIENT_CERT " + notPEM + " and RBOOK_CLIENT_KEY " + notPEM},
	}
	for _, c := range cases {
		t.Setenv(EnvCAFile, c.ca)
		t.Setenv(EnvClientCert, c.cert)
		t.Setenv(EnvClientKey, c.key)
		_, err := get("https://127.0.0.1:1")
		if err == nil || Retryable(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (Retryable %v); want a definite failure saying %q", c.name, err, Retryable(err), c.want)
		}
		if _, err := get("http://127.0.0.1:1"); err == nil || strings.Contains(err.Error(), "RBOOK_") {
			t.Errorf("%s: an http:// URL failed with %v; want a connection refused that names no TLS variable", c.name, err)
		}
	}
}

func poolOf(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the PEM")
	}
	return p
}
