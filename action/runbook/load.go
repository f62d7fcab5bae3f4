package runbook

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// LoadOptions selects the runbook Load reads (docs/spec/runbooks.md, "Step 1" inputs).
type LoadOptions struct {
	// Dir is the runbooks folder, "runbooks" when empty.
	Dir string
	// Name is the runbook name: Load reads Dir/Name.yaml and Dir/Name.values.yaml.
	Name string
	// RulesPath, when set, replaces the embedded rules.yaml (docs/decisions/rules-schema.md).
	RulesPath string
}

// Diagnostic is one problem found in a runbook, values or rules file. Line and Column are
// 1-based; 0 means unknown (yaml.v3 syntax errors carry a line but no column).
type Diagnostic struct {
	File         string
	Line, Column int
	// Field is the path of the offending field, e.g. runbook_steps[2].on_fail; empty when the
	// problem is not about one field.
	Field   string
	Message string
}

// String formats the diagnostic as "file:line:col: field: message", leaving out the parts
// that are unknown.
func (d Diagnostic) String() string {
	where := d.File
	for _, n := range []int{d.Line, d.Column} {
		if n > 0 {
			where += ":" + strconv.Itoa(n)
		}
	}
	parts := []string{}
	for _, p := range []string{where, d.Field, d.Message} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ": ")
}

// LoadError is the only error type Load and LoadFile return (use errors.As).
type LoadError struct {
	// Abort is the specification's literal ABORT line when one applies (missing values file, unreadable
	// rules.yaml, a step failing its type schema), else empty.
	Abort string
	// Diagnostics lists every problem found, in the order found. It is empty when the values
	// file is missing: Abort says all there is to say.
	Diagnostics []Diagnostic
	// Next is the line a person reads after Abort when the values file is missing and the
	// .values.yaml.example file Abort says to copy does not exist either: what a minimal
	// values file holds (MinimalValuesHint). Empty otherwise; Error() leaves it out, so the
	// specification's ABORT line stays the whole error text.
	Next string
}

// Error returns Abort when set, else the first diagnostic and how many more there are.
func (e *LoadError) Error() string {
	switch {
	case e.Abort != "":
		return e.Abort
	case len(e.Diagnostics) == 0:
		return "runbook: load failed"
	case len(e.Diagnostics) == 1:
		return e.Diagnostics[0].String()
	}
	return fmt.Sprintf("%s (and %d more errors)", e.Diagnostics[0], len(e.Diagnostics)-1)
}

// nameRE is the shape of runbook names, both runbook_name and the Name option (docs/decisions/run-ids.md).
var nameRE = lazyregexp.New(`^[A-Za-z0-9._-]{1,64}$`)

// Load reads Dir/Name.yaml and its values file Dir/Name.values.yaml, substitutes values,
// validates against rules.yaml and returns the Plan (docs/spec/runbooks.md, "Step 1"). A missing
// values file gives the specification's ABORT line; every error is a *LoadError.
func Load(opts LoadOptions) (*Plan, error) {
	dir := opts.Dir
	if dir == "" {
		dir = "runbooks"
	}
	if !nameRE.MatchString(opts.Name) {
		return nil, &LoadError{Diagnostics: []Diagnostic{{Message: fmt.Sprintf("runbook name %q must match [A-Za-z0-9._-]{1,64}", opts.Name)}}}
	}
	return LoadFile(strings.TrimSuffix(dir, "/")+"/"+opts.Name+".yaml", opts.RulesPath)
}

// LoadFile is Load for an explicit runbook path; the values file is the sibling
// <base>.values.yaml (for runbooks/prod.yaml: runbooks/prod.values.yaml).
func LoadFile(path, rulesPath string) (*Plan, error) {
	valuesPath, base := valuesPathFor(path)
	plan, lerr := loadFiles(path, valuesPath, base, rulesPath)
	if lerr != nil {
		return nil, lerr
	}
	return plan, nil
}

