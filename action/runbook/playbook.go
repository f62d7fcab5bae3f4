package runbook

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// The .cantbook parser (docs/spec/playbooks.md, "Validation rules"; docs/decisions/yaml-safety.md, docs/decisions/playbooks-on-one-engine.md). A playbook is read with the same YAML safety as a runbook (yamlsafe.go:
// MaxFileBytes, MaxDepth, MaxNodes, duplicate keys, YAML 1.2 scalars) and compiled to the one
// Plan. Every problem is collected before it gives up, except that a file that does not parse or
// hits a YAML limit stops there (nothing else can be read reliably).

// Limits on a .cantbook beyond the YAML limits (docs/spec/playbooks.md, "Limits").
const (
	// MaxPlaybookNodes is the most nodes a playbook may have.
	MaxPlaybookNodes = 1000
	// MaxPlaybookEdges is the most edges a playbook may have.
	MaxPlaybookEdges = 5000
	// MaxNodeArgs is the most args a deterministic node may have.
	MaxNodeArgs = 256
	// MaxCommandBytes caps a deterministic node's command and each of its args (4 KiB each).
	MaxCommandBytes = 4 << 10
	// MaxNodeTimeoutSeconds is the largest node timeout (one day); the smallest is 1.
	MaxNodeTimeoutSeconds = 86400
	// DefaultNodeTimeoutSeconds is a deterministic or agentic node's timeout when it sets none.
	DefaultNodeTimeoutSeconds = 300
	// DefaultApprovalTimeoutSeconds is an approval node's timeout when it sets none (one day).
	DefaultApprovalTimeoutSeconds = 86400
	// MaxReportedCycles is how many cycles one parse names; further ones are counted in one
	// last diagnostic, so the report stays linear in nodes + edges.
	MaxReportedCycles = 10
)

// PlaybookVersion is the only version a .cantbook may declare (docs/spec/playbooks.md, rule 1).
const PlaybookVersion = "1.0"

// nodeIDRE is the shape of node ids and input names (docs/spec/playbooks.md, "Nodes": no dots or commas,
// they are the binding path and list separators).
var nodeIDRE = lazyregexp.New(`^[A-Za-z0-9_-]{1,64}$`)

// envNameRE is the shape of an environment variable name in a deterministic node's env.
var envNameRE = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReservedPlaybookIDs are the names no node id or input may take: they are binding roots the
// runtime owns (docs/spec/playbooks.md, "Bindings": error is what an inject_hint target sees).
var ReservedPlaybookIDs = []string{"error", "inputs", "run"}

// HandlerEvents are the event names an error_handlers entry may use besides "<node-id>-failed"
// (docs/spec/playbooks.md, "Error handlers").
var HandlerEvents = []string{EventNodeFailed, EventAgenticTimeout, EventIterationCapExceeded, EventContractViolation}

// HandlerActions are the error_handlers actions (docs/spec/playbooks.md, "Error handlers").
var HandlerActions = []string{HandlerAbort, HandlerContinue, HandlerRetry, HandlerInjectHint}

// PlaybookParseError is the only error ParsePlaybook and LoadPlaybook return (use errors.As):
// every problem found in one .cantbook (docs/spec/playbooks.md, "PlaybookParseError ... with a list
// of validation issues").
type PlaybookParseError struct {
	// File is the playbook file as given.
	File string
	// Issues is every error, each with file, 1-based line and column (0 when unknown, e.g. an
	// unreadable file), field path such as nodes[2].depends[0], and message; sorted by line,
	// then column, keeping the found order among equals. Never empty.
	Issues []Diagnostic
	// Warnings are problems that would not have stopped the load (an unquoted version: 1.0).
	Warnings []Diagnostic
}

// Error returns the first issue and how many more there are.
func (e *PlaybookParseError) Error() string {
	switch len(e.Issues) {
	case 0:
		return e.File + ": playbook: parse failed"
	case 1:
		return e.Issues[0].String()
	}
	return fmt.Sprintf("%s (and %d more errors)", e.Issues[0], len(e.Issues)-1)
}

