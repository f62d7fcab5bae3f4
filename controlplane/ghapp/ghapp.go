// Package ghapp is the control plane's GitHub App client (docs/approvals.md,
// "GitHub App webhook" and "Approve in GitHub"): installation tokens from the App's private
// key (an RS256 App JWT exchanged at POST /app/installations/{id}/access_tokens; the 1 h
// tokens are reused until a minute before they expire, then refreshed), a REST client
// (ghapi.Client) per installation on a configurable API URL (api.github.com, GHES
// https://HOST/api/v3, a test server), and the calls gates bound to GitHub environments
// need (docs/approvals.md, "Approve in GitHub"): a run's pending deployments, its review
// history (GET …/approvals), a custom protection rule's verdict and its status reports.
package ghapp

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/controlplane/ghapi"
)

// DefaultAPIURL is GitHub.com's REST API (rbook serve --github-api-url's default).
const DefaultAPIURL = "https://api.github.com"

// MaxCommentChars caps the comment of a protection rule's verdict and status report: GitHub
// accepts at most 1024 characters of Markdown (docs/approvals.md, "Approve in GitHub"). Longer text is cut at a
// character boundary and ends with "…" within the cap (Truncate).
const MaxCommentChars = 1024

// RequestTimeout bounds one GitHub API call, token refresh included.
const RequestTimeout = 30 * time.Second

// Config configures an App.
type Config struct {
	// AppID is the GitHub App's id (the JWT's iss).
	AppID int64
	// PrivateKeyPEM is the App's private key as GitHub issues it (PEM, RSA PKCS#1 or PKCS#8).
	PrivateKeyPEM []byte
	// APIURL is the REST API's base URL; "" means DefaultAPIURL. GHES: https://HOST/api/v3.
	APIURL string
	// Transport is the base round tripper; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// App is a GitHub App: its key and one token and client per installation. Safe for
// concurrent use.
type App struct {
	appID  int64
	apiURL string // with a trailing slash
	key    *rsa.PrivateKey
	hc     *http.Client
	now    func() time.Time
	mu     sync.Mutex
	insts  map[int64]*installation
}

// installation is one installation's token (fetched on first use, refreshed within
// tokenMargin of its expiry) and its client.
type installation struct {
	mu      sync.Mutex
	token   string
	expires time.Time
	client  *ghapi.Client
}

// tokenMargin is how long before its expiry an installation token is replaced.
const tokenMargin = time.Minute

// New checks cfg and parses the key. Errors: an AppID ≤ 0, a key that is not an RSA private
// key in PEM, an API URL that is not absolute http(s). Error text never holds key material.
func New(cfg Config) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("GitHub App id %d: must be a positive number", cfg.AppID)
	}
	key, err := parseKey(cfg.PrivateKeyPEM)
	if err != nil {
		return nil, err
	}
	api := cfg.APIURL
	if api == "" {
		api = DefaultAPIURL
	}
	u, err := url.Parse(api)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("GitHub API URL %q: need an absolute http(s) URL such as %s or https://HOST/api/v3", api, DefaultAPIURL)
	}
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &App{appID: cfg.AppID, apiURL: strings.TrimRight(api, "/") + "/", key: key,
		hc: &http.Client{Transport: base, Timeout: RequestTimeout}, now: time.Now, insts: map[int64]*installation{}}, nil
}

// parseKey reads an RSA private key in PEM (PKCS#1 or PKCS#8).
func parseKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("GitHub App private key: no PEM block (expected -----BEGIN RSA PRIVATE KEY-----)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("GitHub App private key: PEM block %q is not a PKCS#1 or PKCS#8 private key", block.Type)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("GitHub App private key: not an RSA key")
	}
	return rk, nil
}

// AppID is the App's id.
func (a *App) AppID() int64 { return a.appID }

