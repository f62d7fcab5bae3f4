// Package auth says who is calling the control plane (ARCHITECTURE.md: "auth/ who is
// calling: bearer tokens from the auth file, GitHub OIDC tokens; roles"). This file and
// oidc.go are the GitHub Actions OIDC half (docs/control-plane.md, "OIDC"): the `rbook serve
// --oidc-config FILE` configuration, and the verifier that turns a job's OIDC token into the
// identity `oidc:<repository>@<ref>` (docs/decisions/identity.md) with the executor role.
package auth

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// GitHubIssuer is the issuer of GitHub.com's Actions OIDC tokens, the default allow-list
// (GitHub, "About security hardening with OpenID Connect"). A GitHub Enterprise Server's is
// https://HOST/_services/token.
const GitHubIssuer = "https://token.actions.githubusercontent.com"

// Limits of an OIDC config file (docs/control-plane.md, "OIDC").
const (
	// MaxOIDCConfigBytes caps the file.
	MaxOIDCConfigBytes = 1 << 20
	// MaxOIDCRules caps the rules of one file.
	MaxOIDCRules = 1000
	// MaxPatternBytes caps one rule field (a claim value or glob).
	MaxPatternBytes = 1024
)

// OIDCConfig is the parsed `--oidc-config` file: which issuers are trusted, the audience a
// token must carry, and the rules that map a job's claims to the executor role.
type OIDCConfig struct {
	// Issuers is the allow-list of token issuers (exact URLs, compared byte for byte with the
	// token's iss claim). Default: [GitHubIssuer].
	Issuers []string
	// Audience is the aud a token must contain. "" means the caller supplies the default (rbook
	// serve: --public-url); NewVerifier refuses an empty audience.
	Audience string
	// InsecureHTTPIssuers allows http:// issuers (tests, a local issuer). Without it every
	// issuer must be https://.
	InsecureHTTPIssuers bool
	// Rules grant the executor role: a token is accepted when at least one rule matches.
	Rules []Rule
}

// Rule matches a token's claims; every field that is set must match (AND). A rule names the
// repository (glob) or the repository_id (exact), so no rule can match every repository on
// the issuer (GitHub.com's issuer signs tokens for everyone's workflows). Globs: `*` matches
// any run of characters except `/`, `**` any run including `/`, `?` one character except
// `/`; everything else is literal.
type Rule struct {
	// Line is the rule's line in the file (for messages).
	Line int
	// Repository matches claim repository (owner/name, case-insensitive as on GitHub). Its
	// owner part must be literal: "myorg/*" is fine, "*/repo" is refused.
	Repository string
	// RepositoryID must equal claim repository_id (digits): survives renames and transfers.
	RepositoryID string
	// Ref matches claim ref, e.g. "refs/heads/main", "refs/tags/v*".
	Ref string
	// Environment matches claim environment; "" means any (also none).
	Environment string
	// JobWorkflowRef matches claim job_workflow_ref, e.g.
	// "myorg/deploy/.github/workflows/deploy.yml@refs/heads/main".
	JobWorkflowRef string

	repository, ref, environment, jobWorkflowRef *regexp.Regexp
}

var repositoryIDRE = lazyregexp.New(`^[0-9]{1,20}$`)

// LoadOIDCConfig reads and parses an OIDC config file (see ParseOIDCConfig).
func LoadOIDCConfig(path string) (*OIDCConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oidc config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxOIDCConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("oidc config %s: %w", path, err)
	}
	return ParseOIDCConfig(data, path)
}

