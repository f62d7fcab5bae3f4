// Package approval issues and verifies the HMAC-SHA-256 resume tokens of confirm gates
// (docs/spec/playbooks.md, "Approval tokens"; docs/decisions/approval-tokens.md).
//
// A token is base64url(payload JSON) "." base64url(HMAC-SHA-256(secret, domain || payload
// segment)). The payload carries the specification's {run_id, node_id, issued_at} plus an expiry, a
// nonce and the plan digest, so a token approves exactly the gate and the content that were
// shown. Verify checks the size, then the MAC (hmac.Equal), and only then parses the JSON:
// nothing an attacker sends is interpreted before it is authenticated. Tokens are bearer
// secrets: no error or log line of this package contains one, and the store keeps only
// TokenHash(token).
package approval

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits and format constants.
const (
	// MinSecretBytes is the shortest accepted HMAC secret (bytes).
	MinSecretBytes = 16
	// MaxTokenBytes caps a token; longer input is refused before any decoding.
	MaxTokenBytes = 4096
	// MaxClaimBytes caps each string claim (bytes), so an issued token stays well under
	// MaxTokenBytes.
	MaxClaimBytes = 256
	// NonceBytes is the size of a generated nonce (128 bits).
	NonceBytes = 16
	// formatVersion is the payload's "v"; a new format gets a new number and domain.
	formatVersion = 1
	// macDomain separates these MACs from any other use of the same secret (RBOOK_SECRET may
	// be shared).
	macDomain = "rbook approval token v1\n"
	macLen    = sha256.Size
)

// Environment variables holding the secret, in order of preference (docs/decisions/approval-tokens.md).
const (
	EnvApprovalSecret = "RBOOK_APPROVAL_SECRET"
	EnvSecret         = "RBOOK_SECRET"
	// EnvApprovalSecretPrevious holds the secret a rotation replaced: it verifies tokens but
	// never signs one (docs/tls.md, "Rotating the approval secret").
	EnvApprovalSecretPrevious = "RBOOK_APPROVAL_SECRET_PREVIOUS"
)

// Errors. Their messages never include the token.
var (
	// ErrTokenInvalid: malformed, oversized, forged or altered token, or one bound to another
	// gate or plan (CheckBinding).
	ErrTokenInvalid = errors.New("approval token is invalid")
	// ErrTokenExpired: an authentic token used at or after its expiry.
	ErrTokenExpired = errors.New("approval token has expired")
	// ErrNoSecret: neither secret variable is set (SecretFromEnv).
	ErrNoSecret = errors.New("no approval secret: set " + EnvApprovalSecret + " (or " + EnvSecret +
		") to a random value of at least 16 bytes, e.g. export " + EnvApprovalSecret + "=$(head -c 32 /dev/urandom | base64)")
	// ErrWeakSecret: the secret is shorter than MinSecretBytes.
	ErrWeakSecret = fmt.Errorf("approval secret is shorter than %d bytes", MinSecretBytes)
)

// SecretFromEnv returns the HMAC secret from RBOOK_APPROVAL_SECRET, else RBOOK_SECRET
// (docs/decisions/approval-tokens.md; the specification's CLEO_PLAYBOOK_SECRET / CLEO_SECRET under rbook's names). getenv is
// os.Getenv in production. A set but short variable is an error naming that variable, not a
// reason to fall back. Errors: ErrNoSecret, ErrWeakSecret.
func SecretFromEnv(getenv func(string) string) ([]byte, error) {
	for _, name := range []string{EnvApprovalSecret, EnvSecret} {
		v := getenv(name)
		if v == "" {
			continue
		}
		if len(v) < MinSecretBytes {
			return nil, fmt.Errorf("%w: %s has %d bytes", ErrWeakSecret, name, len(v))
		}
		return []byte(v), nil
	}
	return nil, ErrNoSecret
}

// PreviousSecretFromEnv returns the verify-only secret of RBOOK_APPROVAL_SECRET_PREVIOUS, nil
// when it is unset (docs/tls.md, "Rotating the approval secret"). Errors: ErrWeakSecret naming
// the variable.
func PreviousSecretFromEnv(getenv func(string) string) ([]byte, error) {
	v := getenv(EnvApprovalSecretPrevious)
	if v == "" {
		return nil, nil
	}
	if len(v) < MinSecretBytes {
		return nil, fmt.Errorf("%w: %s has %d bytes", ErrWeakSecret, EnvApprovalSecretPrevious, len(v))
	}
	return []byte(v), nil
}

// checkDomain is what SecretCheck MACs: a value of its own, so a key-check value is never a
// token's MAC.
const checkDomain = "rbook approval secret check v1"

// SecretCheck is secret's key-check value: lowercase hex HMAC-SHA256(secret, "rbook approval
// secret check v1"). The control plane records it (never the secret) so replicas that
// disagree on the secret are found at start-up (store.Store.CheckSecret).
func SecretCheck(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(checkDomain))
	return hex.EncodeToString(m.Sum(nil))
}

// Claims is what a token binds.
type Claims struct {
	// RunID and NodeID name the gate (the specification: {runId, nodeId, issuedAt}).
	RunID  string
	NodeID string
	// IssuedAt and ExpiresAt are kept to whole seconds (Unix time in the payload).
	IssuedAt  time.Time
	ExpiresAt time.Time
	// Nonce makes every token unique. Issue fills it with NonceBytes random bytes when empty;
	// a caller may set it (for example to the approval id) so the token can be re-derived
	// from the stored approval when a RequestApproval is retried.
	Nonce string
	// PlanDigest is the run's plan content hash: an edited runbook gets new tokens.
	PlanDigest string
}

