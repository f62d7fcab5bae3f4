package runbook

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/unicode/norm"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

//go:embed rules.yaml
var embeddedRules []byte

// RulesYAML returns the embedded rules.yaml, the step-type schema every runbook is validated
// against unless LoadOptions.RulesPath overrides it (docs/spec/runbooks.md, "Step 1"; docs/decisions/rules-schema.md).
// The caller gets its own copy.
func RulesYAML() []byte { return bytes.Clone(embeddedRules) }

// SchemaHash8 returns the first 8 lowercase hex chars of SHA-256(rules): the specification's
// schema_hash8 (docs/spec/runbooks.md, "Step 1"), part of every run id.
func SchemaHash8(rules []byte) string {
	sum := sha256.Sum256(rules)
	return hex.EncodeToString(sum[:4])
}

// fieldRule is one field's rule in rules.yaml; the file's header documents each key.
type fieldRule struct {
	Kind        string     `yaml:"kind"`
	Required    bool       `yaml:"required"`
	Description string     `yaml:"description"`
	MinLength   int        `yaml:"min_length"`
	MaxLength   int        `yaml:"max_length"`
	Pattern     string     `yaml:"pattern"`
	NoControl   bool       `yaml:"no_control"`
	Unique      bool       `yaml:"unique"`
	Values      []string   `yaml:"values"`
	Min         *int       `yaml:"min"`
	Max         *int       `yaml:"max"`
	MaxFrom     string     `yaml:"max_from"`
	Default     *int       `yaml:"default"`
	Items       *fieldRule `yaml:"items"`
	MinItems    int        `yaml:"min_items"`
	Under       string     `yaml:"under"`

	re *regexp.Regexp
}

// ruleSet is rules.yaml: the runbook's top-level fields, the step fields, and per step type
// the fields whose rule differs for that type.
type ruleSet struct {
	Runbook map[string]*fieldRule            `yaml:"runbook"`
	Step    map[string]*fieldRule            `yaml:"step"`
	Types   map[string]map[string]*fieldRule `yaml:"types"`
}

var ruleKinds = []string{"string", "enum", "int", "list", "map", "path", "null", "step", "form"}

// parseRules decodes rules.yaml strictly (unknown keys are errors) and checks it is usable.
func parseRules(data []byte) (*ruleSet, error) {
	var rs ruleSet
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rs); err != nil {
		return nil, err
	}
	if len(rs.Runbook) == 0 || len(rs.Step) == 0 {
		return nil, fmt.Errorf("rules need both a runbook: and a step: section")
	}
	var check func(where string, r *fieldRule) error
	check = func(where string, r *fieldRule) error {
		switch {
		case r == nil || !slices.Contains(ruleKinds, r.Kind):
			return fmt.Errorf("%s: kind must be one of %s", where, strings.Join(ruleKinds, ", "))
		case r.Kind == "list" && r.Items == nil:
			return fmt.Errorf("%s: a list needs items", where)
		case r.MaxFrom != "" && (rs.Runbook[r.MaxFrom] == nil || rs.Runbook[r.MaxFrom].Kind != "int"):
			return fmt.Errorf("%s: max_from %q is not an int field of runbook", where, r.MaxFrom)
		}
		if r.Pattern != "" {
			re, err := regexp.Compile("^(?:" + r.Pattern + ")$")
			if err != nil {
				return fmt.Errorf("%s: pattern: %v", where, err)
			}
			r.re = re
		}
		if r.Items != nil {
			return check(where+".items", r.Items)
		}
		return nil
	}
	sections := map[string]map[string]*fieldRule{"runbook": rs.Runbook, "step": rs.Step}
	for t, fields := range rs.Types {
		sections["types."+t] = fields
	}
	for name, fields := range sections {
		for f, r := range fields {
			if err := check(name+"."+f, r); err != nil {
				return nil, err
			}
		}
	}
	return &rs, nil
}

// stepValue is a validated step: its converted fields and its mapping node.
type stepValue struct {
	fields map[string]any
	node   *yaml.Node
}

