package runbook

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// tokenRE matches a values token (docs/decisions/values-substitution.md). `$1`, `${{ github.sha }}` and `$$` do not match
// and so stay byte for byte.
var (
	tokenRE      = lazyregexp.New(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	identifierRE = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// values parses a values file: a top-level mapping of identifier keys to YAML values.
func (l *loader) values(file string, data []byte) (map[string]*yaml.Node, bool) {
	root, ok := l.parse(file, data)
	if !ok || root == nil {
		return map[string]*yaml.Node{}, ok
	}
	if root.Kind != yaml.MappingNode {
		l.report(root, "", "a values file must be a mapping of keys to values")
		return nil, false
	}
	vals := map[string]*yaml.Node{}
	for _, p := range pairs(root) {
		if !identifierRE.MatchString(p.key.Value) {
			l.report(p.key, p.key.Value, "values key must match [A-Za-z_][A-Za-z0-9_]*")
			continue
		}
		vals[p.key.Value] = p.value
	}
	return vals, len(l.issues) == 0
}

// substitute replaces ${key} tokens in every scalar value of the tree (never in mapping keys),
// in one pass: inserted values are not scanned again (docs/decisions/values-substitution.md). A plain scalar that is
// exactly one token becomes the value's node, so it keeps the value's YAML type; any other
// scalar with tokens becomes a string built from the values' source text (1.10 stays 1.10).
// Aliases are not followed: their targets are substituted where they are defined.
func (l *loader) substitute(n *yaml.Node, vals map[string]*yaml.Node, field string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			l.substitute(n.Content[i+1], vals, joinField(field, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			l.substitute(c, vals, field+"["+strconv.Itoa(i)+"]")
		}
	case yaml.ScalarNode:
		l.substituteScalar(n, vals, field)
	}
}

func (l *loader) substituteScalar(n *yaml.Node, vals map[string]*yaml.Node, field string) {
	locs := tokenRE.FindAllStringSubmatchIndex(n.Value, -1)
	if len(locs) == 0 {
		return
	}
	lookup := func(key string) *yaml.Node {
		v := vals[key]
		if v == nil {
			// The node keeps its token text; the schema checks leave it alone, so a missing
			// key is reported once and does not hide (or fake) the runbook's other errors.
			l.unresolved[n] = true
			if !l.valuesUnusable {
				l.report(n, field, "values key %q is not defined in %s", key, l.valuesFile)
			}
		}
		return resolveAlias(v)
	}
	if n.Style == 0 && len(locs) == 1 && locs[0][0] == 0 && locs[0][1] == len(n.Value) {
		key := n.Value[2 : len(n.Value)-1]
		if v := lookup(key); v != nil {
			line, col := n.Line, n.Column
			// n keeps its own identity (and origin), so errors on it point at the use site;
			// its children are the values file's nodes and point there.
			*n = *v
			n.Line, n.Column, n.Anchor = line, col, ""
			l.substituted[n] = key
		}
		return
	}
	var b strings.Builder
	last, ok := 0, true
	for _, loc := range locs {
		key := n.Value[loc[2]:loc[3]]
		b.WriteString(n.Value[last:loc[0]])
		last = loc[1]
		v := lookup(key)
		switch {
		case v == nil:
			ok = false
		case v.Kind != yaml.ScalarNode:
			l.report(n, field, "values key %q holds a %s, which cannot be inserted into a larger string", key, kindName(v))
			l.unresolved[n] = true
			ok = false
		default:
			b.WriteString(v.Value)
		}
	}
	if ok {
		b.WriteString(n.Value[last:])
		n.Value, n.Tag = b.String(), "!!str"
		l.interpolated[n] = true
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

// MinimalValuesHint says what a minimal values file at valuesPath holds, for a runbook whose
// text is rb and that has no .values.yaml.example to copy: one "key: value" line for each
// ${key} the runbook uses, in the order they first appear, or, when it uses none, that an
// empty file will do.
func MinimalValuesHint(valuesPath string, rb []byte) string {
	var keys []string
	seen := map[string]bool{}
	for _, m := range tokenRE.Regexp().FindAllSubmatch(rb, -1) {
		if k := string(m[1]); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "There is no " + valuesPath + ".example to copy: the runbook uses no ${key} values, so an empty " + valuesPath + " will do."
	}
	var b strings.Builder
	b.WriteString("There is no " + valuesPath + ".example to copy: create " + valuesPath + " with a value for each ${key} the runbook uses, one per line:")
	for _, k := range keys {
		b.WriteString("\n  " + k + ": <value>")
	}
	return b.String()
}