// Details lists every issue, one "file:line:col: field: message" per line.
func (e *PlaybookParseError) Details() string {
	lines := make([]string, len(e.Issues))
	for i, d := range e.Issues {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// LoadPlaybook reads a .cantbook (at most MaxFileBytes) and parses it with ParsePlaybook. Every
// error, an unreadable file included, is a *PlaybookParseError.
func LoadPlaybook(path string) (*Plan, error) {
	src, err := readLimited(path)
	if err != nil {
		msg := pathErrText(err)
		if errors.Is(err, fs.ErrNotExist) {
			msg = "playbook file not found"
		}
		return nil, &PlaybookParseError{File: path, Issues: []Diagnostic{{File: path, Message: msg}}}
	}
	return ParsePlaybook(path, src)
}

// ParsePlaybook parses and validates the .cantbook src (named file in diagnostics) into a Plan
// with Kind KindPlaybook (docs/spec/playbooks.md; docs/spec/playbooks.md):
//
//   - Name is the playbook's name, Path is file, ContentHash the lowercase hex SHA-256 of src
//     (the playbook hash), SchemaHash8 the first 8 hex chars of SHA-256(PlaybookJSONSchema()),
//     MaxStepTimeoutSeconds is MaxNodeTimeoutSeconds.
//   - Steps has one Step per node in file order: Index, Name = id, Type = node type,
//     Line/Column of the node's mapping, Depends = step indexes of depends ∪ incoming edges
//     (each once, depends first, then edges in file order), TimeoutSeconds = the node's timeout
//     (DefaultNodeTimeoutSeconds, or DefaultApprovalTimeoutSeconds for approval nodes), OnFail
//     "", Node filled in.
//   - Playbook holds version, description, inputs, edges, error handlers, the source bytes and
//     the warnings (Playbook.Warnings: an unquoted version: 1.0 is accepted with a warning).
//
// The error is a *PlaybookParseError listing every issue found.
func ParsePlaybook(file string, src []byte) (*Plan, error) {
	p := &pbParser{l: newLoader(nil, file, ""), file: file, ids: map[string]int{}, inputs: map[string]*yaml.Node{}}
	plan := p.parse(src)
	if len(p.l.issues) > 0 {
		e := &PlaybookParseError{File: file, Warnings: p.warnings}
		for _, is := range p.l.issues {
			e.Issues = append(e.Issues, is.Diagnostic)
		}
		SortDiagnostics(e.Issues)
		return nil, e
	}
	return plan, nil
}

// pbParser holds one parse: the loader (for the YAML limits and reporting), what is known so
// far, and the checks that wait until every id is known.
type pbParser struct {
	l        *loader
	file     string
	warnings []Diagnostic
	ids      map[string]int        // node id → index of its first node
	inputs   map[string]*yaml.Node // input name → its name scalar
	// alwaysBound are the inputs every run binds: required ones and those with a default.
	alwaysBound map[string]bool
	nodes       []*rawNode
	edges       []rawEdge
	handlers    []rawHandler
	// templates are the templated strings, checked once every input and id is known.
	templates []templateUse
	// bindings are edge when bindings, checked like template references.
	bindings []templateUse
}

type rawNode struct {
	n       *yaml.Node
	field   string
	step    Step
	node    Node
	depends []ref // depends entries, each with its position
	injectN *yaml.Node
	// rewind are an approval node's rewind_targets entries, each with its position.
	rewind []ref
}

type ref struct {
	id    string
	n     *yaml.Node
	field string
}

type rawEdge struct {
	edge           Edge
	from, to       ref
	n              *yaml.Node
	field          string
	fromOK, toOKay bool
	// whenN is the edge's when mapping (nil without one).
	whenN *yaml.Node
}

type rawHandler struct {
	h     ErrorHandler
	onN   *yaml.Node
	actN  *yaml.Node
	field string
}

type templateUse struct {
	n     *yaml.Node
	field string
	text  string
}

// The keys each part of a .cantbook may have.
var (
	pbTopKeys     = []string{"version", "name", "description", "inputs", "nodes", "edges", "error_handlers"}
	pbInputKeys   = []string{"name", "required", "description", "default"}
	pbCommonKeys  = []string{"id", "type", "description", "depends", "timeout", "iteration_cap", "max_iterations", "on_failure", "requires", "ensures"}
	pbTypeKeys    = map[StepType][]string{TypeDeterministic: {"command", "args", "env", "cwd"}, TypeAgentic: {"skill", "agent", "inputs"}, TypeApproval: {"prompt", "policy", "inputs", "rewind_targets"}}
	pbEdgeKeys    = []string{"from", "to", "description", "contract", "when"}
	pbContractKey = []string{"requires", "ensures"}
	pbWhenOps     = []string{string(WhenEquals), string(WhenNotEquals), string(WhenExists), string(WhenIn), string(WhenTruthy)}
	pbHandlerKeys = []string{"on", "action", "message"}
	pbOnFailKeys  = []string{"inject_into", "max_iterations"}
	pbNodeTypes   = []string{string(TypeDeterministic), string(TypeAgentic), string(TypeApproval)}
)

func (p *pbParser) report(n *yaml.Node, field, format string, args ...any) {
	p.l.report(n, field, format, args...)
}

func (p *pbParser) parse(src []byte) *Plan {
	root, ok := p.l.parse(p.file, src)
	if !ok {
		return nil
	}
	if root == nil || root.Kind != yaml.MappingNode {
		line, col := 1, 1
		if root != nil {
			line, col = root.Line, root.Column
		}
		p.l.reportAt(p.file, line, col, "", "a playbook must be a mapping with version, name and nodes (docs/spec/playbooks.md)")
		return nil
	}
	top := p.fields(root, "", pbTopKeys)
	pb := &Playbook{Source: src}
	plan := &Plan{Kind: KindPlaybook, Path: p.file, Playbook: pb, MaxStepTimeoutSeconds: MaxNodeTimeoutSeconds}

	p.version(root, top["version"], pb)
	if v := top["name"]; v == nil {
		p.report(root, "name", "is required (name must be non-empty)")
	} else if s, ok := p.str(v, "name"); ok {
		switch {
		case s == "":
			p.report(v, "name", "must not be empty")
		case !nameRE.MatchString(s):
			p.report(v, "name", "must match [A-Za-z0-9._-]{1,64} (it is part of run ids)%s", p.l.got(v))
		}
		plan.Name = s
	}
	if v := top["description"]; v != nil {
		pb.Description, _ = p.str(v, "description")
	}
	if v := top["inputs"]; v != nil {
		p.readInputs(v, pb)
	}
	if v := top["nodes"]; v == nil {
		p.report(root, "nodes", "is required: a playbook needs at least one node")
	} else {
		p.readNodes(v)
	}
	if v := top["edges"]; v != nil {
		p.readEdges(v)
	}
	if v := top["error_handlers"]; v != nil {
		p.readHandlers(v)
	}
	p.crossCheck()
	if len(p.l.issues) > 0 {
		return nil
	}
	sum := sha256.Sum256(src)
	plan.ContentHash = hex.EncodeToString(sum[:])
	plan.SchemaHash8 = playbookSchemaHash8()
	for _, e := range p.edges {
		pb.Edges = append(pb.Edges, e.edge)
	}
	for _, h := range p.handlers {
		pb.ErrorHandlers = append(pb.ErrorHandlers, h.h)
	}
	for _, rn := range p.nodes {
		st := rn.step
		node := rn.node
		st.Node = &node
		plan.Steps = append(plan.Steps, st)
	}
	pb.Warnings = p.warnings
	return plan
}

// version applies rule 1 (docs/spec/playbooks.md, "Validation rules"): "1.0" quoted is the
// version; a plain 1.0 (a YAML number, which YAML would read as 1) is accepted from its source
// text with a warning (docs/decisions/yaml-safety.md); anything else is refused.
func (p *pbParser) version(root, v *yaml.Node, pb *Playbook) {
	const hint = `write version: "1.0" (quoted)`
	switch {
	case v == nil:
		p.report(root, "version", "is required; %s", hint)
		return
	case v.Kind != yaml.ScalarNode:
		p.report(v, "version", "must be the string \"1.0\", got a %s; %s", kindName(v), hint)
		return
	case v.Value == PlaybookVersion && v.ShortTag() == "!!str":
	case v.Value == PlaybookVersion && v.Style == 0:
		p.warnings = append(p.warnings, Diagnostic{File: p.file, Line: v.Line, Column: v.Column, Field: "version",
			Message: "version 1.0 is unquoted, so YAML reads a number; it is accepted from its source text, but " + hint})
	default:
		p.report(v, "version", "must be the string \"1.0\"%s; %s", p.l.got(v), hint)
		return
	}
	pb.Version = PlaybookVersion
}

// fields checks that n is a mapping whose keys are all in allowed (reporting the others with a
// did-you-mean) and returns its entries by key, null values left out (null counts as omitted).
func (p *pbParser) fields(n *yaml.Node, field string, allowed []string, also ...[]string) map[string]*yaml.Node {
	n = resolveAlias(n)
	if n.Kind != yaml.MappingNode {
		p.report(n, field, "must be a mapping, got a %s", kindName(n))
		return nil
	}
	out := map[string]*yaml.Node{}
	for _, pr := range pairs(n) {
		k := pr.key.Value
		if !slices.Contains(allowed, k) {
			if !slices.ContainsFunc(also, func(keys []string) bool { return slices.Contains(keys, k) }) {
				p.report(pr.key, joinField(field, k), "unknown field%s (allowed: %s)", didYouMean(k, allowed), strings.Join(allowed, ", "))
			}
			continue
		}
		if v := resolveAlias(pr.value); v.ShortTag() != "!!null" {
			out[k] = v
		}
	}
	return out
}

// str reads a string field: any scalar, by its source text (docs/decisions/yaml-safety.md).
func (p *pbParser) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.report(n, field, "must be a string, got a %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

// nonEmpty is str for a field that must not be empty.
func (p *pbParser) nonEmpty(n *yaml.Node, field string) (string, bool) {
	s, ok := p.str(n, field)
	if ok && strings.TrimSpace(s) == "" {
		p.report(n, field, "must not be empty")
		return "", false
	}
	return s, ok
}

// integer reads a decimal integer in [lo, hi].
func (p *pbParser) integer(n *yaml.Node, field string, lo, hi int, rule string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || !decimalRE.MatchString(n.Value) {
		p.report(n, field, "must be a decimal integer%s", p.l.got(n))
		return 0, false
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		p.report(n, field, "must be in %d..%d%s, got %s", lo, hi, rule, n.Value)
		return 0, false
	}
	return v, true
}

func (p *pbParser) boolean(n *yaml.Node, field string) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.report(n, field, "must be true or false%s", p.l.got(n))
		return false, false
	}
	return b, true
}

// list checks n is a sequence and returns its items.
func (p *pbParser) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		p.report(n, field, "must be a list, got a %s", kindName(n))
		return nil, false
	}
	items := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		items[i] = resolveAlias(c)
	}
	return items, true
}

