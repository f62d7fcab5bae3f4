package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/spf13/cobra"
)

// healthFlags are rbook admin health's flags.
type healthFlags struct {
	addr, service      string
	timeout            time.Duration
	insecureSkipVerify bool
}

// newAdminHealthCmd is `rbook admin health`: one gRPC health check of a control plane, the
// container image's HEALTHCHECK (docs/deploy.md, "The container image").
func newAdminHealthCmd() *cobra.Command {
	var hf healthFlags
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a control plane is serving (gRPC health), exit 0 if it is",
		Long: `Ask a control plane (rbook serve) for its gRPC health (grpc.health.v1.Health/Check) and
print one line: SERVING, or why not. It needs no token.

Where: --addr HOST:PORT or a URL (http://… or https://…, a path prefix is kept). Without
it, $RBOOK_ADDR (the address rbook serve listens on) or else 127.0.0.1:7070; a wildcard
host (0.0.0.0, [::] or none) means this machine's loopback, so the same command checks the
server of its own container. A HOST:PORT is spoken to over TLS when the server answers TLS
there, and over plain HTTP (h2c) otherwise.

TLS: the server's certificate is checked against the system's CAs and the CA in the PEM
file $RBOOK_CA_FILE; $RBOOK_CLIENT_CERT and $RBOOK_CLIENT_KEY present a client certificate.
--insecure-skip-verify skips the check of the server's certificate: it is for a check over
loopback of a server whose certificate names its public host (the container image's
HEALTHCHECK), never for a check across a network.

Exit codes:
  0  the control plane answered SERVING
  1  it answered NOT_SERVING (its database is unreachable, or it is shutting down), did not
     answer within --timeout, or its certificate is not trusted
  2  bad arguments, or $RBOOK_CA_FILE (or the client certificate) cannot be read`,
		Example: `  rbook admin health                                  # $RBOOK_ADDR, else 127.0.0.1:7070
  rbook admin health --addr https://rbook.example.com # with RBOOK_CA_FILE=ca.pem for a private CA
  rbook admin health --service rbook.v1.RunService`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAdminHealth(cmd, &hf) },
	}
	f := cmd.Flags()
	f.StringVar(&hf.addr, "addr", "", "the control plane: HOST:PORT or an http:// or https:// URL (default $RBOOK_ADDR, else "+defaultServeAddr+")")
	f.StringVar(&hf.service, "service", "", `the service whose health to ask for: "" (the server) or one such as rbook.v1.RunService`)
	f.DurationVar(&hf.timeout, "timeout", 5*time.Second, "give up after this long")
	f.BoolVar(&hf.insecureSkipVerify, "insecure-skip-verify", false, "do not check the server's TLS certificate (a loopback check only)")
	return cmd
}

// runAdminHealth checks the control plane hf names once and maps the answer to an exit code.
func runAdminHealth(cmd *cobra.Command, hf *healthFlags) error {
	if hf.timeout <= 0 {
		return &usageError{cmd, fmt.Errorf("--timeout %s: want a positive duration such as 5s", hf.timeout)}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), hf.timeout)
	defer cancel()
	base, err := healthTarget(ctx, hf.addr)
	if err != nil {
		var ue *healthUsageError
		if errors.As(err, &ue) {
			return &usageError{cmd, err}
		}
		return &exitError{code: exitFailed, msg: "rbook admin health: " + err.Error()}
	}
	hc, err := healthHTTPClient(base, hf.insecureSkipVerify)
	if err != nil {
		return abort("rbook admin health: %v", err)
	}
	resp, err := grpchealth.NewClient(hc, base.String(), connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{Service: hf.service})
	if err != nil {
		return &exitError{code: exitFailed, msg: "rbook admin health: " + healthCallError(base, hf, err)}
	}
	if resp.Status != grpchealth.StatusServing {
		return &exitError{code: exitFailed, msg: fmt.Sprintf("rbook admin health: %s answers %s%s: its database is unreachable or it is shutting down; its log says which", base, strings.ToUpper(resp.Status.String()), serviceWords(hf.service))}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s answers SERVING%s\n", base, serviceWords(hf.service))
	return nil
}

// serviceWords is " for SERVICE", or "" for the server as a whole.
func serviceWords(service string) string {
	if service == "" {
		return ""
	}
	return " for " + service
}

// healthUsageError is a --addr that cannot name a control plane.
type healthUsageError struct{ msg string }

func (e *healthUsageError) Error() string { return e.msg }

