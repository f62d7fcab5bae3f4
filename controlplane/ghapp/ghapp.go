// Package ghapp is the control plane's GitHub App client (docs/approvals.md,
// "GitHub App webhook" and "Approve in GitHub"): installation tokens from the App's private key via ghinstallation (the
// 1 h tokens are reused until a minute before they expire, then refreshed), a go-github
// v90 client per installation on a configurable API URL (api.github.com, GHES
// https://HOST/api/v3, a test server), and the calls gates bound to GitHub environments need (docs/approvals.md, "Approve in GitHub"): a run's pending
// deployments, its review history (GET …/approvals), a custom protection rule's verdict
// and its status reports.
//
// It is named ghapp, not github, so that go-github's package keeps its usual name here.
package ghapp

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v90/github"
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

// App is a GitHub App: its key and one token source per installation. Safe for concurrent use.
type App struct {
	appID   int64
	apiURL  string // with a trailing slash
	keyPEM  []byte
	base    http.RoundTripper
	mu      sync.Mutex
	clients map[int64]*github.Client
}

// New checks cfg and parses the key. Errors: an AppID ≤ 0, a key that is not an RSA private
// key in PEM, an API URL that is not absolute http(s). Error text never holds key material.
func New(cfg Config) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("GitHub App id %d: must be a positive number", cfg.AppID)
	}
	if err := checkKey(cfg.PrivateKeyPEM); err != nil {
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
	if _, err := ghinstallation.NewAppsTransport(base, cfg.AppID, cfg.PrivateKeyPEM); err != nil {
		return nil, errors.New("GitHub App private key: not an RSA private key in PEM")
	}
	return &App{appID: cfg.AppID, apiURL: strings.TrimRight(api, "/") + "/", keyPEM: append([]byte(nil), cfg.PrivateKeyPEM...),
		base: base, clients: map[int64]*github.Client{}}, nil
}

// checkKey accepts an RSA private key in PEM (PKCS#1 or PKCS#8).
func checkKey(pemBytes []byte) error {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return errors.New("GitHub App private key: no PEM block (expected -----BEGIN RSA PRIVATE KEY-----)")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("GitHub App private key: PEM block %q is not a PKCS#1 or PKCS#8 private key", block.Type)
	}
	if _, ok := k.(*rsa.PrivateKey); !ok {
		return errors.New("GitHub App private key: not an RSA key")
	}
	return nil
}

// AppID is the App's id.
func (a *App) AppID() int64 { return a.appID }

