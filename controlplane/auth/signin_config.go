package auth

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Console sign-in defaults and limits (docs/console-signin.md, "The config file").
const (
	// DefaultSessionTTL is how long a console session lasts when session_ttl is not set.
	DefaultSessionTTL = 12 * time.Hour
	// MaxSessionTTL caps session_ttl: a session is not a standing credential.
	MaxSessionTTL = 30 * 24 * time.Hour
	// MaxSignInProviders caps the providers of one file.
	MaxSignInProviders = 20
)

// Sign-in provider kinds.
const (
	// KindOIDC is an OpenID Connect issuer (authorization code flow with PKCE).
	KindOIDC = "oidc"
	// KindGitHub is GitHub's user authorization (an OAuth app or a GitHub App's user flow).
	KindGitHub = "github"
)

// SignInConfig is the parsed `rbook serve --sign-in-config FILE`: how people sign in to the
// console and which role each gets.
type SignInConfig struct {
	// SessionTTL is the absolute lifetime of a session (DefaultSessionTTL when not set).
	SessionTTL time.Duration
	// Providers are the ways to sign in, in the order the sign-in page lists them.
	Providers []SignInProvider
}

// SignInProvider is one configured identity provider.
type SignInProvider struct {
	// Line is the provider's line in the file (for messages).
	Line int
	// ID is the path segment of /auth/login/<id> and /auth/callback/<id>: 1-32 of a-z 0-9 -,
	// not "token" (the auth file's sign-in).
	ID string
	// Kind is KindOIDC or KindGitHub.
	Kind string
	// Label is the button text; default "Sign in with <id>" ("Sign in with GitHub").
	Label string
	// Issuer is an OIDC provider's issuer URL (https; http only with InsecureHTTPIssuer).
	Issuer string
	// InsecureHTTPIssuer allows an http:// issuer (a local test issuer only).
	InsecureHTTPIssuer bool
	// ClientID is the OAuth client id registered with the provider.
	ClientID string
	// ClientSecret is the client secret, read from the environment variable or file the file
	// names (client_secret_env, client_secret_file); never written in the file itself. ""
	// for an OIDC public client (PKCE only).
	ClientSecret string
	// Scopes are the OAuth scopes asked for: OIDC default openid, email, profile; GitHub
	// default read:org (to read org and team membership).
	Scopes []string
	// IdentityClaim is the OIDC claim the identity is made of, "oidc:<value>": email
	// (default; refused when email_verified is false), sub or preferred_username.
	IdentityClaim string
	// GroupsClaim is the OIDC claim holding the person's groups (default groups).
	GroupsClaim string
	// WebURL and APIURL are GitHub's web and REST API URLs (defaults https://github.com and
	// https://api.github.com; GitHub Enterprise Server: https://HOST and https://HOST/api/v3).
	WebURL, APIURL string
	// Rules map a signed-in person to a role; the highest role of the matching rules
	// applies and their groups add up. A person no rule matches cannot sign in.
	Rules []SignInRule
}

// SignInRule matches a signed-in person; every condition that is set must match (AND). An
// OIDC rule without conditions matches everyone the issuer signs in; a GitHub rule must
// name github_org or github_team (GitHub signs in everyone on github.com).
type SignInRule struct {
	// Line is the rule's line in the file.
	Line int
	// EmailDomain matches the domain of a verified email claim (OIDC), case-insensitive.
	EmailDomain string
	// Group must be one of the values of the groups claim (OIDC).
	Group string
	// GitHubOrg is an organisation the person is an active member of (GitHub).
	GitHubOrg string
	// GitHubTeam is "org/team-slug", a team the person is a member of (GitHub).
	GitHubTeam string
	// Role is "approver" or "viewer".
	Role string
	// Groups are added to the person's groups, for a gate policy's "group:<name>".
	Groups []string
}