// ParseOIDCConfig parses the YAML of an OIDC config; name is used in errors, which read
// "name:line: field: message". The shape:
//
//	issuers: [https://token.actions.githubusercontent.com]   # optional; this is the default
//	audience: https://rbook.example.internal                # optional; default --public-url
//	insecure_http_issuers: false                            # optional; true allows http:// issuers
//	rules:                                                  # at least one
//	  - repository: myorg/infra        # or repository_id: "123456"
//	    ref: refs/heads/main           # optional glob
//	    environment: production        # optional glob
//	    job_workflow_ref: myorg/infra/.github/workflows/deploy.yml@refs/heads/main  # optional glob
//
// It is strict: an unknown field, a duplicate key, an alias, a value of the wrong kind, an
// issuer that is not an absolute https URL (http only with insecure_http_issuers), a rule
// without repository or repository_id, a glob in a repository's owner, and a file over
// MaxOIDCConfigBytes are errors.
func ParseOIDCConfig(data []byte, name string) (*OIDCConfig, error) {
	doc, err := yamlerr.DecodeOne(name, data, MaxOIDCConfigBytes, "OIDC config", `a mapping with "rules:"`)
	if err != nil {
		return nil, err
	}
	p := parser{name: name}
	cfg := &OIDCConfig{}
	root := doc.Content[0]
	var issuersLine int
	err = p.mapping(root, "", map[string]func(*yaml.Node) error{
		"issuers": func(n *yaml.Node) error {
			issuersLine = n.Line
			return p.strings(n, "issuers", &cfg.Issuers)
		},
		"audience": func(n *yaml.Node) error { return p.str(n, "audience", &cfg.Audience) },
		"insecure_http_issuers": func(n *yaml.Node) error {
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
				return p.errf(n, "insecure_http_issuers", "must be true or false")
			}
			cfg.InsecureHTTPIssuers = n.Value == "true"
			return nil
		},
		"rules": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode {
				return p.errf(n, "rules", "must be a list of rules")
			}
			if len(n.Content) > MaxOIDCRules {
				return p.errf(n, "rules", "has %s, over the limit of %d", yamlerr.Plural(len(n.Content), "rule", "rules"), MaxOIDCRules)
			}
			for i, rn := range n.Content {
				r, err := p.rule(rn, fmt.Sprintf("rules[%d]", i))
				if err != nil {
					return err
				}
				cfg.Rules = append(cfg.Rules, r)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	if issuersLine == 0 {
		cfg.Issuers = []string{GitHubIssuer}
	}
	if len(cfg.Issuers) == 0 {
		return nil, fmt.Errorf("%s:%d: issuers: is empty; leave it out for %s", name, issuersLine, GitHubIssuer)
	}
	for _, iss := range cfg.Issuers {
		if err := checkIssuer(iss, cfg.InsecureHTTPIssuers); err != nil {
			return nil, fmt.Errorf("%s:%d: issuers: %v", name, issuersLine, err)
		}
	}
	if len(cfg.Rules) == 0 {
		return nil, fmt.Errorf("%s:%d: rules: none; add one per repository (and ref) whose jobs may run runbooks", name, root.Line)
	}
	return cfg, nil
}

// checkIssuer accepts an absolute https URL (http only when insecure) without query or fragment.
func checkIssuer(iss string, insecure bool) error {
	u, err := url.Parse(iss)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL like %s or https://HOST/_services/token", iss, GitHubIssuer)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && insecure:
	case u.Scheme == "http":
		return fmt.Errorf("%q is not https; set insecure_http_issuers: true to allow it (a local test issuer only)", iss)
	default:
		return fmt.Errorf("%q: scheme %q is not https", iss, u.Scheme)
	}
	return nil
}

type parser struct{ name string }

func (p parser) errf(n *yaml.Node, field, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", p.name, n.Line, field, fmt.Sprintf(format, args...))
}

// mapping walks a mapping node: every key must be in fields, at most once.
func (p parser) mapping(n *yaml.Node, prefix string, fields map[string]func(*yaml.Node) error) error {
	where := strings.TrimSuffix(prefix, ".")
	if where == "" {
		where = "(top level)"
	}
	if n.Kind == yaml.AliasNode {
		return p.errf(n, where, "aliases are not allowed here")
	}
	if n.Kind != yaml.MappingNode {
		return p.errf(n, where, "must be a mapping")
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errf(k, where, "keys must be plain words")
		}
		if prev, dup := seen[k.Value]; dup {
			return p.errf(k, prefix+k.Value, "duplicate key (first on line %d)", prev)
		}
		seen[k.Value] = k.Line
		f, ok := fields[k.Value]
		if !ok {
			return p.errf(k, prefix+k.Value, "unknown field; known: %s", knownFields(fields))
		}
		if v.Kind == yaml.AliasNode {
			return p.errf(v, prefix+k.Value, "aliases are not allowed")
		}
		if err := f(v); err != nil {
			return err
		}
	}
	return nil
}

func knownFields(fields map[string]func(*yaml.Node) error) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	// Small maps: a simple insertion sort keeps the message stable.
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && names[j] < names[j-1]; j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	return strings.Join(names, ", ")
}