// ValidateResult is what Validate found out about one runbook file (docs/runbooks.md, "Validating").
type ValidateResult struct {
	// ValuesPath is the values file the runbook was checked with: <base>.values.yaml, or
	// <base>.values.yaml.example when ExampleUsed.
	ValuesPath string
	// ExampleUsed: <base>.values.yaml is missing, so `rbook run` stops with the specification's ABORT
	// line (which is among Diagnostics), and the rest was checked with the .example file.
	ExampleUsed bool
	// Diagnostics is every problem of the runbook and its values file, sorted by file, line
	// and column; the missing-values ABORT line, when it applies, is one of them (File is
	// the missing values file, no line). Empty means `rbook run` would load this runbook.
	Diagnostics []Diagnostic
	// Plan is the loaded runbook when Diagnostics is empty, else nil.
	Plan *Plan
	// NeedsMCP: a step is a check with a query, so the run needs an MCP server. It is read
	// from the parsed runbook even when the runbook has other errors.
	NeedsMCP bool
}

// Validate checks one runbook file for `rbook validate` exactly as Load would for `rbook
// run`, and reports every problem it finds at once, sorted by file then line and column.
// When <base>.values.yaml is missing, the specification's ABORT line (what `rbook run` prints) is a
// diagnostic, and the runbook is still checked: with <base>.values.yaml.example when it
// exists (ExampleUsed), else with every ${key} left unresolved.
func Validate(path, rulesPath string) ValidateResult {
	valuesPath, base := valuesPathFor(path)
	res := ValidateResult{ValuesPath: valuesPath}
	rb, vals, haveValues, rules, rulesFile, lerr := readFiles(path, valuesPath, base, rulesPath)
	var abort *Diagnostic
	if lerr != nil && lerr.Abort != "" && len(lerr.Diagnostics) == 0 { // values file missing
		abort = &Diagnostic{File: valuesPath, Message: lerr.Abort}
		example := valuesPath + ".example"
		data, err := readLimited(example)
		switch {
		case err == nil:
			res.ValuesPath, res.ExampleUsed, vals, haveValues = example, true, data, true
		case !errors.Is(err, fs.ErrNotExist):
			res.Diagnostics = append(res.Diagnostics, Diagnostic{File: example, Message: pathErrText(err)})
		}
		lerr = nil
	}
	if lerr != nil {
		res.Diagnostics = append(res.Diagnostics, lerr.Diagnostics...)
	} else if rules != nil { // nil: the rules are unreadable too, and the ABORT says enough
		plan, lerr, needsMCP := loadChecked(path, rb, res.ValuesPath, vals, haveValues, rulesFile, rules)
		res.NeedsMCP = needsMCP
		if lerr != nil {
			res.Diagnostics = append(res.Diagnostics, lerr.Diagnostics...)
		} else if abort == nil {
			res.Plan = plan
		}
	}
	if abort != nil {
		res.Diagnostics = append(res.Diagnostics, *abort)
	}
	SortDiagnostics(res.Diagnostics)
	return res
}

// SortDiagnostics orders diagnostics by file, then line, then column (unknown positions,
// 0, first within a file), keeping the found order among equals.
func SortDiagnostics(ds []Diagnostic) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// valuesPathFor returns the values file beside a runbook and the runbook's base name.
func valuesPathFor(path string) (valuesPath, base string) {
	stem := strings.TrimSuffix(path, ".yaml")
	return stem + ".values.yaml", filepath.Base(stem)
}

// loadFiles reads the files and runs load.
func loadFiles(path, valuesPath, base, rulesPath string) (*Plan, *LoadError) {
	rb, vals, _, rules, rulesFile, lerr := readFiles(path, valuesPath, base, rulesPath)
	if lerr != nil {
		return nil, lerr
	}
	return load(path, rb, valuesPath, vals, rulesFile, rules)
}

