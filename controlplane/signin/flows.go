package signin

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/ghapi"
)

// loginTTL is how long a sign-in may take between /auth/login and /auth/callback.
const loginTTL = 10 * time.Minute

// loginState is a sign-in in progress, kept in the browser in a sealed cookie (AES-256-GCM
// under a key derived from the control plane's secret), so any replica can finish it.
type loginState struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

// deriveKey is HMAC-SHA256(secret, label): a key of its own for sealing login state, so the
// approval-token HMAC key is never used for anything else.
func deriveKey(secret []byte) [32]byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("rbook console sign-in state v1"))
	var k [32]byte
	copy(k[:], m.Sum(nil))
	return k
}

func (h *Handler) seal(ls loginState, name string) string {
	block, _ := aes.NewCipher(h.sealKey[:])
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	plain, _ := json.Marshal(ls)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(name)))
}

func (h *Handler) unseal(value, name string) (loginState, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	block, _ := aes.NewCipher(h.sealKey[:])
	aead, _ := cipher.NewGCM(block)
	if err != nil || len(raw) < aead.NonceSize() {
		return loginState{}, false
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(name))
	var ls loginState
	if err != nil || json.Unmarshal(plain, &ls) != nil || h.opts.Now().Unix() > ls.Expires {
		return loginState{}, false
	}
	return ls, true
}

func loginCookieName(secure bool) string {
	if secure {
		return LoginCookie
	}
	return LoginCookieHTTP
}

func (h *Handler) oauthConfig(p *provider, endpoint oauth2.Endpoint) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: endpoint, Scopes: p.cfg.Scopes,
		RedirectURL: h.opts.PublicURL + "/auth/callback/" + p.cfg.ID}
}

func (h *Handler) clientContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, h.opts.HTTPClient)
}

// discover returns the OIDC provider's endpoints and ID-token verifier, fetching the
// discovery document on first use (and again after a failure), so an identity provider that
// is down does not stop the control plane from starting.
func (h *Handler) discover(ctx context.Context, p *provider) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oidc != nil {
		return p.oidc, p.verifier, nil
	}
	// The provider keeps this context to fetch keys later: only its HTTP client, no deadline.
	op, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), h.opts.HTTPClient), p.cfg.Issuer)
	if err != nil {
		return nil, nil, err
	}
	p.oidc, p.verifier = op, op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: h.opts.Now})
	return p.oidc, p.verifier, nil
}

func (h *Handler) githubEndpoint(p *provider) oauth2.Endpoint {
	return oauth2.Endpoint{AuthURL: p.cfg.WebURL + "/login/oauth/authorize", TokenURL: p.cfg.WebURL + "/login/oauth/access_token",
		AuthStyle: oauth2.AuthStyleInParams}
}

// login is GET /auth/login/{provider}?return=/path: it seals a new state, nonce and PKCE
// verifier into the login cookie and redirects to the provider's authorization endpoint.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	p := h.providers[r.PathValue("provider")]
	if p == nil {
		fail(w, r, http.StatusNotFound, "no sign-in provider has that id; the sign-in page lists the ones this control plane offers")
		return
	}
	ls := loginState{Provider: p.cfg.ID, State: randomID(), Nonce: randomID(), Verifier: oauth2.GenerateVerifier(),
		Return: localPath(r.URL.Query().Get("return")), Expires: h.opts.Now().Add(loginTTL).Unix()}
	var target string
	switch p.cfg.Kind {
	case auth.KindOIDC:
		op, _, err := h.discover(r.Context(), p)
		if err != nil {
			h.opts.Logger.Warn("OIDC discovery failed", "provider", p.cfg.ID, "issuer", p.cfg.Issuer, "err", err)
			fail(w, r, http.StatusBadGateway, fmt.Sprintf("the identity provider %s did not answer its discovery request; try again in a moment, or tell the control plane's operator", p.cfg.ID))
			return
		}
		target = h.oauthConfig(p, op.Endpoint()).AuthCodeURL(ls.State, oauth2.S256ChallengeOption(ls.Verifier), oidc.Nonce(ls.Nonce))
	case auth.KindGitHub:
		target = h.oauthConfig(p, h.githubEndpoint(p)).AuthCodeURL(ls.State, oauth2.S256ChallengeOption(ls.Verifier))
	}
	secure := h.Secure(r)
	name := loginCookieName(secure)
	http.SetCookie(w, &http.Cookie{Name: name, Value: h.seal(ls, name), Path: "/", MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, target, http.StatusFound)
}