func (p parser) str(n *yaml.Node, field string, dst *string) error {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		return p.errf(n, field, "must be a string")
	}
	if n.Value == "" {
		return p.errf(n, field, "is empty; leave the field out instead")
	}
	if len(n.Value) > MaxPatternBytes {
		return p.errf(n, field, "is %d bytes, over the limit of %d", len(n.Value), MaxPatternBytes)
	}
	*dst = n.Value
	return nil
}

func (p parser) strings(n *yaml.Node, field string, dst *[]string) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, field, "must be a list")
	}
	for i, e := range n.Content {
		var s string
		if err := p.str(e, fmt.Sprintf("%s[%d]", field, i), &s); err != nil {
			return err
		}
		*dst = append(*dst, s)
	}
	return nil
}

// ref is str for a rule's ref glob, which must start with "refs/" or "*": the ref claim is
// always a full ref, so "main" would never match and the rule would silently never apply.
func (p parser) ref(n *yaml.Node, field string, dst *string) error {
	if err := p.str(n, field, dst); err != nil {
		return err
	}
	if !strings.HasPrefix(*dst, "refs/") && !strings.HasPrefix(*dst, "*") {
		return p.errf(n, field, "%q never matches: the ref claim is a full ref, such as refs/heads/%s or refs/tags/v1.* (or a glob starting with *)",
			*dst, strings.TrimPrefix(*dst, "heads/"))
	}
	return nil
}

func (p parser) rule(n *yaml.Node, field string) (Rule, error) {
	r := Rule{Line: n.Line}
	err := p.mapping(n, field+".", map[string]func(*yaml.Node) error{
		"repository":       func(v *yaml.Node) error { return p.str(v, field+".repository", &r.Repository) },
		"repository_id":    func(v *yaml.Node) error { return p.str(v, field+".repository_id", &r.RepositoryID) },
		"ref":              func(v *yaml.Node) error { return p.ref(v, field+".ref", &r.Ref) },
		"environment":      func(v *yaml.Node) error { return p.str(v, field+".environment", &r.Environment) },
		"job_workflow_ref": func(v *yaml.Node) error { return p.str(v, field+".job_workflow_ref", &r.JobWorkflowRef) },
	})
	if err != nil {
		return Rule{}, err
	}
	if r.Repository == "" && r.RepositoryID == "" {
		return Rule{}, p.errf(n, field, "names neither repository nor repository_id; a rule without one would admit every repository the issuer signs for")
	}
	if r.RepositoryID != "" && !repositoryIDRE.MatchString(r.RepositoryID) {
		return Rule{}, p.errf(n, field+".repository_id", "%q is not a number (the repository_id claim, digits only)", r.RepositoryID)
	}
	if r.Repository != "" {
		owner, repo, ok := strings.Cut(r.Repository, "/")
		if !ok || owner == "" || repo == "" {
			return Rule{}, p.errf(n, field+".repository", "%q is not owner/name (a glob is allowed in name only)", r.Repository)
		}
		if strings.ContainsAny(owner, "*?") {
			return Rule{}, p.errf(n, field+".repository", "%q: the owner %q may not be a glob; name the owner", r.Repository, owner)
		}
		r.repository = compileGlob(r.Repository, true)
	}
	r.ref = compileGlob(r.Ref, false)
	r.environment = compileGlob(r.Environment, false)
	r.jobWorkflowRef = compileGlob(r.JobWorkflowRef, false)
	return r, nil
}

// compileGlob turns a rule glob into an anchored regexp (see Rule); "" gives nil (any value).
func compileGlob(g string, foldCase bool) *regexp.Regexp {
	if g == "" {
		return nil
	}
	var b strings.Builder
	if foldCase {
		b.WriteString("(?i)")
	}
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch {
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case g[i] == '*':
			b.WriteString("[^/]*")
		case g[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// Matches reports whether every field of r that is set matches c.
func (r Rule) Matches(c *GitHubClaims) bool {
	if r.RepositoryID != "" && r.RepositoryID != c.RepositoryID {
		return false
	}
	for _, m := range []struct {
		re *regexp.Regexp
		v  string
	}{{r.repository, c.Repository}, {r.ref, c.Ref}, {r.environment, c.Environment}, {r.jobWorkflowRef, c.JobWorkflowRef}} {
		if m.re != nil && !m.re.MatchString(m.v) {
			return false
		}
	}
	return true
}
