package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
	"github.com/rbookhq/rbook-action/internal/tlsfiles/tlstest"
)

// tlsServer is an in-process control plane serving HTTPS with a certificate of ca.
type tlsServer struct {
	r                 *server.Running
	certFile, keyFile string
	logs              *syncBuffer
}

// startTLS starts server.Start with TLS (the pair's files checked on every handshake) and a
// server certificate of ca; clientCA, when set, asks for client certificates.
func startTLS(t *testing.T, ca *tlstest.CA, clientCA string, opts server.Options) *tlsServer {
	t.Helper()
	dir := t.TempDir()
	s := &tlsServer{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), logs: &syncBuffer{}}
	ca.Server(t, s.certFile, s.keyFile)
	opts.Secret = []byte(testSecret)
	opts.Logger = slog.New(slog.NewTextHandler(s.logs, nil))
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(dir, "cp.db"),
		TLS:     &server.TLSConfig{CertFile: s.certFile, KeyFile: s.keyFile, ClientCAFile: clientCA, CheckInterval: time.Nanosecond},
		Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	s.r = r
	return s
}

// pool is a certificate pool holding ca's certificate.
func pool(t *testing.T, ca *tlstest.CA) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

// servedSerial dials addr with a new TLS connection trusting ca and returns the serial of
// the certificate the server presented.
func servedSerial(t *testing.T, addr string, ca *tlstest.CA) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool(t, ca), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// A renewed certificate (cert-manager replacing the Secret's files) is served to the next
// connection without a restart; files that do not load leave the last good certificate in
// use and are reported once.
func TestServedCertificateIsReloadedWhenItsFilesChange(t *testing.T) {
	ca := tlstest.NewCA(t, "rbook test CA")
	s := startTLS(t, ca, "", server.Options{})
	if !strings.HasPrefix(s.r.URL(), "https://") {
		t.Fatalf("URL %s: want https://", s.r.URL())
	}
	first := servedSerial(t, s.r.Addr(), ca)
	renewed := ca.Server(t, s.certFile, s.keyFile)
	if got := servedSerial(t, s.r.Addr(), ca); got != renewed.Serial.String() || got == first {
		t.Fatalf("after renewal the server presents serial %s; want the new certificate's %s (the first was %s)", got, renewed.Serial, first)
	}
	if err := os.WriteFile(s.certFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := servedSerial(t, s.r.Addr(), ca); got != renewed.Serial.String() {
			t.Fatalf("with a broken certificate file the server presents serial %s; want the last good one %s", got, renewed.Serial)
		}
	}
	if n := strings.Count(s.logs.String(), "TLS certificate not reloaded"); n != 1 {
		t.Fatalf("the broken pair was reported %d times, want once; logs:\n%s", n, s.logs.String())
	}
	if !strings.Contains(s.logs.String(), "--tls-cert "+s.certFile) {
		t.Fatalf("the report does not name --tls-cert and its file:\n%s", s.logs.String())
	}
}

// The one HTTPS port serves gRPC over HTTP/2 and Connect over HTTP/1.1, TLS 1.2 or later.
func TestHTTPSServesHTTP2AndHTTP1(t *testing.T) {
	ca := tlstest.NewCA(t, "rbook test CA")
	s := startTLS(t, ca, "", server.Options{})
	for _, c := range []struct {
		name  string
		h2    bool
		opts  []connect.ClientOption
		proto string
	}{
		{"gRPC over HTTP/2", true, []connect.ClientOption{connect.WithGRPC()}, "HTTP/2.0"},
		{"Connect over HTTP/1.1", false, nil, "HTTP/1.1"},
	} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, ca)}, Protocols: new(http.Protocols)}
		tr.Protocols.SetHTTP1(!c.h2)
		tr.Protocols.SetHTTP2(c.h2)
		var seen string
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			res, err := tr.RoundTrip(r)
			if err == nil {
				seen = res.Proto
			}
			return res, err
		})}
		runs := rbookv1connect.NewRunServiceClient(hc, s.r.URL(), c.opts...)
		if _, err := runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if seen != c.proto {
			t.Fatalf("%s: answered over %s", c.name, seen)
		}
		tr.CloseIdleConnections()
	}
	if _, err := tls.Dial("tcp", s.r.Addr(), &tls.Config{RootCAs: pool(t, ca), MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded; the minimum is TLS 1.2")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// certClients are Connect clients over HTTPS trusting ca, presenting cert when it is set.
func certClients(t *testing.T, url string, ca *tlstest.CA, cert *tlstest.Issued) clients {
	t.Helper()
	tc := &tls.Config{RootCAs: pool(t, ca)}
	if cert != nil {
		pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names, as rbook's clients do: the server decides.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	return clients{runs: rbookv1connect.NewRunServiceClient(hc, url), apps: rbookv1connect.NewApprovalServiceClient(hc, url)}
}

// With --tls-client-ca, a client certificate signed by that CA is the executor
// cert:<common name>; a caller with neither a certificate nor a token is refused, and so is a
// certificate of another CA, with a message naming it and the flag. Certificates never
// approve.
func TestClientCertificateIdentifiesAnExecutor(t *testing.T) {
	serverCA, clientCA, otherCA := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA"), tlstest.NewCA(t, "other CA")
	s := startTLS(t, serverCA, clientCA.CertFile, server.Options{})
	bot := clientCA.Client(t, "build-bot")
	c := certClients(t, s.r.URL(), serverCA, &bot)
	run := startRun(t, c, "R-cert")
	if run.GetStartedBy() != "cert:build-bot" {
		t.Fatalf("started_by %q, want cert:build-bot", run.GetStartedBy())
	}
	_, tok := gate(t, c, "R-cert", time.Hour)
	_, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok})
	wantCode(t, err, connect.CodePermissionDenied, "E_PERMISSION_DENIED")

	_, err = certClients(t, s.r.URL(), serverCA, nil).runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")

	stranger := otherCA.Client(t, "stranger")
	_, err = certClients(t, s.r.URL(), serverCA, &stranger).runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{})
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	if !strings.Contains(err.Error(), `the TLS client certificate (subject "stranger") is not accepted`) || !strings.Contains(err.Error(), "--tls-client-ca") {
		t.Fatalf("a certificate of another CA: %v; want a refusal naming it and --tls-client-ca", err)
	}
}

