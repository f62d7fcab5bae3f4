package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	// certificate identifies an executor (Options.ClientCertIdentity; docs/tls.md,
	// "Client certificates"). Clients without one are still served (bearer tokens).
	ClientCAFile string
	// CheckInterval is how often the pair's files are looked at again; 0 means
	// tlsfiles.DefaultCheckInterval.
	CheckInterval time.Duration
}

// serverTLS loads c's files into the server's tls.Config. Reloads and reload failures are
// logged to log. Errors name the flag and the file.
func serverTLS(c *TLSConfig, log *slog.Logger) (*tls.Config, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, fmt.Errorf("TLS needs both --tls-cert FILE and --tls-key FILE")
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
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.Certificate}
	if c.ClientCAFile != "" {
		pool, err := tlsfiles.CAPool(nil, c.ClientCAFile, "--tls-client-ca")
		if err != nil {
			return nil, err
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// ClientCertPrefix begins the identity of a caller known by its TLS client certificate:
// "cert:<the certificate's subject common name>" (docs/tls.md, "Client certificates"). An
// auth-file identity cannot have ':', so no token's identity can pass for one.
const ClientCertPrefix = "cert:"

// maxCommonNameBytes is X.509's upper bound of a common name (ub-common-name, RFC 5280).
const maxCommonNameBytes = 64

// clientCertIdentity is the identity of a request's verified client certificate, "" when it
// has none (no TLS, no certificate, or a chain that was not verified against the client CAs)
// or its subject has no usable common name (empty, over 64 bytes, or not printable ASCII).
func clientCertIdentity(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
	if cn == "" || len(cn) > maxCommonNameBytes {
		return ""
	}
	for _, ch := range cn {
		if ch <= ' ' || ch > '~' || ch == ',' {
			return ""
		}
	}
	return ClientCertPrefix + cn
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
