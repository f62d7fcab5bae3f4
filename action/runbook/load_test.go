package runbook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite runbooks/schema/runbook.schema.json from rules.yaml")

func TestLoadValidRunbookFillsEveryField(t *testing.T) {
	plan, err := Load(LoadOptions{Dir: "testdata", Name: "valid"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(mustRead(t, "testdata/valid.yaml") + "\x00" + mustRead(t, "testdata/valid.values.yaml")))
	if plan.Name != "valid-runbook.v1" || plan.Path != "testdata/valid.yaml" || plan.ValuesPath != "testdata/valid.values.yaml" ||
		!reflect.DeepEqual(plan.Subscriptions, []string{"sub-1", "sub-2"}) || plan.StateFilePath != ".rbook/prod.state.json" ||
		plan.MaxStepTimeoutSeconds != 120 || plan.ContentHash != hex.EncodeToString(sum[:]) || plan.SchemaHash8 != SchemaHash8(RulesYAML()) {
		t.Fatalf("plan header = %+v", plan)
	}
	str := func(s string) *string { return &s }
	want := []Step{
		{Index: 0, Name: "check-pre", Type: TypeCheck, Input: str("Resources | where location == 'westeurope' | project name"), OnFail: OnFailContinue, TimeoutSeconds: 30, Line: 8, Column: 5},
		{Index: 1, Name: "deploy-app", Type: TypeDeploy, Input: str("remediation/app/deploy.json"), OnFail: OnFailRollback, TimeoutSeconds: 120, Line: 13, Column: 5},
		{Index: 2, Name: "confirm-app", Type: TypeConfirm, OnFail: OnFailHalt, TimeoutSeconds: 120, Line: 27, Column: 5},
		{Index: 3, Name: "rollback-app", Type: TypeRollback, Input: str("remediation/app/rollback.json"), OnFail: OnFailHalt, TimeoutSeconds: 120, Line: 30, Column: 5},
	}
	if len(plan.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(plan.Steps), len(want))
	}
	for i, w := range want {
		got := plan.Steps[i]
		got.Params = nil
		if !reflect.DeepEqual(got, w) {
			t.Errorf("step %d:\n got %+v input %q\nwant %+v input %q", i, got, deref(got.Input), w, deref(w.Input))
		}
	}
	deployParams := `{"country":"NO","enabled":true,"label":"v2.0","mode":"0755","nested":{"a":[1,2.50,"x"]},"nothing":null,"replicas":3,"version":1.10,"zones":[1,2]}`
	for i, want := range map[int]string{0: "null", 1: deployParams, 2: "null", 3: strings.Replace(deployParams, `"replicas":3`, `"replicas":1`, 1)} {
		if got, _ := json.Marshal(plan.Steps[i].Params); string(got) != want {
			t.Errorf("step %d params:\n got %s\nwant %s", i, got, want)
		}
	}
	if v, ok := plan.Steps[1].Params["version"].(json.Number); !ok || v != "1.10" {
		t.Errorf("version = %#v, want json.Number(\"1.10\")", plan.Steps[1].Params["version"])
	}
}

func TestLoadDefaultDirAndMissingValuesAbort(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("runbooks", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, "runbooks/prod.yaml", mustReadAbs(t, "valid.yaml"))
	_, err := Load(LoadOptions{Name: "prod"})
	want := "ABORT: runbooks/prod.values.yaml missing — copy prod.values.yaml.example and fill in real values."
	var lerr *LoadError
	if !errors.As(err, &lerr) || lerr.Abort != want || err.Error() != want || len(lerr.Diagnostics) != 0 {
		t.Fatalf("err = %v, want %q", err, want)
	}
	writeFile(t, "runbooks/prod.values.yaml", mustReadAbs(t, "valid.values.yaml"))
	if plan, err := Load(LoadOptions{Name: "prod"}); err != nil || plan.Path != "runbooks/prod.yaml" {
		t.Fatalf("with values: %v, %v", plan, err)
	}
}

// mustReadAbs reads a testdata file from a test that changed directory.
var testdataDir, _ = filepath.Abs("testdata")

func mustReadAbs(t *testing.T, name string) string {
	return mustRead(t, filepath.Join(testdataDir, name))
}

func TestLoadMissingRunbookListsTheRunbooks(t *testing.T) {
	_, err := Load(LoadOptions{Dir: "testdata", Name: "nope"})
	want := "testdata/nope.yaml: runbook file not found; runbooks in testdata: bomb, inject, scalars, valid, values-bomb"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	_, err = Load(LoadOptions{Dir: "testdata", Name: "../valid"})
	if err == nil || err.Error() != `runbook name "../valid" must match [A-Za-z0-9._-]{1,64}` {
		t.Fatalf("path-like name: err = %v", err)
	}
}

