package cpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/rbookhq/rbook-action/internal/tlsfiles"
)

// The environment of a client's TLS to an https:// control plane (docs/tls.md, "Clients").
const (
	// EnvCAFile names a PEM file of CA certificates trusted beside the system's (a control
	// plane whose certificate a private CA signed).
	EnvCAFile = "RBOOK_CA_FILE"
	// EnvClientCert and EnvClientKey name the PEM certificate chain and key the client
	// presents when the control plane asks for one (rbook serve --tls-client-ca); both or
	// neither. The pair is re-read when the files change.
	EnvClientCert = "RBOOK_CLIENT_CERT"
	EnvClientKey  = "RBOOK_CLIENT_KEY"
)

// TLSConfigFromEnv is the TLS configuration of https:// control-plane URLs from getenv:
// the system's roots plus RBOOK_CA_FILE's certificates, and the client certificate of
// RBOOK_CLIENT_CERT and RBOOK_CLIENT_KEY; TLS 1.2 or later. Errors name the variable and
// its file: unreadable, no certificate, a key that does not match, one of the pair without
// the other.
func TLSConfigFromEnv(getenv func(string) string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := getenv(EnvCAFile); f != "" {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = nil // no system pool (some platforms): the file's CAs alone
		}
		if tc.RootCAs, err = tlsfiles.CAPool(roots, f, EnvCAFile); err != nil {
			return nil, fmt.Errorf("%w; %s names the PEM file of the CA that signed the control plane's certificate", err, EnvCAFile)
		}
	}
	cert, key := getenv(EnvClientCert), getenv(EnvClientKey)
	switch {
	case cert == "" && key == "":
		return tc, nil
	case cert == "":
		return nil, fmt.Errorf("%s is set but %s is not: set both (the client certificate's PEM chain and its key) or neither", EnvClientKey, EnvClientCert)
	case key == "":
		return nil, fmt.Errorf("%s is set but %s is not: set both (the client certificate's PEM chain and its key) or neither", EnvClientCert, EnvClientKey)
	}
	pair, err := tlsfiles.LoadKeyPair(cert, key, tlsfiles.Options{CertName: EnvClientCert, KeyName: EnvClientKey})
	if err != nil {
		return nil, err
	}
	// Sent whatever CAs the server names: its refusal says more than no certificate would.
	tc.GetClientCertificate = pair.ClientCertificate
	return tc, nil
}

// envTLS caches TLSConfigFromEnv(os.Getenv) per value of the three variables, so every
// Client of a process shares one configuration (and one reloading key pair).
var envTLS struct {
	sync.Mutex
	key string
	tc  *tls.Config
	err error
}

// processTLS is TLSConfigFromEnv(os.Getenv), cached.
func processTLS() (*tls.Config, error) {
	key := os.Getenv(EnvCAFile) + "\x00" + os.Getenv(EnvClientCert) + "\x00" + os.Getenv(EnvClientKey)
	envTLS.Lock()
	defer envTLS.Unlock()
	if envTLS.tc == nil && envTLS.err == nil || envTLS.key != key {
		envTLS.key = key
		envTLS.tc, envTLS.err = TLSConfigFromEnv(os.Getenv)
	}
	return envTLS.tc, envTLS.err
}

// tlsError is a TLS failure that no retry mends: the client's own TLS files are wrong, the
// control plane's certificate is not trusted, or the control plane refused the client's
// certificate. Retryable is false for it, and its message says which variable to set.
type tlsError struct {
	err  error
	hint string
}

func (e *tlsError) Error() string {
	if e.hint == "" {
		return e.err.Error()
	}
	return e.err.Error() + " (" + e.hint + ")"
}

func (e *tlsError) Unwrap() error { return e.err }

// asTLSError wraps err in a *tlsError when it is a TLS failure no retry mends, and returns
// it unchanged otherwise. Inside a *url.Error (what an HTTP client returns) the wrapping goes
// under it: Connect reports the url.Error's cause, which then carries the hint.
func asTLSError(err error) error {
	if err == nil {
		return nil
	}
	if ue, ok := err.(*url.Error); ok {
		if inner := asTLSError(ue.Err); inner != ue.Err {
			return &url.Error{Op: ue.Op, URL: ue.URL, Err: inner}
		}
		return err
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &unknown), errors.As(err, &verify) && errors.As(verify.Err, &unknown):
		return &tlsError{err, "the control plane's certificate is signed by a CA this machine does not trust: set " + EnvCAFile + " to that CA's PEM file"}
	case errors.As(err, &hostname):
		return &tlsError{err, "the control plane's certificate does not name the host of the URL: use a URL with a name the certificate holds"}
	case errors.As(err, &invalid), errors.As(err, &verify):
		return &tlsError{err, "the control plane's certificate is not valid: ask its operator to renew it"}
	case errors.As(err, &op) && op.Op == "remote error" && strings.HasPrefix(op.Err.Error(), "tls: "):
		return &tlsError{err, "the control plane refused the TLS handshake; if it asks for client certificates, set " + EnvClientCert +
			" and " + EnvClientKey + " to a certificate signed by a CA it trusts"}
	}
	return err
}

// CheckTLS reports the error of the TLS environment (TLSConfigFromEnv) when urls (one URL
// or a comma list) has an https:// one, so a command can refuse to start before its first
// call; nil otherwise.
func CheckTLS(urls string) error {
	for _, u := range strings.Split(urls, ",") {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(u)), "https://") {
			_, err := processTLS()
			return err
		}
	}
	return nil
}
