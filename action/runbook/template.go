package runbook

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Playbook templating (docs/spec/playbooks.md, "Templates"): "{{ path }}" in a node's args, env, cwd, inputs,
// prompt and handler messages is replaced by the binding at path. One pass: inserted text is
// never scanned again, so a value holding "{{ x }}" stays literal. There is no escape syntax
// in v1: a literal "{{" cannot be written in a templated field.

// MaxRenderedBytes caps one rendered template (1 MiB): a binding cannot blow a command line
// or a prompt up without bound.
const MaxRenderedBytes = 1 << 20

// pathRE is a binding path: dot-separated segments of [A-Za-z0-9_-].
var pathRE = lazyregexp.New(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// MissingVarError lists every binding a template names that the run does not have, in the
// order they first appear (docs/spec/playbooks.md, "Templates": a missing variable is an error that names it,
// never an empty string or a literal left in a command).
type MissingVarError struct {
	Names []string
	// Has says, for a missing dotted name whose root binding exists, what that binding
	// holds: "detect has: stdout, exit_code" (its keys, sorted, at most MaxHasKeys), or
	// "detect.stdout is a string, not an object" (docs/playbooks.md). Empty when no root
	// exists. NewMissingVarError fills it.
	Has []string
}

// MaxHasKeys caps the keys MissingVarError.Has lists for one binding; more are counted
// ("… and 12 more").
const MaxHasKeys = 20

// NewMissingVarError is the *MissingVarError of names against bindings, with Has filled:
// for each dotted name, the longest prefix that resolves is described (its keys when it is an
// object, its kind otherwise), once per prefix.
func NewMissingVarError(names []string, bindings map[string]any) *MissingVarError {
	e := &MissingVarError{Names: names}
	seen := map[string]bool{}
	for _, n := range names {
		parts := strings.Split(n, ".")
		for k := len(parts) - 1; k >= 1; k-- {
			prefix := strings.Join(parts[:k], ".")
			v, ok := ResolvePath(bindings, prefix)
			if !ok {
				continue
			}
			if !seen[prefix] {
				seen[prefix] = true
				e.Has = append(e.Has, describeBinding(prefix, v))
			}
			break
		}
	}
	return e
}

func describeBinding(prefix string, v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		kind := "a value"
		switch v.(type) {
		case string:
			kind = "a string"
		case bool:
			kind = "a boolean"
		case []any:
			kind = "a list"
		case nil:
			kind = "null"
		case float64, int, int64, json.Number:
			kind = "a number"
		}
		return fmt.Sprintf("%s is %s, not an object", prefix, kind)
	}
	if len(m) == 0 {
		return prefix + " has no keys"
	}
	keys := slices.Sorted(maps.Keys(m))
	more := ""
	if len(keys) > MaxHasKeys {
		more = fmt.Sprintf(" … and %d more", len(keys)-MaxHasKeys)
		keys = keys[:MaxHasKeys]
	}
	return prefix + " has: " + strings.Join(keys, ", ") + more
}

func (e *MissingVarError) Error() string {
	var s string
	if len(e.Names) == 1 {
		s = fmt.Sprintf("template variable %q has no binding", e.Names[0])
	} else {
		s = fmt.Sprintf("template variables %s have no binding", quoteJoin(e.Names))
	}
	if len(e.Has) > 0 {
		s += " (" + strings.Join(e.Has, "; ") + ")"
	}
	return s
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// TemplateError is a template that cannot be read: an unclosed "{{", an empty or malformed
// path, a null value, or a result over MaxRenderedBytes.
type TemplateError struct {
	Msg string
}

func (e *TemplateError) Error() string { return e.Msg }

type segment struct {
	lit  string
	path string // "" for a literal
}

// parseTemplate splits tmpl into literals and {{ path }} references.
func parseTemplate(tmpl string) ([]segment, error) {
	var out []segment
	rest := tmpl
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				out = append(out, segment{lit: rest})
			}
			return out, nil
		}
		if i > 0 {
			out = append(out, segment{lit: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, &TemplateError{Msg: fmt.Sprintf("unclosed {{ in %q (there is no escape for a literal {{ in v1)", clip(tmpl))}
		}
		p := strings.TrimSpace(rest[i+2 : i+2+j])
		if !pathRE.MatchString(p) {
			return nil, &TemplateError{Msg: fmt.Sprintf("{{ %s }} is not a binding path (want name or node.key, segments of A-Z a-z 0-9 _ -)", clip(p))}
		}
		out = append(out, segment{path: p})
		rest = rest[i+2+j+2:]
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:77], "") + "..."
	}
	return s
}

