package yamlerr_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// TestYAMLErrorLines: yaml.v3's syntax errors become file:line with a 1-based
// line: a scanner error as given, a parser error one later (yaml.v3 counts those from 0),
// an error on line 1 (which yaml.v3 prints without a line) as line 1; Plural counts right.
func TestYAMLErrorLines(t *testing.T) {
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

// Every config file is one YAML document of bounded size; the errors name the file, the
// line of a second document and what the file should hold.
func TestDecodeOneAcceptsExactlyOneBoundedDocument(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"one document", "rules: []\n", ""},
		{"empty", "", `c.yaml: empty gate policy: want a mapping with "rules"`},
		{"only a comment", "# nothing\n", `c.yaml: empty gate policy: want a mapping with "rules"`},
		{"two documents", "rules: []\n---\nrules: []\n", "c.yaml:2: a gate policy is exactly one YAML document"},
		{"too large", "rules: [" + strings.Repeat("a, ", 40) + "a]\n", "c.yaml: larger than 64 bytes"},
		{"syntax error", "rules: [\n", "c.yaml:2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := yamlerr.DecodeOne("c.yaml", []byte(tc.text), 64, "gate policy", `a mapping with "rules"`)
			switch {
			case tc.want == "" && (err != nil || doc == nil || len(doc.Content) != 1):
				t.Fatalf("DecodeOne = %v, %v; want the document", doc, err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("DecodeOne error %v, want it to start with %q", err, tc.want)
			}
		})
	}
}
