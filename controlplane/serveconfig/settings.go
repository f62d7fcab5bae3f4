// Package serveconfig is rbook serve's settings: its flags, the --config file and the
// RBOOK_<FLAG> variables that may set them (docs/serve-config.md), the files they name read
// into a server.Config, and the address line's words for the features they turn on.
package serveconfig

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/internal/telemetry"
)

// The control plane's default address: the one port the README, docs/, every --help and the
// TypeScript client's messages name.
const (
	// DefaultPort is the port of DefaultAddr.
	DefaultPort = "7070"
	// DefaultAddr is --addr's default: loopback only.
	DefaultAddr = "127.0.0.1:" + DefaultPort
)

// Settings are rbook serve's flags, bound to a command by AddFlags: the server's Config and
// the files it is read from.
type Settings struct {
	cfg                              server.Config
	authFile, policyFile, notifyFile string
	logJSON                          bool
	version                          string // main.version, for the build info of metrics and traces

	oidc      oidcFlags
	github    githubFlags
	playbook  playbookFlags
	signIn    signInFlags
	people    peopleFlags
	tls       tlsFlags
	secret    secretFlags
	signing   signingFlags
	retention server.RetentionOptions
	metrics   metricsFlags
	tracing   tracingFlags
	limits    limitsFlags
}

// AddFlags registers every rbook serve flag on cmd (in --help's order) and returns the
// settings they fill. version is the binary's -ldflags version (buildinfo.Read's argument).
func AddFlags(cmd *cobra.Command, version string) *Settings {
	s := &Settings{version: version}
	f := cmd.Flags()
	f.StringVar(&s.cfg.Addr, "addr", DefaultAddr, "host:port to listen on (port 0 picks a free one)")
	f.StringVar(&s.cfg.DBPath, "db", ".rbook/controlplane.db", "SQLite database file (created if missing), or PostgreSQL: a postgres://user@host/db URL or a key=value string such as \"host=h dbname=db user=u\" (several replicas may share it)")
	f.StringVar(&s.authFile, "auth-file", "", `bearer tokens, one "identity role token" per line (roles: executor, approver, viewer)`)
	f.StringVar(&s.notifyFile, "notify-config", "", "YAML notification config: channels (webhook, teams, email, slack) and routes of gate and run events (docs/notifications.md)")
	f.StringVar(&s.policyFile, "gate-policy", "", "YAML gate policy: approvals needed, allowed approvers and four-eyes per runbook and gate")
	s.oidc.add(f)
	s.github.add(f)
	s.playbook.add(f)
	s.signIn.add(f)
	s.people.add(f)
	s.tls.add(f)
	s.secret.add(f)
	s.signing.add(f)
	addRetentionFlags(f, &s.retention)
	s.metrics.add(f)
	s.tracing.add(f)
	f.BoolVar(&s.cfg.Insecure, "insecure", false, "allow a non-loopback --addr without --auth-file or --oidc-config")
	f.Bool("forbid-self-approval", true, "deprecated: the run's starter may never approve its gates unless the gate policy says so")
	_ = f.MarkDeprecated("forbid-self-approval", "four-eyes is the default (see --gate-policy)")
	f.BoolVar(&s.logJSON, "log-json", false, "write logs as JSON lines instead of text")
	s.limits.add(f)
	addConfigFlags(f)
	return s
}

// Modes are the address line's words for the optional features that are on ("" off), and
// the files the line names.
type Modes struct {
	authFile, policyFile, notifyFile                    string
	oidc, github, playbook, signIn, people, tls, secret string
	signing                                             string
}

// Line is the address line's description of cfg's features (server.ModeLine), which also
// logs the gate policy's warnings to cfg.Logger.
func (m Modes) Line(cfg *server.Config) string {
	return server.ModeLine(cfg, m.authFile, m.policyFile, m.notifyFile, m.oidc, m.github, m.playbook, m.signIn, m.people, m.tls, m.secret, m.signing)
}

// Load reads the approval secret from the environment and every file the flags name into
// the server's Config, and sets its logger (to cmd's stderr). Call it after ReadConfig. The
// error names the flag or variable whose value or file is wrong.
func (s *Settings) Load(cmd *cobra.Command) (*server.Config, Modes, error) {
	m := Modes{authFile: s.authFile, policyFile: s.policyFile, notifyFile: s.notifyFile}
	cfg := &s.cfg
	secret, err := approval.SecretFromEnv(os.Getenv)
	if err != nil {
		return nil, m, err
	}
	cfg.Secret = secret
	if s.authFile != "" {
		if cfg.Auth, err = server.LoadAuthFile(s.authFile); err != nil {
			return nil, m, err
		}
	}
	if s.policyFile != "" {
		if cfg.GatePolicy, err = approval.LoadGatePolicy(s.policyFile); err != nil {
			return nil, m, err
		}
	}
	if s.notifyFile != "" {
		nc, err := notify.LoadConfig(s.notifyFile)
		if err != nil {
			return nil, m, fmt.Errorf("--notify-config: %w", err)
		}
		cfg.Notify = &server.NotifyOptions{Config: nc}
	}
	if err := s.loadFeatures(cmd, cfg, &m); err != nil {
		return nil, m, err
	}
	var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	if s.logJSON {
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	}
	cfg.Logger = slog.New(telemetry.NewLogHandler(h)) // trace and run ids on each line (docs/tracing.md)
	return cfg, m, nil
}

