package yamlerr_test

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// TestIssue7_Polish_YAMLErrorLines: yaml.v3's syntax errors become file:line with a 1-based
// line: a scanner error as given, a parser error one later (yaml.v3 counts those from 0),
// an error on line 1 (which yaml.v3 prints without a line) as line 1; Plural counts right
// (issue 7 new-user finding 14).
func TestIssue7_Polish_YAMLErrorLines(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"a: b: c\n", "f.yaml:1: mapping values are not allowed in this context"},
		{"a:\n  b: c\n d: e\n", "f.yaml:3: did not find expected key"},
		{"a:\n  - b\n\t- c\n", "f.yaml:3: found a tab character that violates indentation (indent YAML with spaces, not tabs)"},
		{"a: \"x\n", "f.yaml:2: found unexpected end of stream"},
	} {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(c.body), &n)
		if err == nil {
			t.Fatalf("%q parsed", c.body)
		}
		if got := yamlerr.At("f.yaml", []byte(c.body), err).Error(); got != c.want {
			t.Errorf("%q (%v):\n got %s\nwant %s", c.body, err, got, c.want)
		}
	}
	for n, want := range map[int]string{0: "0 rules", 1: "1 rule", 2: "2 rules"} {
		if got := yamlerr.Plural(n, "rule", "rules"); got != want {
			t.Errorf("Plural(%d) = %q", n, got)
		}
	}
}
