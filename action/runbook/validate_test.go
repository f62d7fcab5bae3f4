package runbook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// loadString loads an in-memory runbook named rb.yaml with values rb.values.yaml.
func loadString(t *testing.T, runbook, values string) (*Plan, *LoadError) {
	t.Helper()
	return load("rb.yaml", []byte(runbook), "rb.values.yaml", []byte(values), "rules.yaml", embeddedRules)
}

// header is a valid runbook up to its steps; steps start on line 5.
const header = "runbook_name: rb\nsubscriptions: [sub-1]\nstate_file_path: .rbook/rb.json\nrunbook_steps:\n"

// TestValidationRules covers each rule with the location and field of its diagnostic.
// want is "file:line:col: field: message" of the first diagnostic, or a prefix of it.
func TestValidationRules(t *testing.T) {
	check := "  - name: c\n    type: check\n    kql_or_template: Resources\n    on_fail: halt\n"
	for _, tc := range []struct {
		name, runbook, values, want string
	}{
		// top level
		{"empty file", "", "", "rb.yaml:1:1: a runbook must be a mapping"},
		{"not a mapping", "- a\n", "", "rb.yaml:1:1: a runbook must be a mapping"},
		{"two documents", header + check + "---\na: 1\n", "", "rb.yaml:9: a file must hold exactly one YAML document"},
		{"syntax error", "runbook_name: [\n", "", "rb.yaml:2: invalid YAML: did not find expected node content"},
		{"scanner error", "runbook_name: rb\nsubscriptions: a: b\n", "", "rb.yaml:2: invalid YAML: mapping values are not allowed in this context"},
		{"missing runbook_name", "subscriptions: [s]\nstate_file_path: s\nrunbook_steps:\n" + check, "", "rb.yaml:1:1: runbook_name: is required"},
		{"bad runbook_name", strings.Replace(header, "rb\n", "my runbook\n", 1) + check, "", `rb.yaml:1:15: runbook_name: must match [A-Za-z0-9._-]{1,64}, got "my runbook"`},
		{"runbook_name too long", strings.Replace(header, "rb\n", strings.Repeat("r", 65)+"\n", 1) + check, "", "rb.yaml:1:15: runbook_name: must match"},
		{"unknown top-level field", header + check + "runbok_name: x\n", "", "rb.yaml:9:1: runbok_name: unknown field (allowed: description, max_step_timeout_seconds, runbook_name, runbook_steps, state_file_path, subscriptions)"},
		{"duplicate top-level key", header + check + "runbook_name: again\n", "", `rb.yaml:9:1: runbook_name: duplicate key "runbook_name" (first at line 1)`},
		{"subscriptions empty", strings.Replace(header, "[sub-1]", "[]", 1) + check, "", "rb.yaml:2:16: subscriptions: must have at least 1 item(s)"},
		{"subscription empty string", strings.Replace(header, "[sub-1]", `[sub-1, ""]`, 1) + check, "", "rb.yaml:2:24: subscriptions[1]: must not be empty"},
		{"subscriptions scalar", strings.Replace(header, "[sub-1]", "sub-1", 1) + check, "", "rb.yaml:2:16: subscriptions: must be a list, got a scalar"},
		{"state_file_path null", strings.Replace(header, ".rbook/rb.json", "~", 1) + check, "", "rb.yaml:1:1: state_file_path: is required"},
		{"state_file_path absolute", strings.Replace(header, ".rbook/rb.json", "/tmp/rb.json", 1) + check, "", "rb.yaml:3:18: state_file_path: must be a relative path inside the working directory with no '..', '.' or empty segments, got \"/tmp/rb.json\""},
		{"state_file_path escapes", strings.Replace(header, ".rbook/rb.json", "../rb.json", 1) + check, "", "rb.yaml:3:18: state_file_path: must be a relative path inside the working directory with no '..', '.' or empty segments, got \"../rb.json\""},
		{"state_file_path empty", strings.Replace(header, ".rbook/rb.json", `""`, 1) + check, "", "rb.yaml:3:18: state_file_path: must not be empty"},
		{"max_step_timeout 0", header + check + "max_step_timeout_seconds: 0\n", "", "rb.yaml:9:27: max_step_timeout_seconds: must be at least 1, got 0"},
		{"max_step_timeout above a day", header + check + "max_step_timeout_seconds: 86401\n", "", "rb.yaml:9:27: max_step_timeout_seconds: must be at most 86400, got 86401"},
		{"max_step_timeout float", header + check + "max_step_timeout_seconds: 1.5\n", "", `rb.yaml:9:27: max_step_timeout_seconds: must be a decimal integer, got "1.5"`},
		{"max_step_timeout quoted", header + check + "max_step_timeout_seconds: \"30\"\n", "", `rb.yaml:9:27: max_step_timeout_seconds: must be a decimal integer, got "30"`},
		{"max_step_timeout octal-looking", header + check + "max_step_timeout_seconds: 0755\n", "", `rb.yaml:9:27: max_step_timeout_seconds: must be a decimal integer, got "0755"`},
		{"max_step_timeout huge", header + check + "max_step_timeout_seconds: 99999999999999999999\n", "", `rb.yaml:9:27: max_step_timeout_seconds: must be a decimal integer, got "99999999999999999999"`},
		{"no steps", header + "  []\n", "", "rb.yaml:5:3: runbook_steps: must have at least 1 item(s)"},
		{"step not a mapping", header + "  - just-a-name\n", "", "rb.yaml:5:5: runbook_steps[0]: must be a mapping, got a scalar"},
		// steps
		{"unknown step field", header + check + "    on_fali: halt\n", "", "rb.yaml:9:5: runbook_steps[0].on_fali: unknown field (allowed: inputs, kql_or_template, max_timeout_seconds, name, on_fail, params, type)"},
		{"duplicate step key", header + check + "    on_fail: continue\n", "", `rb.yaml:9:5: runbook_steps[0].on_fail: duplicate key "on_fail" (first at line 8)`},
		{"name missing", header + "  - type: check\n    on_fail: halt\n", "", "rb.yaml:5:5: runbook_steps[0].name: is required"},
		{"name empty", header + strings.Replace(check, "name: c", `name: ""`, 1), "", "rb.yaml:5:11: runbook_steps[0].name: must not be empty"},
		{"name with tab", header + strings.Replace(check, "name: c", `name: "a\tb"`, 1), "", "rb.yaml:5:11: runbook_steps[0].name: must not contain control characters"},
		{"name with bidi override", header + strings.Replace(check, "name: c", "name: a\u202eb", 1), "", "rb.yaml:5:11: runbook_steps[0].name: must not contain control characters"},
		{"name of 129 runes", header + strings.Replace(check, "name: c", "name: "+strings.Repeat("é", 129), 1), "", "rb.yaml:5:11: runbook_steps[0].name: must be at most 128 characters, got 129"},
		{"duplicate name", header + check + check, "", "rb.yaml:9:11: runbook_steps[1].name: duplicate of the name at line 5"},
		{"duplicate name after NFC", header + strings.Replace(check, "name: c", "name: caf\u00e9", 1) + strings.Replace(check, "name: c", "name: cafe\u0301", 1), "", "rb.yaml:9:11: runbook_steps[1].name: duplicate of the name at line 5 (compared after Unicode NFC normalisation)"},
		{"type missing", header + "  - name: c\n    on_fail: halt\n", "", "rb.yaml:5:5: runbook_steps[0].type: is required"},
		{"type unknown", header + strings.Replace(check, "type: check", "type: wait", 1), "", `rb.yaml:6:11: runbook_steps[0].type: must be one of check, deploy, confirm, rollback, got "wait"`},
		{"check query empty", header + strings.Replace(check, "Resources", `""`, 1), "", "rb.yaml:7:22: runbook_steps[0].kql_or_template: must not be empty"},
		{"deploy absolute path", header + "  - {name: d, type: deploy, kql_or_template: /etc/passwd, on_fail: halt}\n", "", `rb.yaml:5:46: runbook_steps[0].kql_or_template: must be a relative path under remediation/ with no '..', '.' or empty segments, got "/etc/passwd"`},
		{"deploy dot-dot", header + "  - {name: d, type: deploy, kql_or_template: remediation/../x.json, on_fail: halt}\n", "", "rb.yaml:5:46: runbook_steps[0].kql_or_template: must be a relative path under remediation/"},
		{"deploy outside remediation", header + "  - {name: d, type: deploy, kql_or_template: templates/x.json, on_fail: halt}\n", "", "rb.yaml:5:46: runbook_steps[0].kql_or_template: must be a relative path under remediation/"},
		{"deploy bare folder", header + "  - {name: d, type: deploy, kql_or_template: remediation/, on_fail: halt}\n", "", "rb.yaml:5:46: runbook_steps[0].kql_or_template: must be a relative path under remediation/"},
		{"rollback double slash", header + "  - {name: d, type: rollback, kql_or_template: remediation//x.json, on_fail: halt}\n", "", "rb.yaml:5:48: runbook_steps[0].kql_or_template: must be a relative path under remediation/"},
		{"rollback backslash", header + "  - {name: d, type: rollback, kql_or_template: 'remediation/a\\x.json', on_fail: halt}\n", "", "rb.yaml:5:48: runbook_steps[0].kql_or_template: must be a relative path under remediation/"},
		{"deploy query not a string", header + "  - {name: d, type: deploy, kql_or_template: [a], on_fail: halt}\n", "", "rb.yaml:5:46: runbook_steps[0].kql_or_template: must be a path, got a list"},
		{"confirm with input", header + "  - {name: g, type: confirm, kql_or_template: Resources, on_fail: halt}\n", "", "rb.yaml:5:47: runbook_steps[0].kql_or_template: must be null or omitted"},
		{"params a list", header + check + "    params: [a]\n", "", "rb.yaml:9:13: runbook_steps[0].params: must be a mapping, got a list"},
		{"duplicate params key", header + check + "    params: {a: 1, a: 2}\n", "", `rb.yaml:9:20: runbook_steps[0].params.a: duplicate key "a" (first at line 9)`},
		{"on_fail missing", header + "  - {name: c, type: check}\n", "", "rb.yaml:5:5: runbook_steps[0].on_fail: is required"},
		{"on_fail unknown", header + strings.Replace(check, "on_fail: halt", "on_fail: retry", 1), "", `rb.yaml:8:14: runbook_steps[0].on_fail: must be one of halt, rollback, continue, got "retry"`},
		{"timeout negative", header + check + "    max_timeout_seconds: -1\n", "", "rb.yaml:9:26: runbook_steps[0].max_timeout_seconds: must be at least 1, got -1"},
		{"timeout float", header + check + "    max_timeout_seconds: 2.5\n", "", `rb.yaml:9:26: runbook_steps[0].max_timeout_seconds: must be a decimal integer, got "2.5"`},
		{"timeout above default cap", header + check + "    max_timeout_seconds: 301\n", "", "rb.yaml:9:26: runbook_steps[0].max_timeout_seconds: 301 exceeds max_step_timeout_seconds (300); it is rejected, not clamped"},
		{"bad merge value", header + "  - {<<: 3, name: c, type: check, on_fail: halt}\n", "", "rb.yaml:5:6: runbook_steps[0].<<: a << merge value must be a mapping or a list of mappings"},
		{"self-referencing alias", header + check + "    params: &p {a: *p}\n", "", "rb.yaml:9:20: runbook_steps[0].params.a: alias *p refers to a node that contains it"},
		{"unquoted token in a flow mapping", header + check + "    params: {a: ${x}}\n", "x: 1\n", "rb.yaml:9: invalid YAML: did not find expected ',' or '}' (a ${key} token inside [ ] or { } must be quoted)"},
		{"non-scalar key", header + check + "    params: {[a]: 1}\n", "", "rb.yaml:9:14: runbook_steps[0].params: mapping keys must be scalars"},
		// values
		{"values not a mapping", header + check, "- a\n", "rb.values.yaml:1:1: a values file must be a mapping of keys to values"},
		{"values key not an identifier", header + check, "my-key: 1\n", "rb.values.yaml:1:1: my-key: values key must match [A-Za-z_][A-Za-z0-9_]*"},
		{"values duplicate key", header + check, "a: 1\na: 2\n", `rb.values.yaml:2:1: a: duplicate key "a" (first at line 1)`},
		{"values syntax error", header + check, "a: [\n", "rb.values.yaml:2: invalid YAML: did not find expected node content"},
		{"list inserted into a string", header + strings.Replace(check, "Resources", `"R ${subs}"`, 1), "subs: [a]\n", `rb.yaml:7:22: runbook_steps[0].kql_or_template: values key "subs" holds a list, which cannot be inserted into a larger string`},
		{"bad value reported at its use", strings.Replace(header, "[sub-1]", "${n}", 1) + check, "n: 3\n", "rb.yaml:2:16: subscriptions: must be a list, got a scalar"},
		{"bad list item reported in values", strings.Replace(header, "[sub-1]", "${subs}", 1) + check, "subs: [a, '']\n", "rb.values.yaml:1:11: subscriptions[1]: must not be empty"},
		{"values exceed nodes once substituted", header + check + "    params:\n      a: ${big}\n      b: ${big}\n",
			"big: [" + strings.Repeat("1,", MaxNodes/2) + "1]\n", "rb.yaml:11:10: runbook_steps[0].params.b: value ${big} expands the document beyond 100000 nodes (MaxNodes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, lerr := loadString(t, tc.runbook, tc.values)
			if lerr == nil {
				t.Fatalf("loaded %+v; want an error %q", plan, tc.want)
			}
			if got := lerr.Diagnostics[0].String(); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("first diagnostic:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestStepAbortLine(t *testing.T) {
	rb := header +
		"  - {name: fine, type: check, kql_or_template: R, on_fail: halt}\n" +
		"  - {name: deploy-app, type: deploy, kql_or_template: /etc/x, on_fail: stop}\n" +
		"  - {type: wat, on_fail: halt}\n"
	_, lerr := loadString(t, rb, "")
	want := `ABORT: step 'deploy-app' failed schema validation for type 'deploy': kql_or_template: must be a relative path under remediation/ with no '..', '.' or empty segments, got "/etc/x".`
	if lerr == nil || lerr.Abort != want || lerr.Error() != want {
		t.Fatalf("got %v, want %s", lerr, want)
	}
	var got []string
	for _, d := range lerr.Diagnostics {
		got = append(got, d.String())
	}
	wantAll := []string{
		`rb.yaml:6:55: runbook_steps[1].kql_or_template: must be a relative path under remediation/ with no '..', '.' or empty segments, got "/etc/x"`,
		`rb.yaml:6:72: runbook_steps[1].on_fail: must be one of halt, rollback, continue, got "stop"`,
		`rb.yaml:7:12: runbook_steps[2].type: must be one of check, deploy, confirm, rollback, got "wat"`,
		`rb.yaml:7:5: runbook_steps[2].name: is required`,
	}
	if strings.Join(got, "\n") != strings.Join(wantAll, "\n") {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantAll, "\n"))
	}

	_, lerr = loadString(t, header+"  - {type: wat, on_fail: halt}\n", "")
	if want := "ABORT: step 'runbook_steps[0]' failed schema validation for type 'wat': type: must be one of check, deploy, confirm, rollback, got \"wat\"."; lerr == nil || lerr.Abort != want {
		t.Fatalf("unnamed step: got %v, want %s", lerr, want)
	}
}

func TestTopLevelErrorsHaveNoAbort(t *testing.T) {
	_, lerr := loadString(t, "runbook_name: rb\n", "")
	if lerr == nil || lerr.Abort != "" || len(lerr.Diagnostics) != 3 {
		t.Fatalf("got %#v; want three 'is required' diagnostics and no Abort", lerr)
	}
	if want := "rb.yaml:1:1: runbook_steps: is required (and 2 more errors)"; lerr.Error() != want {
		t.Fatalf("Error() = %q, want %q", lerr.Error(), want)
	}
}

func TestSubstitution(t *testing.T) {
	// testdata/substitution/params.yaml: one deploy step whose template and params take
	// every kind of value of params.values.yaml, whole, quoted, inside a string, as a key, and
	// next to text that only looks like a ${key} token.
	plan, lerr := loadString(t, mustRead(t, "testdata/substitution/params.yaml"), mustRead(t, "testdata/substitution/params.values.yaml"))
	if lerr != nil {
		t.Fatal(lerr)
	}
	got, _ := json.Marshal(plan.Steps[0].Params)
	want := `{"${n}":"key","flt":1.10,"inside":"x3yNOz","kept":"$1 ${{ github.sha }} $$ $ {n} ${1n} ${n","list":[1,"x"],"map":{"k":1.10},"nul":null,"oct":"0755","plain":3,"quoted":"3","yes":true}`
	if string(got) != want {
		t.Fatalf("params\n got %s\nwant %s", got, want)
	}
	if in := deref(plan.Steps[0].Input); in != "remediation/app.json" {
		t.Fatalf("input = %q", in)
	}
}

func TestContentHashCoversRunbookAndValues(t *testing.T) {
	rb := header + "  - {name: c, type: check, kql_or_template: \"R ${x}\", on_fail: halt}\n"
	plan, lerr := loadString(t, rb, "x: 1\n")
	if lerr != nil {
		t.Fatal(lerr)
	}
	sum := sha256.Sum256([]byte(rb + "\x00" + "x: 1\n"))
	if want := hex.EncodeToString(sum[:]); plan.ContentHash != want {
		t.Fatalf("ContentHash = %s, want %s", plan.ContentHash, want)
	}
	other, _ := loadString(t, rb, "x: 2\n")
	if other.ContentHash == plan.ContentHash {
		t.Fatal("editing the values file did not change ContentHash")
	}
}

// Values files may hold secrets: no diagnostic or ABORT line may echo a value's text.
func TestErrorsNeverShowValues(t *testing.T) {
	const secret = "hunter2 s3cr3t"
	// testdata/substitution/secret-everywhere.yaml inserts ${secret} into runbook_name,
	// max_step_timeout_seconds and every field of its one step.
	rb := mustRead(t, "testdata/substitution/secret-everywhere.yaml")
	_, lerr := loadString(t, rb, "secret: "+secret+"\n")
	if lerr == nil || len(lerr.Diagnostics) != 4 {
		t.Fatalf("want 4 diagnostics (runbook_name, max_step_timeout_seconds, type, on_fail), got %#v", lerr)
	}
	if want := "ABORT: step 'runbook_steps[0]' failed schema validation for type '': type: must be one of check, deploy, confirm, rollback (the value comes from rb.values.yaml and is not shown)."; lerr.Abort != want {
		t.Errorf("Abort = %q\nwant    %q", lerr.Abort, want)
	}
	for _, d := range lerr.Diagnostics {
		if strings.Contains(d.String(), "hunter2") {
			t.Errorf("diagnostic shows the value: %s", d)
		}
	}
}