// callback is GET /auth/callback/{provider}?code=…&state=…: it checks the state against the
// login cookie, exchanges the code with the PKCE verifier, learns who signed in, applies the
// provider's rules and starts a session.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	p := h.providers[r.PathValue("provider")]
	if p == nil {
		fail(w, r, http.StatusNotFound, "no sign-in provider has that id")
		return
	}
	secure := h.Secure(r)
	name := loginCookieName(secure)
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	c, err := r.Cookie(name)
	var ls loginState
	ok := err == nil
	if ok {
		ls, ok = h.unseal(c.Value, name)
	}
	q := r.URL.Query()
	if !ok || ls.Provider != p.cfg.ID || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(ls.State)) != 1 {
		fail(w, r, http.StatusBadRequest, "this sign-in does not match the one this browser started (or it took over 10 minutes); start again from the sign-in page")
		return
	}
	if e := q.Get("error"); e != "" {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("%s did not sign you in (%s); start again from the sign-in page", p.cfg.Label, truncate(e, 80)))
		return
	}
	ctx, cancel := context.WithTimeout(h.clientContext(r.Context()), 30*time.Second)
	defer cancel()
	var person Person
	var method string
	switch p.cfg.Kind {
	case auth.KindOIDC:
		person, err = h.finishOIDC(ctx, p, q.Get("code"), ls)
		method = "oidc"
	case auth.KindGitHub:
		person, err = h.finishGitHub(ctx, p, q.Get("code"), ls)
		method = "github"
	}
	var refusal *refusedError
	switch {
	case errors.As(err, &refusal):
		h.opts.Logger.Info("console sign-in refused", "provider", p.cfg.ID, "reason", refusal.msg)
		fail(w, r, http.StatusForbidden, refusal.msg)
		return
	case err != nil:
		h.opts.Logger.Warn("console sign-in failed", "provider", p.cfg.ID, "err", err)
		fail(w, r, http.StatusBadGateway, fmt.Sprintf("signing in with %s failed while talking to it; try again, or tell the control plane's operator (the server log has the details)", p.cfg.ID))
		return
	}
	if _, err := h.startSession(w, r, person, method, p.cfg.ID); err != nil {
		h.opts.Logger.Error("storing a console session failed", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "the session could not be stored (the database is unreachable); try again in a moment")
		return
	}
	http.Redirect(w, r, localPath(ls.Return), http.StatusSeeOther)
}