// strList reads a list of strings (scalars by their source text), each with its position.
func (p *pbParser) strList(n *yaml.Node, field string) []ref {
	items, ok := p.list(n, field)
	if !ok {
		return nil
	}
	var out []ref
	for i, c := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s, ok := p.str(c, f); ok {
			out = append(out, ref{id: s, n: c, field: f})
		}
	}
	return out
}

// facts reads a requires/ensures list: each a binding path or file:PATH (docs/spec/playbooks.md, "Facts").
func (p *pbParser) facts(n *yaml.Node, field string) []string {
	items, ok := p.list(n, field)
	if !ok {
		return nil
	}
	var out []string
	for i, c := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.str(c, f)
		if !ok {
			continue
		}
		if path, isFile := strings.CutPrefix(s, "file:"); isFile {
			if strings.TrimSpace(path) == "" {
				p.report(c, f, "file: needs a path (file:dist/index.js)")
				continue
			}
		} else if !pathRE.MatchString(s) {
			p.report(c, f, "a fact is a binding name or path (segments of A-Z a-z 0-9 _ -, joined by dots) or file:PATH%s", p.l.got(c))
			continue
		}
		out = append(out, s)
	}
	return out
}

// checkID reports an id or input name that has the wrong shape or is reserved.
func (p *pbParser) checkID(n *yaml.Node, field, what string) (string, bool) {
	s, ok := p.nonEmpty(n, field)
	if !ok {
		return "", false
	}
	switch {
	case !nodeIDRE.MatchString(s):
		p.report(n, field, "%s must match [A-Za-z0-9_-]{1,64} (no dots or commas)%s", what, p.l.got(n))
		return "", false
	case slices.Contains(ReservedPlaybookIDs, s):
		p.report(n, field, "%s %q is reserved (reserved: %s)", what, s, strings.Join(ReservedPlaybookIDs, ", "))
		return "", false
	}
	return s, true
}

