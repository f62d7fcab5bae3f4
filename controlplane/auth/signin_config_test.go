package auth

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var signInEnv = map[string]string{"RBOOK_OKTA_SECRET": "okta-secret", "RBOOK_GITHUB_SECRET": "gh-secret"}

func getenv(k string) string { return signInEnv[k] }

func TestSignInConfigExampleParsesWithDefaults(t *testing.T) {
	data, err := os.ReadFile("testdata/signin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseSignInConfig(data, "signin.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTTL != 8*time.Hour || len(cfg.Providers) != 2 {
		t.Fatalf("config = %+v, want 8h and two providers", cfg)
	}
	okta, gh := cfg.Providers[0], cfg.Providers[1]
	if okta.ClientSecret != "okta-secret" || okta.IdentityClaim != "email" || okta.GroupsClaim != "groups" ||
		!reflect.DeepEqual(okta.Scopes, []string{"openid", "email", "profile"}) {
		t.Errorf("okta = %+v; want the secret from the environment and the OIDC defaults", okta)
	}
	if gh.Label != "Sign in with GitHub" || gh.WebURL != "https://github.com" || gh.APIURL != "https://api.github.com" ||
		gh.ClientSecret != "gh-secret" || !reflect.DeepEqual(gh.Scopes, []string{"read:org"}) {
		t.Errorf("github = %+v; want GitHub's URLs, read:org and the label", gh)
	}
}

func TestSignInRulesGiveTheHighestRoleAndAllGroups(t *testing.T) {
	data, _ := os.ReadFile("testdata/signin.yaml")
	cfg, err := ParseSignInConfig(data, "signin.yaml", getenv)
	if err != nil {
		t.Fatal(err)
	}
	okta, gh := cfg.Providers[0], cfg.Providers[1]
	for _, c := range []struct {
		name   string
		p      SignInProvider
		person SignInPerson
		role   string
		groups []string
	}{
		{"domain only", okta, SignInPerson{Email: "bob@example.com"}, "viewer", nil},
		{"domain and group", okta, SignInPerson{Email: "amy@EXAMPLE.com", Groups: []string{"sre"}}, "approver", []string{"sre"}},
		{"other domain", okta, SignInPerson{Email: "eve@evil.example"}, "", nil},
		{"org member", gh, SignInPerson{GitHubOrgs: []string{"MyOrg"}}, "viewer", nil},
		{"team member", gh, SignInPerson{GitHubTeams: []string{"myorg/sre"}}, "approver", nil},
		{"outsider", gh, SignInPerson{GitHubOrgs: []string{"other"}}, "", nil},
	} {
		role, groups := c.p.Match(c.person)
		if role != c.role || !reflect.DeepEqual(groups, c.groups) {
			t.Errorf("%s: Match = %q %v, want %q %v", c.name, role, groups, c.role, c.groups)
		}
	}
}

func TestSignInConfigErrorsNameFileLineAndField(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(secretFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	head := "providers:\n  - id: okta\n    kind: oidc\n    issuer: https://example.okta.com\n    client_id: c\n"
	rule := "    rules:\n      - role: viewer\n"
	for _, c := range []struct{ name, yaml, want string }{
		{"inline secret", head + "    client_secret: hunter2\n" + rule, "signin.yaml:6: providers[0].client_secret: a secret is never written in this file"},
		{"unset variable", head + "    client_secret_env: RBOOK_UNSET\n" + rule, "signin.yaml:6: providers[0].client_secret_env: $RBOOK_UNSET is not set"},
		{"empty secret file", head + "    client_secret_file: " + secretFile + "\n" + rule, "signin.yaml:6: providers[0].client_secret_file: " + secretFile + " is empty"},
		{"executor role", head + "    rules:\n      - role: executor\n", "signin.yaml:7: providers[0].rules[0].role: \"executor\" is not approver or viewer"},
		{"no rules", head, "signin.yaml:2: providers[0].rules: none"},
		{"http issuer", strings.Replace(head, "https://example", "http://example", 1) + rule, "signin.yaml:2: providers[0].issuer: \"http://example.okta.com\" is not https"},
		{"unknown field", head + "    colour: blue\n" + rule, "signin.yaml:6: providers[0].colour: unknown field"},
		{"token id", strings.Replace(head, "id: okta", "id: token", 1) + rule, "signin.yaml:2: providers[0].id: \"token\" is not a provider id"},
		{"github rule for everyone", "providers:\n  - id: gh\n    kind: github\n    client_id: c\n    client_secret_env: RBOOK_GITHUB_SECRET\n    rules:\n      - role: viewer\n",
			"signin.yaml:7: providers[0].rules: names neither github_org nor github_team"},
		{"short ttl", "session_ttl: 1m\n" + head + rule, "signin.yaml:1: session_ttl: \"1m\" is not a duration between 5m"},
		{"duplicate id", head + rule + strings.TrimPrefix(head, "providers:\n") + rule, "signin.yaml:8: providers[1].id: \"okta\" is also the id of the provider on line 2"},
	} {
		_, err := ParseSignInConfig([]byte(c.yaml), "signin.yaml", getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the inline secret: %v", c.name, err)
		}
	}
}
