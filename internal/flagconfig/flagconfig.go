// Package flagconfig makes a command's flags settable from a YAML file and from environment
// variables, with one precedence for every flag: the command line, then the environment
// (PREFIX + the flag's name upper-cased, '-' as '_'), then the file, then the flag's default
// (docs/serve-config.md). Everything is derived from the pflag.FlagSet: a flag added to the
// command is a file key and an environment variable with no change here. Values are applied
// with FlagSet.Set, so each flag's own parsing and the command's checks stay in one place.
package flagconfig

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// MaxFileBytes caps a configuration file (256 KiB): a file of flag values is a few KiB.
const MaxFileBytes = 256 << 10

// SecretAnnotation, set on a flag (MarkSecret), makes Effective show whether it is set and
// how long it is, never its value.
const SecretAnnotation = "flagconfig_secret"

// MarkSecret marks flag name of fs as holding a secret value (SecretAnnotation). Errors: no
// such flag.
func MarkSecret(fs *pflag.FlagSet, name string) error {
	return fs.SetAnnotation(name, SecretAnnotation, []string{"true"})
}

// Source is where a flag's effective value came from.
type Source string

// The sources, strongest first.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromFile    Source = "file"
	FromDefault Source = "default"
)

// Origin is where one flag's effective value came from: Env names the variable (FromEnv),
// Line the file's line (FromFile).
type Origin struct {
	Source Source
	Env    string
	Line   int
}

// String is "flag", "env RBOOK_ADDR", "file line 3" or "default".
func (o Origin) String() string {
	switch o.Source {
	case FromEnv:
		return "env " + o.Env
	case FromFile:
		return fmt.Sprintf("file line %d", o.Line)
	}
	return string(o.Source)
}

// Options say which flags are settings and how their environment variables are named.
type Options struct {
	// EnvPrefix starts every variable name ("RBOOK_").
	EnvPrefix string
	// Skip names flags that are not settings (--config itself, --print-config, --help): they
	// are neither file keys nor read from the environment.
	Skip []string
	// ReservedEnv are variable names never read as a flag, because something else owns them
	// (a secret, another command's setting). A flag whose variable is reserved is settable
	// by the file and the command line only.
	ReservedEnv []string
	// NotKeys maps a key a person may try to put in the file but must not (a secret) to what
	// to do instead; such a key is refused with that hint.
	NotKeys map[string]string
	// LookupEnv is os.LookupEnv in production; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// EnvName is the environment variable of flag name: prefix + name upper-cased, '-' as '_'
// ("RBOOK_" and "public-url" give RBOOK_PUBLIC_URL).
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Settings are the flags of fs that the file and the environment may set, in fs's order
// (sorted by name unless fs says otherwise): every flag except Skip, hidden and deprecated
// ones.
func Settings(fs *pflag.FlagSet, opts Options) []*pflag.Flag {
	var out []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if setting(f, opts) {
			out = append(out, f)
		}
	})
	return out
}

func setting(f *pflag.Flag, opts Options) bool {
	return !slices.Contains(opts.Skip, f.Name) && !f.Hidden && f.Deprecated == ""
}

// Result is what Apply did: the file it read ("" for none) and where each setting's
// effective value came from, by flag name.
type Result struct {
	File    string
	Origins map[string]Origin
}

// entry is one key of the file, checked.
type entry struct {
	key    *yaml.Node
	values []string // one for a scalar flag; the items for a list
}

// Apply sets every setting of fs that the command line did not set (fs.Changed) from its
// environment variable when that is set and not empty, else from file when file ("" for
// none) has its key. Errors, all of them joined, name where the problem is:
// "FILE:LINE:COL: key "x": …" for the file (an unknown, duplicate, deprecated or skipped key,
// a value of the wrong YAML type, a value the flag refuses) and "VAR: …" for a variable.
// Nothing is set when the file cannot be read or has a mistake of key or type.
func Apply(fs *pflag.FlagSet, file string, opts Options) (*Result, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	res := &Result{File: file, Origins: map[string]Origin{}}
	var entries map[string]entry
	if file != "" {
		var err error
		if entries, err = readFile(fs, file, opts); err != nil {
			return nil, err
		}
	}
	var errs []error
	if err := refuseDeprecatedEnv(fs, opts, lookup); err != nil {
		errs = append(errs, err)
	}
	for _, f := range Settings(fs, opts) {
		env := EnvName(opts.EnvPrefix, f.Name)
		if f.Changed {
			res.Origins[f.Name] = Origin{Source: FromFlag}
			continue
		}
		if v, ok := lookup(env); ok && v != "" && !slices.Contains(opts.ReservedEnv, env) {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", env, setError(f, err)))
			}
			res.Origins[f.Name] = Origin{Source: FromEnv, Env: env}
			continue
		}
		if e, ok := entries[f.Name]; ok {
			if err := setValues(fs, f, e.values); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d:%d: key %q: %v", file, e.key.Line, e.key.Column, f.Name, setError(f, err)))
			}
			res.Origins[f.Name] = Origin{Source: FromFile, Line: e.key.Line}
			continue
		}
		res.Origins[f.Name] = Origin{Source: FromDefault}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return res, nil
}