// capCheck is a max_from check that waits until the top-level field it refers to is known.
type capCheck struct {
	node  *yaml.Node
	field string
	value int
	from  string
	step  int
}

// object validates a mapping against field rules and returns the converted value of every
// field that passed (plus defaults). For steps, types holds the per-type rule overrides
// selected by the step's `type` field.
func (l *loader) object(n *yaml.Node, field string, fields map[string]*fieldRule, types map[string]map[string]*fieldRule) map[string]any {
	n = resolveAlias(n)
	if l.unresolved[n] {
		return nil // its missing values key is reported already
	}
	if n.Kind != yaml.MappingNode {
		l.report(n, field, "must be a mapping, got a %s", kindName(n))
		return nil
	}
	ps := pairs(n)
	var overrides map[string]*fieldRule
	if types != nil {
		if t := lookup(ps, "type"); t != nil {
			overrides = types[t.Value]
		}
	}
	rule := func(name string) *fieldRule {
		if r := overrides[name]; r != nil {
			return r
		}
		return fields[name]
	}
	out, present := map[string]any{}, map[string]bool{}
	for _, p := range ps {
		name, f, r := p.key.Value, joinField(field, p.key.Value), rule(p.key.Value)
		switch {
		case r == nil:
			l.report(p.key, f, "unknown field (allowed: %s)", strings.Join(sortedKeys(fields, overrides), ", "))
		case p.value.ShortTag() == "!!null": // null counts as omitted
		default:
			present[name] = true
			if v, ok := l.value(p.value, r, f); ok {
				out[name] = v
			}
		}
	}
	for _, name := range sortedKeys(fields, overrides) {
		if r := rule(name); !present[name] && r.Required {
			l.report(n, joinField(field, name), "is required")
		} else if !present[name] && r.Default != nil {
			out[name] = *r.Default
		}
	}
	return out
}

var decimalRE = lazyregexp.New(`^-?(0|[1-9][0-9]*)$`)