func (p *pbParser) readInputs(v *yaml.Node, pb *Playbook) {
	items, ok := p.list(v, "inputs")
	if !ok {
		return
	}
	for i, it := range items {
		field := fmt.Sprintf("inputs[%d]", i)
		fs := p.fields(it, field, pbInputKeys)
		if fs == nil {
			continue
		}
		in := PlaybookInput{Line: it.Line}
		if n := fs["name"]; n == nil {
			p.report(it, field+".name", "is required")
		} else if name, ok := p.checkID(n, field+".name", "an input name"); ok {
			if first := p.inputs[name]; first != nil {
				p.report(n, field+".name", "duplicate input %q (first at line %d)", name, first.Line)
			} else {
				p.inputs[name] = n
			}
			in.Name = name
		}
		if n := fs["required"]; n != nil {
			in.Required, _ = p.boolean(n, field+".required")
		}
		if n := fs["description"]; n != nil {
			in.Description, _ = p.str(n, field+".description")
		}
		// A default written as null is still a default (HasDefault), so look at the raw entry.
		for _, pr := range pairs(resolveAlias(it)) {
			if pr.key.Value == "default" {
				in.Default, in.HasDefault = p.l.plain(pr.value, field+".default"), true
			}
		}
		if in.Name != "" && (in.Required || in.HasDefault) {
			if p.alwaysBound == nil {
				p.alwaysBound = map[string]bool{}
			}
			p.alwaysBound[in.Name] = true
		}
		pb.Inputs = append(pb.Inputs, in)
	}
}

func (p *pbParser) readNodes(v *yaml.Node) {
	items, ok := p.list(v, "nodes")
	if !ok {
		return
	}
	if len(items) == 0 {
		p.report(v, "nodes", "must have at least one node")
	}
	if len(items) > MaxPlaybookNodes {
		p.report(v, "nodes", "has %d nodes; at most %d are allowed (MaxPlaybookNodes)", len(items), MaxPlaybookNodes)
	}
	for i, it := range items {
		p.readNode(i, it)
	}
}

func (p *pbParser) readNode(i int, it *yaml.Node) {
	field := fmt.Sprintf("nodes[%d]", i)
	rn := &rawNode{n: it, field: field}
	rn.step = Step{Index: i, Line: it.Line, Column: it.Column}
	p.nodes = append(p.nodes, rn)
	if it.Kind != yaml.MappingNode {
		p.report(it, field, "must be a mapping, got a %s", kindName(it))
		return
	}
	// The node's type decides which keys it may have; read it first.
	var typ StepType
	typeKnown := false
	if t := lookup(pairs(it), "type"); t == nil || t.ShortTag() == "!!null" {
		p.report(it, field+".type", "is required (one of %s)", strings.Join(pbNodeTypes, ", "))
	} else if s, ok := p.str(t, field+".type"); ok {
		if !slices.Contains(pbNodeTypes, s) {
			p.report(t, field+".type", "must be one of %s%s", strings.Join(pbNodeTypes, ", "), p.l.got(t))
		} else {
			typ, typeKnown = StepType(s), true
		}
	}
	allowed := slices.Clone(pbCommonKeys)
	var others [][]string
	if typeKnown {
		allowed = append(allowed, pbTypeKeys[typ]...)
		for t, keys := range pbTypeKeys {
			if t != typ {
				others = append(others, keys)
			}
		}
	} else {
		for _, t := range pbNodeTypes {
			allowed = append(allowed, pbTypeKeys[StepType(t)]...)
		}
	}
	fs := p.fields(it, field, allowed, others...)
	if fs == nil {
		return
	}
	if typeKnown { // keys of another node type: say which type they belong to
		for _, pr := range pairs(it) {
			if slices.Contains(pbTypeKeys[typ], pr.key.Value) {
				continue
			}
			var owners []string // in pbNodeTypes order, so the message is stable
			for _, t := range pbNodeTypes {
				if slices.Contains(pbTypeKeys[StepType(t)], pr.key.Value) {
					owners = append(owners, t)
				}
			}
			if len(owners) > 0 {
				p.report(pr.key, joinField(field, pr.key.Value), "is for %s nodes only; this node is %s", strings.Join(owners, " and "), typ)
			}
		}
	}
	rn.step.Type, rn.node.IterationCap = typ, DefaultIterationCap
	if n := fs["id"]; n == nil {
		p.report(it, field+".id", "is required")
	} else if id, ok := p.checkID(n, field+".id", "a node id"); ok {
		if first, dup := p.ids[id]; dup {
			p.report(n, field+".id", "duplicate node id %q (first at line %d; node ids must be unique)", id, p.nodes[first].n.Line)
		} else {
			p.ids[id] = i
		}
		rn.step.Name, rn.node.ID = id, id
	}
	if n := fs["depends"]; n != nil {
		rn.depends = p.strList(n, field+".depends")
	}
	timeout := DefaultNodeTimeoutSeconds
	if typ == TypeApproval {
		timeout = DefaultApprovalTimeoutSeconds
	}
	if n := fs["timeout"]; n != nil {
		if t, ok := p.timeout(n, field+".timeout"); ok {
			timeout, rn.node.TimeoutSet = t, true
		}
	}
	rn.step.TimeoutSeconds = timeout
	const capRule = " (the hard limit of iteration_cap and max_iterations)"
	capSet := false
	setCap := func(c int) {
		if !capSet || c < rn.node.IterationCap {
			rn.node.IterationCap = c
		}
		capSet = true
	}
	for _, k := range []string{"iteration_cap", "max_iterations"} {
		if n := fs[k]; n != nil {
			if c, ok := p.integer(n, field+"."+k, 0, MaxIterationCap, capRule); ok {
				setCap(c)
			}
		}
	}
	if n := fs["on_failure"]; n != nil {
		of := p.fields(n, field+".on_failure", pbOnFailKeys)
		if of != nil {
			rn.node.OnFailure = &OnFailure{}
			if m := of["inject_into"]; m != nil {
				if s, ok := p.nonEmpty(m, field+".on_failure.inject_into"); ok {
					rn.node.OnFailure.InjectInto, rn.injectN = s, m
				}
			}
			if m := of["max_iterations"]; m != nil {
				if c, ok := p.integer(m, field+".on_failure.max_iterations", 0, MaxIterationCap, capRule); ok {
					rn.node.OnFailure.MaxIterations = c
					setCap(c)
				}
			}
		}
	}
	if n := fs["requires"]; n != nil {
		rn.node.Requires = p.facts(n, field+".requires")
	}
	if n := fs["ensures"]; n != nil {
		rn.node.Ensures = p.facts(n, field+".ensures")
	}
	switch typ {
	case TypeDeterministic:
		p.deterministic(rn, it, fs, field)
	case TypeAgentic:
		p.agentic(rn, it, fs, field)
	case TypeApproval:
		if n := fs["prompt"]; n == nil {
			p.report(it, field+".prompt", "is required for approval nodes")
		} else if s, ok := p.nonEmpty(n, field+".prompt"); ok {
			rn.node.Prompt = s
			p.templates = append(p.templates, templateUse{n, field + ".prompt", s})
		}
		if n := fs["policy"]; n != nil {
			if s, ok := p.str(n, field+".policy"); ok {
				if !slices.Contains(NodePolicies, s) {
					p.report(n, field+".policy", "must be %s (a person decides this node; no auto-pass rule can pass it)%s%s", strings.Join(NodePolicies, ", "), p.l.got(n), didYouMean(s, NodePolicies))
				} else {
					rn.node.Policy = s
				}
			}
		}
		if n := fs["inputs"]; n != nil {
			p.form(rn, n, field)
		}
		if n := fs["rewind_targets"]; n != nil {
			rn.rewind = p.strList(n, field+".rewind_targets")
		}
	}
}