// refuseDeprecatedEnv is an error for each set variable of a deprecated flag.
func refuseDeprecatedEnv(fs *pflag.FlagSet, opts Options, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		env := EnvName(opts.EnvPrefix, f.Name)
		if f.Deprecated == "" || slices.Contains(opts.ReservedEnv, env) {
			return
		}
		if v, ok := lookup(env); ok && v != "" {
			errs = append(errs, fmt.Errorf("%s: --%s is deprecated (%s): unset the variable", env, f.Name, f.Deprecated))
		}
	})
	return errors.Join(errs...)
}

// setError is err of FlagSet.Set as "not a valid TYPE for --NAME: why".
func setError(f *pflag.Flag, err error) error {
	if cause := errors.Unwrap(err); cause != nil {
		err = cause
	}
	return fmt.Errorf("not a valid %s for --%s: %v", f.Value.Type(), f.Name, err)
}

// setValues sets f from a file's values: a list replaces the default as a whole.
func setValues(fs *pflag.FlagSet, f *pflag.Flag, values []string) error {
	sv, isSlice := f.Value.(pflag.SliceValue)
	if !isSlice {
		return fs.Set(f.Name, values[0])
	}
	// Set marks the flag changed (a command's checks read fs.Changed) and replaces the
	// default; Replace then gives the exact list, commas and quotes in items included.
	var first string
	if len(values) > 0 && f.Value.Type() == "stringSlice" {
		first = csvField(values[0])
	} else if len(values) > 0 {
		first = values[0]
	}
	if err := fs.Set(f.Name, first); err != nil {
		return err
	}
	return sv.Replace(values)
}

// csvField is s as one CSV field, the form a stringSlice flag's Set reads.
func csvField(s string) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{s})
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// readFile reads and checks file: one YAML mapping whose keys are settings of fs, each once,
// with values of the flag's YAML type.
func readFile(fs *pflag.FlagSet, file string, opts Options) (map[string]entry, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	doc, err := yamlerr.DecodeOne(file, data, MaxFileBytes, "configuration file", "a mapping of flag names to values, such as addr: 0.0.0.0:7070")
	if err != nil {
		return nil, err
	}
	top := doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: want a mapping of flag names to values, such as addr: 0.0.0.0:7070; got %s", file, top.Line, top.Column, kindOf(top))
	}
	out := map[string]entry{}
	var errs []error
	at := func(n *yaml.Node, key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d:%d: key %q: %s", file, n.Line, n.Column, key, fmt.Sprintf(format, args...)))
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			errs = append(errs, fmt.Errorf("%s:%d:%d: a key must be a flag name, got %s", file, k.Line, k.Column, kindOf(k)))
			continue
		}
		name := k.Value
		if prev, dup := out[name]; dup {
			at(k, name, "given twice (first at line %d); keep one", prev.key.Line)
			continue
		}
		if hint, no := opts.NotKeys[name]; no {
			at(k, name, "not a configuration key: %s", hint)
			continue
		}
		f := fs.Lookup(name)
		switch {
		case f == nil:
			at(k, name, "unknown: the keys are the long flag names of the command (%s)", suggest(fs, opts, name))
			continue
		case f.Deprecated != "":
			at(k, name, "--%s is deprecated (%s): remove the key", name, f.Deprecated)
			continue
		case !setting(f, opts):
			at(k, name, "--%s is not a setting: give it on the command line", name)
			continue
		}
		values, err := valuesOf(f, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d:%d: key %q: %v", file, v.Line, v.Column, name, err))
			continue
		}
		out[name] = entry{key: k, values: values}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// suggest is the settings closest to name, or a hint to see them all.
