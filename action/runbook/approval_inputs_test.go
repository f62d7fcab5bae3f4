package runbook

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// review is an approval node "review" whose inputs: list is form (lines from 8 on).
func review(form string) string {
	return "  - id: review\n    type: approval\n    prompt: ok?\n    inputs:\n" + form
}

// An approval node's form is read into Node.Form: types, required, pattern, options and
// defaults (taken by their source text), description; type defaults to string.
func TestApprovalNodeFormIsReadIntoThePlan(t *testing.T) {
	plan := parsePB(t, pbOf(review(`      - name: target
        type: enum
        options: [blue, green]
        required: true
        description: which slot
      - name: replicas
        type: number
        default: 3
      - name: dry_run
        type: boolean
        default: false
      - name: ticket
        pattern: "[A-Z]+-[0-9]+"
`), det("deploy", `args: ["{{ review.inputs.target }}", "{{ review.inputs.replicas }}"]`, "depends: [review]")))
	want := []gateinputs.Field{
		{Name: "target", Type: "enum", Options: []string{"blue", "green"}, Required: true, Description: "which slot"},
		{Name: "replicas", Type: "number", Default: "3", HasDefault: true},
		{Name: "dry_run", Type: "boolean", Default: "false", HasDefault: true},
		{Name: "ticket", Type: "string", Pattern: "[A-Z]+-[0-9]+"},
	}
	if got := plan.Steps[0].Node.Form; !reflect.DeepEqual(got, want) {
		t.Fatalf("Form = %+v\nwant %+v", got, want)
	}
}

// A bad form is refused at load time at the line of the offending attribute, with its
// field path, as every other playbook check is.
func TestApprovalNodeFormErrorsNameFileLineAndField(t *testing.T) {
	many := ""
	for i := range gateinputs.MaxFields + 1 {
		many += "      - name: f" + strings.Repeat("x", i) + "\n"
	}
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"bad name", pbOf(review("      - name: Target\n")), "nodes[0].inputs[0].name", "not a field name", 8},
		{"missing name", pbOf(review("      - type: string\n")), "nodes[0].inputs[0].name", "is required", 8},
		{"unknown key", pbOf(review("      - name: a\n        patern: x\n")), "nodes[0].inputs[0].patern", `did you mean "pattern"?`, 9},
		{"bad type", pbOf(review("      - name: a\n        type: text\n")), "nodes[0].inputs[0].type", "one of string, number, boolean, enum", 9},
		{"bad pattern", pbOf(review("      - name: a\n        pattern: \"(a\"\n")), "nodes[0].inputs[0].pattern", "not an RE2 expression", 9},
		{"pattern on enum", pbOf(review("      - name: a\n        type: enum\n        options: [x]\n        pattern: x\n")), "nodes[0].inputs[0].pattern", "string fields only", 11},
		{"enum without options", pbOf(review("      - name: a\n        type: enum\n")), "nodes[0].inputs[0].options", "required for enum", 8},
		{"duplicate option", pbOf(review("      - name: a\n        type: enum\n        options: [x, y, x]\n")), "nodes[0].inputs[0].options[2]", "listed twice", 10},
		{"default not an option", pbOf(review("      - name: a\n        type: enum\n        options: [x]\n        default: y\n")), "nodes[0].inputs[0].default", "must be one of x", 11},
		{"default not a number", pbOf(review("      - name: a\n        type: number\n        default: lots\n")), "nodes[0].inputs[0].default", "must be a number", 10},
		{"required not a bool", pbOf(review("      - name: a\n        required: yes\n")), "nodes[0].inputs[0].required", "must be true or false", 9},
		{"duplicate name", pbOf(review("      - name: a\n      - name: a\n")), "nodes[0].inputs[1].name", `duplicate input "a" (first at line 8)`, 9},
		{"not a list", pbOf("  - id: review\n    type: approval\n    prompt: ok?\n    inputs: {a: 1}\n"), "nodes[0].inputs", "must be a list", 7},
		{"too many fields", pbOf(review(many)), "nodes[0].inputs", "at most 20", 8},
		{"form on a deterministic node", pbOf(det("a", "inputs: []")), "nodes[0].inputs", "is for agentic and approval nodes only; this node is deterministic", 8},
		{"template names an undeclared input", pbOf(review("      - name: target\n"), det("d", `args: ["{{ review.inputs.colour }}"]`, "depends: [review]")),
			"nodes[1].args[0]", `approval node "review" declares only the inputs target`, 12},
	} {
		t.Run(tc.name, func(t *testing.T) { wantIssue(t, tc.src, tc.field, tc.msg, tc.line) })
	}
}
