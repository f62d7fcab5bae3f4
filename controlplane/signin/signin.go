// Package signin is how a person signs in to the approver's console (docs/console-signin.md):
// the plain HTTP endpoints under /auth/ (OpenID Connect authorization code flow with PKCE,
// GitHub's user authorization, the auth file's bearer tokens posted in a request body, and
// sign-out) and the sessions they create. A session lives in the control plane's store
// (only the SHA-256 of its id), so it survives a restart and works on every PostgreSQL
// replica; the browser holds the id in an HttpOnly cookie. The control plane's auth
// interceptor turns a valid session into the same caller a bearer token gives
// (Handler.Lookup), so authorization, the gate policy and four-eyes stay in one place.
package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// Cookie names. Over TLS the session cookie carries the __Host- prefix, which a browser
// accepts only with Secure, Path=/ and no Domain: no other host or plain-http page can set or
// shadow it.
const (
	// SessionCookie is the session cookie over TLS.
	SessionCookie = "__Host-rbook_session"
	// SessionCookieHTTP is the session cookie over plain http (a loopback server).
	SessionCookieHTTP = "rbook_session"
	// LoginCookie and LoginCookieHTTP hold a sign-in in progress (sealed; loginstate.go).
	LoginCookie     = "__Host-rbook_login"
	LoginCookieHTTP = "rbook_login"
)

// Errors of Lookup.
var (
	// ErrNoSession means the request carries no session cookie.
	ErrNoSession = errors.New("no session cookie")
	// ErrSessionEnded means the cookie names no live session: unknown, expired or signed out.
	ErrSessionEnded = errors.New("the session ended (signed out or expired); sign in again")
)

// Person is who signed in, as a token check or a provider reports it.
type Person struct {
	// Identity is what decisions are recorded under.
	Identity string
	// DisplayName is a name to show ("" for the identity).
	DisplayName string
	// Role is "approver" or "viewer".
	Role string
	// Groups are gate-policy group names; GitHubLogin the GitHub login, for four-eyes.
	Groups      []string
	GitHubLogin string
}

