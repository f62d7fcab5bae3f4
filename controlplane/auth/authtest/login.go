package authtest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// The console sign-in half of the local issuer (docs/console-signin.md, "Testing with the
// fakes"): an OpenID Connect provider's authorization code flow with PKCE, as
// https://openid.net/specs/openid-connect-core-1_0.html and RFC 7636 describe it. The
// authorization endpoint consents at once as the issuer's user (SetUser); the token endpoint
// checks the client, the redirect URI and the PKCE code_verifier (S256 only) before it issues
// an ID token with the user's claims and the request's nonce.

// Client credentials the issuer accepts at its token endpoint.
const (
	// ClientID is the OAuth client id registered with every Issuer.
	ClientID = "rbook-console"
	// ClientSecret is that client's secret (client_secret_basic or client_secret_post).
	ClientSecret = "console-client-secret-0123456789"
)

// DefaultUser is the person an Issuer signs in until SetUser: alice@example.com, in group sre.
func DefaultUser() map[string]any {
	return map[string]any{"sub": "00u-alice", "email": "alice@example.com", "email_verified": true,
		"name": "Alice Example", "preferred_username": "alice", "groups": []string{"sre"}}
}

// login is the state of the issuer's code flow.
type login struct {
	mu    sync.Mutex
	user  map[string]any
	codes map[string]grant
	// tokenRefusals counts token requests refused (bad client, code, redirect or verifier).
	tokenRefusals int
}

type grant struct {
	challenge, nonce, redirectURI, clientID string
	user                                    map[string]any
	expires                                 time.Time
}

// SetUser sets the claims (sub, email, name, groups, …) of the person the authorization
// endpoint signs in from now on.
func (iss *Issuer) SetUser(claims map[string]any) {
	iss.login.mu.Lock()
	defer iss.login.mu.Unlock()
	iss.login.user = maps.Clone(claims)
}

// TokenRefusals is how many token requests the issuer refused (a missing or wrong PKCE
// verifier, an unknown or reused code, a wrong client or redirect URI).
func (iss *Issuer) TokenRefusals() int {
	iss.login.mu.Lock()
	defer iss.login.mu.Unlock()
	return iss.login.tokenRefusals
}

func (iss *Issuer) mountLogin(mux *http.ServeMux) {
	iss.login.user = DefaultUser()
	iss.login.codes = map[string]grant{}
	mux.HandleFunc("GET /authorize", iss.authorize)
	mux.HandleFunc("POST /token", iss.token)
}

// authorize answers the authorization request with a redirect to redirect_uri carrying a
// one-time code and the state. It refuses (400, no redirect) an unknown client, a
// response_type other than code, and a request without an S256 code_challenge.
func (iss *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("client_id") != ClientID:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case err != nil || !redirect.IsAbs():
		http.Error(w, "redirect_uri must be an absolute URL", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE is required: code_challenge with code_challenge_method S256", http.StatusBadRequest)
		return
	}
	code := randomString()
	iss.login.mu.Lock()
	iss.login.codes[code] = grant{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirectURI: redirect.String(),
		clientID: ClientID, user: maps.Clone(iss.login.user), expires: time.Now().Add(time.Minute)}
	iss.login.mu.Unlock()
	rq := redirect.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	redirect.RawQuery = rq.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code for an ID token (RFC 6749 section 4.1.3, RFC 7636 section 4.6).
func (iss *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	iss.login.mu.Lock()
	g, known := iss.login.codes[r.PostForm.Get("code")]
	delete(iss.login.codes, r.PostForm.Get("code")) // one use only
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	ok := r.PostForm.Get("grant_type") == "authorization_code" && known && time.Now().Before(g.expires) &&
		id == ClientID && subtle.ConstantTimeCompare([]byte(secret), []byte(ClientSecret)) == 1 &&
		r.PostForm.Get("redirect_uri") == g.redirectURI &&
		r.PostForm.Get("code_verifier") != "" && subtle.ConstantTimeCompare([]byte(challenge), []byte(g.challenge)) == 1
	if !ok {
		iss.login.tokenRefusals++
	}
	iss.login.mu.Unlock()
	if !ok {
		tokenError(w, "invalid_grant")
		return
	}
	claims := maps.Clone(g.user)
	now := time.Now()
	claims["iss"], claims["aud"], claims["iat"], claims["exp"] = iss.URL, g.clientID, now.Unix(), now.Add(iss.Lifetime).Unix()
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	idToken, err := signErr(iss.key, iss.kid, claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, map[string]any{"access_token": randomString(), "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"error":"` + code + `"}`))
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// SignInConfigYAML is a provider entry of a sign-in config (auth.ParseSignInConfig) for this
// issuer under id, with the client secret in the environment variable secretEnv (set it to
// ClientSecret) and the given rules (YAML list items, indented as rules of a provider), for
// other packages' tests.
func (iss *Issuer) SignInConfigYAML(t testing.TB, id, secretEnv, rules string) string {
	t.Helper()
	return "  - id: " + id + "\n    kind: oidc\n    issuer: " + iss.URL + "\n    insecure_http_issuer: true\n" +
		"    client_id: " + ClientID + "\n    client_secret_env: " + secretEnv + "\n    scopes: [openid, email, profile, groups]\n" +
		"    rules:\n" + rules
}