func (p *pbParser) deterministic(rn *rawNode, it *yaml.Node, fs map[string]*yaml.Node, field string) {
	if n := fs["command"]; n == nil {
		p.report(it, field+".command", "is required for deterministic nodes (command + args)")
	} else if s, ok := p.nonEmpty(n, field+".command"); ok {
		switch {
		case len(s) > MaxCommandBytes:
			p.report(n, field+".command", "is %d bytes; at most %d (MaxCommandBytes)", len(s), MaxCommandBytes)
		case strings.ContainsRune(s, 0):
			p.report(n, field+".command", "must not contain a NUL byte")
		case strings.Contains(s, "{{"):
			p.report(n, field+".command", "is not templated (only args, env and cwd are); a {{ … }} here would be run as written")
		default:
			rn.node.Command = s
		}
	}
	if n := fs["args"]; n == nil {
		p.report(it, field+".args", "is required for deterministic nodes (command + args; write args: [] for none)")
	} else if items, ok := p.list(n, field+".args"); ok {
		if len(items) > MaxNodeArgs {
			p.report(n, field+".args", "has %d args; at most %d (MaxNodeArgs)", len(items), MaxNodeArgs)
		}
		rn.node.Args = []string{}
		for j, c := range items {
			f := fmt.Sprintf("%s.args[%d]", field, j)
			if c.ShortTag() == "!!null" {
				p.report(c, f, "must be a string, got null")
				continue
			}
			s, ok := p.str(c, f)
			switch {
			case !ok:
				continue
			case len(s) > MaxCommandBytes:
				p.report(c, f, "is %d bytes; at most %d (MaxCommandBytes)", len(s), MaxCommandBytes)
			case strings.ContainsRune(s, 0):
				p.report(c, f, "must not contain a NUL byte")
			}
			rn.node.Args = append(rn.node.Args, s)
			p.templates = append(p.templates, templateUse{c, f, s})
		}
	}
	if n := fs["env"]; n != nil {
		if n.Kind != yaml.MappingNode {
			p.report(n, field+".env", "must be a mapping of NAME: value, got a %s", kindName(n))
		} else {
			rn.node.Env = map[string]string{}
			for _, pr := range pairs(n) {
				f := joinField(field+".env", pr.key.Value)
				if !envNameRE.MatchString(pr.key.Value) {
					p.report(pr.key, f, "an environment variable name must match [A-Za-z_][A-Za-z0-9_]*")
					continue
				}
				v := resolveAlias(pr.value)
				if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
					p.report(v, f, "must be a string, got a %s", kindName(v))
					continue
				}
				rn.node.Env[pr.key.Value] = v.Value
				p.templates = append(p.templates, templateUse{v, f, v.Value})
			}
		}
	}
	if n := fs["cwd"]; n != nil {
		if s, ok := p.nonEmpty(n, field+".cwd"); ok {
			rn.node.Cwd = s
			p.templates = append(p.templates, templateUse{n, field + ".cwd", s})
		}
	}
}

func (p *pbParser) agentic(rn *rawNode, it *yaml.Node, fs map[string]*yaml.Node, field string) {
	if fs["skill"] == nil && fs["agent"] == nil {
		p.report(it, field, "an agentic node needs skill or agent")
	}
	if n := fs["skill"]; n != nil {
		rn.node.Skill, _ = p.nonEmpty(n, field+".skill")
	}
	if n := fs["agent"]; n != nil {
		rn.node.Agent, _ = p.nonEmpty(n, field+".agent")
	}
	if n := fs["inputs"]; n != nil {
		if n.Kind != yaml.MappingNode {
			p.report(n, field+".inputs", "must be a mapping (the tool's arguments), got a %s", kindName(n))
			return
		}
		rn.node.Inputs, _ = p.l.plain(n, field+".inputs").(map[string]any)
		p.collectScalars(n, field+".inputs")
	}
}

// collectScalars queues every string scalar under n as a template (agentic inputs).
func (p *pbParser) collectScalars(n *yaml.Node, field string) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			p.templates = append(p.templates, templateUse{n, field, n.Value})
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p.collectScalars(c, fmt.Sprintf("%s[%d]", field, i))
		}
	case yaml.MappingNode:
		for _, pr := range pairs(n) {
			p.collectScalars(pr.value, joinField(field, pr.key.Value))
		}
	}
}