func suggest(fs *pflag.FlagSet, opts Options, name string) string {
	var close []string
	for _, f := range Settings(fs, opts) {
		sub := len(name) >= 4 && len(f.Name) >= 4 && (strings.Contains(f.Name, name) || strings.Contains(name, f.Name))
		if sub || levenshtein(f.Name, name) <= max(1, len(name)/3) {
			close = append(close, f.Name)
		}
	}
	if len(close) == 0 {
		return "see --help"
	}
	return "did you mean " + strings.Join(close, " or ") + "?"
}

// levenshtein is the edit distance of a and b.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// valuesOf checks that n has the YAML type of f's values (Kind) and returns them as the
// strings Set takes.
func valuesOf(f *pflag.Flag, n *yaml.Node) ([]string, error) {
	kind := KindOf(f.Value)
	if kind.List {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("want a list of %s, got %s", kind.Item.plural(), kindOf(n))
		}
		out := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if err := kind.Item.check(item); err != nil {
				return nil, fmt.Errorf("line %d:%d: %v", item.Line, item.Column, err)
			}
			out = append(out, item.Value)
		}
		return out, nil
	}
	if err := kind.Item.check(n); err != nil {
		return nil, err
	}
	return []string{n.Value}, nil
}

// Scalar is the YAML (and JSON) type of a flag's value, or of a list flag's items.
type Scalar string

// The scalar types.
const (
	String   Scalar = "string"
	Boolean  Scalar = "boolean"
	Integer  Scalar = "integer"
	Number   Scalar = "number"
	Duration Scalar = "duration" // a string Go's time.ParseDuration reads: 90s, 1h30m
)

// Kind is the shape of a flag's value in the file: a scalar, or a list of them.
type Kind struct {
	List bool
	Item Scalar
}

// KindOf is the file shape of a flag value, from its pflag Type(): bool, the int and uint
// types, float32/64, duration, string, and their Slice/Array forms. Any other type (a
// command's own pflag.Value) is a string, or a list of strings when it is a
// pflag.SliceValue.
func KindOf(v pflag.Value) Kind {
	t := v.Type()
	_, isSlice := v.(pflag.SliceValue)
	base := strings.TrimSuffix(strings.TrimSuffix(t, "Slice"), "Array")
	list := isSlice || base != t
	switch base {
	case "bool":
		return Kind{list, Boolean}
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count":
		return Kind{list, Integer}
	case "float32", "float64":
		return Kind{list, Number}
	case "duration":
		return Kind{list, Duration}
	}
	return Kind{list, String}
}

func (s Scalar) plural() string {
	switch s {
	case Boolean:
		return "booleans"
	case Integer:
		return "integers"
	case Number:
		return "numbers"
	case Duration:
		return "durations (strings such as 90s or 1h30m)"
	}
	return "strings"
}

// check is nil when n is a scalar of type s, else what is wrong in words.
func (s Scalar) check(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return fmt.Errorf("want %s, got %s", s.article(), kindOf(n))
	}
	ok := false
	switch s {
	case Boolean:
		ok = n.Tag == "!!bool"
	case Integer:
		ok = n.Tag == "!!int"
	case Number:
		ok = n.Tag == "!!int" || n.Tag == "!!float"
	default:
		ok = n.Tag == "!!str"
	}
	if ok {
		return nil
	}
	if s == String || s == Duration {
		return fmt.Errorf("want %s, got %s (quote it: %q)", s.article(), kindOf(n), n.Value)
	}
	return fmt.Errorf("want %s, got %s", s.article(), kindOf(n))
}

func (s Scalar) article() string {
	switch s {
	case Boolean:
		return "true or false"
	case Integer:
		return "an integer"
	case Number:
		return "a number"
	case Duration:
		return "a duration (a string such as 90s or 1h30m)"
	}
	return "a string"
}

// kindOf names n's YAML type for an error: "a list", "a mapping", "an integer 7070", …
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.Tag {
	case "!!null":
		return "no value"
	case "!!bool":
		return "a boolean " + n.Value
	case "!!int":
		return "an integer " + n.Value
	case "!!float":
		return "a number " + n.Value
	case "!!str":
		return fmt.Sprintf("a string %q", n.Value)
	}
	return "a " + strings.TrimPrefix(n.Tag, "!!")
}
