package runbook

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// PlaybookJSONSchema returns a JSON Schema (draft 2020-12) for .cantbook files, for editors
// (docs/spec/playbooks.md). runbooks/schema/cantbook.schema.json is exactly this output (checked by
// TestPlaybookJSONSchemaInSync). It is built from the parser's own key lists and
// limits; rules a schema cannot express (ids known, the DAG, template references, inject_hint
// needing on_failure.inject_into) are in descriptions and enforced by ParsePlaybook. An
// unquoted version: 1.0 fails the schema on purpose: the parser accepts it only with a
// warning. The error is from encoding/json and does not happen for this fixed document.
func PlaybookJSONSchema() ([]byte, error) {
	return playbookSchema()
}

var playbookSchema = sync.OnceValues(func() ([]byte, error) {
	out, err := json.MarshalIndent(playbookSchemaDoc(), "", "  ")
	return append(out, '\n'), err
})

// playbookSchemaHash8 is Plan.SchemaHash8 for playbooks: the first 8 hex chars of
// SHA-256(PlaybookJSONSchema()).
func playbookSchemaHash8() string {
	b, _ := playbookSchema()
	return SchemaHash8(b)
}

func playbookSchemaDoc() map[string]any {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	nonEmpty := func(desc string) map[string]any {
		return map[string]any{"type": "string", "minLength": 1, "description": desc}
	}
	templated := func(desc string) map[string]any {
		return map[string]any{"type": "string", "description": desc + " Templated: {{ input }}, {{ node.key }} or {{ error.message }}; there is no escape for a literal {{."}
	}
	idRef := map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}
	id := map[string]any{
		"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "not": map[string]any{"enum": ReservedPlaybookIDs},
		"description": "Unique node id (or input name): letters, digits, _ and -, at most 64; error, inputs and run are reserved; a node id may not equal an input name.",
	}
	facts := map[string]any{
		"type":        "array",
		"items":       map[string]any{"type": "string", "pattern": `^(file:.+|[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)$`},
		"description": "Named facts: a binding name or path that must be truthy, or file:PATH that must exist.",
	}
	iterCap := map[string]any{"type": "integer", "minimum": 0, "maximum": MaxIterationCap,
		"description": "How many times the node may execute in one run (0..10, rule 10); default 3."}
	typeIs := func(t StepType) map[string]any {
		return map[string]any{"properties": map[string]any{"type": map[string]any{"const": string(t)}}, "required": []string{"type"}}
	}
	forbid := func(except StepType, own map[string]any) map[string]any {
		props := map[string]any{}
		for t, keys := range pbTypeKeys {
			if t != except {
				for _, k := range keys {
					if !slices.Contains(pbTypeKeys[except], k) {
						props[k] = false
					}
				}
			}
		}
		maps.Copy(props, own)
		return props
	}
	formField := formFieldSchema("an approval node", "Read later as {{ <node id>.inputs.<name> }}.")
	node := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"id", "type"},
		"properties": map[string]any{
			"id":          id,
			"type":        map[string]any{"enum": pbNodeTypes},
			"description": str("What the node does."),
			"depends":     map[string]any{"type": "array", "items": idRef, "description": "Node ids this node waits for (rule 9: each a known id); edges into the node count too."},
			"timeout": map[string]any{
				"description": "Seconds (1..86400) or a duration such as \"90s\", \"5m\", \"1h\"; default 300, approval nodes 86400.",
				"oneOf": []any{
					map[string]any{"type": "integer", "minimum": 1, "maximum": MaxNodeTimeoutSeconds},
					map[string]any{"type": "string", "pattern": `^([0-9]+h)?([0-9]+m)?([0-9]+s)?$`, "minLength": 2},
				},
			},
			"iteration_cap":  iterCap,
			"max_iterations": iterCap,
			"on_failure": map[string]any{
				"type": "object", "additionalProperties": false,
				"description": "On failure, re-run inject_into with {{ error }} in its bindings, then this node again.",
				"properties": map[string]any{
					"inject_into":    map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "A known node id other than this node."},
					"max_iterations": iterCap,
				},
			},
			"requires": facts,
			"ensures":  facts,
			"command":  map[string]any{"type": "string", "minLength": 1, "maxLength": MaxCommandBytes, "description": "deterministic: the program, exec'd without a shell; not templated."},
			"args": map[string]any{"type": "array", "maxItems": MaxNodeArgs, "description": "deterministic: argv after the command, each one argument, templated.",
				"items": map[string]any{"type": []string{"string", "number", "boolean"}, "maxLength": MaxCommandBytes}},
			"env": map[string]any{"type": "object", "description": "deterministic: extra environment, values templated.",
				"propertyNames": map[string]any{"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "additionalProperties": map[string]any{"type": []string{"string", "number", "boolean"}}},
			"cwd":    templated("deterministic: working folder, relative to the run's working folder."),
			"skill":  nonEmpty("agentic: the MCP tool to call."),
			"agent":  nonEmpty("agentic: the MCP server (a key of mcpServers)."),
			"inputs": map[string]any{"description": "agentic: the tool's arguments, an object; every string inside is templated. approval: the approver-input form, a list of fields (docs/approver-inputs.md)."},
			"prompt": templated("approval: what the approver is asked."),
			"policy": map[string]any{"enum": NodePolicies, "description": "approval: require-human pins the node to a person; no auto-pass rule can pass it."},
			"rewind_targets": map[string]any{"type": "array", "uniqueItems": true, "maxItems": MaxPlaybookNodes, "items": idRef,
				"description": "approval: the nodes a reviewer may send the run back to when rejecting, each an ancestor of this node; read the comment as {{ <node id>.feedback }} (docs/push-back.md)."},
		},
		"allOf": []any{
			map[string]any{"if": typeIs(TypeDeterministic), "then": map[string]any{"required": []string{"command", "args"}, "properties": forbid(TypeDeterministic, nil)}},
			map[string]any{"if": typeIs(TypeAgentic), "then": map[string]any{"anyOf": []any{map[string]any{"required": []string{"skill"}}, map[string]any{"required": []string{"agent"}}},
				"properties": forbid(TypeAgentic, map[string]any{"inputs": map[string]any{"type": "object"}})}},
			map[string]any{"if": typeIs(TypeApproval), "then": map[string]any{"required": []string{"prompt"},
				"properties": forbid(TypeApproval, map[string]any{"inputs": map[string]any{"type": "array", "maxItems": gateinputs.MaxFields, "items": map[string]any{"$ref": "#/$defs/formField"}}})}},
		},
	}
	var oneOp []any
	for _, op := range pbWhenOps {
		oneOp = append(oneOp, map[string]any{"required": []string{op}})
	}
	scalar := map[string]any{"type": []string{"string", "number", "boolean", "null"}}
	edge := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"from", "to"},
		"properties": map[string]any{
			"from":        idRef,
			"to":          idRef,
			"description": str("Why the edge exists."),
			"contract": map[string]any{"type": "object", "additionalProperties": false,
				"properties": map[string]any{"requires": facts, "ensures": facts}},
			"when": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"binding"},
				"description": "The edge's condition: exactly one operator on a binding; false skips the target node.",
				"oneOf":       oneOp,
				"properties": map[string]any{
					"binding":   map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`},
					"equals":    scalar,
					"notEquals": scalar,
					"in":        map[string]any{"type": "array", "minItems": 1, "items": scalar},
					"exists":    map[string]any{"type": []string{"boolean", "null"}},
					"truthy":    map[string]any{"type": []string{"boolean", "null"}},
				},
			},
		},
	}
	handler := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"on", "action"},
		"properties": map[string]any{
			"on": map[string]any{"description": "<node-id>-failed or an event.", "anyOf": []any{
				map[string]any{"enum": HandlerEvents},
				map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}-failed$"},
			}},
			"action":  map[string]any{"enum": HandlerActions, "description": "inject_hint needs on_failure.inject_into on the failed node."},
			"message": templated("Recorded when the handler fires."),
		},
	}
	input := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"name"},
		"properties": map[string]any{
			"name":        id,
			"required":    map[string]any{"type": "boolean"},
			"description": str("What the input is."),
			"default":     map[string]any{"description": "Applied when the run gives no value."},
		},
	}
	return map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"title":                "rbook playbook (.cantbook)",
		"description":          "Generated by runbook.PlaybookJSONSchema (action/runbook/playbook_schema.go); update with `go test ./action/runbook -run TestPlaybookJSONSchemaInSync -update`; do not edit.",
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"version", "name", "nodes"},
		"properties": map[string]any{
			"version":        map[string]any{"type": "string", "const": PlaybookVersion, "description": `Must be the string "1.0" (quote it).`},
			"name":           map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
			"description":    str("What the playbook does."),
			"inputs":         map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/input"}},
			"nodes":          map[string]any{"type": "array", "minItems": 1, "maxItems": MaxPlaybookNodes, "items": map[string]any{"$ref": "#/$defs/node"}},
			"edges":          map[string]any{"type": "array", "maxItems": MaxPlaybookEdges, "items": map[string]any{"$ref": "#/$defs/edge"}},
			"error_handlers": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/handler"}},
		},
		"$defs": map[string]any{"node": node, "edge": edge, "handler": handler, "input": input, "formField": formField},
	}
}

// formFieldSchema is the JSON Schema of one field of an approver-input form (the playbook's
// and the runbook's schema share it); owner names what declares the form ("an approval node"), nameDoc describes
// the name attribute.
func formFieldSchema(owner, nameDoc string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"name"},
		"description":          "One field of " + owner + "'s approver-input form (docs/approver-inputs.md).",
		"properties": map[string]any{
			"name":        map[string]any{"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$", "description": nameDoc},
			"type":        map[string]any{"enum": gateinputs.Types, "description": "Default string."},
			"required":    map[string]any{"type": "boolean"},
			"pattern":     map[string]any{"type": "string", "maxLength": gateinputs.MaxPatternBytes, "description": "string fields: an RE2 expression the whole value must match."},
			"options":     map[string]any{"type": "array", "minItems": 1, "maxItems": gateinputs.MaxOptions, "uniqueItems": true, "items": map[string]any{"type": []string{"string", "number", "boolean"}}, "description": "enum fields: the allowed values."},
			"default":     map[string]any{"type": []string{"string", "number", "boolean"}, "description": "Used when the approver gives no value; must itself be valid."},
			"description": map[string]any{"type": "string", "maxLength": gateinputs.MaxDescriptionBytes},
		},
	}
}