// refusedError is a sign-in the provider completed but the rules or claims refuse; msg is
// shown to the person.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func (h *Handler) finishOIDC(ctx context.Context, p *provider, code string, ls loginState) (Person, error) {
	op, verifier, err := h.discover(ctx, p)
	if err != nil {
		return Person{}, err
	}
	tok, err := h.oauthConfig(p, op.Endpoint()).Exchange(ctx, code, oauth2.VerifierOption(ls.Verifier))
	if err != nil {
		return Person{}, fmt.Errorf("token exchange: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Person{}, errors.New("the token response has no id_token")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return Person{}, fmt.Errorf("ID token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(ls.Nonce)) != 1 {
		return Person{}, errors.New("ID token: the nonce is not the one this sign-in sent")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Person{}, fmt.Errorf("ID token claims: %w", err)
	}
	str := func(k string) string { s, _ := claims[k].(string); return s }
	email := str("email")
	if v, set := claims["email_verified"].(bool); set && !v {
		email = "" // an unverified address proves nothing
	}
	var groups []string
	if list, ok := claims[p.cfg.GroupsClaim].([]any); ok {
		for _, g := range list {
			if s, ok := g.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	who := str(p.cfg.IdentityClaim)
	if p.cfg.IdentityClaim == "email" {
		who = email
	}
	if who == "" || len(who) > 200 || strings.ContainsAny(who, ", \t\r\n") {
		return Person{}, &refusedError{fmt.Sprintf("%s gave no usable %s for you (an email must be verified); ask its administrator", p.cfg.ID, p.cfg.IdentityClaim)}
	}
	role, ruleGroups := p.cfg.Match(auth.SignInPerson{Email: email, Groups: groups})
	if role == "" {
		return Person{}, &refusedError{fmt.Sprintf("%s signed you in as %s, but no rule of this control plane gives that account a role; ask its operator", p.cfg.ID, who)}
	}
	display := str("name")
	if display == "" {
		display = who
	}
	return Person{Identity: "oidc:" + who, DisplayName: truncate(display, 200), Role: role, Groups: policyGroups(ruleGroups, groups)}, nil
}

// policyGroups are the rules' groups, then the groups claim's values that are valid gate
// policy group names, without repeats.
func policyGroups(ruleGroups, claimGroups []string) []string {
	out := append([]string(nil), ruleGroups...)
	for _, g := range claimGroups {
		if validGroup(g) && !contains(out, g) && len(out) < 50 {
			out = append(out, g)
		}
	}
	return out
}

func validGroup(g string) bool {
	if g == "" || len(g) > 64 {
		return false
	}
	for _, c := range g {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (h *Handler) finishGitHub(ctx context.Context, p *provider, code string, ls loginState) (Person, error) {
	tok, err := h.oauthConfig(p, h.githubEndpoint(p)).Exchange(ctx, code, oauth2.VerifierOption(ls.Verifier))
	if err != nil {
		return Person{}, fmt.Errorf("token exchange: %w", err)
	}
	gh, err := ghapi.NewClient(p.cfg.APIURL, h.opts.HTTPClient, func(context.Context) (string, error) { return "Bearer " + tok.AccessToken, nil })
	if err != nil {
		return Person{}, err
	}
	var u ghapi.User
	if _, err := gh.Do(ctx, http.MethodGet, "user", nil, &u); err != nil {
		return Person{}, fmt.Errorf("GET /user: %w", err)
	}
	login := u.Login
	if login == "" {
		return Person{}, errors.New("GET /user answered no login")
	}
	var person auth.SignInPerson
	needTeams := false
	for _, r := range p.cfg.Rules {
		if r.GitHubTeam != "" {
			needTeams = true
		}
		if r.GitHubOrg != "" && !contains(person.GitHubOrgs, r.GitHubOrg) {
			var m ghapi.Membership
			resp, err := gh.Do(ctx, http.MethodGet, "user/memberships/orgs/"+url.PathEscape(r.GitHubOrg), nil, &m)
			switch {
			case err == nil && m.State == "active":
				person.GitHubOrgs = append(person.GitHubOrgs, r.GitHubOrg)
			case resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden):
			case err != nil:
				return Person{}, fmt.Errorf("GET /user/memberships/orgs/%s: %w", r.GitHubOrg, err)
			}
		}
	}
	if needTeams {
		page := 1
		for range 10 {
			var teams []ghapi.Team
			resp, err := gh.Do(ctx, http.MethodGet, "user/teams?per_page=100&page="+strconv.Itoa(page), nil, &teams)
			if err != nil {
				return Person{}, fmt.Errorf("GET /user/teams: %w", err)
			}
			for _, t := range teams {
				person.GitHubTeams = append(person.GitHubTeams, t.Organization.GetLogin()+"/"+t.Slug)
			}
			if page = ghapi.NextPage(resp); page == 0 {
				break
			}
		}
	}
	role, groups := p.cfg.Match(person)
	if role == "" {
		return Person{}, &refusedError{fmt.Sprintf("GitHub signed you in as %s, but no rule of this control plane gives that account a role (it checks organisation and team membership); ask its operator", login)}
	}
	display := u.Name
	if display == "" {
		display = login
	}
	return Person{Identity: "github:" + login, DisplayName: truncate(display, 200), Role: role, Groups: groups, GitHubLogin: login}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
