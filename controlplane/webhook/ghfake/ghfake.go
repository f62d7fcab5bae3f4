// Package ghfake is a fake GitHub for tests (docs/approvals.md, "Approve in GitHub"): an
// httptest server with the REST endpoints a GitHub App uses for environment reviews, which
// checks the App's JWT and installation tokens and records every request it receives, and
// builders of webhook deliveries shaped like GitHub's documented payloads and signed like
// GitHub signs them (X-Hub-Signature-256: HMAC-SHA256 of the body with the webhook secret).
// It also plays GitHub's OAuth web flow and the user endpoints "Sign in with GitHub" reads
// (oauth.go: SetOAuthUser, OAuthClientID, OAuthClientSecret, SignInConfigYAML).
//
// It is for tests only; nothing outside _test.go files and test helpers may import it.
package ghfake

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the fake received, as it arrived: method, path (with the /api/v3
// prefix of a GHES-style URL removed), headers, exact body, and the status it answered.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	Status       int
}

// Server is the fake GitHub. Its zero value is not usable: create it with New.
type Server struct {
	// URL is the API base URL to configure the App with (dotcom style, no /api/v3).
	URL string
	// AppID is the App id the JWT's iss must carry.
	AppID int64
	// Key is the App's private key; KeyPEM is it as a PKCS#1 PEM, KeyFile that PEM on disk.
	Key     *rsa.PrivateKey
	KeyPEM  []byte
	KeyFile string

	srv *httptest.Server

	mu       sync.Mutex
	recorded chan struct{} // closed (and replaced) whenever a request is recorded
	now      func() time.Time
	tokenTTL time.Duration
	tokens   map[string]token
	issued   int
	requests []Request
	pending  map[string]json.RawMessage // run path → pending_deployments response
	reviews  map[string]json.RawMessage // run path → approvals response
	failures map[string][]int           // "METHOD path" → statuses to answer next, in order
	attempts map[string]int             // run path → run_attempt of GET …/actions/runs/{run} (default 1)

	oauthUser  OAuthUser             // the account the OAuth flow signs in (oauth.go)
	oauthCodes map[string]oauthGrant // authorization code → grant
	userTokens map[string]OAuthUser  // user access token → account
}

type token struct {
	installation string
	expires      time.Time
}

// DefaultTokenTTL is how long an installation token lives, as on GitHub (1 h).
const DefaultTokenTTL = time.Hour

