package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Timeouts of the verifier's requests to an issuer (docs/control-plane.md, "OIDC").
const (
	// DiscoveryTimeout bounds the discovery request (/.well-known/openid-configuration) and
	// every JWKS request of an issuer. The keys are cached (go-oidc's remote key set) and
	// fetched again only for a key id the cache does not hold.
	DiscoveryTimeout = 10 * time.Second
	// MaxClaimBytes caps each claim the control plane keeps (they end up in the run's row);
	// a token with a longer one is refused.
	MaxClaimBytes = 1024
	// MaxTokenBytes caps a bearer JWT before anything decodes it (GitHub's are about 1-2 KiB;
	// every kept claim is at most MaxClaimBytes). A longer one is refused unparsed.
	MaxTokenBytes = 32 << 10
	// MaxIdentityBytes caps the identity oidc:<repository>@<ref> (the store's limit for
	// started_by and owner, store.MaxIDBytes).
	MaxIdentityBytes = 256
)

// GitHubClaims are the claims of a verified GitHub Actions OIDC token that the control plane
// uses (GitHub, "About security hardening with OpenID Connect"; proto rbook.v1.GitHubJob).
type GitHubClaims struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
	// Actor is the login that triggered the workflow run.
	Actor string `json:"actor"`
	// Repository is owner/name; RepositoryID its numeric id as text.
	Repository   string `json:"repository"`
	RepositoryID string `json:"repository_id"`
	// RunID and RunAttempt identify the workflow run (as text, as GitHub sends them).
	RunID      string `json:"run_id"`
	RunAttempt string `json:"run_attempt"`
	SHA        string `json:"sha"`
	// WorkflowRef is owner/name/.github/workflows/file.yml@ref.
	WorkflowRef string `json:"workflow_ref"`
	// Ref is the git ref, e.g. refs/heads/main.
	Ref string `json:"ref"`
	// Environment is the job's environment, "" without one.
	Environment string `json:"environment"`
	// JobWorkflowRef is the workflow file the job's steps come from (a reusable workflow).
	JobWorkflowRef string `json:"job_workflow_ref"`
	// Expiry is the token's exp.
	Expiry time.Time `json:"-"`
}

// Identity is the caller's identity for these claims: "oidc:<repository>@<ref>" (docs/decisions/identity.md).
func (c *GitHubClaims) Identity() string { return "oidc:" + c.Repository + "@" + c.Ref }

// RefusedError is a token the verifier does not accept. Reason says why in words that are
// safe to send to the caller: never the token, only claims and configuration.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// UnavailableError is an issuer the verifier could not reach (discovery or JWKS): the
// token may be fine, so the caller should retry.
type UnavailableError struct {
	Issuer string
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("could not fetch the signing keys of issuer %s: %v", e.Issuer, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Verifier verifies GitHub Actions OIDC tokens against an OIDCConfig with go-oidc: the
// signature with the issuer's JWKS (discovered lazily on the first token of each issuer, then
// cached), iss on the allow-list, aud containing the audience, exp in the future; then the
// rules. Safe for concurrent use.
type Verifier struct {
	cfg    OIDCConfig
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	verifiers map[string]*oidc.IDTokenVerifier
}

// VerifierOption adjusts a Verifier.
type VerifierOption func(*Verifier)

// WithHTTPClient sets the HTTP client for discovery and JWKS requests (default: one with
// DiscoveryTimeout).
func WithHTTPClient(c *http.Client) VerifierOption { return func(v *Verifier) { v.client = c } }

// WithClock sets the clock that exp is checked against (tests).
func WithClock(now func() time.Time) VerifierOption { return func(v *Verifier) { v.now = now } }

// NewVerifier returns a verifier for cfg. It makes no request (issuers are discovered on
// first use, so the control plane starts while an issuer is down). Errors: an empty
// audience, no issuers, no rules.
func NewVerifier(cfg OIDCConfig, opts ...VerifierOption) (*Verifier, error) {
	switch {
	case cfg.Audience == "":
		return nil, errors.New("oidc: no audience: set audience in the OIDC config or rbook serve --public-url")
	case len(cfg.Issuers) == 0:
		return nil, errors.New("oidc: no issuers")
	case len(cfg.Rules) == 0:
		return nil, errors.New("oidc: no rules")
	}
	v := &Verifier{cfg: cfg, client: &http.Client{Timeout: DiscoveryTimeout}, now: time.Now,
		verifiers: map[string]*oidc.IDTokenVerifier{}}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Audience is the audience tokens must carry.
func (v *Verifier) Audience() string { return v.cfg.Audience }

// LooksLikeJWT reports whether a bearer value has the shape of a JWS compact serialization:
// three non-empty base64url segments separated by dots (RFC 7515, section 7.1). Auth-file
// tokens may hold dots too, but rarely two with base64url around them; such a token is then
// sent to the OIDC verifier and refused there, never looked up in the auth file.
func LooksLikeJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.IndexFunc(p, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return false
		}
	}
	return true
}

// unverifiedClaims decodes the payload of a JWT without checking anything: used only to pick
// the issuer's verifier and to word refusals; every decision is made on verified claims.
func unverifiedClaims(raw string) (iss string, aud []string, err error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", nil, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", nil, errors.New("its payload is not base64url")
	}
	var c struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", nil, errors.New("its payload is not a JSON object")
	}
	var one string
	if json.Unmarshal(c.Aud, &one) == nil {
		aud = []string{one}
	} else {
		_ = json.Unmarshal(c.Aud, &aud) // absent or malformed: no audience
	}
	return c.Iss, aud, nil
}

