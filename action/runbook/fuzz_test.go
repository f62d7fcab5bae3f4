package runbook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// testdataPairs returns every testdata runbook with its values file (empty when none).
func testdataPairs(f *testing.F) (pairs [][2][]byte) {
	paths, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no testdata runbooks: %v", err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".values.yaml") {
			continue
		}
		rb, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		vals, _ := os.ReadFile(strings.TrimSuffix(p, ".yaml") + ".values.yaml")
		pairs = append(pairs, [2][]byte{rb, vals})
	}
	return pairs
}

// FuzzLoad feeds arbitrary runbook and values bytes to the loader: it must never panic, and
// it returns either a plan that keeps the rules or an error with diagnostics.
func FuzzLoad(f *testing.F) {
	for _, p := range testdataPairs(f) {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, rb, vals []byte) {
		plan, lerr := load("rb.yaml", rb, "rb.values.yaml", vals, "rules.yaml", embeddedRules)
		if lerr != nil {
			if plan != nil || len(lerr.Diagnostics) == 0 {
				t.Fatalf("plan %v with error %#v", plan, lerr)
			}
			return
		}
		if !nameRE.MatchString(plan.Name) || len(plan.Steps) == 0 || len(plan.Subscriptions) == 0 {
			t.Fatalf("invalid plan accepted: %+v", plan)
		}
		for _, s := range plan.Steps {
			if s.TimeoutSeconds < 1 || s.TimeoutSeconds > plan.MaxStepTimeoutSeconds || s.Name == "" {
				t.Fatalf("invalid step accepted: %+v", s)
			}
			if s.Type == TypeConfirm && s.Input != nil {
				t.Fatalf("confirm step with input: %+v", s)
			}
		}
	})
}

// FuzzSubstitute checks one-pass ${key} substitution inside a string scalar against a
// regexp-replace oracle, and that text without tokens is never touched.
func FuzzSubstitute(f *testing.F) {
	for _, p := range testdataPairs(f) {
		for _, line := range strings.Split(string(p[0]), "\n") {
			if strings.Contains(line, "$") {
				f.Add(line, p[1])
			}
		}
	}
	f.Fuzz(func(t *testing.T, template string, values []byte) {
		l := newLoader(nil, "rb.yaml", "rb.values.yaml")
		vals, ok := l.values("rb.values.yaml", values)
		if !ok {
			return
		}
		n := &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Tag: "!!str", Value: template}
		l.substituteScalar(n, vals, "f")
		missing, wrongKind := 0, 0
		want := tokenRE.ReplaceAllStringFunc(template, func(tok string) string {
			v := resolveAlias(vals[tok[2:len(tok)-1]])
			switch {
			case v == nil:
				missing++
			case v.Kind != yaml.ScalarNode:
				wrongKind++
			default:
				return v.Value
			}
			return tok
		})
		switch {
		case len(l.issues) != missing+wrongKind:
			t.Fatalf("%d issues %v, want %d missing + %d non-scalar", len(l.issues), l.issues, missing, wrongKind)
		case len(l.issues) == 0 && n.Value != want:
			t.Fatalf("substituted %q, want %q", n.Value, want)
		case len(l.issues) > 0 && n.Value != template:
			t.Fatalf("failed substitution changed the text to %q", n.Value)
		}
	})
}