// readFiles reads a runbook, its values file and the rules. A missing values file is a
// LoadError with the specification's ABORT line and no diagnostics (docs/spec/runbooks.md, "Step 1");
// rules is the embedded rules.yaml unless rulesPath is set.
func readFiles(path, valuesPath, base, rulesPath string) (rb, vals []byte, haveValues bool, rules []byte, rulesFile string, lerr *LoadError) {
	fileErr := func(file string, err error) *LoadError {
		return &LoadError{Diagnostics: []Diagnostic{{File: file, Message: pathErrText(err)}}}
	}
	rb, err := readLimited(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, nil, "", &LoadError{Diagnostics: []Diagnostic{{File: path, Message: "runbook file not found; " + listRunbooks(filepath.Dir(path))}}}
	} else if err != nil {
		return nil, nil, false, nil, "", fileErr(path, err)
	}
	vals, err = readLimited(valuesPath)
	var missing *LoadError
	if errors.Is(err, fs.ErrNotExist) {
		missing = &LoadError{Abort: "ABORT: " + valuesPath + " missing — copy " + base + ".values.yaml.example and fill in real values."}
		if _, serr := os.Stat(valuesPath + ".example"); errors.Is(serr, fs.ErrNotExist) {
			missing.Next = MinimalValuesHint(valuesPath, rb)
		}
	} else if err != nil {
		return nil, nil, false, nil, "", fileErr(valuesPath, err)
	}
	rules, rulesFile = embeddedRules, "rules.yaml (embedded)"
	if rulesPath != "" {
		rulesFile = rulesPath
		if rules, err = readLimited(rulesPath); err != nil {
			if missing != nil { // the specification checks the values file first (Step 1.1 before 1.3)
				return nil, nil, false, nil, "", missing
			}
			lerr := fileErr(rulesPath, err)
			lerr.Abort = "ABORT: rules.yaml unreadable"
			return nil, nil, false, nil, "", lerr
		}
	}
	if missing != nil {
		return rb, nil, false, rules, rulesFile, missing
	}
	return rb, vals, true, rules, rulesFile, nil
}

// pathErrText is a read error's text without the path (a diagnostic names the file).
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// listRunbooks names the runbooks in dir, for a "not found" message.
func listRunbooks(dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	for _, p := range paths {
		if name := strings.TrimSuffix(filepath.Base(p), ".yaml"); !strings.HasSuffix(name, ".values") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "no runbooks in " + dir
	}
	return "runbooks in " + dir + ": " + strings.Join(names, ", ")
}

// loader holds the state of one load: the files, where each node came from, and the problems
// found so far.
type loader struct {
	rules                   *ruleSet
	runbookFile, valuesFile string
	origin                  map[*yaml.Node]string
	issues                  []issue
	curStep                 int // index of the step being validated, -1 outside steps
	unique                  map[*fieldRule]map[string]*yaml.Node
	caps                    []capCheck
	stepNodes               map[int]*yaml.Node    // each step's mapping, for the ABORT line
	substituted             map[*yaml.Node]string // nodes replaced by a whole value, and its key
	interpolated            map[*yaml.Node]bool   // scalars with values inserted into their text
	// unresolved holds scalars whose ${key} could not be substituted (missing key, or a
	// list inserted into a string). Their problem is reported once, by substitution; the
	// schema checks skip them, so the runbook's own errors still show (docs/runbooks.md, "Validating").
	unresolved map[*yaml.Node]bool
	// valuesUnusable: the values file is missing or broken (and reported), so a missing key
	// is not worth a diagnostic of its own.
	valuesUnusable bool
}

// hasValueText reports whether a node's text came, wholly or partly, from the values file.
func (l *loader) hasValueText(n *yaml.Node) bool {
	_, replaced := l.substituted[n]
	return replaced || l.interpolated[n] || l.origin[n] == l.valuesFile
}

func newLoader(rules *ruleSet, runbookFile, valuesFile string) *loader {
	return &loader{rules: rules, runbookFile: runbookFile, valuesFile: valuesFile, origin: map[*yaml.Node]string{}, curStep: -1,
		unique: map[*fieldRule]map[string]*yaml.Node{}, stepNodes: map[int]*yaml.Node{}, substituted: map[*yaml.Node]string{}, interpolated: map[*yaml.Node]bool{},
		unresolved: map[*yaml.Node]bool{}}
}

// issue is a diagnostic and the step it belongs to (-1 for none).
type issue struct {
	Diagnostic
	step int
}

func (l *loader) reportAt(file string, line, col int, field, msg string) {
	l.issues = append(l.issues, issue{Diagnostic{file, line, col, field, msg}, l.curStep})
}

