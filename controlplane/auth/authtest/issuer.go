// Package authtest is a local GitHub Actions OIDC issuer for tests (docs/control-plane.md, "OIDC"): an
// httptest server that serves OpenID discovery and the JWKS of a generated RSA key, mints
// tokens with GitHub's claims (signed with github.com/go-jose/go-jose/v4), and plays the
// runner's token endpoint (ACTIONS_ID_TOKEN_REQUEST_URL). It is also an OpenID provider for
// console sign-in (login.go): an authorization endpoint that consents as a configured user
// and a token endpoint that checks the PKCE verifier. Only tests import it.
package authtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a running local issuer. URL is its issuer value (http://127.0.0.1:PORT).
type Issuer struct {
	URL string
	// Lifetime is the exp - iat of minted tokens (default 5 minutes, like GitHub's).
	Lifetime time.Duration
	key      *rsa.PrivateKey
	kid      string
	// JWKSRequests counts requests for the key set.
	JWKSRequests atomic.Int64
	srv          *httptest.Server
	login        login
}

// Close stops the issuer before the test ends (an issuer that went down).
func (iss *Issuer) Close() { iss.srv.Close() }

// NewIssuer starts an issuer; it stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{Lifetime: 5 * time.Minute, key: newKey(t), kid: "test-key-1"}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.URL, iss.srv = srv.URL, srv
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": iss.URL, "jwks_uri": iss.URL + "/.well-known/jwks",
			"authorization_endpoint": iss.URL + "/authorize", "token_endpoint": iss.URL + "/token",
			"subject_types_supported": []string{"public", "pairwise"}, "response_types_supported": []string{"id_token", "code"},
			"code_challenge_methods_supported": []string{"S256"}, "grant_types_supported": []string{"authorization_code"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"claims_supported":                      []string{"sub", "aud", "exp", "iat", "iss", "repository", "ref", "actor"},
		})
	})
	mux.HandleFunc("/.well-known/jwks", func(w http.ResponseWriter, _ *http.Request) {
		iss.JWKSRequests.Add(1)
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &iss.key.PublicKey, KeyID: iss.kid, Algorithm: "RS256", Use: "sig"}}})
	})
	iss.mountLogin(mux)
	return iss
}

func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Claims are GitHub-shaped claims of a job in owner/repo on refs/heads/main, run by octocat
// (GitHub, "About security hardening with OpenID Connect", example token).
func Claims() map[string]any {
	return map[string]any{
		"sub": "repo:owner/repo:ref:refs/heads/main", "actor": "octocat", "actor_id": "583231",
		"repository": "owner/repo", "repository_id": "424242", "repository_owner": "owner",
		"run_id": "1234567890", "run_number": "7", "run_attempt": "2", "sha": "0123456789abcdef0123456789abcdef01234567",
		"ref": "refs/heads/main", "ref_type": "branch", "environment": "production", "event_name": "workflow_dispatch",
		"workflow_ref":     "owner/repo/.github/workflows/deploy.yml@refs/heads/main",
		"job_workflow_ref": "owner/repo/.github/workflows/deploy.yml@refs/heads/main",
	}
}

// Mint signs a token for audience with claims (Claims() when nil) over iss, iat, nbf and exp
// (now + Lifetime). Keys of claims override those.
func (iss *Issuer) Mint(t testing.TB, audience string, claims map[string]any) string {
	t.Helper()
	return sign(t, iss.key, iss.kid, iss.standard(audience, claims))
}

// MintExpired is Mint with exp an hour ago.
func (iss *Issuer) MintExpired(t testing.TB, audience string) string {
	t.Helper()
	c := iss.standard(audience, nil)
	c["iat"], c["nbf"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	return sign(t, iss.key, iss.kid, c)
}

// MintForged is Mint signed by another key under the issuer's key id: the signature cannot
// verify with the issuer's JWKS.
func (iss *Issuer) MintForged(t testing.TB, audience string) string {
	t.Helper()
	return sign(t, newKey(t), iss.kid, iss.standard(audience, nil))
}

func (iss *Issuer) standard(audience string, claims map[string]any) map[string]any {
	c := Claims()
	now := time.Now()
	c["iss"], c["aud"], c["iat"], c["nbf"], c["exp"] = iss.URL, audience, now.Unix(), now.Unix(), now.Add(iss.Lifetime).Unix()
	maps.Copy(c, claims)
	return c
}

func sign(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	tok, err := signErr(key, kid, claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func signErr(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// TokenEndpoint is a fake runner token service: GET <RequestURL>&audience=AUD with
// "Authorization: Bearer <RequestToken>" answers {"value": "<jwt>"} minted by its issuer for
// AUD (GitHub's shape); a wrong request token gets 401.
type TokenEndpoint struct {
	// RequestURL and RequestToken are ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN.
	RequestURL, RequestToken string
	// Requests counts tokens minted; LastAudience holds the last audience asked for (string).
	Requests     atomic.Int64
	LastAudience atomic.Value
}

// NewTokenEndpoint starts a token endpoint that mints tokens of iss with claims (nil:
// Claims()); it stops when the test ends.
func NewTokenEndpoint(t testing.TB, iss *Issuer, claims map[string]any) *TokenEndpoint {
	t.Helper()
	te := &TokenEndpoint{RequestToken: "runner-request-token-0123456789"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/idtoken" || r.Header.Get("Authorization") != "Bearer "+te.RequestToken {
			http.Error(w, "bad request token", http.StatusUnauthorized)
			return
		}
		aud := r.URL.Query().Get("audience")
		te.LastAudience.Store(aud)
		tok, err := signErr(iss.key, iss.kid, iss.standard(aud, claims))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		te.Requests.Add(1)
		writeJSON(w, map[string]string{"value": tok})
	}))
	t.Cleanup(srv.Close)
	te.RequestURL = srv.URL + "/idtoken?api-version=2.0"
	return te
}

// Env is the job environment for the endpoint: ACTIONS_ID_TOKEN_REQUEST_URL=… and _TOKEN=….
func (te *TokenEndpoint) Env() []string {
	return []string{"ACTIONS_ID_TOKEN_REQUEST_URL=" + te.RequestURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN=" + te.RequestToken}
}