// timeout reads a node timeout: whole seconds as an integer (90) or a duration ("90s", "5m",
// "1h30m"), in 1..MaxNodeTimeoutSeconds.
func (p *pbParser) timeout(n *yaml.Node, field string) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		d, err := time.ParseDuration(n.Value)
		if err != nil || d%time.Second != 0 || d < time.Second || d > MaxNodeTimeoutSeconds*time.Second {
			p.report(n, field, "must be whole seconds in 1..%d, as 90 or a duration such as \"90s\", \"5m\" or \"1h\"%s", MaxNodeTimeoutSeconds, p.l.got(n))
			return 0, false
		}
		return int(d / time.Second), true
	}
	return p.integer(n, field, 1, MaxNodeTimeoutSeconds, " seconds")
}

func (p *pbParser) readEdges(v *yaml.Node) {
	items, ok := p.list(v, "edges")
	if !ok {
		return
	}
	if len(items) > MaxPlaybookEdges {
		p.report(v, "edges", "has %d edges; at most %d are allowed (MaxPlaybookEdges)", len(items), MaxPlaybookEdges)
	}
	for i, it := range items {
		field := fmt.Sprintf("edges[%d]", i)
		fs := p.fields(it, field, pbEdgeKeys)
		if fs == nil {
			continue
		}
		e := rawEdge{n: it, field: field, edge: Edge{Line: it.Line}}
		for _, end := range []struct {
			key string
			dst *ref
			val *string
		}{{"from", &e.from, &e.edge.From}, {"to", &e.to, &e.edge.To}} {
			n := fs[end.key]
			if n == nil {
				p.report(it, field+"."+end.key, "is required (edges reference known node ids)")
				continue
			}
			if s, ok := p.nonEmpty(n, field+"."+end.key); ok {
				*end.dst, *end.val = ref{id: s, n: n, field: field + "." + end.key}, s
			}
		}
		if n := fs["contract"]; n != nil {
			if c := p.fields(n, field+".contract", pbContractKey); c != nil {
				if m := c["requires"]; m != nil {
					e.edge.Requires = p.facts(m, field+".contract.requires")
				}
				if m := c["ensures"]; m != nil {
					e.edge.Ensures = p.facts(m, field+".contract.ensures")
				}
			}
		}
		if n := fs["when"]; n != nil {
			e.edge.When, e.whenN = p.when(n, field+".when"), n
		}
		p.edges = append(p.edges, e)
	}
}

// when reads an edge condition: a binding and exactly one of equals | notEquals | exists | in |
// truthy (docs/spec/playbooks.md).
func (p *pbParser) when(n *yaml.Node, field string) *When {
	allowed := append([]string{"binding"}, pbWhenOps...)
	fs := p.fields(n, field, allowed)
	if fs == nil {
		return nil
	}
	w := &When{}
	ok := true
	if b := fs["binding"]; b == nil {
		p.report(n, field+".binding", "is required (the binding path the condition tests, e.g. test.exit_code)")
		ok = false
	} else if s, sok := p.nonEmpty(b, field+".binding"); !sok {
		ok = false
	} else if !pathRE.MatchString(s) {
		p.report(b, field+".binding", "must be a binding path (segments of A-Z a-z 0-9 _ -, joined by dots)%s", p.l.got(b))
		ok = false
	} else {
		w.Binding = s
		p.bindings = append(p.bindings, templateUse{b, field + ".binding", s})
	}
	var ops []string
	var opNodes []*yaml.Node
	for _, pr := range pairs(resolveAlias(n)) {
		if slices.Contains(pbWhenOps, pr.key.Value) {
			ops, opNodes = append(ops, pr.key.Value), append(opNodes, resolveAlias(pr.value))
		}
	}
	if len(ops) != 1 {
		p.report(n, field, "needs exactly one of %s, got %d", strings.Join(pbWhenOps, ", "), len(ops))
		return nil
	}
	w.Op = WhenOp(ops[0])
	v, f := opNodes[0], field+"."+ops[0]
	switch w.Op {
	case WhenIn:
		if v.Kind != yaml.SequenceNode {
			p.report(v, f, "must be a list of values, got a %s", kindName(v))
			return nil
		}
		if len(v.Content) == 0 {
			// Never true: the node behind the edge could never run on this branch.
			p.report(v, f, "is an empty list: no value is in it, so the condition is never true and the edge's node would be skipped on every run; list the values that let it run")
			ok = false
		}
		for i, c := range v.Content {
			if c := resolveAlias(c); c.Kind != yaml.ScalarNode {
				p.report(c, fmt.Sprintf("%s[%d]", f, i), "must be a scalar, got a %s", kindName(c))
				ok = false
			}
		}
		w.Value = p.l.plain(v, f)
	case WhenExists, WhenTruthy:
		w.Value = true
		if v.ShortTag() != "!!null" {
			b, bok := p.boolean(v, f)
			w.Value, ok = b, ok && bok
		}
	default:
		if v.Kind != yaml.ScalarNode {
			p.report(v, f, "must be a scalar, got a %s", kindName(v))
			return nil
		}
		w.Value = p.l.plain(v, f)
	}
	if !ok {
		return nil
	}
	return w
}

