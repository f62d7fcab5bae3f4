package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/internal/tlsfiles"
)

// TLSConfig makes rbook serve speak HTTPS (docs/tls.md): HTTP/2 (gRPC) and HTTP/1.1 (Connect,
// gRPC-Web, the console) over TLS 1.2 or later on the one port, with no h2c.
type TLSConfig struct {
	// CertFile is the PEM certificate chain (leaf first) and KeyFile its private key
	// (rbook serve --tls-cert, --tls-key). Both are read at start and again when either
	// file's modification time or size changed (checked at most every CheckInterval, on a
	// handshake), so a rotated certificate is served to new connections without a restart;
	// a changed pair that does not load is logged once and the old pair kept.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM bundle of CAs (rbook serve --tls-client-ca): clients
	// are asked for a certificate, one given must verify against these CAs, and a verified
	// certificate identifies an executor (Options.ClientCAs; docs/tls.md, "Client
	// certificates"). Clients without one are still served (bearer tokens).
	ClientCAFile string
	// CheckInterval is how often the pair's files are looked at again; 0 means
	// tlsfiles.DefaultCheckInterval.
	CheckInterval time.Duration
}

// serverTLS loads c's files into the server's tls.Config and returns the client CAs (nil
// without ClientCAFile). Reloads and reload failures are logged to log. Errors name the flag
// and the file.
//
// Client certificates are requested (tls.RequestClientCert) and verified against the client
// CAs by the handler (certVerdicts), not in the handshake: under TLS 1.3 a handshake refusal
// reaches the client only as a connection that closes ("http2: client conn could not be
// established"), which says nothing; a refusal in the response names the flag and the
// variables to fix. A certificate that does not verify is refused on every path.
func serverTLS(c *TLSConfig, log *slog.Logger) (*tls.Config, *x509.CertPool, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, nil, fmt.Errorf("TLS needs both --tls-cert FILE and --tls-key FILE")
	}
	pair, err := tlsfiles.LoadKeyPair(c.CertFile, c.KeyFile, tlsfiles.Options{
		CertName: "--tls-cert", KeyName: "--tls-key", Interval: c.CheckInterval,
		OnReloadError: func(err error) {
			log.Error("TLS certificate not reloaded: the changed files do not load, so the previous certificate is still served; fix the files (checked again when they change)",
				"error", err.Error())
		},
		OnReload: func() { log.Info("TLS certificate reloaded", "cert", c.CertFile) },
	})
	if err != nil {
		return nil, nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.Certificate}
	if c.ClientCAFile == "" {
		return tc, nil, nil
	}
	pool, err := tlsfiles.CAPool(nil, c.ClientCAFile, "--tls-client-ca")
	if err != nil {
		return nil, nil, err
	}
	tc.ClientAuth = tls.RequestClientCert
	return tc, pool, nil
}

// ClientCertPrefix begins the identity of a caller known by its TLS client certificate:
// "cert:<the certificate's subject common name>" (docs/tls.md, "Client certificates"). An
// auth-file identity cannot have ':', so no token's identity can pass for one.
const ClientCertPrefix = "cert:"

// maxCommonNameBytes is X.509's upper bound of a common name (ub-common-name, RFC 5280).
const maxCommonNameBytes = 64

// maxCertVerdicts bounds the verdict cache; when full it is emptied.
const maxCertVerdicts = 1024

// certVerdicts verifies client certificates against the client CAs and remembers each
// leaf's verdict (keyed by its SHA-256) until the leaf expires, so a connection's requests
// do not verify its chain again and again.
type certVerdicts struct {
	roots *x509.CertPool
	mu    sync.Mutex
	seen  map[[sha256.Size]byte]certVerdict
}

type certVerdict struct {
	identity string
	err      error
	until    time.Time
}

func newCertVerdicts(roots *x509.CertPool) *certVerdicts {
	return &certVerdicts{roots: roots, seen: map[[sha256.Size]byte]certVerdict{}}
}

