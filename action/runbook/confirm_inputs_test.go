package runbook

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// A runbook confirm step's inputs: is read into Step.Form with the playbook approval node's
// rules; values-file tokens are substituted first, as everywhere in a runbook.
func TestConfirmStepFormIsReadIntoThePlan(t *testing.T) {
	plan, err := Load(LoadOptions{Dir: "testdata/forms", Name: "confirm-form"})
	if err != nil {
		t.Fatal(err)
	}
	want := []gateinputs.Field{
		{Name: "target", Type: "enum", Options: []string{"blue", "green"}, Required: true, Description: "the slot that takes traffic"},
		{Name: "replicas", Type: "number", Default: "3", HasDefault: true},
		{Name: "ticket", Type: "string", Pattern: "[A-Z]+-[0-9]+"},
	}
	if got := plan.Steps[0].Form; !reflect.DeepEqual(got, want) {
		t.Fatalf("Form = %+v\nwant %+v", got, want)
	}
	if plan.Steps[0].Node != nil {
		t.Fatalf("a runbook step has no playbook node, got %+v", plan.Steps[0].Node)
	}
}

// confirmWithForm is a runbook whose one confirm step declares form (lines from 9 on).
func confirmWithForm(form string) string {
	return "runbook_name: f\nsubscriptions: [s]\nstate_file_path: s.json\nrunbook_steps:\n" +
		"  - name: ok\n    type: confirm\n    on_fail: halt\n    inputs:\n" + form
}

// A bad confirm-step form is refused at load time with the file, the line of the offending
// attribute and its field path; a form on a step that is no confirm step is refused too.
func TestConfirmStepFormErrorsNameFileLineAndField(t *testing.T) {
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"bad name", confirmWithForm("      - name: Target\n"), "runbook_steps[0].inputs[0].name", "not a field name", 9},
		{"missing name", confirmWithForm("      - type: string\n"), "runbook_steps[0].inputs[0].name", "is required", 9},
		{"unknown key", confirmWithForm("      - name: a\n        patern: x\n"), "runbook_steps[0].inputs[0].patern", `did you mean "pattern"?`, 10},
		{"default not an option", confirmWithForm("      - name: a\n        type: enum\n        options: [x]\n        default: y\n"), "runbook_steps[0].inputs[0].default", "must be one of x", 12},
		{"duplicate name", confirmWithForm("      - name: a\n      - name: a\n"), "runbook_steps[0].inputs[1].name", `duplicate input "a" (first at line 9)`, 10},
		{"not a list", strings.TrimSuffix(confirmWithForm(""), "\n") + " {a: 1}\n", "runbook_steps[0].inputs", "must be a list", 8},
		{"form on a deploy step", "runbook_name: f\nsubscriptions: [s]\nstate_file_path: s.json\nrunbook_steps:\n" +
			"  - name: d\n    type: deploy\n    kql_or_template: remediation/a.json\n    on_fail: halt\n    inputs: [{name: a}]\n",
			"runbook_steps[0].inputs", "must be null or omitted", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.yaml")
			writeFile(t, path, tc.src)
			writeFile(t, filepath.Join(dir, "f.values.yaml"), "{}\n")
			lerr := loadErr(t, path)
			for _, d := range lerr.Diagnostics {
				if d.Field == tc.field && strings.Contains(d.Message, tc.msg) && d.Line == tc.line && d.File == path {
					return
				}
			}
			t.Fatalf("want %s:%d: %s: …%s…; got %v", path, tc.line, tc.field, tc.msg, lerr.Diagnostics)
		})
	}
}