// Client is the go-github client of one installation (from a webhook's installation.id).
// Its token is fetched on first use and reused until a minute before it expires.
func (a *App) Client(installationID int64) (*github.Client, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("GitHub App installation id %d: must be a positive number", installationID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.clients[installationID]; c != nil {
		return c, nil
	}
	// One AppsTransport per installation: ghinstallation's token refresh writes the shared
	// AppsTransport's BaseURL and Client under the installation's own lock only.
	apps, err := ghinstallation.NewAppsTransport(a.base, a.appID, a.keyPEM)
	if err != nil {
		return nil, errors.New("GitHub App private key: not an RSA private key in PEM")
	}
	apps.BaseURL = strings.TrimRight(a.apiURL, "/")
	itr := ghinstallation.NewFromAppsTransport(apps, installationID)
	itr.BaseURL = apps.BaseURL
	itr.Client = &http.Client{Transport: a.base, Timeout: RequestTimeout}
	api := a.apiURL
	c, err := github.NewClient(github.WithTransport(itr), github.WithURLs(&api, &api), github.WithTimeout(RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("GitHub client: %w", err)
	}
	a.clients[installationID] = c
	return c, nil
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

// PendingDeployments lists the run's deployments waiting for review
// (GET /repos/{o}/{r}/actions/runs/{run_id}/pending_deployments).
func (a *App) PendingDeployments(ctx context.Context, r Repo, runID int64) ([]*github.PendingDeployment, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return nil, err
	}
	pd, _, err := c.Actions.GetPendingDeployments(ctx, r.Owner, r.Name, runID)
	if err != nil {
		return nil, fmt.Errorf("GitHub pending deployments of %s/%s run %d: %w", r.Owner, r.Name, runID, err)
	}
	return pd, nil
}

// RunAttempt is the workflow run's current attempt (GET /repos/{o}/{r}/actions/runs/{run_id}
// → run_attempt; go-github's ActionsService.GetWorkflowRunByID): 1 for the first run, n+1
// after each re-run. A deployment_protection_rule payload does not carry the attempt, so the
// control plane asks (docs/approvals.md, "Approve in GitHub": a re-run must not be bound to a
// gate of an earlier attempt). Errors: GitHub's error, or an attempt < 1.
func (a *App) RunAttempt(ctx context.Context, r Repo, runID int64) (int, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return 0, err
	}
	run, _, err := c.Actions.GetWorkflowRunByID(ctx, r.Owner, r.Name, runID)
	if err != nil {
		return 0, fmt.Errorf("GitHub workflow run %s/%s %d: %w", r.Owner, r.Name, runID, err)
	}
	if run.GetRunAttempt() < 1 {
		return 0, fmt.Errorf("GitHub workflow run %s/%s %d: run_attempt %d, want ≥ 1", r.Owner, r.Name, runID, run.GetRunAttempt())
	}
	return run.GetRunAttempt(), nil
}

// RunApproval is one entry of a run's review history (GitHub's "environment-approvals"):
// who decided which environments, with what state ("approved", "rejected") and comment.
type RunApproval struct {
	Environments []RunApprovalEnvironment `json:"environments"`
	State        string                   `json:"state"`
	User         *github.User             `json:"user"`
	Comment      string                   `json:"comment"`
}

// RunApprovalEnvironment is an environment of a RunApproval.
type RunApprovalEnvironment struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// RunApprovals reads the run's review history (GET /repos/{o}/{r}/actions/runs/{run_id}/approvals;
// not in go-github v90, so NewRequest + Do with RunApproval).
func (a *App) RunApprovals(ctx context.Context, r Repo, runID int64) ([]RunApproval, error) {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return nil, err
	}
	u := fmt.Sprintf("repos/%s/%s/actions/runs/%d/approvals", url.PathEscape(r.Owner), url.PathEscape(r.Name), runID)
	req, err := c.NewRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	var out []RunApproval
	if _, err := c.Do(req, &out); err != nil {
		return nil, fmt.Errorf("GitHub approvals of %s/%s run %d: %w", r.Owner, r.Name, runID, err)
	}
	return out, nil
}

// Verdict states of a custom deployment protection rule.
const (
	StateApproved = "approved"
	StateRejected = "rejected"
)

// ReviewProtectionRule gives the custom protection rule's verdict for environment
// (POST /repos/{o}/{r}/actions/runs/{run_id}/deployment_protection_rule with environment_name,
// state and comment; go-github's ReviewCustomDeploymentProtectionRule). state is StateApproved
// or StateRejected; comment is cut to MaxCommentChars. Errors: another state, GitHub's error.
func (a *App) ReviewProtectionRule(ctx context.Context, r Repo, runID int64, environment, state, comment string) error {
	if state != StateApproved && state != StateRejected {
		return fmt.Errorf("protection rule verdict %q: want %q or %q", state, StateApproved, StateRejected)
	}
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return err
	}
	_, err = c.Actions.ReviewCustomDeploymentProtectionRule(ctx, r.Owner, r.Name, runID,
		&github.ReviewCustomDeploymentProtectionRuleRequest{EnvironmentName: environment, State: state, Comment: Truncate(comment, MaxCommentChars)})
	if err != nil {
		return fmt.Errorf("GitHub protection rule verdict for %s/%s run %d (%s): %w", r.Owner, r.Name, runID, environment, err)
	}
	return nil
}

// statusReport is a status report's body: the verdict's POST without "state" (go-github's
// request struct has no omitempty on State, so it cannot send one).
type statusReport struct {
	EnvironmentName string `json:"environment_name"`
	Comment         string `json:"comment"`
}

// ReportProtectionRuleStatus posts a status report to the pending protection rule: the
// verdict's endpoint without "state" (GitHub keeps at most 10 per deployment). comment is
// Markdown, cut to MaxCommentChars.
func (a *App) ReportProtectionRuleStatus(ctx context.Context, r Repo, runID int64, environment, comment string) error {
	c, err := a.Client(r.InstallationID)
	if err != nil {
		return err
	}
	u := fmt.Sprintf("repos/%s/%s/actions/runs/%d/deployment_protection_rule", url.PathEscape(r.Owner), url.PathEscape(r.Name), runID)
	req, err := c.NewRequest(ctx, http.MethodPost, u, statusReport{EnvironmentName: environment, Comment: Truncate(comment, MaxCommentChars)})
	if err != nil {
		return err
	}
	if _, err := c.Do(req, nil); err != nil {
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