// healthTarget is the base URL addr names (see rbook admin health --help, "Where"): a URL
// as given, or a HOST:PORT with a wildcard host made loopback and its scheme found by
// probing. Errors: *healthUsageError for an addr that is neither, else the probe's
// connection error.
func healthTarget(ctx context.Context, addr string) (*url.URL, error) {
	if addr == "" {
		addr = os.Getenv("RBOOK_ADDR")
	}
	if addr == "" {
		addr = defaultServeAddr
	}
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, &healthUsageError{fmt.Sprintf("--addr %q: want http://HOST:PORT or https://HOST[:PORT] (a path prefix is kept; no user@, query or fragment), or HOST:PORT (scheme %q)", addr, scheme)}
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		return u, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return nil, &healthUsageError{fmt.Sprintf("--addr %q: want HOST:PORT such as %s, or an http:// or https:// URL", addr, defaultServeAddr)}
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	hostPort := net.JoinHostPort(host, port)
	scheme, err := probeScheme(ctx, hostPort)
	if err != nil {
		return nil, fmt.Errorf("%s did not answer: %v; is rbook serve running there (rbook serve --addr, or $RBOOK_ADDR)?", hostPort, err)
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, nil
}

// probeScheme says whether the server at hostPort speaks TLS ("https") or plain HTTP
// ("http"): it starts a TLS handshake and reads the answer. A plain HTTP server answers a
// ClientHello with an HTTP response, which is not a TLS record. The probe sends nothing
// but the handshake, so it does not check the certificate: the health call that follows
// does.
func probeScheme(ctx context.Context, hostPort string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(hostPort)
	tc := tls.Client(conn, &tls.Config{ServerName: host, InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe for the scheme; the call verifies
	err = tc.HandshakeContext(ctx)
	var rh tls.RecordHeaderError
	switch {
	case err == nil:
		return "https", nil
	case errors.As(err, &rh):
		return "http", nil
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "", fmt.Errorf("no answer to a TLS or HTTP hello within the --timeout")
	default:
		// A server that hangs up on a ClientHello (or a TLS alert): not plain HTTP, so the
		// call over TLS says what is wrong.
		return "https", nil
	}
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// healthHTTPClient is the HTTP client of the check: h2c for http://, HTTP/2 over TLS for
// https:// with the system's CAs plus $RBOOK_CA_FILE and, when both are set, the client
// certificate $RBOOK_CLIENT_CERT/$RBOOK_CLIENT_KEY. Errors: an unreadable or empty CA file,
// an unreadable client pair, only one of the two set.
func healthHTTPClient(base *url.URL, insecureSkipVerify bool) (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // the check is of this server, not of a proxy in front of it
	t.Protocols = new(http.Protocols)
	if base.Scheme == "http" {
		t.Protocols.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: t}, nil
	}
	t.Protocols.SetHTTP2(true)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecureSkipVerify} //nolint:gosec // only with --insecure-skip-verify
	if caFile := os.Getenv("RBOOK_CA_FILE"); caFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("RBOOK_CA_FILE: %v", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("RBOOK_CA_FILE %s: no PEM certificate in it; point it at the CA certificate (-----BEGIN CERTIFICATE-----) that signed the server's", caFile)
		}
		cfg.RootCAs = pool
	}
	certFile, keyFile := os.Getenv("RBOOK_CLIENT_CERT"), os.Getenv("RBOOK_CLIENT_KEY")
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("RBOOK_CLIENT_CERT/RBOOK_CLIENT_KEY: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "" || keyFile != "":
		return nil, errors.New("set both RBOOK_CLIENT_CERT and RBOOK_CLIENT_KEY (a client certificate and its key), or neither")
	}
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t}, nil
}

// healthCallError is the one line for a failed health call: an unknown service, an
// untrusted certificate, or no answer.
func healthCallError(base *url.URL, hf *healthFlags, err error) string {
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		return fmt.Sprintf("%s has no health status for --service %q: leave --service out for the server, or name rbook.v1.RunService, rbook.v1.ApprovalService or rbook.v1.IdentityService", base, hf.service)
	case errors.As(err, &cert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname):
		return fmt.Sprintf("%s: its TLS certificate is not trusted: %v; set RBOOK_CA_FILE to the PEM file of the CA that signed it (or use the host name it was issued for)", base, err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("%s speaks plain HTTP, not TLS: use --addr http://%s%s", base, base.Host, base.Path)
	case errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		return fmt.Sprintf("%s did not answer within %s; is rbook serve running there, and reachable?", base, hf.timeout)
	}
	return fmt.Sprintf("%s did not answer: %v; is rbook serve running there (rbook serve --addr)?", base, err)
}