// payload is the token's JSON; short keys keep tokens short.
type payload struct {
	V          int    `json:"v"`
	RunID      string `json:"run"`
	NodeID     string `json:"node"`
	IssuedAt   int64  `json:"iat"`
	ExpiresAt  int64  `json:"exp"`
	Nonce      string `json:"nonce"`
	PlanDigest string `json:"plan"`
}

// b64 is strict: non-zero padding bits are refused, so no two spellings decode to one MAC.
var b64 = base64.RawURLEncoding.Strict()

// NewNonce returns NonceBytes random bytes, base64url-encoded.
func NewNonce() (string, error) {
	b := make([]byte, NonceBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("approval: nonce: %w", err)
	}
	return b64.EncodeToString(b), nil
}

// Issue signs c into a token. Times are truncated to seconds; ExpiresAt must be after
// IssuedAt; RunID, NodeID and PlanDigest are required; each claim is at most MaxClaimBytes.
// The same secret and claims (nonce included) always give the same token.
// Errors: ErrWeakSecret, a message naming the bad claim.
func Issue(secret []byte, c Claims) (string, error) {
	if len(secret) < MinSecretBytes {
		return "", ErrWeakSecret
	}
	if c.Nonce == "" {
		n, err := NewNonce()
		if err != nil {
			return "", err
		}
		c.Nonce = n
	}
	for _, f := range []struct{ name, v string }{
		{"run_id", c.RunID}, {"node_id", c.NodeID}, {"plan_digest", c.PlanDigest}, {"nonce", c.Nonce},
	} {
		if f.v == "" {
			return "", fmt.Errorf("approval: claim %s is required", f.name)
		}
		if len(f.v) > MaxClaimBytes {
			return "", fmt.Errorf("approval: claim %s is %d bytes, over the limit of %d", f.name, len(f.v), MaxClaimBytes)
		}
	}
	iat, exp := c.IssuedAt.Unix(), c.ExpiresAt.Unix()
	if c.IssuedAt.IsZero() || c.ExpiresAt.IsZero() || exp <= iat {
		return "", errors.New("approval: claims need issued_at and an expires_at at least a second later")
	}
	body, err := json.Marshal(payload{V: formatVersion, RunID: c.RunID, NodeID: c.NodeID, IssuedAt: iat,
		ExpiresAt: exp, Nonce: c.Nonce, PlanDigest: c.PlanDigest})
	if err != nil {
		return "", fmt.Errorf("approval: encode claims: %w", err)
	}
	seg := b64.EncodeToString(body)
	tok := seg + "." + b64.EncodeToString(mac(secret, seg))
	if len(tok) > MaxTokenBytes {
		return "", fmt.Errorf("approval: token would be %d bytes, over the limit of %d", len(tok), MaxTokenBytes)
	}
	return tok, nil
}

func mac(secret []byte, payloadSegment string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(macDomain))
	m.Write([]byte(payloadSegment))
	return m.Sum(nil)
}

// Verify authenticates token and returns its claims (times in UTC). It refuses input over
// MaxTokenBytes before decoding anything, compares the MAC with hmac.Equal before reading
// the payload, and never panics. A token is expired when now is at or after its expiry.
// On ErrTokenExpired the (authentic) claims are returned too, so the caller can name the gate.
// The caller must still check that the claims match the gate being decided (CheckBinding).
// Errors: ErrTokenInvalid, ErrTokenExpired, ErrWeakSecret.
func Verify(secret []byte, token string, now time.Time) (Claims, error) {
	if len(secret) < MinSecretBytes {
		return Claims{}, ErrWeakSecret
	}
	if len(token) == 0 || len(token) > MaxTokenBytes {
		return Claims{}, ErrTokenInvalid
	}
	seg, sig, ok := strings.Cut(token, ".")
	if !ok || seg == "" || b64.DecodedLen(len(sig)) != macLen {
		return Claims{}, ErrTokenInvalid
	}
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, seg)) {
		return Claims{}, ErrTokenInvalid
	}
	body, err := b64.DecodeString(seg)
	if err != nil {
		return Claims{}, ErrTokenInvalid
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() || p.V != formatVersion ||
		p.RunID == "" || p.NodeID == "" || p.PlanDigest == "" || p.Nonce == "" || p.ExpiresAt <= p.IssuedAt {
		return Claims{}, ErrTokenInvalid
	}
	c := Claims{RunID: p.RunID, NodeID: p.NodeID, IssuedAt: time.Unix(p.IssuedAt, 0).UTC(),
		ExpiresAt: time.Unix(p.ExpiresAt, 0).UTC(), Nonce: p.Nonce, PlanDigest: p.PlanDigest}
	if !now.Before(c.ExpiresAt) {
		return c, ErrTokenExpired
	}
	return c, nil
}

// CheckBinding refuses claims issued for another run, gate or plan digest
// (docs/decisions/approval-tokens.md: a token approves exactly the content that was shown):
// a valid signature alone does not decide this gate. Errors: ErrTokenInvalid.
func (c Claims) CheckBinding(runID, nodeID, planDigest string) error {
	if c.RunID != runID || c.NodeID != nodeID || c.PlanDigest != planDigest {
		return fmt.Errorf("%w: it was issued for another gate or plan", ErrTokenInvalid)
	}
	return nil
}

// TokenHash is the lowercase hex SHA-256 of token: what the store keeps and looks up, so a
// leaked database holds no usable token.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