// loadFeatures applies the optional features' flags to cfg, in the order their checks
// depend on (sign-in after --public-url), and records their words in m.
func (s *Settings) loadFeatures(cmd *cobra.Command, cfg *server.Config, m *Modes) error {
	var err error
	if m.oidc, err = s.oidc.apply(cfg); err != nil {
		return err
	}
	if m.github, err = s.github.apply(cmd.Flags(), cfg); err != nil {
		return err
	}
	if m.playbook, err = s.playbook.apply(cfg); err != nil {
		return err
	}
	if m.signIn, err = s.signIn.apply(cfg); err != nil {
		return err
	}
	if m.people, err = s.people.apply(cfg); err != nil {
		return err
	}
	if err := s.limits.apply(cfg); err != nil {
		return err
	}
	if m.tls, err = s.tls.apply(cfg); err != nil {
		return err
	}
	if m.secret, err = s.secret.apply(cfg); err != nil {
		return err
	}
	if m.signing, err = s.signing.apply(cfg); err != nil {
		return err
	}
	if err := applyRetention(s.retention, cfg); err != nil {
		return err
	}
	return s.metrics.apply(cfg, s.version)
}

// Help is rbook serve's --help: what the settings do and where they are documented.
const Help = `Run the rbook control plane: executors report every transition of their runs to it,
and confirm gates wait until someone calls Approve or Reject (rbook approve, grpcurl, or any
buf-generated client). Runs and approvals are kept in a SQLite database (--db FILE), or in
PostgreSQL with --db postgres://user@host:5432/db, postgresql://… or a libpq key=value
string "host=… dbname=… user=…" (migrated on start; two or more replicas may serve one
PostgreSQL database; every replica needs the same RBOOK_APPROVAL_SECRET). Any other
scheme:// is refused. Health says NOT_SERVING while the database is unreachable.

One port serves Connect, gRPC and gRPC-Web over HTTP/1.1 and h2c, with gRPC reflection
(grpcurl -plaintext ADDR list) and gRPC health. Logs go to stderr, one line per call.

TLS: --tls-cert FILE --tls-key FILE serve HTTPS on the port instead (HTTP/2 for gRPC and
HTTP/1.1, TLS 1.2 or later, no h2c); the pair is re-read when the files change, so a rotated
certificate needs no restart. --tls-client-ca FILE asks clients for a certificate and verifies
one given against those CAs; a verified certificate is the executor cert:<common name>.
Clients trust an extra CA from RBOOK_CA_FILE and present RBOOK_CLIENT_CERT and
RBOOK_CLIENT_KEY. See docs/tls.md, also for running behind a reverse proxy or an ingress.

The approval-token secret comes from RBOOK_APPROVAL_SECRET, else RBOOK_SECRET (at least 16
bytes); the server does not start without one. RBOOK_APPROVAL_SECRET_PREVIOUS, during a
rotation, verifies tokens without signing any, so gates opened before still decide. The
database keeps a key-check value of the secret (never the secret): a replica whose secret
disagrees with it is refused at start (--reset-approval-secret-check when the old one is lost).

Configuration: --config FILE (or RBOOK_CONFIG) is a YAML file whose keys are these flags'
long names (addr: 0.0.0.0:7070, db: …, public-url: …); every flag can also be set as
RBOOK_<FLAG> (RBOOK_ADDR, RBOOK_DB, RBOOK_PUBLIC_URL). A flag on the command line beats the
variable, which beats the file. --print-config prints the effective settings, each with
where it came from, secrets redacted, and exits. See docs/serve-config.md.

Limits, per client address: the GitHub webhook (--rate-limit-webhook, default 50/s), Slack's
interactions (--rate-limit-slack, 20/s), sign-in (--rate-limit-signin, 30/m) and the
console's pages and browser calls (--rate-limit-console, 50/s) answer 429 with Retry-After
past their rate (N/s, N/m, N/h or off), and 413 for a body over their cap. Behind a
reverse proxy, --trusted-proxies CIDR,... lets its X-Forwarded-For name the client.

Authentication: --auth-file FILE holds one caller per line, "identity role token", with role
  executor   start runs, record transitions, request approvals, cancel runs
  approver   approve and reject gates (by token or by approval id), cancel runs
  viewer     read only (every role can read)
and optionally, after the token, groups=sre,dba (for a gate policy's group:NAME) and
github=LOGIN (the caller's GitHub login, for four-eyes against a run's GitHub actor).
Callers send "Authorization: Bearer <token>". --oidc-config FILE also admits GitHub Actions
jobs as executors with their OIDC token (identity oidc:<repository>@<ref>), by the file's
rules; its audience defaults to --public-url. Without --auth-file or --oidc-config every
call is allowed, so a non-loopback --addr is refused unless --insecure is given.

Links to gates: --public-url URL is the address people open this control plane at (http://
or https://, no user@, query or fragment; a path prefix is kept). With it every approval a
call returns carries approval_url, URL/approvals/ID, the gate's page; executors print it at
each gate (job log, job summary, the approval-url output) and GitHub status reports link to
it. The link carries no secret. See docs/console-links.md.

Notifications: --notify-config FILE (YAML) names channels (a webhook signed per the Standard
Webhooks specification, a Microsoft Teams workflow webhook, email over SMTP, a Slack
message per gate whose buttons decide it at /slack/interactions: docs/slack.md) and routes
that send gate events (opened, vote cast, decided, expired, withdrawn) and run events
(finished, failed, cancelled) of matching runbooks, environments and repositories to
them. Events are stored with the change they report and delivered at least once, with
back-off. Secrets come from environment variables or files. See docs/notifications.md.

Gate policy: --gate-policy FILE (YAML) says per runbook and gate (globs) how many distinct
approvers a gate needs (approvals, 1..10), who may decide it (approvers: identities,
github:LOGIN, person:ID, group:NAME; empty = anyone with the approver role) and whether the identity
that started the run may approve (starter_may_approve, default false); notify: person:ID,
group:NAME or email:ADDRESS are mailed its events too (docs/notifications.md). The first matching
rule applies; with none, a gate needs 1 approval and the run's starter may not approve it.
The requirement is captured when a gate opens: editing the file does not change open gates.

GitHub App (environment reviews as gates): --github-app-id ID --github-app-key FILE
--github-webhook-secret-file FILE [--github-api-url URL] (all three or none; the URL defaults
to https://api.github.com, GitHub Enterprise Server: https://HOST/api/v3). The App's webhook
is then served at /github/webhook on this port: deliveries are verified with the secret
(X-Hub-Signature-256) and de-duplicated by X-GitHub-Delivery. Without the flags that path
answers 404. The key and the secret are read from the files and never logged.

Playbook approval nodes may auto-pass: the auto-pass policy (ordered rules, each a CEL
condition over node, bindings, playbook, commands and tools, with auto-approve or
require-human) decides when the gate opens. The default rules need a human for publish, git
push/tag, gh release create, gh workflow run, destructive commands, outbound HTTP and remote
access, and auto-approve only gates that guard known read-only or QA commands and no agentic
node. --playbook-policy FILE adds rules before the defaults; no auto-approve passes a gate
while any require-human rule matches, and a rule that fails to evaluate means a human
decides. --policy-shadow records what the policy would decide without acting on it.

The approver's console signs people in (docs/console-signin.md): approver and viewer tokens
of --auth-file are posted to /auth/token; --sign-in-config FILE (YAML) adds OpenID Connect
providers (authorization code flow with PKCE) and Sign in with GitHub, with rules giving
each person the approver or viewer role (needs --public-url, which providers redirect back
to). Sessions are kept in the database (they survive a restart and work on every replica)
and end at sign-out or after session_ttl (default 12h). Cross-origin browser requests that
change anything are refused.

People: --people FILE (YAML) links each person's identities (auth-file name, github:LOGIN,
slack:TEAM/USER, oidc:VALUE, email:ADDRESS) and groups people. A vote records its identity
and person; M-of-N counts distinct people, and four-eyes compares the voter's person with
the run's starter. The auth file's github= links count as one person too. See docs/people.md.

Metrics: Prometheus metrics are served at /metrics on this port (runs, gates waiting and
their age, decisions by channel, commit latency, webhook and notification deliveries, lease
take-overs, database reachability, build info; docs/metrics.md). Like health they need no
token unless --metrics-token-file FILE names one scrapers must send as a bearer token;
--metrics=false turns them off.

SIGINT or SIGTERM shuts down gracefully: open watch streams end (clients reconnect), calls
in flight finish, the database is closed.

Exit codes: 0 after a clean shutdown, 2 bad flags, no secret, or the server could not start.`