// TemplateRefs returns the binding paths tmpl uses, each once, in order of first use; the
// error is a *TemplateError for a malformed template.
func TemplateRefs(tmpl string) ([]string, error) {
	segs, err := parseTemplate(tmpl)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, s := range segs {
		if s.path != "" && !slices.Contains(refs, s.path) {
			refs = append(refs, s.path)
		}
	}
	return refs, nil
}

// ResolvePath looks path ("version", "build.stdout", "build.meta.tag") up in bindings,
// descending through nested maps. ok is false when any segment is missing or a non-map is
// descended into.
func ResolvePath(bindings map[string]any, path string) (v any, ok bool) {
	var cur any = bindings
	for seg := range strings.SplitSeq(path, ".") {
		m, isMap := cur.(map[string]any)
		if !isMap {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Truthy reports whether v counts as true for when: truthy and for facts: not nil, false, 0,
// "", an empty list or an empty map (docs/spec/playbooks.md, "Error handlers").
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case float64:
		return x != 0
	case float32:
		return x != 0
	case int:
		return x != 0
	case int64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// ValueText is how a binding value is inserted into a template: a string as is, a number or a
// bool as its JSON text, a list or a map as compact JSON. nil is an error.
func ValueText(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", errors.New("is null")
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cannot be written as text: %v", err)
	}
	return string(b), nil
}

// Render replaces every {{ path }} in tmpl by its binding (ValueText), in one pass. Errors: a
// *MissingVarError naming every missing binding, or a *TemplateError (malformed template, a
// null binding, a result over MaxRenderedBytes).
func Render(tmpl string, bindings map[string]any) (string, error) {
	segs, err := parseTemplate(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var missing []string
	for _, s := range segs {
		if s.path == "" {
			b.WriteString(s.lit)
			continue
		}
		v, ok := ResolvePath(bindings, s.path)
		if !ok {
			if !slices.Contains(missing, s.path) {
				missing = append(missing, s.path)
			}
			continue
		}
		text, err := ValueText(v)
		if err != nil {
			return "", &TemplateError{Msg: fmt.Sprintf("binding %q %s", s.path, err)}
		}
		b.WriteString(text)
		if b.Len() > MaxRenderedBytes {
			return "", &TemplateError{Msg: fmt.Sprintf("rendered template is over %d bytes", MaxRenderedBytes)}
		}
	}
	if len(missing) > 0 {
		return "", NewMissingVarError(missing, bindings)
	}
	return b.String(), nil
}

// RenderValue renders every string inside v (maps and lists are walked; other values are
// kept) and returns a new value; v is not changed. Missing bindings across the whole value are
// reported together in one *MissingVarError.
func RenderValue(v any, bindings map[string]any) (any, error) {
	var missing []string
	out, err := renderValue(v, bindings, &missing)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, NewMissingVarError(missing, bindings)
	}
	return out, nil
}

func renderValue(v any, bindings map[string]any, missing *[]string) (any, error) {
	switch x := v.(type) {
	case string:
		s, err := Render(x, bindings)
		var mv *MissingVarError
		if errors.As(err, &mv) {
			for _, n := range mv.Names {
				if !slices.Contains(*missing, n) {
					*missing = append(*missing, n)
				}
			}
			return x, nil
		}
		return s, err
	case map[string]any:
		m := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) { // sorted: missing names in a stable order
			e := x[k]
			r, err := renderValue(e, bindings, missing)
			if err != nil {
				return nil, err
			}
			m[k] = r
		}
		return m, nil
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			r, err := renderValue(e, bindings, missing)
			if err != nil {
				return nil, err
			}
			l[i] = r
		}
		return l, nil
	}
	return v, nil
}
