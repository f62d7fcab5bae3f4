package ghfake

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The "Sign in with GitHub" half of the fake (docs/console-signin.md, "Testing with the
// fakes"), shaped like GitHub's documented web application flow ("Authorizing OAuth apps",
// "Generating a user access token for a GitHub App"): GET /login/oauth/authorize consents at
// once as the user set with SetOAuthUser and redirects to redirect_uri with a code and the
// state; POST /login/oauth/access_token exchanges the code (client id and secret checked, and
// the PKCE code_verifier when the authorization carried a code_challenge) for a user token;
// GET /user, GET /user/teams and GET /user/memberships/orgs/{org} answer with that token.

// OAuth client credentials the fake accepts.
const (
	// OAuthClientID is the client id of the fake's OAuth app.
	OAuthClientID = "Iv1.fakeconsole0001"
	// OAuthClientSecret is its client secret.
	OAuthClientSecret = "fake-oauth-client-secret-0123456789"
)

// OAuthUser is the GitHub account the fake signs in.
type OAuthUser struct {
	// Login and Name are GET /user's login and name; ID its id.
	Login, Name string
	ID          int64
	// Orgs are organisations the user is an active member of.
	Orgs []string
	// Teams are the user's teams as "org/team-slug".
	Teams []string
}

type oauthGrant struct {
	user                                 OAuthUser
	challenge, challengeMethod, redirect string
	expires                              time.Time
}

// SetOAuthUser sets the account the authorization endpoint signs in from now on (until then:
// octocat, a member of octo-org without teams).
func (s *Server) SetOAuthUser(u OAuthUser) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthUser = u
}

func (s *Server) mountOAuth(mux *http.ServeMux) {
	s.oauthUser = OAuthUser{Login: "octocat", Name: "The Octocat", ID: 583231, Orgs: []string{"octo-org"}}
	s.oauthCodes = map[string]oauthGrant{}
	s.userTokens = map[string]OAuthUser{}
	mux.HandleFunc("GET /login/oauth/authorize", s.oauthAuthorize)
	mux.HandleFunc("POST /login/oauth/access_token", s.oauthAccessToken)
	mux.HandleFunc("GET /user", s.userAuthed(func(w http.ResponseWriter, _ *http.Request, u OAuthUser) {
		writeJSON(w, http.StatusOK, map[string]any{"login": u.Login, "id": u.ID, "name": u.Name, "type": "User"})
	}))
	mux.HandleFunc("GET /user/teams", s.userAuthed(func(w http.ResponseWriter, _ *http.Request, u OAuthUser) {
		teams := []map[string]any{}
		for i, t := range u.Teams {
			org, slug, _ := strings.Cut(t, "/")
			teams = append(teams, map[string]any{"id": i + 1, "slug": slug, "name": slug, "organization": map[string]any{"login": org}})
		}
		writeJSON(w, http.StatusOK, teams)
	}))
	mux.HandleFunc("GET /user/memberships/orgs/{org}", s.userAuthed(func(w http.ResponseWriter, r *http.Request, u OAuthUser) {
		for _, o := range u.Orgs {
			if strings.EqualFold(o, r.PathValue("org")) {
				writeJSON(w, http.StatusOK, map[string]any{"state": "active", "role": "member",
					"organization": map[string]any{"login": o}, "user": map[string]any{"login": u.Login}})
				return
			}
		}
		ghError(w, http.StatusNotFound, "Not Found")
	}))
}

func (s *Server) oauthAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if q.Get("client_id") != OAuthClientID || err != nil || !redirect.IsAbs() {
		http.Error(w, "unknown client_id or bad redirect_uri", http.StatusBadRequest)
		return
	}
	if m := q.Get("code_challenge_method"); q.Get("code_challenge") != "" && m != "S256" {
		http.Error(w, "code_challenge_method must be S256", http.StatusBadRequest)
		return
	}
	code := oauthRandom()
	s.mu.Lock()
	s.oauthCodes[code] = oauthGrant{user: s.oauthUser, challenge: q.Get("code_challenge"), challengeMethod: q.Get("code_challenge_method"),
		redirect: redirect.String(), expires: s.now().Add(10 * time.Minute)}
	s.mu.Unlock()
	rq := redirect.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	redirect.RawQuery = rq.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (s *Server) oauthAccessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusOK, map[string]string{"error": "bad_verification_code"})
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	code := r.PostForm.Get("code")
	s.mu.Lock()
	g, known := s.oauthCodes[code]
	delete(s.oauthCodes, code)
	s.mu.Unlock()
	if id != OAuthClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(OAuthClientSecret)) != 1 {
		// GitHub answers 200 with an error object for a bad client.
		writeJSON(w, http.StatusOK, map[string]string{"error": "incorrect_client_credentials"})
		return
	}
	if !known || !s.now().Before(g.expires) || (r.PostForm.Get("redirect_uri") != "" && r.PostForm.Get("redirect_uri") != g.redirect) {
		writeJSON(w, http.StatusOK, map[string]string{"error": "bad_verification_code"})
		return
	}
	if g.challenge != "" {
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1 {
			writeJSON(w, http.StatusOK, map[string]string{"error": "bad_verification_code"})
			return
		}
	}
	tok := "gho_" + oauthRandom()
	s.mu.Lock()
	s.userTokens[tok] = g.user
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"access_token": tok, "token_type": "bearer", "scope": "read:org"})
}

// userAuthed requires a user token the fake issued ("Authorization: Bearer T" or "token T").
func (s *Server) userAuthed(next func(http.ResponseWriter, *http.Request, OAuthUser)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			tok, ok = strings.CutPrefix(h, "token ")
		}
		s.mu.Lock()
		u, known := s.userTokens[tok]
		s.mu.Unlock()
		if !ok || !known {
			ghError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		next(w, r, u)
	}
}

func oauthRandom() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// SignInConfigYAML is a provider entry of a sign-in config (auth.ParseSignInConfig) for this
// fake under id, with the client secret in the environment variable secretEnv (set it to
// OAuthClientSecret) and the given rules (YAML list items, indented as rules of a provider),
// for other packages' tests.
func (s *Server) SignInConfigYAML(id, secretEnv, rules string) string {
	return "  - id: " + id + "\n    kind: github\n    client_id: " + OAuthClientID + "\n    client_secret_env: " + secretEnv +
		"\n    web_url: " + s.URL + "\n    api_url: " + s.URL + "\n    rules:\n" + rules
}