func (p *pbParser) readHandlers(v *yaml.Node) {
	items, ok := p.list(v, "error_handlers")
	if !ok {
		return
	}
	for i, it := range items {
		field := fmt.Sprintf("error_handlers[%d]", i)
		fs := p.fields(it, field, pbHandlerKeys)
		if fs == nil {
			continue
		}
		h := rawHandler{field: field, h: ErrorHandler{Line: it.Line}}
		if n := fs["on"]; n == nil {
			p.report(it, field+".on", "is required (<node-id>-failed or one of %s)", strings.Join(HandlerEvents, ", "))
		} else if s, ok := p.nonEmpty(n, field+".on"); ok {
			h.h.On, h.onN = s, n
		}
		if n := fs["action"]; n == nil {
			p.report(it, field+".action", "is required (one of %s)", strings.Join(HandlerActions, ", "))
		} else if s, ok := p.nonEmpty(n, field+".action"); ok {
			if !slices.Contains(HandlerActions, s) {
				p.report(n, field+".action", "must be one of %s%s%s", strings.Join(HandlerActions, ", "), p.l.got(n), didYouMean(s, HandlerActions))
			} else {
				h.h.Action, h.actN = s, n
			}
		}
		if n := fs["message"]; n != nil {
			if s, ok := p.str(n, field+".message"); ok {
				h.h.Message = s
				p.templates = append(p.templates, templateUse{n, field + ".message", s})
			}
		}
		p.handlers = append(p.handlers, h)
	}
}

// crossCheck runs the checks that need every id: depends, edges, inject_into, handlers,
// template references, input/id collisions, then the DAG.
func (p *pbParser) crossCheck() {
	known := func(r ref, rule string) bool {
		if r.n == nil {
			return false
		}
		if _, ok := p.ids[r.id]; !ok {
			p.report(r.n, r.field, "unknown node id %q (%s)%s", r.id, rule, p.didYouMeanID(r.id))
			return false
		}
		return true
	}
	for _, rn := range p.nodes {
		for _, d := range rn.depends {
			known(d, "depends entries must be node ids")
		}
		if rn.node.ID != "" {
			if in := p.inputs[rn.node.ID]; in != nil {
				p.report(rn.n, rn.field+".id", "node id %q is also the name of an input (line %d); bindings hold inputs and node outputs in one namespace", rn.node.ID, in.Line)
			}
		}
		if rn.injectN != nil {
			target := rn.node.OnFailure.InjectInto
			if known(ref{target, rn.injectN, rn.field + ".on_failure.inject_into"}, "on_failure.inject_into must name a node") && target == rn.node.ID {
				p.report(rn.injectN, rn.field+".on_failure.inject_into", "a node cannot inject into itself")
			}
		}
	}
	for i := range p.edges {
		e := &p.edges[i]
		e.fromOK = known(e.from, "edges[].from must be a known node id")
		e.toOKay = known(e.to, "edges[].to must be a known node id")
	}
	anyInject := false
	for _, rn := range p.nodes {
		anyInject = anyInject || rn.node.OnFailure != nil && rn.node.OnFailure.InjectInto != ""
	}
	for _, h := range p.handlers {
		if h.onN == nil {
			continue
		}
		target, specific := strings.CutSuffix(h.h.On, EventFailedSuffix)
		switch {
		case slices.Contains(HandlerEvents, h.h.On):
			if h.h.Action == HandlerInjectHint && !anyInject {
				p.report(h.actN, h.field+".action", "inject_hint needs on_failure.inject_into on the failed node, and no node has one")
			}
		case specific:
			idx, ok := p.ids[target]
			if !ok {
				p.report(h.onN, h.field+".on", "%q names no node: unknown node id %q%s", h.h.On, target, p.didYouMeanID(target))
			} else if of := p.nodes[idx].node.OnFailure; h.h.Action == HandlerInjectHint && (of == nil || of.InjectInto == "") {
				p.report(h.actN, h.field+".action", "inject_hint needs on_failure.inject_into on node %q", target)
			}
		default:
			p.report(h.onN, h.field+".on", "must be <node-id>-failed or one of %s%s%s", strings.Join(HandlerEvents, ", "), p.l.got(h.onN), didYouMean(h.h.On, HandlerEvents))
		}
	}
	for _, t := range p.templates {
		p.checkTemplate(t)
	}
	for _, b := range p.bindings {
		if head, _, _ := strings.Cut(b.text, "."); !p.knownRoot(head) {
			p.report(b.n, b.field, "binding %q names no input, node id or error%s", b.text, p.didYouMeanID(head))
		}
	}
	p.buildDepends()
	p.checkWhens()
	p.checkRewinds()
}

// checkWhens refuses an edge condition whose binding cannot be there, in a known state, when
// the engine tests it, which is once every node the edge's node waits for is done: a node
// that is not upstream of the edge's node along depends and edges (the node itself, one
// after it, or one beside it, which may or may not have run by then), and "error" (bound only
// in an inject_hint target's templates and handler messages, never in the bindings a when is
// tested against). Such a condition is always true or never true, or true by chance. exists
// on an input every run binds is decided before the run too: exists: false is refused, exists:
// true (harmless, but no condition) is a warning.
func (p *pbParser) checkWhens() {
	for _, e := range p.edges {
		w := e.edge.When
		if w == nil || !e.toOKay {
			continue
		}
		at, field := e.whenN, e.field+".when.binding"
		for _, pr := range pairs(resolveAlias(e.whenN)) {
			if pr.key.Value == "binding" {
				at = pr.value
			}
		}
		head, _, _ := strings.Cut(w.Binding, ".")
		to := p.ids[e.to.id]
		switch from, isNode := p.ids[head]; {
		case head == "error" && !isNode && p.inputs[head] == nil:
			p.report(at, field, "binding %q: error is bound only in an inject_hint target's templates and handler messages, never when an edge's when is tested, so this condition is always %s; test a node's output instead", w.Binding, whenOnMissing(w))
		case !isNode && p.alwaysBound[w.Binding] && w.Op == WhenExists:
			// Every run binds a required input or one with a default: exists is decided already.
			if w.Value == false {
				p.report(at, field, "binding %q is an input every run has (required or with a default), so exists: false is never true and node %q would be skipped on every run; test its value instead", w.Binding, e.to.id)
			} else {
				p.warnings = append(p.warnings, Diagnostic{File: p.file, Line: at.Line, Column: at.Column, Field: field,
					Message: fmt.Sprintf("binding %q is an input every run has (required or with a default), so exists: true is always true; remove the when or test its value", w.Binding)})
			}
		case isNode && !p.upstream(from, to):
			p.report(at, field, "binding %q names node %q, which is not upstream of node %q (no chain of depends and edges leads from it to %q), so its output may not exist when the condition is tested and the condition is decided by timing, not by the run; make %q depend on %q, or test a node upstream of it", w.Binding, head, e.to.id, e.to.id, e.to.id, head)
		}
	}
}