// Options configure a Handler.
type Options struct {
	// Store keeps the sessions. Required.
	Store *store.Store
	// Config is the parsed --sign-in-config; nil offers token sign-in only.
	Config *auth.SignInConfig
	// Secret is the control plane's approval secret (server.Options.Secret): the key that
	// seals the sign-in-in-progress cookie is derived from it, so every replica that shares
	// the secret can finish a sign-in another one began. Required, at least 16 bytes.
	Secret []byte
	// PublicURL is the URL browsers reach the control plane at (rbook serve --public-url);
	// providers redirect back to PublicURL + "/auth/callback/<id>". Required with providers.
	// An https URL also makes cookies Secure behind a proxy that ends TLS.
	PublicURL string
	// CheckToken checks an auth-file bearer token for POST /auth/token: the person and true,
	// or false. Nil turns token sign-in off. It must compare in constant time.
	CheckToken func(token string) (Person, bool)
	// HTTPClient talks to the providers; nil means a client with a 15-second timeout.
	HTTPClient *http.Client
	// Logger receives sign-in events (never a secret or a session id); nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves /auth/ and looks sessions up. Create it with New.
type Handler struct {
	opts      Options
	ttl       time.Duration
	sealKey   [32]byte
	mux       *http.ServeMux
	providers map[string]*provider
	lastSweep atomic.Int64 // unix seconds of the last SweepSessions
}

// provider is one configured provider with its lazily discovered OIDC endpoints.
type provider struct {
	cfg auth.SignInProvider

	mu       sync.Mutex
	oidc     *oidc.Provider // nil until discovery succeeded
	verifier *oidc.IDTokenVerifier
}

// New builds the /auth/ handler. Errors: a short Secret, no Store, providers without a
// PublicURL.
func New(opts Options) (*Handler, error) {
	if opts.Store == nil {
		return nil, errors.New("signin: no store")
	}
	if len(opts.Secret) < 16 {
		return nil, errors.New("signin: the approval secret is shorter than 16 bytes")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	h := &Handler{opts: opts, ttl: auth.DefaultSessionTTL, providers: map[string]*provider{}, sealKey: deriveKey(opts.Secret)}
	if opts.Config != nil {
		h.ttl = opts.Config.SessionTTL
		if len(opts.Config.Providers) > 0 && opts.PublicURL == "" {
			return nil, errors.New("signin: sign-in providers need the control plane's public URL (rbook serve --public-url https://…): providers redirect back to it")
		}
		for _, p := range opts.Config.Providers {
			h.providers[p.ID] = &provider{cfg: p}
		}
	}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /auth/login/{provider}", h.login)
	h.mux.HandleFunc("GET /auth/callback/{provider}", h.callback)
	h.mux.HandleFunc("POST /auth/token", h.tokenSignIn)
	h.mux.HandleFunc("POST /auth/logout", h.logout)
	return h, nil
}

// ServeHTTP serves the /auth/ endpoints. Responses are never cached.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

// ProviderInfo is a way to sign in, for a sign-in page (WhoAmI's sign_in_providers).
type ProviderInfo struct {
	// ID is the provider id ("token" for the auth file); Label the button text; Kind "oidc",
	// "github" or "token".
	ID, Label, Kind string
}

// Providers lists the ways to sign in, in the config file's order, then token sign-in when
// CheckToken is set.
func (h *Handler) Providers() []ProviderInfo {
	var out []ProviderInfo
	if h.opts.Config != nil {
		for _, p := range h.opts.Config.Providers {
			out = append(out, ProviderInfo{ID: p.ID, Label: p.Label, Kind: p.Kind})
		}
	}
	if h.opts.CheckToken != nil {
		out = append(out, ProviderInfo{ID: "token", Label: "Sign in with a token", Kind: "token"})
	}
	return out
}

// Secure reports whether cookies for a request are Secure (and __Host- named): the request
// came over TLS, or the public URL is https (TLS ended at a proxy).
func (h *Handler) Secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(h.opts.PublicURL, "https://")
}

// SecureTransport is Secure for a request known only by whether it came over TLS.
func (h *Handler) SecureTransport(tls bool) bool {
	return tls || strings.HasPrefix(h.opts.PublicURL, "https://")
}

func sessionCookieName(secure bool) string {
	if secure {
		return SessionCookie
	}
	return SessionCookieHTTP
}

// Lookup finds the live session whose id the request's session cookie (the name for secure
// or plain http, SecureTransport) carries. Errors: ErrNoSession, ErrSessionEnded, or the
// store's error. The id is never logged or returned in an error.
func (h *Handler) Lookup(ctx context.Context, header http.Header, secure bool) (store.Session, error) {
	c, err := (&http.Request{Header: header}).Cookie(sessionCookieName(secure))
	if err != nil || c.Value == "" {
		return store.Session{}, ErrNoSession
	}
	if len(c.Value) > 128 {
		return store.Session{}, ErrSessionEnded
	}
	sess, err := h.opts.Store.GetSession(ctx, hashID(c.Value))
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, ErrSessionEnded
	}
	if err != nil {
		return store.Session{}, err
	}
	if !sess.Active(h.opts.Now()) {
		return store.Session{}, ErrSessionEnded
	}
	return sess, nil
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// startSession stores a session for p and sets its cookie on w.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, p Person, method, providerID string) (store.Session, error) {
	now := h.opts.Now()
	id := randomID()
	sess := store.Session{IDHash: hashID(id), Identity: p.Identity, DisplayName: p.DisplayName, Role: p.Role, Groups: p.Groups,
		GitHubLogin: p.GitHubLogin, Method: method, Provider: providerID, CreatedAt: now, ExpiresAt: now.Add(h.ttl)}
	if err := h.opts.Store.CreateSession(r.Context(), sess); err != nil {
		return store.Session{}, err
	}
	secure := h.Secure(r)
	http.SetCookie(w, &http.Cookie{Name: sessionCookieName(secure), Value: id, Path: "/", Expires: sess.ExpiresAt,
		MaxAge: int(h.ttl / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	h.opts.Logger.Info("signed in", "identity", p.Identity, "role", p.Role, "method", method, "provider", providerID,
		"expires_at", sess.ExpiresAt.UTC().Format(time.RFC3339))
	h.sweep(r.Context(), now)
	return sess, nil
}

// sweepEvery is how often sign-ins and sign-outs delete expired and revoked sessions.
const sweepEvery = 10 * time.Minute

func (h *Handler) sweep(ctx context.Context, now time.Time) {
	last := h.lastSweep.Load()
	if now.Unix()-last < int64(sweepEvery/time.Second) || !h.lastSweep.CompareAndSwap(last, now.Unix()) {
		return
	}
	if n, err := h.opts.Store.SweepSessions(ctx, now); err != nil {
		h.opts.Logger.Warn("deleting ended console sessions failed", "err", err)
	} else if n > 0 {
		h.opts.Logger.Info("deleted ended console sessions", "count", n)
	}
}

// wantsJSON reports whether the request is a fetch from the page (a JSON body or Accept),
// which gets JSON answers instead of redirects.
func wantsJSON(r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return ct == "application/json" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// fail answers a sign-in problem: JSON {"error": msg} or a plain-text page with a link home.
func fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
		return
	}
	http.Error(w, msg+"\n\nBack to the console: /", status)
}

// maxTokenBody caps a POST /auth/token body.
const maxTokenBody = 8 << 10

// tokenSignIn is POST /auth/token: the auth file's bearer token in the body, as a form
// (token=…&return=/path) or JSON ({"token": "…"}). Never in a URL: a query string is
// refused. Executor tokens are refused: a console session approves or views.
func (h *Handler) tokenSignIn(w http.ResponseWriter, r *http.Request) {
	if h.opts.CheckToken == nil {
		fail(w, r, http.StatusNotFound, "this control plane has no auth file, so there is no token sign-in")
		return
	}
	if r.URL.RawQuery != "" {
		fail(w, r, http.StatusBadRequest, "send the token in the request body, never in the URL")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTokenBody+1))
	if err != nil {
		fail(w, r, http.StatusBadRequest, "the request body is unreadable")
		return
	}
	if len(body) > maxTokenBody {
		fail(w, r, http.StatusRequestEntityTooLarge, "the request body is larger than 8 KiB")
		return
	}
	var tok, ret string
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var in struct {
			Token  string `json:"token"`
			Return string `json:"return"`
		}
		if json.Unmarshal(body, &in) != nil {
			fail(w, r, http.StatusBadRequest, `the body is not JSON like {"token": "…"}`)
			return
		}
		tok, ret = in.Token, in.Return
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			fail(w, r, http.StatusBadRequest, "the form body is malformed")
			return
		}
		tok, ret = form.Get("token"), form.Get("return")
	default:
		fail(w, r, http.StatusUnsupportedMediaType, "send the token as a form (token=…) or as JSON ({\"token\": \"…\"})")
		return
	}
	tok = strings.TrimSpace(tok)
	p, ok := h.opts.CheckToken(tok)
	if tok == "" || !ok {
		h.opts.Logger.Info("token sign-in refused", "peer", r.RemoteAddr)
		fail(w, r, http.StatusUnauthorized, "that token is not in this control plane's auth file; ask its operator for an approver or viewer token")
		return
	}
	if p.Role != "approver" && p.Role != "viewer" {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("%s has role %s, which is for executors (the CLI and CI), not the console; sign in with an approver or viewer token", p.Identity, p.Role))
		return
	}
	sess, err := h.startSession(w, r, p, "token", "")
	if err != nil {
		h.opts.Logger.Error("storing a console session failed", "err", err)
		fail(w, r, http.StatusServiceUnavailable, "the session could not be stored (the database is unreachable); try again in a moment")
		return
	}
	if wantsJSON(r) {
		writeSessionJSON(w, sess)
		return
	}
	http.Redirect(w, r, localPath(ret), http.StatusSeeOther)
}

