// Package gateinputs is the approver-input form of a gate (docs/approver-inputs.md): the
// fields a playbook approval node declares under inputs:, the check of such a declaration,
// and the one validation of the values an approver gives. The control plane validates an
// Approve with Validate in the transaction that records the vote, and the executor's terminal
// gate validates what it prompts for with the same function, so no channel accepts a value
// another would refuse.
//
// It imports only the standard library and internal/lazyregexp, so the executor, the control
// plane and the CLI can all use it.
package gateinputs

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// The field types (docs/approver-inputs.md, "Declaration").
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeEnum    = "enum"
)

// Types are the values a field's type may have, in the order the docs list them.
var Types = []string{TypeString, TypeNumber, TypeBoolean, TypeEnum}

// Bounds of a declaration and of the values (docs/approver-inputs.md, "Declaration"): they keep a
// form small enough for a Slack modal and an approval row small enough for every list page.
const (
	// MaxFields is the most fields one gate may declare.
	MaxFields = 20
	// MaxValueBytes bounds one value, a default, and one option, in bytes.
	MaxValueBytes = 4 << 10
	// MaxOptions is the most options an enum field may list.
	MaxOptions = 100
	// MaxPatternBytes bounds a string field's pattern.
	MaxPatternBytes = 1 << 10
	// MaxDescriptionBytes bounds a field's description.
	MaxDescriptionBytes = 1 << 10
)

// nameRE is a field's name: a lower-case letter, then up to 63 lower-case letters, digits and
// underscores, so it is a binding path segment ({{ review.inputs.<name> }}) and a form key.
var nameRE = lazyregexp.New(`^[a-z][a-z0-9_]{0,63}$`)

// Field is one declared input. Its JSON form is how the control plane stores a gate's
// declaration (the approval row's inputs_json).
type Field struct {
	// Name matches [a-z][a-z0-9_]{0,63} and is unique in its declaration.
	Name string `json:"name"`
	// Type is one of Types.
	Type string `json:"type"`
	// Required means Validate refuses a value map without it, unless Default is set.
	Required bool `json:"required,omitempty"`
	// Pattern (string fields only) is an RE2 expression the whole value must match.
	Pattern string `json:"pattern,omitempty"`
	// Options (enum fields only) are the allowed values, at least one, unique.
	Options []string `json:"options,omitempty"`
	// Default is applied when the approver gives no value; HasDefault tells an empty default
	// from none. It must itself be a valid value of the field.
	Default    string `json:"default,omitempty"`
	HasDefault bool   `json:"has_default,omitempty"`
	// Description is shown next to the field in every channel.
	Description string `json:"description,omitempty"`
}

// Error is a refusal that names the field it is about: a declaration's attribute
// ("inputs[1].pattern") or a value's field name ("target").
type Error struct {
	// Field is the field name (Validate) or the attribute's path (Check, CheckField).
	Field string
	// Msg says what is wrong and what to do.
	Msg string
}

// Error is "input <field>: <msg>".
func (e *Error) Error() string { return "input " + e.Field + ": " + e.Msg }

// CheckField checks one declared field on its own: its name, type, pattern, options and
// default. The error's Field is the attribute ("name", "type", "pattern", "options",
// "default", "description"); nil when the field is valid.
func CheckField(f Field) *Error {
	bad := func(attr, format string, args ...any) *Error {
		return &Error{Field: attr, Msg: fmt.Sprintf(format, args...)}
	}
	if !nameRE.MatchString(f.Name) {
		return bad("name", "%q is not a field name: a lower-case letter, then up to 63 lower-case letters, digits and _", clip(f.Name))
	}
	if !slices.Contains(Types, f.Type) {
		return bad("type", "%q is not a field type; use one of %s", clip(f.Type), strings.Join(Types, ", "))
	}
	if len(f.Description) > MaxDescriptionBytes {
		return bad("description", "is %d bytes; at most %d", len(f.Description), MaxDescriptionBytes)
	}
	if f.Pattern != "" {
		if f.Type != TypeString {
			return bad("pattern", "is for string fields only; this field is %s", f.Type)
		}
		if len(f.Pattern) > MaxPatternBytes {
			return bad("pattern", "is %d bytes; at most %d", len(f.Pattern), MaxPatternBytes)
		}
		if _, err := compile(f.Pattern); err != nil {
			return bad("pattern", "is not an RE2 expression: %v", err)
		}
	}
	switch {
	case f.Type == TypeEnum && len(f.Options) == 0:
		return bad("options", "is required for enum fields: list the allowed values")
	case f.Type != TypeEnum && len(f.Options) > 0:
		return bad("options", "is for enum fields only; this field is %s", f.Type)
	case len(f.Options) > MaxOptions:
		return bad("options", "has %d options; at most %d", len(f.Options), MaxOptions)
	}
	for i, o := range f.Options {
		switch {
		case o == "":
			return bad(fmt.Sprintf("options[%d]", i), "must not be empty")
		case len(o) > MaxValueBytes:
			return bad(fmt.Sprintf("options[%d]", i), "is %d bytes; at most %d", len(o), MaxValueBytes)
		case slices.Index(f.Options, o) != i:
			return bad(fmt.Sprintf("options[%d]", i), "%q is listed twice", clip(o))
		}
		if msg := printable(o); msg != "" {
			return bad(fmt.Sprintf("options[%d]", i), "%s", msg)
		}
	}
	if f.HasDefault {
		if _, msg := value(f, f.Default); msg != "" {
			return bad("default", "%s", msg)
		}
	}
	return nil
}