// verifierFor returns the go-oidc verifier of an allowed issuer, discovering it on first use
// (bounded by ctx and DiscoveryTimeout; a failure is not cached). The lock is not held while
// discovering, so an issuer that hangs does not stall the tokens of another one.
func (v *Verifier) verifierFor(ctx context.Context, iss string) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	iv, ok := v.verifiers[iss]
	v.mu.Unlock()
	if ok {
		return iv, nil
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), DiscoveryTimeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, iss)
	if err != nil {
		return nil, &UnavailableError{Issuer: iss, Err: err}
	}
	// The key set outlives this request: its own context carries only the HTTP client
	// (go-oidc drops the cancellation); each Verify waits for keys at most as long as its ctx.
	iv = p.VerifierContext(oidc.ClientContext(context.Background(), v.client), &oidc.Config{
		ClientID: v.cfg.Audience, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256}, Now: v.now,
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	if first, ok := v.verifiers[iss]; ok {
		return first, nil // a concurrent discovery finished first: keep one key cache
	}
	v.verifiers[iss] = iv
	return iv, nil
}

// Verify checks raw (a JWT from an Authorization header) and returns its claims when it is a
// valid token of an allowed issuer for the audience, unexpired, whose claims match a rule.
// Errors: *RefusedError (over MaxTokenBytes, issuer not allowed, wrong audience, expired, bad
// signature, claims missing or too long, no rule matches), *UnavailableError (the issuer's discovery or keys
// could not be fetched, or ctx ended while waiting for them).
func (v *Verifier) Verify(ctx context.Context, raw string) (*GitHubClaims, error) {
	if len(raw) > MaxTokenBytes {
		return nil, &RefusedError{Reason: fmt.Sprintf("the bearer token is %d bytes, over the limit of %d for an OIDC token", len(raw), MaxTokenBytes)}
	}
	iss, aud, err := unverifiedClaims(raw)
	if err != nil {
		return nil, &RefusedError{Reason: "the bearer token looks like a JWT but is not one: " + err.Error()}
	}
	if !slices.Contains(v.cfg.Issuers, iss) {
		return nil, &RefusedError{Reason: fmt.Sprintf("the OIDC token's issuer %q is not allowed here (allowed: %s)",
			clip(iss), strings.Join(v.cfg.Issuers, ", "))}
	}
	if !slices.Contains(aud, v.cfg.Audience) {
		return nil, &RefusedError{Reason: fmt.Sprintf("the OIDC token is for audience %q, not this control plane's %q "+
			"(request it with that audience: rbook run --oidc-audience, RBOOK_OIDC_AUDIENCE, or the Action's oidc-audience)",
			clip(strings.Join(aud, ", ")), v.cfg.Audience)}
	}
	iv, err := v.verifierFor(ctx, iss)
	if err != nil {
		return nil, err
	}
	tok, err := iv.Verify(ctx, raw)
	if err != nil {
		return nil, classify(iss, err)
	}
	c := &GitHubClaims{}
	if err := tok.Claims(c); err != nil {
		return nil, &RefusedError{Reason: "the OIDC token's claims are not GitHub's: " + err.Error()}
	}
	c.Expiry = tok.Expiry
	for _, f := range []struct{ name, v string }{
		{"iss", c.Issuer}, {"sub", c.Subject}, {"actor", c.Actor}, {"repository", c.Repository},
		{"repository_id", c.RepositoryID}, {"run_id", c.RunID}, {"run_attempt", c.RunAttempt}, {"sha", c.SHA},
		{"workflow_ref", c.WorkflowRef}, {"ref", c.Ref}, {"environment", c.Environment}, {"job_workflow_ref", c.JobWorkflowRef},
	} {
		if len(f.v) > MaxClaimBytes {
			return nil, &RefusedError{Reason: fmt.Sprintf("the OIDC token's claim %s is %d bytes, over the limit of %d", f.name, len(f.v), MaxClaimBytes)}
		}
	}
	if c.Repository == "" || c.Ref == "" {
		return nil, &RefusedError{Reason: "the OIDC token has no repository or ref claim: it is not a GitHub Actions job token"}
	}
	if id := c.Identity(); len(id) > MaxIdentityBytes {
		return nil, &RefusedError{Reason: fmt.Sprintf("the identity %s is %d bytes, over the limit of %d", clip(id), len(id), MaxIdentityBytes)}
	}
	for _, r := range v.cfg.Rules {
		if r.Matches(c) {
			return c, nil
		}
	}
	return nil, &RefusedError{Reason: fmt.Sprintf("no rule of the OIDC config matches repository %s (id %s), ref %s, environment %q, job_workflow_ref %s",
		c.Repository, c.RepositoryID, c.Ref, c.Environment, c.JobWorkflowRef)}
}

// classify turns a go-oidc verification error into a refusal (or unavailability) whose words
// name the check that failed.
func classify(iss string, err error) error {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return &RefusedError{Reason: fmt.Sprintf("the OIDC token expired at %s; fetch a new one", expired.Expiry.UTC().Format(time.RFC3339))}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), strings.Contains(err.Error(), "fetching keys"):
		return &UnavailableError{Issuer: iss, Err: err}
	case strings.Contains(err.Error(), "signature"):
		return &RefusedError{Reason: fmt.Sprintf("the OIDC token's signature does not verify with the keys of issuer %s", iss)}
	case strings.Contains(err.Error(), "before the nbf"):
		return &RefusedError{Reason: "the OIDC token is not valid yet (nbf)"}
	default:
		return &RefusedError{Reason: "the OIDC token was refused: " + strings.TrimPrefix(err.Error(), "oidc: ")}
	}
}

// clip shortens text from a token before it goes into a message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