func TestLoadRefusesOversizedFiles(t *testing.T) {
	path := copyRunbook(t, "valid", "pad: \""+strings.Repeat("x", MaxFileBytes)+"\"\n")
	_, err := LoadFile(path, "")
	if want := strings.TrimSuffix(path, ".yaml") + ".values.yaml: file is larger than 1048576 bytes (MaxFileBytes)"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	_, lerr := loadString(t, "a: "+strings.Repeat("x", MaxFileBytes), "")
	if lerr == nil || lerr.Diagnostics[0].String() != "rb.yaml: file is larger than 1048576 bytes (MaxFileBytes)" {
		t.Fatalf("in memory: %v", lerr)
	}
}

func TestRulesOverrideDrivesValidationAndHash(t *testing.T) {
	dir := t.TempDir()
	rules := strings.Replace(string(RulesYAML()), "values: [halt, rollback, continue]", "values: [halt, rollback, continue, retry]", 1)
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeFile(t, rulesPath, rules)
	path := copyRunbook(t, "scalars", mustRead(t, "testdata/scalars.values.yaml"))
	writeFile(t, path, strings.Replace(mustRead(t, "testdata/scalars.yaml"), "on_fail: halt", "on_fail: retry", 1))

	if _, err := LoadFile(path, ""); err == nil || !strings.Contains(err.Error(), `on_fail: must be one of halt, rollback, continue, got "retry"`) {
		t.Fatalf("embedded rules: err = %v", err)
	}
	plan, err := LoadFile(path, rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Steps[0].OnFail != "retry" || plan.SchemaHash8 != SchemaHash8([]byte(rules)) || plan.SchemaHash8 == SchemaHash8(RulesYAML()) {
		t.Fatalf("override: on_fail %q, schema_hash8 %s", plan.Steps[0].OnFail, plan.SchemaHash8)
	}

	for name, rulesPath := range map[string]string{"missing": filepath.Join(dir, "none.yaml"), "broken": filepath.Join(dir, "broken.yaml")} {
		writeFile(t, filepath.Join(dir, "broken.yaml"), "runbook:\n  runbook_name: {kind: text}\nstep:\n  name: {kind: string}\n")
		_, err := LoadFile(path, rulesPath)
		var lerr *LoadError
		if !errors.As(err, &lerr) || err.Error() != "ABORT: rules.yaml unreadable" || lerr.Diagnostics[0].File != rulesPath {
			t.Errorf("%s rules: err = %v (%+v)", name, err, lerr)
		}
	}
}

func TestEmbeddedRules(t *testing.T) {
	rs, err := parseRules(RulesYAML())
	if err != nil {
		t.Fatal(err)
	}
	if d := rs.Runbook["max_step_timeout_seconds"].Default; d == nil || *d != DefaultMaxStepTimeoutSeconds {
		t.Fatalf("rules.yaml default %v, want DefaultMaxStepTimeoutSeconds %d", d, DefaultMaxStepTimeoutSeconds)
	}
	sum := sha256.Sum256(embeddedRules)
	if got := SchemaHash8(RulesYAML()); got != hex.EncodeToString(sum[:])[:8] {
		t.Fatalf("SchemaHash8 = %s", got)
	}
	RulesYAML()[0] = '!'
	if embeddedRules[0] == '!' {
		t.Fatal("RulesYAML returned the embedded slice itself")
	}
}

func TestValidateReportsEveryErrorAndFallsBackToExample(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prod.yaml")
	writeFile(t, path, header+"  - {name: a, type: check, on_fail: stop}\n  - {name: a, type: deploy, kql_or_template: \"${tpl}\", on_fail: halt}\n")
	valuesPath := filepath.Join(dir, "prod.values.yaml")
	abort := "ABORT: " + valuesPath + " missing — copy prod.values.yaml.example and fill in real values."
	strs := func(ds []Diagnostic) string {
		var got []string
		for _, d := range ds {
			got = append(got, d.String())
		}
		return strings.Join(got, "\n")
	}
	// No values file and no example: the ABORT, and the runbook's own errors all the same
	// (the unresolved ${tpl} is not reported on its own).
	res := Validate(path, "")
	// Sorted by file name: prod.values.yaml before prod.yaml.
	want := strings.Join([]string{
		valuesPath + ": " + abort,
		path + `:5:37: runbook_steps[0].on_fail: must be one of halt, rollback, continue, got "stop"`,
		path + `:6:12: runbook_steps[1].name: duplicate of the name at line 5 (compared after Unicode NFC normalisation)`,
	}, "\n")
	if got := strs(res.Diagnostics); got != want || res.ExampleUsed || res.Plan != nil || res.NeedsMCP {
		t.Fatalf("no values: %+v\n%s\nwant:\n%s", res, got, want)
	}
	writeFile(t, filepath.Join(dir, "prod.values.yaml.example"), "tpl: /abs.json\n")
	res = Validate(path, "")
	want = strings.Join([]string{
		valuesPath + ": " + abort,
		path + `:5:37: runbook_steps[0].on_fail: must be one of halt, rollback, continue, got "stop"`,
		path + `:6:12: runbook_steps[1].name: duplicate of the name at line 5 (compared after Unicode NFC normalisation)`,
		path + `:6:46: runbook_steps[1].kql_or_template: must be a relative path under remediation/ with no '..', '.' or empty segments (the value comes from ` + valuesPath + `.example and is not shown)`,
	}, "\n")
	if got := strs(res.Diagnostics); got != want || !res.ExampleUsed || res.ValuesPath != valuesPath+".example" {
		t.Fatalf("with example: %+v\n%s\nwant:\n%s", res, got, want)
	}
	for _, path := range []string{"testdata/valid.yaml", "../../runbooks/demo.yaml"} {
		if res := Validate(path, ""); res.Diagnostics != nil || res.Plan == nil {
			t.Errorf("%s: %v", path, res.Diagnostics)
		}
	}
	// prod ships only its example: `rbook run prod` aborts, so validate is not ok, but the
	// runbook itself is fine with the example's values.
	res = Validate("../../runbooks/prod.yaml", "")
	if len(res.Diagnostics) != 1 || !strings.HasPrefix(res.Diagnostics[0].Message, "ABORT: ../../runbooks/prod.values.yaml missing") || !res.ExampleUsed {
		t.Errorf("prod: %+v", res)
	}
}

// TestMissingKeyDoesNotHideSchemaErrors: a missing values key, a values file
// that does not parse, and schema errors are all reported in one pass, sorted by file and
// line; the unresolved field itself gets only the missing-key diagnostic.
func TestMissingKeyDoesNotHideSchemaErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rb.yaml")
	valuesPath := filepath.Join(dir, "rb.values.yaml")
	rb := "runbook_name: rb\nsubscriptions: ${subs}\nstate_file_path: .rbook/rb.json\nrunbook_steps:\n" +
		"  - {name: a, type: check, kql_or_template: \"R | where x == '${owner}'\", on_fail: explode}\n" +
		"  - {name: b, type: wait, on_fail: halt}\n"
	writeFile(t, path, rb)
	writeFile(t, valuesPath, "region: west\n")
	res := Validate(path, "")
	want := []string{
		path + `:2:16: subscriptions: values key "subs" is not defined in ` + valuesPath,
		path + `:5:45: runbook_steps[0].kql_or_template: values key "owner" is not defined in ` + valuesPath,
		path + `:5:83: runbook_steps[0].on_fail: must be one of halt, rollback, continue, got "explode"`,
		path + `:6:21: runbook_steps[1].type: must be one of check, deploy, confirm, rollback, got "wait"`,
	}
	var got []string
	for _, d := range res.Diagnostics {
		got = append(got, d.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// rbook run's loader reports the same problems (in the order found).
	_, err := LoadFile(path, "")
	var lerr *LoadError
	if !errors.As(err, &lerr) || len(lerr.Diagnostics) != len(want) {
		t.Fatalf("LoadFile: %v", err)
	}
	// A values file that does not parse: its error, and the runbook's schema errors; the
	// keys it would have defined are not reported missing one by one.
	writeFile(t, valuesPath, "subs: [a\n")
	got = nil
	for _, d := range Validate(path, "").Diagnostics {
		got = append(got, d.String())
	}
	want = []string{
		valuesPath + `:2: invalid YAML: did not find expected ',' or ']'`,
		path + `:5:83: runbook_steps[0].on_fail: must be one of halt, rollback, continue, got "explode"`,
		path + `:6:21: runbook_steps[1].type: must be one of check, deploy, confirm, rollback, got "wait"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("broken values:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTabIndentationLineAndColumn: yaml.v3 reports a tab in the indentation at
// the line where the scalar before it started, without a column; the diagnostic names the
// tab's own line and column.
func TestTabIndentationLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ name, runbook, want string }{
		{"tab after a plain scalar", header + "  - name: c\n\ttype: check\n", "rb.yaml:6:1: invalid YAML: found a tab character that violates indentation (indent YAML with spaces, not tabs)"},
		{"tab after spaces", header + "  - name: c\n    type: check\n  \t  on_fail: halt\n", "rb.yaml:7:3: invalid YAML: found a tab character that violates indentation"},
		{"tab on the first line", "\trunbook_name: rb\n", "rb.yaml:1:1: invalid YAML: found character that cannot start any token (indent YAML with spaces, not tabs)"},
		{"tab starting a mapping", "runbook_name: rb\nsubscriptions:\n\t- a\n", "rb.yaml:3:1: invalid YAML: found character that cannot start any token"},
		{"tab in a block scalar", header + "  - name: c\n    type: check\n    kql_or_template: |\n\tResources\n", "rb.yaml:8:1: invalid YAML: found a tab character where an indentation space is expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, lerr := loadString(t, tc.runbook, "")
			if lerr == nil || len(lerr.Diagnostics) != 1 || !strings.HasPrefix(lerr.Diagnostics[0].String(), tc.want) {
				t.Fatalf("got %v\nwant %s", lerr, tc.want)
			}
		})
	}
	// A character other than a tab that cannot start a token keeps yaml.v3's line, no column.
	_, lerr := loadString(t, header+"  - name: c\n    type: @check\n\n\tx\n", "")
	if lerr == nil || lerr.Diagnostics[0].String() != "rb.yaml:6: invalid YAML: found character that cannot start any token" {
		t.Fatalf("got %v", lerr)
	}
}

func TestDiagnosticAndLoadErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{"a.yaml", 3, 7, "runbook_steps[2].on_fail", "is required"}, "a.yaml:3:7: runbook_steps[2].on_fail: is required"},
		{Diagnostic{"a.yaml", 3, 0, "", "invalid YAML: x"}, "a.yaml:3: invalid YAML: x"},
		{Diagnostic{File: "a.yaml", Message: "too big"}, "a.yaml: too big"},
		{Diagnostic{Message: "bad name"}, "bad name"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	two := &LoadError{Diagnostics: []Diagnostic{{File: "a", Message: "x"}, {File: "b", Message: "y"}}}
	if got := two.Error(); got != "a: x (and 1 more errors)" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&LoadError{Abort: "ABORT: z", Diagnostics: two.Diagnostics}).Error(); got != "ABORT: z" {
		t.Errorf("Error() with Abort = %q", got)
	}
}

func TestJSONSchemaInSync(t *testing.T) {
	got, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "runbooks", "schema", "runbook.schema.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(committed, got) {
		t.Fatalf("%s differs from JSONSchema() (%v); run: go test ./action/runbook -run TestJSONSchemaInSync -update", path, err)
	}
	var schema struct {
		Schema     string         `json:"$schema"`
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
		Defs       struct {
			Step struct {
				Required []string `json:"required"`
				AllOf    []any    `json:"allOf"`
			} `json:"step"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(got, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || len(schema.Properties) != 6 ||
		!reflect.DeepEqual(schema.Required, []string{"runbook_name", "runbook_steps", "state_file_path", "subscriptions"}) ||
		!reflect.DeepEqual(schema.Defs.Step.Required, []string{"name", "on_fail", "type"}) || len(schema.Defs.Step.AllOf) != 4 {
		t.Fatalf("schema = %+v", schema)
	}
}

// TestMissingValuesWithoutExampleSaysWhatAMinimalFileHolds: with no values file and no
// .values.yaml.example to copy, the error is still the specification's ABORT line alone, and Next
// lists the ${key}s the runbook uses as a minimal values file; with an example file, Next is
// empty (the ABORT line's advice holds).
func TestMissingValuesWithoutExampleSaysWhatAMinimalFileHolds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.yaml")
	writeFile(t, path, header+"  - {name: a, type: deploy, kql_or_template: \"${tpl}-${env}-${tpl}\", on_fail: halt}\n")
	_, err := LoadFile(path, "")
	var lerr *LoadError
	want := "ABORT: " + filepath.Join(dir, "new.values.yaml") + " missing — copy new.values.yaml.example and fill in real values."
	if !errors.As(err, &lerr) || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if !strings.Contains(lerr.Next, "create "+filepath.Join(dir, "new.values.yaml")) || !strings.HasSuffix(lerr.Next, ":\n  tpl: <value>\n  env: <value>") {
		t.Errorf("Next = %q, want the keys tpl and env, once each, in order", lerr.Next)
	}
	writeFile(t, filepath.Join(dir, "new.values.yaml.example"), "tpl: x\nenv: y\n")
	if _, err := LoadFile(path, ""); !errors.As(err, &lerr) || lerr.Next != "" {
		t.Errorf("with an example file: err = %v, Next = %q, want none", err, lerr.Next)
	}
}