// New starts a fake GitHub for App appID with a freshly generated 2048-bit RSA key written
// to a file in t's temp folder; it is closed at t's cleanup.
func New(t testing.TB, appID int64) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Server{AppID: appID, Key: key, KeyPEM: keyPEM, KeyFile: keyFile, now: time.Now, tokenTTL: DefaultTokenTTL, recorded: make(chan struct{}),
		tokens: map[string]token{}, pending: map[string]json.RawMessage{}, reviews: map[string]json.RawMessage{},
		failures: map[string][]int{}, attempts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", s.accessToken)
	mux.HandleFunc("GET /repos/{o}/{r}/actions/runs/{run}", s.authed(s.getRun))
	mux.HandleFunc("GET /repos/{o}/{r}/actions/runs/{run}/pending_deployments", s.authed(s.getPending))
	mux.HandleFunc("POST /repos/{o}/{r}/actions/runs/{run}/pending_deployments", s.authed(s.reviewPending))
	mux.HandleFunc("GET /repos/{o}/{r}/actions/runs/{run}/approvals", s.authed(s.getApprovals))
	mux.HandleFunc("POST /repos/{o}/{r}/actions/runs/{run}/deployment_protection_rule", s.authed(s.protectionRule))
	s.mountOAuth(mux)
	s.srv = httptest.NewServer(s.record(mux))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// SetTokenTTL sets the lifetime of the installation tokens issued from now on.
func (s *Server) SetTokenTTL(d time.Duration) { s.mu.Lock(); s.tokenTTL = d; s.mu.Unlock() }

// TokensIssued is how many installation tokens the fake issued.
func (s *Server) TokensIssued() int { s.mu.Lock(); defer s.mu.Unlock(); return s.issued }

// SetPendingDeployments sets the JSON array GET …/runs/{runID}/pending_deployments answers.
func (s *Server) SetPendingDeployments(owner, repo string, runID int64, jsonArray string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[runKey(owner, repo, runID)] = json.RawMessage(jsonArray)
}

// SetApprovals sets the JSON array GET …/runs/{runID}/approvals answers.
func (s *Server) SetApprovals(owner, repo string, runID int64, jsonArray string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reviews[runKey(owner, repo, runID)] = json.RawMessage(jsonArray)
}

// SetRunAttempt sets the run_attempt GET /repos/{owner}/{repo}/actions/runs/{runID} answers
// (1 until set): a re-run of the workflow is attempt 2.
func (s *Server) SetRunAttempt(owner, repo string, runID int64, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[runKey(owner, repo, runID)] = attempt
}

// RunPath is the path of a workflow run (GET: the run, with run_attempt).
func RunPath(owner, repo string, runID int64) string {
	return fmt.Sprintf("/repos/%s/%s/actions/runs/%d", owner, repo, runID)
}

// FailNext makes the next len(statuses) requests to method path answer those statuses (with
// a GitHub-style error body) instead of being served: for retry and back-off tests.
func (s *Server) FailNext(method, path string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := method + " " + path
	s.failures[k] = append(s.failures[k], statuses...)
}

// Requests returns a copy of every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// AwaitRequests waits until ok holds for the requests received for method and path (as
// RequestsTo returns them), woken by each request the fake records. It returns them, and
// false when timeout passed first.
func (s *Server) AwaitRequests(method, path string, timeout time.Duration, ok func([]Request) bool) ([]Request, bool) {
	expired := time.After(timeout)
	for {
		s.mu.Lock()
		next := s.recorded
		s.mu.Unlock()
		got := s.RequestsTo(method, path)
		if ok(got) {
			return got, true
		}
		select {
		case <-next:
		case <-expired:
			return got, false
		}
	}
}

// RequestsTo returns the requests received for method and path (exact, e.g.
// "/repos/o/r/actions/runs/42/deployment_protection_rule").
func (s *Server) RequestsTo(method, path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// ProtectionRulePath is the path of a run's deployment_protection_rule endpoint.
func ProtectionRulePath(owner, repo string, runID int64) string {
	return fmt.Sprintf("/repos/%s/%s/actions/runs/%d/deployment_protection_rule", owner, repo, runID)
}

func runKey(owner, repo string, runID int64) string {
	return fmt.Sprintf("%s/%s/%d", owner, repo, runID)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// record strips a GHES /api/v3 prefix, applies FailNext, serves and records the request.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/api/v3"); ok {
			r.URL.Path = p
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		s.mu.Lock()
		k := r.Method + " " + r.URL.Path
		var fail int
		if q := s.failures[k]; len(q) > 0 {
			fail, s.failures[k] = q[0], q[1:]
		}
		s.mu.Unlock()
		if fail != 0 {
			ghError(sw, fail, "injected failure")
		} else {
			next.ServeHTTP(sw, r)
		}
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Status: sw.status})
		close(s.recorded)
		s.recorded = make(chan struct{})
		s.mu.Unlock()
	})
}

func ghError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// accessToken checks the App JWT (RS256 with Key, iss = AppID, iat ≤ now+60 s < exp ≤ iat+10 min,
// GitHub's rules) and issues an installation token for {id}.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	if err := s.VerifyAppJWT(jwt); err != nil {
		ghError(w, http.StatusUnauthorized, err.Error())
		return
	}
	s.mu.Lock()
	s.issued++
	tok := fmt.Sprintf("ghs_fake%04d", s.issued)
	exp := s.now().Add(s.tokenTTL).UTC().Truncate(time.Second)
	s.tokens[tok] = token{installation: r.PathValue("id"), expires: exp}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.Format(time.RFC3339),
		"permissions": map[string]string{"actions": "read", "deployments": "write"}, "repository_selection": "selected"})
}

