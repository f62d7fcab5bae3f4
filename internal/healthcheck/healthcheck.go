// Package healthcheck is one gRPC health check (grpc.health.v1.Health/Check) of a control
// plane, as `rbook admin health` and the container image's HEALTHCHECK make it
// (docs/deploy.md, "The container image"): the address, the scheme found by probing, the
// client's TLS from the environment, and one line saying the answer or why there is none.
package healthcheck

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

	"github.com/rbookhq/rbook-action/action/cpclient"
)

// Options say which control plane to check and how.
type Options struct {
	// Addr is HOST:PORT or an http:// or https:// URL (a path prefix is kept); "" is
	// $RBOOK_ADDR, else DefaultAddr.
	Addr string
	// DefaultAddr is rbook serve's default --addr.
	DefaultAddr string
	// Service is the service whose health to ask for; "" is the server as a whole.
	Service string
	// Timeout bounds the whole check; it must be positive.
	Timeout time.Duration
	// InsecureSkipVerify skips the check of the server's TLS certificate (a loopback check
	// of a server whose certificate names its public host).
	InsecureSkipVerify bool
}

// UsageError is Options that name no check: an Addr that is neither HOST:PORT nor an
// http(s) URL, or a Timeout that is not positive.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// SetupError is a client TLS environment (RBOOK_CA_FILE, RBOOK_CLIENT_CERT and
// RBOOK_CLIENT_KEY; cpclient.TLSConfigFromEnv) that cannot be read: nothing was asked.
type SetupError struct{ err error }

func (e *SetupError) Error() string { return e.err.Error() }

func (e *SetupError) Unwrap() error { return e.err }

// Check asks the control plane o names for its health once. It returns the line to print
// when it answers SERVING. Errors: *UsageError, *SetupError, else one line saying that it
// answered NOT_SERVING, did not answer within o.Timeout, is not trusted, or has no status
// for o.Service.
func Check(ctx context.Context, o Options) (string, error) {
	if o.Timeout <= 0 {
		return "", &UsageError{fmt.Sprintf("--timeout %s: want a positive duration such as 5s", o.Timeout)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	base, err := target(ctx, o.Addr, o.DefaultAddr)
	if err != nil {
		return "", err
	}
	hc, err := httpClient(base, o.InsecureSkipVerify)
	if err != nil {
		return "", &SetupError{err}
	}
	resp, err := grpchealth.NewClient(hc, base.String(), connect.WithGRPC()).Check(ctx, &grpchealth.CheckRequest{Service: o.Service})
	if err != nil {
		return "", errors.New(callError(base, o, err))
	}
	if resp.Status != grpchealth.StatusServing {
		return "", fmt.Errorf("%s answers %s%s: its database is unreachable or it is shutting down; its log says which", base, strings.ToUpper(resp.Status.String()), serviceWords(o.Service))
	}
	return fmt.Sprintf("%s answers SERVING%s", base, serviceWords(o.Service)), nil
}

// serviceWords is " for SERVICE", or "" for the server as a whole.
func serviceWords(service string) string {
	if service == "" {
		return ""
	}
	return " for " + service
}

// target is the base URL addr names (see rbook admin health --help, "Where"): a URL as
// given, or a HOST:PORT with a wildcard host made loopback and its scheme found by probing.
// Errors: *UsageError for an addr that is neither, else the probe's connection error.
func target(ctx context.Context, addr, defaultAddr string) (*url.URL, error) {
	if addr == "" {
		addr = os.Getenv("RBOOK_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, &UsageError{fmt.Sprintf("--addr %q: want http://HOST:PORT or https://HOST[:PORT] (a path prefix is kept; no user@, query or fragment), or HOST:PORT (scheme %q)", addr, scheme)}
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		return u, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return nil, &UsageError{fmt.Sprintf("--addr %q: want HOST:PORT such as %s, or an http:// or https:// URL", addr, defaultAddr)}
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

// httpClient is the HTTP client of the check: h2c for http://, HTTP/2 over TLS for
// https:// with the client TLS of every rbook command (cpclient.TLSConfigFromEnv: the
// system's CAs plus $RBOOK_CA_FILE, the client certificate of $RBOOK_CLIENT_CERT and
// $RBOOK_CLIENT_KEY). Errors are TLSConfigFromEnv's, naming the variable and its file.
func httpClient(base *url.URL, insecureSkipVerify bool) (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // the check is of this server, not of a proxy in front of it
	t.Protocols = new(http.Protocols)
	if base.Scheme == "http" {
		t.Protocols.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: t}, nil
	}
	t.Protocols.SetHTTP2(true)
	cfg, err := cpclient.TLSConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg.InsecureSkipVerify = insecureSkipVerify //nolint:gosec // only with --insecure-skip-verify
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t}, nil
}

// callError is the one line for a failed health call: an unknown service, an untrusted
// certificate, or no answer.
func callError(base *url.URL, o Options, err error) string {
	var cert *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		return fmt.Sprintf("%s has no health status for --service %q: leave --service out for the server, or name rbook.v1.RunService, rbook.v1.ApprovalService or rbook.v1.IdentityService", base, o.Service)
	case errors.As(err, &cert) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname):
		return fmt.Sprintf("%s: its TLS certificate is not trusted: %v; set RBOOK_CA_FILE to the PEM file of the CA that signed it (or use the host name it was issued for)", base, err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("%s speaks plain HTTP, not TLS: use --addr http://%s%s", base, base.Host, base.Path)
	case errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		return fmt.Sprintf("%s did not answer within %s; is rbook serve running there, and reachable?", base, o.Timeout)
	}
	return fmt.Sprintf("%s did not answer: %v; is rbook serve running there (rbook serve --addr)?", base, err)
}