func (l *loader) report(n *yaml.Node, field, format string, args ...any) {
	file := l.origin[n]
	if file == "" {
		file = l.runbookFile
	}
	l.reportAt(file, n.Line, n.Column, field, fmt.Sprintf(format, args...))
}

// load is the whole of Step 1 on bytes in memory: parse both files within the limits,
// substitute values into the parsed runbook, validate it against the rules, build the Plan.
func load(path string, rb []byte, valuesPath string, vals []byte, rulesFile string, rulesData []byte) (*Plan, *LoadError) {
	plan, lerr, _ := loadChecked(path, rb, valuesPath, vals, true, rulesFile, rulesData)
	return plan, lerr
}

// loadChecked is load that also reports whether the runbook has a check step with a query
// (so it needs an MCP server), read from the parsed tree even when the runbook is invalid.
// haveValues=false means there is no values file to use: the runbook is still checked, with
// every ${key} left unresolved and not reported (the caller reports the missing file).
//
// Every problem of both files is collected before it gives up (docs/runbooks.md, "Validating"): errors
// in the values file or missing keys do not stop the schema checks of the runbook; only a
// runbook that does not parse, or a limit hit (docs/decisions/yaml-safety.md), ends the checks early.
func loadChecked(path string, rb []byte, valuesPath string, vals []byte, haveValues bool, rulesFile string, rulesData []byte) (plan *Plan, lerr *LoadError, needsMCP bool) {
	rules, err := parseRules(rulesData)
	if err != nil {
		return nil, &LoadError{Abort: "ABORT: rules.yaml unreadable", Diagnostics: []Diagnostic{{File: rulesFile, Message: err.Error()}}}, false
	}
	l := newLoader(rules, path, valuesPath)
	values, valuesOK := map[string]*yaml.Node{}, true
	if haveValues {
		values, valuesOK = l.values(valuesPath, vals)
	}
	l.valuesUnusable = !haveValues || !valuesOK
	if values == nil {
		values = map[string]*yaml.Node{}
	}
	root, ok := l.parse(path, rb)
	if !ok {
		return nil, l.failure(), false
	}
	if root == nil || root.Kind != yaml.MappingNode {
		l.reportAt(path, 1, 1, "", "a runbook must be a mapping with runbook_name, subscriptions, state_file_path and runbook_steps")
		return nil, l.failure(), false
	}
	l.substitute(root, values, "")
	// Substituted values can nest and repeat, so the limits hold again for the result.
	if w := (limitWalker{l: l, active: map[*yaml.Node]bool{}}); !w.walk(root, 1, nil) {
		return nil, l.failure(), false
	}
	top := l.object(root, "", rules.Runbook, nil)
	needsMCP = l.hasCheckQuery()
	for _, c := range l.caps {
		if limit, ok := top[c.from].(int); ok && c.value > limit {
			l.curStep = c.step
			l.report(c.node, c.field, "%d exceeds %s (%d); it is rejected, not clamped", c.value, c.from, limit)
		}
	}
	if len(l.issues) > 0 || !valuesOK || !haveValues {
		return nil, l.failure(), needsMCP
	}
	sum := sha256.New()
	sum.Write(rb)
	sum.Write([]byte{0})
	sum.Write(vals)
	plan = &Plan{Path: path, ValuesPath: valuesPath, ContentHash: hex.EncodeToString(sum.Sum(nil)), SchemaHash8: SchemaHash8(rulesData)}
	plan.Name, _ = top["runbook_name"].(string)
	plan.ValueTexts = valueTexts(values)
	plan.StateFilePath, _ = top["state_file_path"].(string)
	plan.MaxStepTimeoutSeconds, _ = top["max_step_timeout_seconds"].(int)
	if plan.MaxStepTimeoutSeconds == 0 {
		plan.MaxStepTimeoutSeconds = DefaultMaxStepTimeoutSeconds
	}
	// Type assertions are checked: an overriding rules.yaml may shape fields differently.
	subs, _ := top["subscriptions"].([]any)
	for _, s := range subs {
		if s, ok := s.(string); ok {
			plan.Subscriptions = append(plan.Subscriptions, s)
		}
	}
	steps, _ := top["runbook_steps"].([]any)
	for i, s := range steps {
		sv, ok := s.(stepValue)
		if !ok {
			continue
		}
		st := Step{Index: i, Line: sv.node.Line, Column: sv.node.Column, TimeoutSeconds: plan.MaxStepTimeoutSeconds}
		st.Name, _ = sv.fields["name"].(string)
		typ, _ := sv.fields["type"].(string)
		onFail, _ := sv.fields["on_fail"].(string)
		st.Type, st.OnFail = StepType(typ), OnFail(onFail)
		st.Params, _ = sv.fields["params"].(map[string]any)
		if in, ok := sv.fields["kql_or_template"].(string); ok {
			st.Input = &in
		}
		if t, ok := sv.fields["max_timeout_seconds"].(int); ok {
			st.TimeoutSeconds = t
		}
		st.Form, _ = sv.fields["inputs"].([]gateinputs.Field)
		plan.Steps = append(plan.Steps, st)
	}
	return plan, nil, needsMCP
}

