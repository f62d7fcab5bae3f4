package runbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Limits on every YAML file the loader reads (runbook and values file alike;
// docs/decisions/yaml-safety.md: alias bombs and deep nesting). They bound memory and time
// before any value is converted.
const (
	// MaxFileBytes is the largest runbook or values file accepted, in bytes (1 MiB).
	MaxFileBytes = 1 << 20
	// MaxDepth is the deepest nesting of mappings and sequences accepted, counted after
	// alias expansion; the document's top-level collection is depth 1.
	MaxDepth = 64
	// MaxNodes is the most YAML nodes a document may have once every alias is expanded
	// (and, for a runbook, once values are substituted). It stops alias bombs.
	MaxNodes = 100_000
)

// readLimited reads a whole file, refusing files larger than MaxFileBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err == nil && len(data) > MaxFileBytes {
		err = errTooLarge
	}
	return data, err
}

var errTooLarge = fmt.Errorf("file is larger than %d bytes (MaxFileBytes)", MaxFileBytes)

var yamlLineRE = lazyregexp.New(`^yaml: line (\d+): `)

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its scanner) reports.
var yamlParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected <document start>", "did not find expected <stream-start>", "did not find expected key",
	"did not find expected node content", "found duplicate %TAG directive", "found duplicate %YAML directive",
	"found incompatible YAML document", "found undefined tag handle",
}