// identity is the identity of the request's client certificate: "" and no error without
// one (no TLS, or no certificate sent); cert:<common name> for one that chains to the client
// CAs for client authentication and has a usable common name (1-64 printable ASCII
// characters without spaces or commas); else an error saying what to fix.
func (v *certVerdicts) identity(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", nil
	}
	leaf := r.TLS.PeerCertificates[0]
	key := sha256.Sum256(leaf.Raw)
	now := time.Now()
	v.mu.Lock()
	got, ok := v.seen[key]
	v.mu.Unlock()
	if ok && now.Before(got.until) {
		return got.identity, got.err
	}
	got = certVerdict{until: leaf.NotAfter}
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: v.roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		got.err = fmt.Errorf("the TLS client certificate (subject %q) is not accepted: %v; present one signed by a CA of this control plane's --tls-client-ca "+
			"(RBOOK_CLIENT_CERT and RBOOK_CLIENT_KEY), or none", truncate(leaf.Subject.CommonName, maxCommonNameBytes), err)
	} else if cn := leaf.Subject.CommonName; !usableCommonName(cn) {
		got.err = fmt.Errorf("the TLS client certificate's subject common name %q is not an identity: give it 1-%d printable characters without spaces or commas",
			truncate(cn, maxCommonNameBytes), maxCommonNameBytes)
	} else {
		got.identity = ClientCertPrefix + cn
	}
	v.mu.Lock()
	if len(v.seen) >= maxCertVerdicts {
		clear(v.seen)
	}
	v.seen[key] = got
	v.mu.Unlock()
	return got.identity, got.err
}

func usableCommonName(cn string) bool {
	if cn == "" || len(cn) > maxCommonNameBytes {
		return false
	}
	for _, ch := range cn {
		if ch <= ' ' || ch > '~' || ch == ',' {
			return false
		}
	}
	return true
}

// certCaller is the caller a verified client certificate makes: an executor named
// cert:<common name>. Certificates never approve: approvers are people, who sign in or
// hold an auth-file token.
func certCaller(identity string) Caller { return Caller{Identity: identity, Role: RoleExecutor} }

// secretCheckName is the row of store's secret_checks that holds the approval secret's values.
const secretCheckName = "approval"

// checkSecretAgreement compares cfg's approval secrets with the key-check values st records
// (store.Store.CheckSecret). Errors say what to do: share the secret, rotate it, or reset
// the record when the old secret is lost.
func checkSecretAgreement(ctx context.Context, st *store.Store, cfg Config) (store.SecretAgreement, error) {
	prev := ""
	if len(cfg.PreviousSecret) > 0 {
		prev = approval.SecretCheck(cfg.PreviousSecret)
	}
	a, err := st.CheckSecret(ctx, secretCheckName, approval.SecretCheck(cfg.Secret), prev, cfg.ReplaceSecretCheck)
	const rotate = "To rotate the secret, start every replica with " + approval.EnvApprovalSecretPrevious + " set to the secret in use and " +
		approval.EnvApprovalSecret + " to the new one (docs/tls.md, \"Rotating the approval secret\"). If the old secret is lost, start once with " +
		"--reset-approval-secret-check: tokens of gates opened before then stop working (decide those gates by approval id)."
	switch {
	case errors.Is(err, store.ErrSecretDisagrees):
		return "", fmt.Errorf("the approval secret (%s) is not the one this database (%s) is served with: every replica of a control plane must share it. "+
			"Set %s to the secret the other replicas use. %s", approval.EnvApprovalSecret, store.RedactDSN(cfg.DBPath), approval.EnvApprovalSecret, rotate)
	case errors.Is(err, store.ErrSecretRetired):
		return "", fmt.Errorf("the approval secret (%s) is the one a completed rotation replaced in this database (%s): "+
			"set %s to the new secret the other replicas use (and %s to this one, or leave it unset). %s", approval.EnvApprovalSecret,
			store.RedactDSN(cfg.DBPath), approval.EnvApprovalSecret, approval.EnvApprovalSecretPrevious, rotate)
	case err != nil:
		return "", fmt.Errorf("check the approval secret against %s: %w", store.RedactDSN(cfg.DBPath), err)
	}
	return a, nil
}

// logSecretAgreement says what checkSecretAgreement changed, if anything.
func logSecretAgreement(log *slog.Logger, a store.SecretAgreement) {
	switch a {
	case store.SecretRotated:
		log.Info("approval secret rotated: tokens are signed with the new secret; the previous one still verifies while " +
			approval.EnvApprovalSecretPrevious + " is set")
	case store.SecretRotationPending:
		log.Warn("approval secret rotation under way: this replica signs with the secret being replaced; " +
			"restart it with the new secret (docs/tls.md, \"Rotating the approval secret\")")
	case store.SecretReplaced:
		log.Warn("approval secret record replaced (--reset-approval-secret-check): tokens of gates opened before no longer work; decide those gates by approval id")
	}
}
