package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
)

// The --oidc-config file is strict; every error names file:line and field.
func TestOIDCConfigStrict(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"rules:\n  - repository: o/r\n    reff: refs/heads/main\n", "f.yaml:3: rules[0].reff: unknown field"},
		{"audience: a\naudience: b\nrules:\n  - repository: o/r\n", "f.yaml:2: audience: duplicate key (first on line 1)"},
		{"issuers: [http://127.0.0.1:1]\nrules:\n  - repository: o/r\n", "f.yaml:1: issuers: \"http://127.0.0.1:1\" is not https; set insecure_http_issuers: true"},
		{"rules:\n  - ref: refs/heads/main\n", "f.yaml:2: rules[0]: names neither repository nor repository_id"},
		{"rules:\n  - repository: \"*/infra\"\n", "f.yaml:2: rules[0].repository: \"*/infra\": the owner \"*\" may not be a glob"},
		{"rules:\n  - repository_id: abc\n", "f.yaml:2: rules[0].repository_id: \"abc\" is not a number"},
		{"audience: x\n", "f.yaml:1: rules: none"},
		{"rules: &a\n  - repository: o/r\nx: *a\n", "f.yaml:3: x: unknown field"},
		{"rules:\n  - repository: o/r\n    ref: [a]\n", "f.yaml:3: rules[0].ref: must be a string"},
		{"", "f.yaml: empty"},
	} {
		_, err := auth.ParseOIDCConfig([]byte(tc.body), "f.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want prefix %q", tc.body, err, tc.want)
		}
	}
	cfg, err := auth.ParseOIDCConfig([]byte("rules:\n  - repository: myorg/*\n    ref: refs/tags/v*\n  - repository_id: 123\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Issuers) != 1 || cfg.Issuers[0] != auth.GitHubIssuer || len(cfg.Rules) != 2 || cfg.Rules[1].Line != 4 {
		t.Errorf("defaults: %+v", cfg)
	}
	// Globs: * stops at /, ** does not; repository is case-insensitive; repository_id exact.
	for _, tc := range []struct {
		c    auth.GitHubClaims
		want bool
	}{
		{auth.GitHubClaims{Repository: "myorg/infra", Ref: "refs/tags/v1.2"}, true},
		{auth.GitHubClaims{Repository: "MyOrg/Infra", Ref: "refs/tags/v1.2"}, true},
		{auth.GitHubClaims{Repository: "myorg/infra", Ref: "refs/heads/main"}, false},
		{auth.GitHubClaims{Repository: "myorg/infra", Ref: "refs/tags/v1/x"}, false},
		{auth.GitHubClaims{Repository: "other/infra", Ref: "refs/tags/v1"}, false},
		{auth.GitHubClaims{Repository: "myorgx/infra", Ref: "refs/tags/v1"}, false},
	} {
		if got := cfg.Rules[0].Matches(&tc.c); got != tc.want {
			t.Errorf("rule 0 on %+v = %v, want %v", tc.c, got, tc.want)
		}
	}
	if !cfg.Rules[1].Matches(&auth.GitHubClaims{RepositoryID: "123"}) || cfg.Rules[1].Matches(&auth.GitHubClaims{RepositoryID: "1234"}) {
		t.Error("repository_id must match exactly")
	}
	deep, _ := auth.ParseOIDCConfig([]byte("rules:\n  - repository: o/r\n    job_workflow_ref: o/r/.github/**@refs/heads/main\n"), "f")
	if !deep.Rules[0].Matches(&auth.GitHubClaims{Repository: "o/r", JobWorkflowRef: "o/r/.github/workflows/d.yml@refs/heads/main"}) {
		t.Error("** must match across /")
	}
}

// A token of an issuer not on the list is refused; an allowed issuer that
// cannot be reached is not a refusal of the token: Verify returns *UnavailableError (the
// server answers E_RETRY, which executors retry).
func TestOIDCIssuerUnreachable(t *testing.T) {
	iss := authtest.NewIssuer(t)
	tok := iss.Mint(t, "aud", nil)
	cfg := auth.OIDCConfig{Issuers: []string{"http://127.0.0.1:1"}, Audience: "aud", InsecureHTTPIssuers: true,
		Rules: mustRules(t)}
	v, err := auth.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The token names its real issuer, which is not on this list: refused, not unavailable.
	if _, err := v.Verify(context.Background(), tok); !errors.As(err, new(*auth.RefusedError)) {
		t.Fatalf("foreign issuer: %v", err)
	}
	cfg.Issuers = []string{iss.URL}
	v, _ = auth.NewVerifier(cfg, auth.WithClock(time.Now))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := v.Verify(ctx, tok); err != nil || c.Identity() != "oidc:owner/repo@refs/heads/main" || c.Actor != "octocat" {
		t.Fatalf("Verify: %+v, %v", c, err)
	}
	down := authtest.NewIssuer(t)
	dtok := down.Mint(t, "aud", nil)
	cfg.Issuers = []string{down.URL}
	v, _ = auth.NewVerifier(cfg)
	down.Close()
	var ue *auth.UnavailableError
	if _, err := v.Verify(ctx, dtok); !errors.As(err, &ue) || ue.Issuer != down.URL {
		t.Fatalf("issuer down: %v, want *UnavailableError", err)
	}
}

func mustRules(t *testing.T) []auth.Rule {
	t.Helper()
	cfg, err := auth.ParseOIDCConfig([]byte("rules:\n  - repository: owner/repo\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Rules
}