var (
	providerIDRE   = lazyregexp.New(`^[a-z0-9][a-z0-9-]{0,31}$`)
	envNameRE      = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	signInGroupRE  = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)
	githubTeamRE   = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)
	githubOrgRE    = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}$`)
	emailDomainRE  = lazyregexp.New(`^[A-Za-z0-9.-]{1,253}$`)
	identityClaims = map[string]bool{"email": true, "sub": true, "preferred_username": true}
)

// LoadSignInConfig reads and parses a sign-in config file; client secrets are read with
// os.Getenv and os.ReadFile (see ParseSignInConfig).
func LoadSignInConfig(path string) (*SignInConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sign-in config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxOIDCConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("sign-in config %s: %w", path, err)
	}
	return ParseSignInConfig(data, path, os.Getenv)
}

// ParseSignInConfig parses the YAML of a sign-in config; name is used in errors, which read
// "name:line: field: message", and getenv resolves client_secret_env. The shape:
//
//	session_ttl: 12h                       # optional; Go duration, 5m..720h
//	providers:
//	  - id: okta                           # /auth/login/okta
//	    kind: oidc
//	    label: Sign in with Okta           # optional
//	    issuer: https://example.okta.com
//	    client_id: 0oa1example
//	    client_secret_env: RBOOK_OKTA_SECRET   # or client_secret_file: /etc/rbook/okta-secret
//	    identity_claim: email              # optional: email (default), sub, preferred_username
//	    groups_claim: groups               # optional
//	    scopes: [openid, email, profile, groups]   # optional
//	    rules:
//	      - email_domain: example.com
//	        role: viewer
//	      - group: sre
//	        role: approver
//	        groups: [sre]
//	  - id: github
//	    kind: github
//	    client_id: Iv1.example
//	    client_secret_file: /etc/rbook/github-client-secret
//	    web_url: https://github.com        # optional; GHES: https://HOST
//	    api_url: https://api.github.com    # optional; GHES: https://HOST/api/v3
//	    rules:
//	      - github_org: myorg
//	        role: viewer
//	      - github_team: myorg/sre
//	        role: approver
//
// It is strict: unknown fields, duplicate keys or provider ids, an inline client_secret, a
// secret variable that is unset or a secret file that cannot be read, a non-https issuer or
// URL (http only with insecure_http_issuer / for loopback), a provider without rules, a
// GitHub rule naming neither org nor team, and an unknown role are errors.
func ParseSignInConfig(data []byte, name string, getenv func(string) string) (*SignInConfig, error) {
	doc, err := yamlerr.DecodeOne(name, data, MaxOIDCConfigBytes, "sign-in config", `a mapping with "providers:"`)
	if err != nil {
		return nil, err
	}
	p := parser{name: name}
	cfg := &SignInConfig{SessionTTL: DefaultSessionTTL}
	root := doc.Content[0]
	seen := map[string]int{}
	err = p.mapping(root, "", map[string]func(*yaml.Node) error{
		"session_ttl": func(n *yaml.Node) error {
			var s string
			if err := p.str(n, "session_ttl", &s); err != nil {
				return err
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < 5*time.Minute || d > MaxSessionTTL {
				return p.errf(n, "session_ttl", "%q is not a duration between 5m and %s (e.g. 12h)", s, MaxSessionTTL)
			}
			cfg.SessionTTL = d
			return nil
		},
		"providers": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode {
				return p.errf(n, "providers", "must be a list of providers")
			}
			if len(n.Content) > MaxSignInProviders {
				return p.errf(n, "providers", "has %d providers, over the limit of %d", len(n.Content), MaxSignInProviders)
			}
			for i, pn := range n.Content {
				pr, err := p.signInProvider(pn, fmt.Sprintf("providers[%d]", i), getenv)
				if err != nil {
					return err
				}
				if prev, dup := seen[pr.ID]; dup {
					return p.errf(pn, fmt.Sprintf("providers[%d].id", i), "%q is also the id of the provider on line %d", pr.ID, prev)
				}
				seen[pr.ID] = pr.Line
				cfg.Providers = append(cfg.Providers, pr)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("%s:%d: providers: none; add an oidc or github provider (docs/console-signin.md)", name, root.Line)
	}
	return cfg, nil
}

func (p parser) signInProvider(n *yaml.Node, field string, getenv func(string) string) (SignInProvider, error) {
	pr := SignInProvider{Line: n.Line}
	var secretEnv, secretFile string
	var secretEnvNode, secretFileNode *yaml.Node
	err := p.mapping(n, field+".", map[string]func(*yaml.Node) error{
		"id":     func(v *yaml.Node) error { return p.str(v, field+".id", &pr.ID) },
		"kind":   func(v *yaml.Node) error { return p.str(v, field+".kind", &pr.Kind) },
		"label":  func(v *yaml.Node) error { return p.str(v, field+".label", &pr.Label) },
		"issuer": func(v *yaml.Node) error { return p.str(v, field+".issuer", &pr.Issuer) },
		"insecure_http_issuer": func(v *yaml.Node) error {
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				return p.errf(v, field+".insecure_http_issuer", "must be true or false")
			}
			pr.InsecureHTTPIssuer = v.Value == "true"
			return nil
		},
		"client_id": func(v *yaml.Node) error { return p.str(v, field+".client_id", &pr.ClientID) },
		"client_secret": func(v *yaml.Node) error {
			return p.errf(v, field+".client_secret", "a secret is never written in this file: name an environment variable (client_secret_env) or a file (client_secret_file) that holds it")
		},
		"client_secret_env": func(v *yaml.Node) error {
			secretEnvNode = v
			return p.str(v, field+".client_secret_env", &secretEnv)
		},
		"client_secret_file": func(v *yaml.Node) error {
			secretFileNode = v
			return p.str(v, field+".client_secret_file", &secretFile)
		},
		"scopes":         func(v *yaml.Node) error { return p.strings(v, field+".scopes", &pr.Scopes) },
		"identity_claim": func(v *yaml.Node) error { return p.str(v, field+".identity_claim", &pr.IdentityClaim) },
		"groups_claim":   func(v *yaml.Node) error { return p.str(v, field+".groups_claim", &pr.GroupsClaim) },
		"web_url":        func(v *yaml.Node) error { return p.str(v, field+".web_url", &pr.WebURL) },
		"api_url":        func(v *yaml.Node) error { return p.str(v, field+".api_url", &pr.APIURL) },
		"rules": func(v *yaml.Node) error {
			if v.Kind != yaml.SequenceNode {
				return p.errf(v, field+".rules", "must be a list of rules")
			}
			for i, rn := range v.Content {
				r, err := p.signInRule(rn, fmt.Sprintf("%s.rules[%d]", field, i))
				if err != nil {
					return err
				}
				pr.Rules = append(pr.Rules, r)
			}
			return nil
		},
	})
	if err != nil {
		return pr, err
	}
	if !providerIDRE.MatchString(pr.ID) || pr.ID == "token" {
		return pr, p.errf(n, field+".id", "%q is not a provider id: 1-32 of a-z 0-9 -, not \"token\" (it appears in /auth/login/<id>)", pr.ID)
	}
	if pr.ClientID == "" {
		return pr, p.errf(n, field+".client_id", "is required: the client id registered with the provider")
	}
	switch {
	case secretEnvNode != nil && secretFileNode != nil:
		return pr, p.errf(secretFileNode, field+".client_secret_file", "give client_secret_env or client_secret_file, not both")
	case secretEnvNode != nil:
		if !envNameRE.MatchString(secretEnv) {
			return pr, p.errf(secretEnvNode, field+".client_secret_env", "%q is not an environment variable name", secretEnv)
		}
		if pr.ClientSecret = strings.TrimSpace(getenv(secretEnv)); pr.ClientSecret == "" {
			return pr, p.errf(secretEnvNode, field+".client_secret_env", "$%s is not set or empty: export the client secret in it before rbook serve starts", secretEnv)
		}
	case secretFileNode != nil:
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return pr, p.errf(secretFileNode, field+".client_secret_file", "cannot read the client secret: %v", err)
		}
		if pr.ClientSecret = strings.TrimSpace(string(b)); pr.ClientSecret == "" {
			return pr, p.errf(secretFileNode, field+".client_secret_file", "%s is empty: put the client secret in it", secretFile)
		}
	}
	if len(pr.Rules) == 0 {
		return pr, p.errf(n, field+".rules", "none; add at least one rule giving a role (approver or viewer), or nobody can sign in with %s", pr.ID)
	}
	switch pr.Kind {
	case KindOIDC:
		if pr.Issuer == "" {
			return pr, p.errf(n, field+".issuer", "is required for kind oidc: the issuer URL, e.g. https://example.okta.com")
		}
		if err := checkIssuer(pr.Issuer, pr.InsecureHTTPIssuer); err != nil {
			return pr, p.errf(n, field+".issuer", "%v", strings.ReplaceAll(err.Error(), "insecure_http_issuers", "insecure_http_issuer"))
		}
		if pr.WebURL != "" || pr.APIURL != "" {
			return pr, p.errf(n, field, "web_url and api_url are for kind github")
		}
		if pr.IdentityClaim == "" {
			pr.IdentityClaim = "email"
		}
		if !identityClaims[pr.IdentityClaim] {
			return pr, p.errf(n, field+".identity_claim", "%q is not email, sub or preferred_username", pr.IdentityClaim)
		}
		if pr.GroupsClaim == "" {
			pr.GroupsClaim = "groups"
		}
		if len(pr.Scopes) == 0 {
			pr.Scopes = []string{"openid", "email", "profile"}
		}
		for _, r := range pr.Rules {
			if r.GitHubOrg != "" || r.GitHubTeam != "" {
				return pr, fmt.Errorf("%s:%d: %s.rules: github_org and github_team are for kind github; an oidc rule matches email_domain or group", p.name, r.Line, field)
			}
		}
		if pr.Label == "" {
			pr.Label = "Sign in with " + pr.ID
		}
	case KindGitHub:
		if pr.Issuer != "" || pr.IdentityClaim != "" || pr.GroupsClaim != "" {
			return pr, p.errf(n, field, "issuer, identity_claim and groups_claim are for kind oidc; GitHub's identity is github:<login>")
		}
		if pr.ClientSecret == "" {
			return pr, p.errf(n, field+".client_secret_env", "GitHub needs the client secret: client_secret_env or client_secret_file")
		}
		if pr.WebURL == "" {
			pr.WebURL = "https://github.com"
		}
		if pr.APIURL == "" {
			pr.APIURL = "https://api.github.com"
		}
		for _, u := range []struct{ f, v string }{{"web_url", pr.WebURL}, {"api_url", pr.APIURL}} {
			if err := checkServiceURL(u.v); err != nil {
				return pr, p.errf(n, field+"."+u.f, "%v", err)
			}
		}
		pr.WebURL, pr.APIURL = strings.TrimRight(pr.WebURL, "/"), strings.TrimRight(pr.APIURL, "/")
		if len(pr.Scopes) == 0 {
			pr.Scopes = []string{"read:org"}
		}
		for _, r := range pr.Rules {
			if r.EmailDomain != "" || r.Group != "" {
				return pr, fmt.Errorf("%s:%d: %s.rules: email_domain and group are for kind oidc; a github rule matches github_org or github_team", p.name, r.Line, field)
			}
			if r.GitHubOrg == "" && r.GitHubTeam == "" {
				return pr, fmt.Errorf("%s:%d: %s.rules: names neither github_org nor github_team; such a rule would let everyone on GitHub in", p.name, r.Line, field)
			}
		}
		if pr.Label == "" {
			pr.Label = "Sign in with GitHub"
		}
	default:
		return pr, p.errf(n, field+".kind", "%q is not oidc or github", pr.Kind)
	}
	return pr, nil
}

// checkServiceURL accepts an absolute https URL, or http on a loopback host (a test fake).
func checkServiceURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL like https://github.com", raw)
	}
	host := u.Hostname()
	if u.Scheme == "https" || (u.Scheme == "http" && (host == "127.0.0.1" || host == "::1" || host == "localhost")) {
		return nil
	}
	return fmt.Errorf("%q is not https (http only for a loopback test server)", raw)
}

func (p parser) signInRule(n *yaml.Node, field string) (SignInRule, error) {
	r := SignInRule{Line: n.Line}
	err := p.mapping(n, field+".", map[string]func(*yaml.Node) error{
		"email_domain": func(v *yaml.Node) error { return p.str(v, field+".email_domain", &r.EmailDomain) },
		"group":        func(v *yaml.Node) error { return p.str(v, field+".group", &r.Group) },
		"github_org":   func(v *yaml.Node) error { return p.str(v, field+".github_org", &r.GitHubOrg) },
		"github_team":  func(v *yaml.Node) error { return p.str(v, field+".github_team", &r.GitHubTeam) },
		"role":         func(v *yaml.Node) error { return p.str(v, field+".role", &r.Role) },
		"groups":       func(v *yaml.Node) error { return p.strings(v, field+".groups", &r.Groups) },
	})
	if err != nil {
		return r, err
	}
	switch {
	case r.Role != "approver" && r.Role != "viewer":
		return r, p.errf(n, field+".role", "%q is not approver or viewer (a console session never executes runs)", r.Role)
	case r.EmailDomain != "" && !emailDomainRE.MatchString(r.EmailDomain):
		return r, p.errf(n, field+".email_domain", "%q is not a domain such as example.com", r.EmailDomain)
	case r.GitHubOrg != "" && !githubOrgRE.MatchString(r.GitHubOrg):
		return r, p.errf(n, field+".github_org", "%q is not a GitHub organisation login", r.GitHubOrg)
	case r.GitHubTeam != "" && !githubTeamRE.MatchString(r.GitHubTeam):
		return r, p.errf(n, field+".github_team", "%q is not org/team-slug", r.GitHubTeam)
	}
	for i, g := range r.Groups {
		if !signInGroupRE.MatchString(g) {
			return r, p.errf(n, fmt.Sprintf("%s.groups[%d]", field, i), "%q is not a group name (1-64 of A-Z a-z 0-9 . _ -)", g)
		}
	}
	return r, nil
}

// SignInPerson is what a provider said about a signed-in person, for rule matching.
type SignInPerson struct {
	// Email is a verified email address ("" when none or unverified).
	Email string
	// Groups are the OIDC groups claim's values.
	Groups []string
	// GitHubOrgs are the organisations the person is an active member of; GitHubTeams their
	// teams as "org/slug" (both compared without regard to case).
	GitHubOrgs, GitHubTeams []string
}

// Match applies the provider's rules to person: the highest role of the matching rules
// ("approver" over "viewer"; "" when none matches) and the union of their groups, in rule
// order without repeats.
func (pr SignInProvider) Match(person SignInPerson) (role string, groups []string) {
	for _, r := range pr.Rules {
		if !r.matches(person) {
			continue
		}
		if role != "approver" {
			role = r.Role
		}
		for _, g := range r.Groups {
			if !containsFold(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	return role, groups
}

func (r SignInRule) matches(p SignInPerson) bool {
	if r.EmailDomain != "" {
		_, domain, ok := strings.Cut(p.Email, "@")
		if !ok || !strings.EqualFold(domain, r.EmailDomain) {
			return false
		}
	}
	if r.Group != "" && !containsFold(p.Groups, r.Group) {
		return false
	}
	if r.GitHubOrg != "" && !containsFold(p.GitHubOrgs, r.GitHubOrg) {
		return false
	}
	if r.GitHubTeam != "" && !containsFold(p.GitHubTeams, r.GitHubTeam) {
		return false
	}
	return true
}

func containsFold(list []string, v string) bool {
	for _, x := range list {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}