// hasCheckQuery reports whether a step of the parsed runbook is a check with a non-null
// kql_or_template: the steps `rbook run` sends to an MCP server (cmd/rbook executors).
func (l *loader) hasCheckQuery() bool {
	for _, n := range l.stepNodes {
		if n == nil || n.Kind != yaml.MappingNode {
			continue
		}
		ps := pairs(n)
		t, q := lookup(ps, "type"), lookup(ps, "kql_or_template")
		if t != nil && t.Value == string(TypeCheck) && q != nil && q.ShortTag() != "!!null" {
			return true
		}
	}
	return false
}

// failure turns the issues into a LoadError. When a step broke its type schema, Abort is the
// specification's line for the first such step (docs/spec/runbooks.md, "Step 1").
func (l *loader) failure() *LoadError {
	e := &LoadError{}
	first := -1
	for _, is := range l.issues {
		e.Diagnostics = append(e.Diagnostics, is.Diagnostic)
		if is.step >= 0 && (first < 0 || is.step < l.issues[first].step) {
			first = len(e.Diagnostics) - 1
		}
	}
	if first >= 0 {
		is := l.issues[first]
		stepField := "runbook_steps[" + strconv.Itoa(is.step) + "]"
		reason := strings.TrimPrefix(strings.TrimPrefix(is.Field, stepField), ".")
		if reason != "" {
			reason += ": "
		}
		name, typ := l.stepLabel(is.step, stepField)
		e.Abort = fmt.Sprintf("ABORT: step '%s' failed schema validation for type '%s': %s%s.", name, typ, reason, strings.TrimSuffix(is.Message, "."))
	}
	return e
}

// stepLabel returns the name and type a step declares, as written, for the ABORT line.
func (l *loader) stepLabel(i int, stepField string) (name, typ string) {
	name = stepField
	if n := l.stepNodes[i]; n != nil && n.Kind == yaml.MappingNode {
		ps := pairs(n)
		printable := func(v *yaml.Node) bool {
			return v != nil && v.Kind == yaml.ScalarNode && !l.hasValueText(v) && strings.IndexFunc(v.Value, isControl) < 0
		}
		if v := lookup(ps, "name"); printable(v) && v.Value != "" {
			name = v.Value
		}
		if v := lookup(ps, "type"); printable(v) {
			typ = v.Value
		}
	}
	return name, typ
}

// valueTexts is Plan.ValueTexts: every scalar text under each values key (aliases followed
// once; the limit walk already bounded the tree).
func valueTexts(values map[string]*yaml.Node) map[string][]string {
	out := make(map[string][]string, len(values))
	for k, v := range values {
		seen := map[*yaml.Node]bool{}
		have := map[string]bool{}
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			n = resolveAlias(n)
			if n == nil || seen[n] {
				return
			}
			seen[n] = true
			if n.Kind == yaml.ScalarNode {
				if !have[n.Value] {
					have[n.Value] = true
					out[k] = append(out[k], n.Value)
				}
				return
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(v)
	}
	return out
}