// Check checks a whole declaration: at most MaxFields fields, each valid (CheckField), names
// unique. The error's Field is "inputs[i].<attribute>" or "inputs"; nil when it is valid.
func Check(fields []Field) *Error {
	if len(fields) > MaxFields {
		return &Error{Field: "inputs", Msg: fmt.Sprintf("declares %d fields; at most %d", len(fields), MaxFields)}
	}
	for i, f := range fields {
		if e := CheckField(f); e != nil {
			return &Error{Field: fmt.Sprintf("inputs[%d].%s", i, e.Field), Msg: e.Msg}
		}
		if j := slices.IndexFunc(fields[:i], func(g Field) bool { return g.Name == f.Name }); j >= 0 {
			return &Error{Field: fmt.Sprintf("inputs[%d].name", i), Msg: fmt.Sprintf("%q is declared twice (also inputs[%d])", f.Name, j)}
		}
	}
	return nil
}

// Validate checks the values an approver gave (field name → text) against the declaration
// and returns the values the gate is decided with: every declared field, in canonical form
// (booleans "true"/"false", numbers as given), a default for a missing one that has a default,
// "" for a missing optional one without a default. Refused, with the field named: a value for
// a field the declaration does not have, a missing required one, a value over MaxValueBytes or
// with a control character, a wrong type, a string that does not match its pattern, an enum
// value that is not one of its options. Fields are checked in declaration order, unknown
// names first in sorted order, so the same input always gets the same error. A value given
// empty counts as not given.
func Validate(fields []Field, values map[string]string) (map[string]string, *Error) {
	var unknown []string
	for k := range values {
		if !slices.ContainsFunc(fields, func(f Field) bool { return f.Name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Name
		}
		known := "this gate declares no inputs"
		if len(names) > 0 {
			known = "this gate's inputs are " + strings.Join(names, ", ")
		}
		return nil, &Error{Field: clip(unknown[0]), Msg: "is not an input of this gate; " + known}
	}
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		v := values[f.Name]
		if v == "" { // not given, or given empty: the default, else no value
			switch {
			case f.HasDefault:
				v = f.Default
			case f.Required:
				return nil, &Error{Field: f.Name, Msg: "is required and has no default; give a value"}
			}
			if v == "" {
				out[f.Name] = ""
				continue
			}
		}
		canon, msg := value(f, v)
		if msg != "" {
			return nil, &Error{Field: f.Name, Msg: msg}
		}
		out[f.Name] = canon
	}
	return out, nil
}

// value checks one non-empty value of f and returns its canonical text, or a message.
func value(f Field, v string) (string, string) {
	if len(v) > MaxValueBytes {
		return "", fmt.Sprintf("is %d bytes; at most %d", len(v), MaxValueBytes)
	}
	if msg := printable(v); msg != "" {
		return "", msg
	}
	switch f.Type {
	case TypeNumber:
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return "", fmt.Sprintf("must be a number, got %q", clip(v))
		}
		return strings.TrimSpace(v), ""
	case TypeBoolean:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return "true", ""
		case "false":
			return "false", ""
		}
		return "", fmt.Sprintf("must be true or false, got %q", clip(v))
	case TypeEnum:
		if !slices.Contains(f.Options, v) {
			return "", fmt.Sprintf("must be one of %s, got %q", strings.Join(f.Options, ", "), clip(v))
		}
	case TypeString:
		if f.Pattern != "" {
			re, err := compile(f.Pattern)
			if err != nil {
				return "", "the declaration's pattern does not compile: " + err.Error()
			}
			if !re.MatchString(v) {
				return "", fmt.Sprintf("%q does not match the pattern %s", clip(v), f.Pattern)
			}
		}
	}
	return v, ""
}

// compile compiles a pattern anchored at both ends: the whole value must match.
func compile(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// printable is why v may not be a value ("" when it may): not UTF-8, or a control or
// bidirectional-text character, which would forge output where values are printed (terminals,
// the job log, reports).
func printable(v string) string {
	if !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	for i, r := range v {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return fmt.Sprintf("has the control character %U at byte %d; give one line of printable text", r, i)
		}
	}
	return ""
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	i := 64
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// NeedsPerson is the name of the first field a person must give — required, with no
// default — or "" when the form can be filled with its defaults alone. An auto-pass policy
// does not pass a gate whose form needs a person (docs/approver-inputs.md, "Every channel").
func NeedsPerson(fields []Field) string {
	for _, f := range fields {
		if f.Required && !f.HasDefault {
			return f.Name
		}
	}
	return ""
}
