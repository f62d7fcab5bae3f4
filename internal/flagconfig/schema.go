package flagconfig

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// DurationPattern matches what Go's time.ParseDuration reads: "0", or a sequence of decimal
// numbers each with a unit (ns, us, µs, ms, s, m, h), optionally signed: 90s, 1h30m, 1.5h.
const DurationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`

// SchemaValue is a pflag.Value that describes its own values in JSON Schema (a custom
// type's string pattern); the schema replaces the plain {"type": "string"}.
type SchemaValue interface {
	pflag.Value
	// JSONSchema is the schema of one value, e.g. {"type": "string", "pattern": "…"}.
	JSONSchema() map[string]any
}

// Schema is a JSON Schema (draft 2020-12) of the configuration file of fs: an object whose
// properties are the settings (Settings), each typed by its Kind, described by its usage
// and with its default; no other property is allowed. id and title go in $id and title.
// Errors: a default that does not parse as its type.
func Schema(fs *pflag.FlagSet, opts Options, id, title, description string) ([]byte, error) {
	props := map[string]any{}
	for _, f := range Settings(fs, opts) {
		p, err := property(f, opts)
		if err != nil {
			return nil, err
		}
		props[f.Name] = p
	}
	doc := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  id,
		"title":                title,
		"description":          description,
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// property is the schema of flag f's value.
func property(f *pflag.Flag, opts Options) (map[string]any, error) {
	kind := KindOf(f.Value)
	item := scalarSchema(f.Value, kind.Item)
	p := map[string]any{}
	_, desc := pflag.UnquoteUsage(f)
	if env := EnvName(opts.EnvPrefix, f.Name); !slices.Contains(opts.ReservedEnv, env) {
		desc += " (environment: " + env + ")"
	}
	p["description"] = desc
	if kind.List {
		p["type"], p["items"] = "array", item
		items, err := csvItems(f.DefValue)
		if err != nil {
			return nil, fmt.Errorf("--%s: default %q: %w", f.Name, f.DefValue, err)
		}
		def := []any{}
		for _, s := range items {
			v, err := typed(kind.Item, s)
			if err != nil {
				return nil, fmt.Errorf("--%s: default %q: %w", f.Name, f.DefValue, err)
			}
			def = append(def, v)
		}
		p["default"] = def
		return p, nil
	}
	for k, v := range item {
		p[k] = v
	}
	def, err := typed(kind.Item, f.DefValue)
	if err != nil {
		return nil, fmt.Errorf("--%s: default %q: %w", f.Name, f.DefValue, err)
	}
	p["default"] = def
	return p, nil
}

// scalarSchema is the schema of one value of scalar type s (or v's own, for a SchemaValue).
func scalarSchema(v pflag.Value, s Scalar) map[string]any {
	if sv, ok := v.(SchemaValue); ok {
		return sv.JSONSchema()
	}
	switch s {
	case Duration:
		return map[string]any{"type": "string", "pattern": DurationPattern}
	case Boolean, Integer, Number:
		return map[string]any{"type": string(s)}
	}
	return map[string]any{"type": "string"}
}

// typed is the JSON value of s, a default in pflag's text form, for scalar type t.
func typed(t Scalar, s string) (any, error) {
	switch t {
	case Boolean:
		return strconv.ParseBool(s)
	case Integer:
		return strconv.ParseInt(s, 10, 64)
	case Number:
		return strconv.ParseFloat(s, 64)
	}
	return s, nil
}

// csvItems are the items of a list flag's default as pflag prints it, "[a,b]".
func csvItems(def string) ([]string, error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(def, "["), "]")
	if inner == "" {
		return nil, nil
	}
	return csv.NewReader(strings.NewReader(inner)).Read()
}
