package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/ghapp"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
)

// GitHubOptions make the control plane a GitHub App taking part in environment protection
// (docs/approvals.md, "GitHub App webhook"; rbook serve --github-app-id, --github-app-key,
// --github-webhook-secret-file, --github-api-url).
type GitHubOptions struct {
	// App is the App's API client (installation tokens, reviews); required.
	App *ghapp.App
	// WebhookSecret verifies X-Hub-Signature-256 of deliveries at webhook.Path; at least
	// webhook.MinSecretBytes. Never logged.
	WebhookSecret []byte
	// PreviousWebhookSecret, when set, verifies deliveries too: the secret a rotation replaced
	// (rbook serve --github-webhook-secret-file's second line; docs/tls.md, "Rotating the
	// GitHub webhook secret"). Never logged.
	PreviousWebhookSecret []byte
	// Handler acts on verified deliveries; nil means the control plane's own: protection
	// rules bound to gates and reviews deciding them (github_gates.go; docs/approvals.md, "Approve in GitHub").
	Handler webhook.Handler
	// RetryBase is the first back-off of a failed GitHub API delivery (doubling up to
	// MaxGitHubRetry); zero means DefaultGitHubRetryBase.
	RetryBase time.Duration
}

// mountGitHub serves webhook.Path: the endpoint when GitHub is configured, else 404 with a
// hint (docs/approvals.md, "GitHub App webhook": "without them the webhook path answers 404").
func (s *Server) mountGitHub() error {
	gh := s.opts.GitHub
	if gh == nil || s.st.ReadOnly() {
		s.mux.HandleFunc(webhook.Path, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "GitHub webhook not configured: start rbook serve with --github-app-id, --github-app-key and --github-webhook-secret-file", http.StatusNotFound)
		})
		return nil
	}
	if gh.App == nil {
		return fmt.Errorf("GitHub App: no App client")
	}
	h := gh.Handler
	if h == nil {
		s.gates = newGitHubGates(s, gh.App, gh.RetryBase)
		h = s.gates
	}
	ep, err := webhook.New(gh.WebhookSecret, s.st, h, s.log, webhook.WithPreviousSecret(gh.PreviousWebhookSecret), webhook.WithOutcome(s.metrics.WebhookDelivery))
	if err != nil {
		return fmt.Errorf("GitHub App: %w", err)
	}
	s.mux.Handle(webhook.Path, ep)
	return nil
}