// VerifyAppJWT checks an App JWT the way GitHub does: RS256 signed by Key, iss = AppID, and
// iat/exp around now with exp at most 10 minutes after iat.
func (s *Server) VerifyAppJWT(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("JWT has %d parts, want 3", len(parts))
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if err := decodePart(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return fmt.Errorf("JWT header: alg %q, want RS256 (%v)", hdr.Alg, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("JWT signature: %v", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.Key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("JWT signature does not verify with the App's key")
	}
	var claims struct {
		Iss string `json:"iss"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	if err := decodePart(parts[1], &claims); err != nil {
		return fmt.Errorf("JWT claims: %v", err)
	}
	if claims.Iss != strconv.FormatInt(s.AppID, 10) {
		return fmt.Errorf("JWT iss %q, want the App id %d", claims.Iss, s.AppID)
	}
	now := s.now().Unix()
	if claims.Iat > now+60 || claims.Exp <= now || claims.Exp-claims.Iat > 600 {
		return fmt.Errorf("JWT iat %d / exp %d out of range at %d", claims.Iat, claims.Exp, now)
	}
	return nil
}

func decodePart(p string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// authed requires "Authorization: token T" with an unexpired installation token.
func (s *Server) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
		s.mu.Lock()
		t, known := s.tokens[tok]
		now := s.now()
		s.mu.Unlock()
		if !ok || !known || !now.Before(t.expires) {
			ghError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		next(w, r)
	}
}

func (s *Server) runKeyOf(r *http.Request) (string, bool) {
	run, err := strconv.ParseInt(r.PathValue("run"), 10, 64)
	return runKey(r.PathValue("o"), r.PathValue("r"), run), err == nil
}

// getRun answers a workflow run with its id and run_attempt (the fields the App reads).
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	k, ok := s.runKeyOf(r)
	if !ok {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	attempt := s.attempts[k]
	s.mu.Unlock()
	if attempt == 0 {
		attempt = 1
	}
	id, _ := strconv.ParseInt(r.PathValue("run"), 10, 64)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "run_attempt": attempt, "status": "waiting"})
}

func (s *Server) getPending(w http.ResponseWriter, r *http.Request) { s.serveSet(w, r, s.pending) }

func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) { s.serveSet(w, r, s.reviews) }

func (s *Server) serveSet(w http.ResponseWriter, r *http.Request, set map[string]json.RawMessage) {
	k, ok := s.runKeyOf(r)
	if !ok {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	body := set[k]
	s.mu.Unlock()
	if body == nil {
		body = json.RawMessage("[]")
	}
	writeJSON(w, http.StatusOK, body)
}

// reviewPending accepts {"environment_ids":[…],"state":"approved|rejected","comment":"…"}.
func (s *Server) reviewPending(w http.ResponseWriter, r *http.Request) {
	var req struct {
		EnvironmentIDs []int64 `json:"environment_ids"`
		State          string  `json:"state"`
		Comment        *string `json:"comment"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.EnvironmentIDs) == 0 ||
		(req.State != "approved" && req.State != "rejected") || req.Comment == nil {
		ghError(w, http.StatusUnprocessableEntity, "Invalid request: environment_ids, state and comment are required")
		return
	}
	writeJSON(w, http.StatusOK, []any{})
}

// protectionRule accepts a verdict {"environment_name","state","comment"} or a status report
// (no "state"); GitHub answers 204 to both.
func (s *Server) protectionRule(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		ghError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	var env string
	if json.Unmarshal(req["environment_name"], &env) != nil || env == "" {
		ghError(w, http.StatusUnprocessableEntity, "Invalid request: environment_name is required")
		return
	}
	if raw, ok := req["state"]; ok {
		var state string
		if json.Unmarshal(raw, &state) != nil || (state != "approved" && state != "rejected") {
			ghError(w, http.StatusUnprocessableEntity, "Invalid request: state must be approved or rejected")
			return
		}
	}
	var comment string
	if raw, ok := req["comment"]; ok && json.Unmarshal(raw, &comment) == nil && len([]rune(comment)) > 1024 {
		ghError(w, http.StatusUnprocessableEntity, "Invalid request: comment is too long (maximum is 1024 characters)")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