// parse decodes one YAML document into a node tree and checks it against the limits.
// It returns nil for an empty document and ok=false when it reported an error.
func (l *loader) parse(file string, data []byte) (root *yaml.Node, ok bool) {
	if len(data) > MaxFileBytes {
		l.reportAt(file, 0, 0, "", errTooLarge.Error())
		return nil, false
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := safeDecode(dec, &doc)
	if errors.Is(err, io.EOF) {
		return nil, true
	}
	if err == nil {
		var extra yaml.Node
		if err2 := safeDecode(dec, &extra); !errors.Is(err2, io.EOF) {
			line := extra.Line
			if err2 != nil {
				line = 0
			}
			l.reportAt(file, line, 0, "", "a file must hold exactly one YAML document")
			return nil, false
		}
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = strings.TrimPrefix(err.Error(), m[0])
			if slices.Contains(yamlParserProblems, msg) {
				line++ // yaml.v3 prints a 0-based line for parser (not scanner) errors
			}
		}
		col := 0
		if strings.Contains(msg, "tab character") || strings.Contains(msg, "cannot start any token") {
			from := max(line, 1) // no line: yaml.v3 leaves out "line 1"
			// "cannot start any token" is reported at the offending line itself; the
			// tab-indentation errors at the line of the scalar before it.
			if tl, tc := findIndentTab(data, from); tl > 0 && (tl == from || strings.Contains(msg, "tab character")) {
				line, col = tl, tc
				msg += " (indent YAML with spaces, not tabs)"
			}
		}
		msg = "invalid YAML: " + msg
		if bytes.Contains(data, []byte("${")) && strings.Contains(msg, "expected ','") {
			msg += " (a ${key} token inside [ ] or { } must be quoted)"
		}
		if strings.Contains(msg, "exceeded max depth") {
			// yaml.v3 stops at 10,000 levels on its own; say which limit applies here.
			msg = fmt.Sprintf("nesting deeper than %d levels (MaxDepth)", MaxDepth)
		}
		l.reportAt(file, line, col, "", msg)
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	root = doc.Content[0]
	markOrigin(root, l.origin, file)
	w := limitWalker{l: l, active: map[*yaml.Node]bool{}}
	return root, w.walk(root, 1, nil)
}

// findIndentTab locates the tab behind a yaml.v3 tab error: the first line at or after
// fromLine (1-based) with a tab in its indentation, and the tab's 1-based column. yaml.v3
// reports such errors at the line where the enclosing scalar started (its "context mark"),
// not where the tab is, and never with a column (docs/runbooks.md, "Validating"). It returns 0, 0 when
// no indentation from fromLine on holds a tab.
func findIndentTab(data []byte, fromLine int) (line, col int) {
	for i, text := range bytes.Split(data, []byte("\n")) {
		if i+1 < fromLine {
			continue
		}
		indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
		if j := bytes.IndexByte(indent, '\t'); j >= 0 {
			return i + 1, j + 1
		}
	}
	return 0, 0
}

// safeDecode turns a panic inside the YAML library into an error, so hostile input can never
// crash the caller.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// markOrigin records which file each node of a tree came from (aliases are not followed:
// their targets are part of the same tree).
func markOrigin(n *yaml.Node, origin map[*yaml.Node]string, file string) {
	origin[n] = file
	for _, c := range n.Content {
		markOrigin(c, origin, file)
	}
}

// limitWalker walks a document as a consumer would see it, aliases and substituted values
// expanded, and stops at the first limit hit. Work is bounded by MaxNodes however aliases nest.
type limitWalker struct {
	l       *loader
	count   int
	active  map[*yaml.Node]bool // collections on the current path, to catch self-referencing aliases
	path    []string
	viaPath int // length of path where the outermost expansion (alias or value) started
}

func (w *limitWalker) fail(n *yaml.Node, pathLen int, format string, args ...any) bool {
	w.l.report(n, strings.Join(w.path[:pathLen], ""), format, args...)
	return false
}

// walk checks n at nesting depth; via is the outermost alias or substituted value being
// expanded, if any, and the node a node-count error is reported at.
func (w *limitWalker) walk(n *yaml.Node, depth int, via *yaml.Node) bool {
	if _, substituted := w.l.substituted[n]; via == nil && (n.Kind == yaml.AliasNode || substituted) {
		via, w.viaPath = n, len(w.path)
	}
	if w.count++; w.count > MaxNodes {
		switch {
		case via == nil:
			return w.fail(n, len(w.path), "document has more than %d nodes (MaxNodes)", MaxNodes)
		case via.Kind == yaml.AliasNode:
			return w.fail(via, w.viaPath, "alias *%s expands the document beyond %d nodes (MaxNodes)", via.Value, MaxNodes)
		}
		return w.fail(via, w.viaPath, "value ${%s} expands the document beyond %d nodes (MaxNodes)", w.l.substituted[via], MaxNodes)
	}
	if via == nil && !w.checkTag(n, len(w.path)) {
		return false
	}
	switch n.Kind {
	case yaml.AliasNode:
		if w.active[n.Alias] {
			return w.fail(n, len(w.path), "alias *%s refers to a node that contains it", n.Value)
		}
		return w.walk(n.Alias, depth, via)
	case yaml.ScalarNode:
		return true
	}
	if depth > MaxDepth {
		return w.fail(n, len(w.path), "nesting deeper than %d levels (MaxDepth)", MaxDepth)
	}
	w.active[n] = true
	defer delete(w.active, n)
	if n.Kind == yaml.SequenceNode {
		for i, c := range n.Content {
			w.path = append(w.path, "["+strconv.Itoa(i)+"]")
			ok := w.walk(c, depth+1, via)
			w.path = w.path[:len(w.path)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	seen := map[string]*yaml.Node{}
	var merge *yaml.Node // the mapping's << key, if any
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return w.fail(k, len(w.path), "mapping keys must be scalars")
		}
		seg := k.Value
		if len(w.path) > 0 {
			seg = "." + seg
		}
		w.path = append(w.path, seg)
		ok := via != nil || w.checkTag(k, len(w.path))
		switch first := seen[k.Value]; {
		case !ok:
		case isMerge(k) && merge != nil && via == nil:
			ok = w.fail(k, len(w.path), "a second << merge key in one mapping (the first is at line %d); merge several mappings with one key: <<: [*a, *b]", merge.Line)
		case first != nil && via == nil && !isMerge(k):
			ok = w.fail(k, len(w.path), "duplicate key %q (first at line %d)", k.Value, first.Line)
		case isMerge(k) && mergeSources(n.Content[i+1]) == nil:
			ok = w.fail(k, len(w.path), "a << merge value must be a mapping or a list of mappings")
		}
		if isMerge(k) && merge == nil {
			merge = k
		}
		seen[k.Value] = k
		ok = ok && w.walk(n.Content[i+1], depth+1, via)
		w.path = w.path[:len(w.path)-1]
		if !ok {
			return false
		}
	}
	return true
}

// coreScalarTags are the explicit scalar tags a runbook or values file may carry: the YAML 1.2
// core schema's, with !!map and !!seq for collections (docs/decisions/yaml-safety.md).
// Anything else — !!binary, !!timestamp, !!set, !!python/…, local tags like !foo, %TAG
// handles — would be silently read as plain text or dropped, so it is an error.
var coreScalarTags = map[string]bool{"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true}

// checkTag reports an explicit tag on n that is outside the core schema, that does not fit
// n's kind (!!map on a list), or that does not fit n's text (!!int on "abc", or any tag but
// !!str on a value holding a ${key} token, which substitution would silently turn into a
// string). Untagged nodes are always fine: their type comes from YAML 1.2 resolution.
func (w *limitWalker) checkTag(n *yaml.Node, pathLen int) bool {
	if n.Style&yaml.TaggedStyle == 0 || n.Kind == yaml.AliasNode {
		return true
	}
	tag := n.Tag
	switch {
	case n.Kind == yaml.MappingNode && tag == "!!map", n.Kind == yaml.SequenceNode && tag == "!!seq":
		return true
	case n.Kind == yaml.ScalarNode && coreScalarTags[tag]:
	case coreScalarTags[tag] || tag == "!!map" || tag == "!!seq":
		return w.fail(n, pathLen, "tag %s cannot be applied to a %s", tag, kindName(n))
	default:
		return w.fail(n, pathLen, "tag %s is not allowed: only the YAML core schema tags !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are (no local tags such as !foo, no !!binary, !!timestamp or language tags such as !!python/object)", tag)
	}
	if tag == "!!str" {
		return true
	}
	if tokenRE.MatchString(n.Value) {
		return w.fail(n, pathLen, "tag %s on a value with a ${key} token; remove the tag (a value that is exactly ${key} takes the type of the value it names)", tag)
	}
	implicit := (&yaml.Node{Kind: yaml.ScalarNode, Value: n.Value}).ShortTag()
	if implicit != tag && (tag != "!!float" || implicit != "!!int") {
		return w.fail(n, pathLen, "the value does not fit its tag %s%s", tag, w.l.got(n))
	}
	return true
}

func isMerge(k *yaml.Node) bool { return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" }

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// pair is one effective key/value of a mapping after `<<` merges.
type pair struct{ key, value *yaml.Node }

// pairs returns a mapping's entries with YAML merge keys applied: explicit keys first, in file
// order, then merged keys not already present (earlier merge sources win). The limit walk has
// checked every merge value and ruled out cycles.
func pairs(n *yaml.Node) []pair {
	var own, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !isMerge(k) {
			own = append(own, pair{k, v})
			continue
		}
		for _, s := range mergeSources(v) {
			merged = append(merged, pairs(s)...)
		}
	}
	seen := map[string]bool{}
	for _, p := range own {
		seen[p.key.Value] = true
	}
	for _, p := range merged {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			own = append(own, p)
		}
	}
	return own
}

// mergeSources returns the mappings a `<<` value merges, or nil when it is not a mapping or
// a list of mappings.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = resolveAlias(v)
	if v.Kind == yaml.MappingNode {
		return []*yaml.Node{v}
	}
	if v.Kind != yaml.SequenceNode {
		return nil
	}
	srcs := make([]*yaml.Node, len(v.Content))
	for i, s := range v.Content {
		if srcs[i] = resolveAlias(s); srcs[i].Kind != yaml.MappingNode {
			return nil
		}
	}
	return srcs
}

var jsonNumberRE = lazyregexp.New(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// plain converts a node to Go values for Params (docs/decisions/yaml-safety.md): numbers become json.Number of
// their source text (or the source string when that is not a JSON number, e.g. 0755 or .inf),
// booleans bool, null nil, everything else its string; mappings map[string]any, sequences []any.
func (l *loader) plain(n *yaml.Node, field string) any {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, p := range pairs(n) {
			m[p.key.Value] = l.plain(p.value, joinField(field, p.key.Value))
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = l.plain(c, fmt.Sprintf("%s[%d]", field, i))
		}
		return s
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int", "!!float":
		if jsonNumberRE.MatchString(n.Value) {
			return json.Number(n.Value)
		}
	}
	return n.Value
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
