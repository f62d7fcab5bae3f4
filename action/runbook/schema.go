package runbook

import (
	"encoding/json"
	"regexp"
	"slices"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// JSONSchema returns a JSON Schema (draft 2020-12) for runbook files, generated from the
// embedded rules.yaml for editors (docs/decisions/rules-schema.md). runbooks/schema/runbook.schema.json is exactly
// this output (checked by TestJSONSchemaInSync). Rules it cannot express (NFC-unique names,
// max_timeout_seconds ≤ max_step_timeout_seconds, clean template paths) are in descriptions.
// It fails only if the embedded rules are broken.
func JSONSchema() ([]byte, error) {
	rs, err := parseRules(embeddedRules)
	if err != nil {
		return nil, err
	}
	step := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             requiredFields(rs.Step),
		"properties":           properties(rs.Step),
	}
	var perType []any
	for _, t := range sortedTypes(rs.Types) {
		overrides := rs.Types[t]
		then := map[string]any{}
		for name := range overrides {
			// The type's rule replaces the step rule, so the step-level property allows anything.
			step["properties"].(map[string]any)[name] = map[string]any{"description": describe(rs.Step[name])}
		}
		props := map[string]any{}
		for _, name := range overriddenFields(rs.Types) {
			r := overrides[name]
			if r == nil {
				r = rs.Step[name]
			}
			if r != nil {
				props[name] = fieldSchema(r, !r.Required)
			}
		}
		then["properties"] = props
		if req := requiredFields(overrides); len(req) > 0 {
			then["required"] = req
		}
		perType = append(perType, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": t}}, "required": []string{"type"}},
			"then": then,
		})
	}
	if len(perType) > 0 {
		step["allOf"] = perType
	}
	schema := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"title":                "rbook runbook",
		"description":          "Generated from action/runbook/rules.yaml (schema_hash8 " + SchemaHash8(embeddedRules) + ") by `go test ./action/runbook -run TestJSONSchemaInSync -update`; do not edit.",
		"type":                 "object",
		"additionalProperties": false,
		"required":             requiredFields(rs.Runbook),
		"properties":           properties(rs.Runbook),
		"$defs": map[string]any{
			"step":      step,
			"formField": formFieldSchema("a confirm step", "The name the approver fills in; a runbook has no bindings that read it."),
			"token": map[string]any{
				"description": "A values-file token, replaced by the value of that key (docs/decisions/values-substitution.md).",
				"type":        "string",
				"pattern":     `^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`,
			},
		},
	}
	out, err := json.MarshalIndent(schema, "", "  ")
	return append(out, '\n'), err
}

func properties(fields map[string]*fieldRule) map[string]any {
	props := map[string]any{}
	for name, r := range fields {
		props[name] = fieldSchema(r, !r.Required)
	}
	return props
}

func requiredFields(fields map[string]*fieldRule) []string {
	req := []string{}
	for _, name := range sortedKeys(fields) {
		if fields[name].Required {
			req = append(req, name)
		}
	}
	return req
}

func sortedTypes(types map[string]map[string]*fieldRule) []string {
	var ts []string
	for t := range types {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

func overriddenFields(types map[string]map[string]*fieldRule) []string {
	var all []map[string]*fieldRule
	for _, t := range sortedTypes(types) {
		all = append(all, types[t])
	}
	return sortedKeys(all...)
}

func describe(r *fieldRule) string {
	if r == nil {
		return ""
	}
	d := r.Description
	if r.MaxFrom != "" {
		d += " At most " + r.MaxFrom + "."
	}
	return d
}

// fieldSchema is a field's schema, also accepting a whole-value ${token} where the value is
// not a free string and, when nullable, null (which the loader treats as omitted).
func fieldSchema(r *fieldRule, nullable bool) map[string]any {
	s := map[string]any{}
	switch r.Kind {
	case "string", "path":
		s["type"] = "string"
		if r.MinLength > 0 {
			s["minLength"] = r.MinLength
		}
		if r.MaxLength > 0 {
			s["maxLength"] = r.MaxLength
		}
		if r.Pattern != "" {
			s["pattern"] = "^(?:" + r.Pattern + ")$"
		}
		if r.Kind == "path" {
			s["pattern"] = "^" + regexp.QuoteMeta(r.Under) + `[^\\/][^\\]*$`
		}
	case "enum":
		s["enum"] = r.Values
	case "int":
		s["type"] = "integer"
		if r.Min != nil {
			s["minimum"] = *r.Min
		}
		if r.Max != nil {
			s["maximum"] = *r.Max
		}
		if r.Default != nil {
			s["default"] = *r.Default
		}
	case "list":
		s["type"] = "array"
		s["items"] = fieldSchema(r.Items, false)
		if r.MinItems > 0 {
			s["minItems"] = r.MinItems
		}
	case "map":
		s["type"] = "object"
	case "null":
		s["type"] = "null"
	case "step":
		return map[string]any{"$ref": "#/$defs/step"}
	case "form":
		s["type"] = "array"
		s["maxItems"] = gateinputs.MaxFields
		s["items"] = map[string]any{"$ref": "#/$defs/formField"}
	}
	var alts []any
	// A whole-value token is offered where a string would not already match it; not for the
	// step list, so editors can point at the step that is wrong.
	_, patterned := s["pattern"]
	if r.Kind != "null" && (r.Kind != "string" || patterned) && (r.Kind != "list" || r.Items.Kind != "step") {
		alts = append(alts, map[string]any{"$ref": "#/$defs/token"})
	}
	if nullable && r.Kind != "null" {
		alts = append(alts, map[string]any{"type": "null"})
	}
	if len(alts) > 0 {
		s = map[string]any{"anyOf": append([]any{s}, alts...)}
	}
	if d := describe(r); d != "" {
		s["description"] = d
	}
	return s
}