// Client is the REST client of one installation (from a webhook's installation.id). Its
// token is fetched on first use and reused until a minute before it expires. Errors: an
// installation id ≤ 0.
func (a *App) Client(installationID int64) (*ghapi.Client, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("GitHub App installation id %d: must be a positive number", installationID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if in := a.insts[installationID]; in != nil {
		return in.client, nil
	}
	in := &installation{}
	c, err := ghapi.NewClient(a.apiURL, a.hc, func(ctx context.Context) (string, error) {
		tok, err := a.installationToken(ctx, installationID, in)
		return "token " + tok, err
	})
	if err != nil {
		return nil, err
	}
	in.client = c
	a.insts[installationID] = in
	return c, nil
}

// installationToken is in's token, first exchanging a fresh App JWT for one
// (POST /app/installations/{id}/access_tokens) when it has none or it expires within
// tokenMargin. Errors: GitHub's refusal or an answer without a token.
func (a *App) installationToken(ctx context.Context, id int64, in *installation) (string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.token != "" && a.now().Add(tokenMargin).Before(in.expires) {
		return in.token, nil
	}
	jwt, err := a.appJWT()
	if err != nil {
		return "", err
	}
	apps, err := ghapi.NewClient(a.apiURL, a.hc, func(context.Context) (string, error) { return "Bearer " + jwt, nil })
	if err != nil {
		return "", err
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if _, err := apps.Do(ctx, http.MethodPost, "app/installations/"+strconv.FormatInt(id, 10)+"/access_tokens", nil, &out); err != nil {
		return "", fmt.Errorf("GitHub App installation %d token: %w", id, err)
	}
	if out.Token == "" {
		return "", fmt.Errorf("GitHub App installation %d token: GitHub's answer has no token", id)
	}
	in.token, in.expires = out.Token, out.ExpiresAt
	return in.token, nil
}

// appJWT is the App's JSON Web Token (GitHub's "Generating a JSON Web Token (JWT) for a
// GitHub App"): RS256, iss = the App id, iat a minute in the past (clock drift), exp nine
// minutes ahead (GitHub allows at most ten after iat).
func (a *App) appJWT() (string, error) {
	now := a.now().Unix()
	claims, err := json.Marshal(struct {
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
		Iss string `json:"iss"`
	}{now - 60, now + 9*60, strconv.FormatInt(a.appID, 10)})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App JWT: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// Repo names a repository and the App installation that can act on it.
type Repo struct {
	InstallationID int64
	Owner, Name    string
}

// SplitFullName splits "owner/name" (a payload's repository.full_name, GITHUB_REPOSITORY).
// Errors: anything but two non-empty parts.
func SplitFullName(full string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q: want owner/name", full)
	}
	return owner, name, nil
}

// runPath is the REST path of a workflow run, owner and name escaped.
func runPath(r Repo, runID int64) string {
	return fmt.Sprintf("repos/%s/%s/actions/runs/%d", url.PathEscape(r.Owner), url.PathEscape(r.Name), runID)
}

// PendingDeployments lists the run's deployments waiting for review
// (GET /repos/{o}/{r}/actions/runs/{run_id}/pending_deployments).
func (a *App) PendingDeployments(ctx context.Context, r Repo, runID int64) ([]*ghapi.PendingDeployment, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return nil, err
	}
	var pd []*ghapi.PendingDeployment
	if _, err := c.Do(ctx, http.MethodGet, runPath(r, runID)+"/pending_deployments", nil, &pd); err != nil {
		return nil, fmt.Errorf("GitHub pending deployments of %s/%s run %d: %w", r.Owner, r.Name, runID, err)
	}
	return pd, nil
}

// RunAttempt is the workflow run's current attempt (GET /repos/{o}/{r}/actions/runs/{run_id}
// → run_attempt): 1 for the first run, n+1 after each re-run. A deployment_protection_rule
// payload does not carry the attempt, so the control plane asks (docs/approvals.md,
// "Approve in GitHub": a re-run must not be bound to a gate of an earlier attempt). Errors:
// GitHub's error, or an attempt < 1.
func (a *App) RunAttempt(ctx context.Context, r Repo, runID int64) (int, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return 0, err
	}
	var run ghapi.WorkflowRun
	if _, err := c.Do(ctx, http.MethodGet, runPath(r, runID), nil, &run); err != nil {
		return 0, fmt.Errorf("GitHub workflow run %s/%s %d: %w", r.Owner, r.Name, runID, err)
	}
	if run.RunAttempt < 1 {
		return 0, fmt.Errorf("GitHub workflow run %s/%s %d: run_attempt %d, want ≥ 1", r.Owner, r.Name, runID, run.RunAttempt)
	}
	return run.RunAttempt, nil
}