// restartable is an in-process control plane on one database that a test stops and starts
// again with other approval secrets, as an operator rotating the secret would.
type restartable struct {
	t  *testing.T
	db string
	r  *server.Running
}

// start starts it with secret and previous (nil for none), checking the secret against the
// database's record as rbook serve does.
func (s *restartable) start(secret, previous string) error {
	var prev []byte
	if previous != "" {
		prev = []byte(previous)
	}
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: s.db, CheckSecretAgreement: true,
		Options: server.Options{Secret: []byte(secret), PreviousSecret: prev, Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return err
	}
	s.r = r
	return nil
}

func (s *restartable) stop() {
	h2cTransport.CloseIdleConnections()
	if err := s.r.Close(); err != nil {
		s.t.Error(err)
	}
}

const (
	secretA = "approval-secret-A-0123456789abcdef"
	secretB = "approval-secret-B-0123456789abcdef"
)

// A rotation of the approval secret keeps open gates decidable: a gate opened under A is
// decided by its token after a restart with B and previous A; once A is gone its token is
// refused as one signed with another secret.
func TestRotatedApprovalSecretStillDecidesOpenGates(t *testing.T) {
	s := &restartable{t: t, db: filepath.Join(t.TempDir(), "cp.db")}
	if err := s.start(secretA, ""); err != nil {
		t.Fatal(err)
	}
	c := newClients(s.r.URL())
	startRun(t, c, "R-1")
	_, tok1 := gate(t, c, "R-1", time.Hour)
	startRun(t, c, "R-2")
	_, tok2 := gate(t, c, "R-2", time.Hour)
	s.stop()

	if err := s.start(secretB, secretA); err != nil {
		t.Fatal(err)
	}
	c = newClients(s.r.URL())
	res, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok1, Approver: "ann"})
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("approving with a token of the previous secret: %v, %v", res, err)
	}
	startRun(t, c, "R-3")
	_, tok3 := gate(t, c, "R-3", time.Hour)
	s.stop()

	if err := s.start(secretB, ""); err != nil {
		t.Fatal(err)
	}
	c = newClients(s.r.URL())
	_, err = c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok2, Approver: "ann"})
	wantCode(t, err, connect.CodePermissionDenied, "E_TOKEN_INVALID")
	if res, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok3, Approver: "ann"}); err != nil ||
		res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("approving with a token of the new secret: %v, %v", res, err)
	}
	s.stop()
}

// A replica whose approval secret disagrees with the database's record does not start, and
// says what to do; the record holds no secret.
func TestReplicaWithAnotherApprovalSecretIsRefusedAtStart(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "cp.db")
			if backend == "postgres" {
				db = newPGDatabase(t)
			}
			first := &restartable{t: t, db: db}
			if err := first.start(secretA, ""); err != nil {
				t.Fatal(err)
			}
			if backend == "sqlite" {
				first.stop() // one server per SQLite file: the replicas come one after the other
			}
			second := &restartable{t: t, db: db}
			err := second.start(secretB, "")
			if err == nil {
				second.stop()
				t.Fatal("a replica with another approval secret started")
			}
			for _, want := range []string{"every replica of a control plane must share it", "Set RBOOK_APPROVAL_SECRET to the secret the other replicas use",
				"RBOOK_APPROVAL_SECRET_PREVIOUS", "--reset-approval-secret-check"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("refusal %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secretA) || strings.Contains(err.Error(), secretB) {
				t.Fatalf("refusal %q holds a secret", err)
			}
			if err := second.start(secretA, secretB); err != nil {
				t.Fatalf("a replica with the recorded secret (and a previous one) did not start: %v", err)
			}
			second.stop()
			if backend == "postgres" {
				first.stop()
			}
		})
	}
}