// whenOnMissing is what a condition evaluates to on a binding that does not exist.
func whenOnMissing(w *When) string {
	want := true
	if b, ok := w.Value.(bool); ok {
		want = b
	}
	switch w.Op {
	case WhenNotEquals:
		return "true"
	case WhenExists, WhenTruthy:
		if !want {
			return "true"
		}
	}
	return "false"
}

// upstream reports whether node from runs before node to on every run: a chain of depends
// and edges leads from it to to (buildDepends filled step.Depends). A node is not upstream
// of itself.
func (p *pbParser) upstream(from, to int) bool {
	seen := make([]bool, len(p.nodes))
	stack := []int{to}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range p.nodes[i].step.Depends {
			if d == from {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, d)
			}
		}
	}
	return false
}

func (p *pbParser) knownRoot(head string) bool {
	_, isNode := p.ids[head]
	return isNode || p.inputs[head] != nil || head == "error"
}

// checkTemplate reports a malformed template, and in one diagnostic every reference whose
// first segment is no input, node id or error.
func (p *pbParser) checkTemplate(t templateUse) {
	if !strings.Contains(t.text, "{{") {
		return
	}
	refs, err := TemplateRefs(t.text)
	if err != nil {
		p.report(t.n, t.field, "%s", err)
		return
	}
	var unknown []string
	for _, r := range refs {
		if head, _, _ := strings.Cut(r, "."); !p.knownRoot(head) {
			unknown = append(unknown, r)
		} else if msg := p.checkFormRef(r); msg != "" {
			p.report(t.n, t.field, "%s", msg)
		}
	}
	if len(unknown) > 0 {
		p.report(t.n, t.field, "template names %s: no input, node id or error by that name (inputs: %s)", quoteJoin(unknown), p.inputNames())
	}
}

func (p *pbParser) inputNames() string {
	var names []string
	for name := range p.inputs {
		names = append(names, name)
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func (p *pbParser) didYouMeanID(id string) string {
	var ids []string
	for k := range p.ids {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	return didYouMean(id, ids)
}

// arc is one dependency, from → to (from runs first), with where it was written.
type arc struct {
	to    int
	n     *yaml.Node
	field string
}

// buildDepends fills each node's Depends (ids and step indexes: depends first, then incoming
// edges, each once) and checks the graph is a DAG (rule 5).
func (p *pbParser) buildDepends() {
	adj := make([][]arc, len(p.nodes))
	seen := map[[2]int]bool{}
	add := func(from, to int, n *yaml.Node, field string) {
		if seen[[2]int{from, to}] {
			return
		}
		seen[[2]int{from, to}] = true
		adj[from] = append(adj[from], arc{to, n, field})
		rn := p.nodes[to]
		rn.node.Depends = append(rn.node.Depends, p.nodes[from].node.ID)
		rn.step.Depends = append(rn.step.Depends, from)
	}
	for to, rn := range p.nodes {
		if p.ids[rn.node.ID] != to || rn.node.ID == "" { // a duplicate or missing id: reported already
			continue
		}
		for _, d := range rn.depends {
			if from, ok := p.ids[d.id]; ok {
				add(from, to, d.n, d.field)
			}
		}
	}
	for _, e := range p.edges {
		if e.fromOK && e.toOKay {
			add(p.ids[e.from.id], p.ids[e.to.id], e.n, e.field)
		}
	}
	p.findCycles(adj)
}

// findCycles is an iterative depth-first search, linear in nodes + arcs: each back arc closes
// one cycle, named from the node first reached, e.g. "a → b → c → a". At most
// MaxReportedCycles are named.
func (p *pbParser) findCycles(adj [][]arc) {
	const white, grey, black = 0, 1, 2
	color := make([]byte, len(adj))
	pos := make([]int, len(adj)) // index in the stack of a grey node
	type frame struct{ v, next int }
	var stack []frame
	cycles := 0
	var first *yaml.Node
	for s := range adj {
		if color[s] != white {
			continue
		}
		stack = append(stack[:0], frame{s, 0})
		color[s], pos[s] = grey, 0
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(adj[top.v]) {
				color[top.v] = black
				stack = stack[:len(stack)-1]
				continue
			}
			a := adj[top.v][top.next]
			top.next++
			switch color[a.to] {
			case white:
				color[a.to], pos[a.to] = grey, len(stack)
				stack = append(stack, frame{a.to, 0})
			case grey:
				if cycles++; cycles > MaxReportedCycles {
					continue
				}
				if first == nil {
					first = a.n
				}
				var names []string
				for _, f := range stack[pos[a.to]:] {
					names = append(names, p.nodes[f.v].node.ID)
				}
				names = append(names, p.nodes[a.to].node.ID)
				p.report(a.n, a.field, "cycle %s (nodes + edges + depends must form a DAG)", strings.Join(names, " → "))
			}
		}
	}
	if cycles > MaxReportedCycles {
		p.report(first, "", "%d more cycles not named (MaxReportedCycles is %d)", cycles-MaxReportedCycles, MaxReportedCycles)
	}
}

// didYouMean suggests the closest of candidates to s (edit distance at most 2, or a
// case-insensitive match), as " (did you mean "x"?)", or "".
func didYouMean(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD && d < max(len(c), 2) {
			best, bestD = c, d
		}
	}
	if best == "" || best == s {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance; inputs longer than 64 bytes are not compared.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