// RunApproval is one entry of a run's review history (GitHub's "environment-approvals"):
// who decided which environments, with what state ("approved", "rejected") and comment.
type RunApproval struct {
	Environments []RunApprovalEnvironment `json:"environments"`
	State        string                   `json:"state"`
	User         *ghapi.User              `json:"user"`
	Comment      string                   `json:"comment"`
}

// RunApprovalEnvironment is an environment of a RunApproval.
type RunApprovalEnvironment struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// RunApprovals reads the run's review history (GET /repos/{o}/{r}/actions/runs/{run_id}/approvals).
func (a *App) RunApprovals(ctx context.Context, r Repo, runID int64) ([]RunApproval, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return nil, err
	}
	var out []RunApproval
	if _, err := c.Do(ctx, http.MethodGet, runPath(r, runID)+"/approvals", nil, &out); err != nil {
		return nil, fmt.Errorf("GitHub approvals of %s/%s run %d: %w", r.Owner, r.Name, runID, err)
	}
	return out, nil
}

// Verdict states of a custom deployment protection rule.
const (
	StateApproved = "approved"
	StateRejected = "rejected"
)

// protectionRuleBody is the body of POST …/deployment_protection_rule: a verdict has a
// state, a status report has none.
type protectionRuleBody struct {
	EnvironmentName string `json:"environment_name"`
	State           string `json:"state,omitempty"`
	Comment         string `json:"comment"`
}

// ReviewProtectionRule gives the custom protection rule's verdict for environment
// (POST /repos/{o}/{r}/actions/runs/{run_id}/deployment_protection_rule with environment_name,
// state and comment). state is StateApproved or StateRejected; comment is cut to
// MaxCommentChars. Errors: another state, GitHub's error.
func (a *App) ReviewProtectionRule(ctx context.Context, r Repo, runID int64, environment, state, comment string) error {
	if state != StateApproved && state != StateRejected {
		return fmt.Errorf("protection rule verdict %q: want %q or %q", state, StateApproved, StateRejected)
	}
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return err
	}
	body := protectionRuleBody{EnvironmentName: environment, State: state, Comment: Truncate(comment, MaxCommentChars)}
	if _, err := c.Do(ctx, http.MethodPost, runPath(r, runID)+"/deployment_protection_rule", body, nil); err != nil {
		return fmt.Errorf("GitHub protection rule verdict for %s/%s run %d (%s): %w", r.Owner, r.Name, runID, environment, err)
	}
	return nil
}

// ReportProtectionRuleStatus posts a status report to the pending protection rule: the
// verdict's endpoint without "state" (GitHub keeps at most 10 per deployment). comment is
// Markdown, cut to MaxCommentChars.
func (a *App) ReportProtectionRuleStatus(ctx context.Context, r Repo, runID int64, environment, comment string) error {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return err
	}
	body := protectionRuleBody{EnvironmentName: environment, Comment: Truncate(comment, MaxCommentChars)}
	if _, err := c.Do(ctx, http.MethodPost, runPath(r, runID)+"/deployment_protection_rule", body, nil); err != nil {
		return fmt.Errorf("GitHub protection rule status report for %s/%s run %d (%s): %w", r.Owner, r.Name, runID, environment, err)
	}
	return nil
}

// CommentWithTail is a protection rule comment whose tail always survives the
// MaxCommentChars cap: head is cut (Truncate) to leave room for tail, then tail follows it
// (a gate's page link at the end of a status report or verdict; docs/console-links.md). A
// tail longer than half the cap would leave too little of head, so then head+tail is cut as
// one text instead.
func CommentWithTail(head, tail string) string {
	n := utf8.RuneCountInString(tail)
	if n > MaxCommentChars/2 {
		return Truncate(head+tail, MaxCommentChars)
	}
	return Truncate(head, MaxCommentChars-n) + tail
}

// Truncate returns s if it has at most max characters (runes), else its first max-1
// characters and "…": never more than max characters, never a split UTF-8 sequence (invalid
// bytes count as one character each and become U+FFFD in JSON anyway).
func Truncate(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