// value validates one non-null field value and converts it: string kinds to string, int to
// int, list to []any, map to map[string]any (docs/decisions/yaml-safety.md numbers), step to stepValue, form to
// []gateinputs.Field.
func (l *loader) value(n *yaml.Node, r *fieldRule, field string) (any, bool) {
	n = resolveAlias(n)
	fail := func(format string, args ...any) (any, bool) {
		if !l.unresolved[n] { // a node whose values key is missing was reported as such
			l.report(n, field, format, args...)
		}
		return nil, false
	}
	switch r.Kind {
	case "null":
		return fail("must be null or omitted")
	case "step":
		l.stepNodes[l.curStep] = n
		return stepValue{l.object(n, field, l.rules.Step, l.rules.Types), n}, true
	case "form":
		// The playbook parser's reading, so a confirm step's form follows exactly the rules of
		// an approval node's (docs/approver-inputs.md, "Declaration").
		before := len(l.issues)
		form := (&pbParser{l: l}).readForm(n, field, "the name the approver fills in")
		return form, len(l.issues) == before
	case "map":
		if n.Kind != yaml.MappingNode {
			return fail("must be a mapping, got a %s", kindName(n))
		}
		return l.plain(n, field), true
	case "list":
		if n.Kind != yaml.SequenceNode {
			return fail("must be a list, got a %s", kindName(n))
		}
		if len(n.Content) < r.MinItems {
			return fail("must have at least %d item(s)", r.MinItems)
		}
		items, ok := make([]any, len(n.Content)), true
		for i, c := range n.Content {
			if r.Items.Kind == "step" {
				l.curStep = i
			}
			var itemOK bool
			items[i], itemOK = l.value(c, r.Items, field+"["+strconv.Itoa(i)+"]")
			ok = ok && itemOK
			l.curStep = -1
		}
		return items, ok
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return fail("must be a %s, got a %s", r.Kind, kindName(n))
	}
	s := n.Value
	switch r.Kind {
	case "int":
		if n.ShortTag() != "!!int" || !decimalRE.MatchString(s) {
			return fail("must be a decimal integer%s", l.got(n))
		}
		v, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return fail("integer %s is out of range", s)
		case r.Min != nil && v < *r.Min:
			return fail("must be at least %d, got %d", *r.Min, v)
		case r.Max != nil && v > *r.Max:
			return fail("must be at most %d, got %d", *r.Max, v)
		}
		if r.MaxFrom != "" {
			l.caps = append(l.caps, capCheck{n, field, v, r.MaxFrom, l.curStep})
		}
		return v, true
	case "enum":
		if !slices.Contains(r.Values, s) {
			return fail("must be one of %s%s", strings.Join(r.Values, ", "), l.got(n))
		}
	case "path":
		if s != "" && !cleanRelativePath(s, r.Under) {
			where := "under " + r.Under
			if r.Under == "" {
				where = "inside the working directory"
			}
			return fail("must be a relative path %s with no '..', '.' or empty segments%s", where, l.got(n))
		}
	}
	switch runes := utf8.RuneCountInString(s); {
	case runes < r.MinLength && runes == 0:
		return fail("must not be empty")
	case runes < r.MinLength:
		return fail("must be at least %d characters", r.MinLength)
	case r.MaxLength > 0 && runes > r.MaxLength:
		return fail("must be at most %d characters, got %d", r.MaxLength, runes)
	case r.re != nil && !r.re.MatchString(s):
		return fail("must match %s%s", r.Pattern, l.got(n))
	case r.NoControl && strings.IndexFunc(s, isControl) >= 0:
		return fail("must not contain control characters")
	}
	if r.Unique {
		key := norm.NFC.String(s)
		if first := l.unique[r][key]; first != nil {
			return fail("duplicate of the %s at line %d (compared after Unicode NFC normalisation)", lastSegment(field), first.Line)
		}
		if l.unique[r] == nil {
			l.unique[r] = map[string]*yaml.Node{}
		}
		l.unique[r][key] = n
	}
	return s, true
}

// got quotes a rejected scalar for an error message, unless its text came from the values
// file: values may be secrets, and secrets never reach errors.
func (l *loader) got(n *yaml.Node) string {
	if l.hasValueText(n) {
		return " (the value comes from " + l.valuesFile + " and is not shown)"
	}
	v := n.Value
	if len(v) > MaxQuotedValueBytes {
		v = strings.ToValidUTF8(v[:MaxQuotedValueBytes], "") + fmt.Sprintf("… (%d bytes)", len(n.Value))
	}
	return ", got " + strconv.Quote(v)
}

// MaxQuotedValueBytes caps how much of an offending value a diagnostic quotes ("got …"): a
// 100 KiB node id is shown as its first 120 bytes and its length, so one bad scalar cannot
// blow up an error listing (docs/decisions/yaml-safety.md: bad input gets a clear error).
const MaxQuotedValueBytes = 120

// isControl reports characters that make a name print differently from what it is:
// control characters and bidirectional formatting marks.
func isControl(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }

func lookup(ps []pair, key string) *yaml.Node {
	for _, p := range ps {
		if p.key.Value == key {
			return resolveAlias(p.value)
		}
	}
	return nil
}

func sortedKeys(maps ...map[string]*fieldRule) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func lastSegment(field string) string { return field[strings.LastIndexAny(field, ".]")+1:] }

// cleanRelativePath reports whether p is a clean relative path that starts with under, has
// more after it, never leaves the working directory and has no backslash, NUL or
// surrounding blanks in its last segment (docs/decisions/yaml-safety.md: paths are data, never navigation).
func cleanRelativePath(p, under string) bool {
	return strings.HasPrefix(p, under) && len(p) > len(under) && path.Clean(p) == p &&
		!path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../") &&
		!strings.ContainsAny(p, "\\\x00") && strings.TrimSpace(path.Base(p)) == path.Base(p)
}