func writeSessionJSON(w http.ResponseWriter, sess store.Session) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"identity": sess.Identity, "display_name": sess.DisplayName, "role": sess.Role,
		"expires_at": sess.ExpiresAt.UTC().Format(time.RFC3339)})
}

// logout is POST /auth/logout: revokes the session (every replica refuses it from then on)
// and clears the cookie. It succeeds without a session too.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	secure := h.Secure(r)
	if c, err := r.Cookie(sessionCookieName(secure)); err == nil && c.Value != "" && len(c.Value) <= 128 {
		if err := h.opts.Store.RevokeSession(r.Context(), hashID(c.Value)); err != nil {
			h.opts.Logger.Error("revoking a console session failed", "err", err)
			fail(w, r, http.StatusServiceUnavailable, "signing out failed (the database is unreachable); try again in a moment")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookieName(secure), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	h.sweep(r.Context(), h.opts.Now())
	if wantsJSON(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// maxReturnPath caps a return path.
const maxReturnPath = 2048

// localPath returns ret when it is a path on this server ("/approvals/x?y"), else "/": an
// absolute URL, a scheme-relative "//host", a backslash (which browsers read as a slash) or
// a control character could send the browser elsewhere after sign-in (an open redirect).
func localPath(ret string) string {
	if ret == "" || len(ret) > maxReturnPath || !strings.HasPrefix(ret, "/") || strings.HasPrefix(ret, "//") ||
		strings.ContainsAny(ret, "\\") {
		return "/"
	}
	for _, c := range ret {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	u, err := url.Parse(ret)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(u.Path, "/auth/") {
		return "/"
	}
	return ret
}
