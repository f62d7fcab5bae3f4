package auth_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/auth"
)

// TestOIDCConfigMessages: an OIDC config's YAML syntax error is "file:line:
// message" (not yaml.v3's raw "yaml: line N:"); a rule ref that is not a full ref (nor a glob
// starting with *) is refused with the ref it means; repository_id written as a YAML int is
// taken as its text and matches the claim; the rule count is singular for one.
func TestOIDCConfigMessages(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"rules:\n  - repository: o/r\n\tref: refs/heads/main\n", "o8.yaml:3: found a tab character that violates indentation (indent YAML with spaces, not tabs)"},
		{"rules: a: b\n", "o8.yaml:1: mapping values are not allowed in this context"},
		{"rules:\n  - repository: o/r\n    ref: main\n", `o8.yaml:3: rules[0].ref: "main" never matches: the ref claim is a full ref, such as refs/heads/main or refs/tags/v1.* (or a glob starting with *)`},
		{"rules:\n  - repository: o/r\n    ref: heads/release-*\n", `o8.yaml:3: rules[0].ref: "heads/release-*" never matches: the ref claim is a full ref, such as refs/heads/release-* or refs/tags/v1.* (or a glob starting with *)`},
	} {
		_, err := auth.ParseOIDCConfig([]byte(c.body), "o8.yaml")
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.body, err, c.want)
		}
	}
	cfg, err := auth.ParseOIDCConfig([]byte("rules:\n  - repository_id: 123\n    ref: \"**/main\"\n  - repository: o/r\n    ref: refs/heads/main\n"), "o8.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Rules[0].Matches(&auth.GitHubClaims{RepositoryID: "123", Ref: "refs/heads/main"}) || cfg.Rules[0].Matches(&auth.GitHubClaims{RepositoryID: "1234", Ref: "refs/heads/main"}) {
		t.Errorf("repository_id: 123 as an int: %+v", cfg.Rules[0])
	}
	rules := "rules:\n" + strings.Repeat("  - repository: o/r\n", auth.MaxOIDCRules+1)
	if _, err := auth.ParseOIDCConfig([]byte(rules), "o8.yaml"); err == nil || !strings.Contains(err.Error(), "rules: has "+strconv.Itoa(auth.MaxOIDCRules+1)+" rules, over the limit") {
		t.Errorf("too many rules: %v", err)
	}
}
