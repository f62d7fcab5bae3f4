package gateinputs

import (
	"maps"
	"strings"
	"testing"
)

var form = []Field{
	{Name: "target", Type: TypeString, Required: true, Pattern: `[a-z]+`, Description: "deployment colour"},
	{Name: "replicas", Type: TypeNumber, HasDefault: true, Default: "3"},
	{Name: "dry_run", Type: TypeBoolean},
	{Name: "region", Type: TypeEnum, Options: []string{"eu", "us"}, HasDefault: true, Default: "eu"},
}

func TestValidateRefusesBadValuesNamingTheField(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]string
		field  string
		msg    string
	}{
		{"missing required", map[string]string{}, "target", "is required"},
		{"required given empty", map[string]string{"target": ""}, "target", "is required"},
		{"wrong number", map[string]string{"target": "blue", "replicas": "three"}, "replicas", "must be a number"},
		{"infinite number", map[string]string{"target": "blue", "replicas": "1e999"}, "replicas", "must be a number"},
		{"wrong boolean", map[string]string{"target": "blue", "dry_run": "maybe"}, "dry_run", "must be true or false"},
		{"pattern mismatch", map[string]string{"target": "Blue1"}, "target", "does not match the pattern"},
		{"pattern is anchored", map[string]string{"target": "blue!"}, "target", "does not match the pattern"},
		{"not in options", map[string]string{"target": "blue", "region": "ap"}, "region", "must be one of eu, us"},
		{"unknown field", map[string]string{"target": "blue", "colour": "x"}, "colour", "is not an input of this gate"},
		{"oversize", map[string]string{"target": strings.Repeat("a", MaxValueBytes+1)}, "target", "at most 4096"},
		{"control character", map[string]string{"target": "blue\x1b[2J"}, "target", "control character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Validate(form, c.values)
			if err == nil {
				t.Fatalf("Validate = %v, want a refusal of %s", got, c.field)
			}
			if err.Field != c.field || !strings.Contains(err.Msg, c.msg) {
				t.Fatalf("error %q (field %q), want field %q and %q", err.Error(), err.Field, c.field, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "input "+c.field+": ") {
				t.Fatalf("error %q does not start with the field", err.Error())
			}
		})
	}
}

func TestValidateAppliesDefaultsAndCanonicalForms(t *testing.T) {
	got, err := Validate(form, map[string]string{"target": "blue", "dry_run": "TRUE"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"target": "blue", "replicas": "3", "dry_run": "true", "region": "eu"}
	if !maps.Equal(got, want) {
		t.Fatalf("Validate = %v, want %v", got, want)
	}
	got, err = Validate(form, map[string]string{"target": "green", "replicas": "5", "region": "us"})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"target": "green", "replicas": "5", "dry_run": "", "region": "us"}
	if !maps.Equal(got, want) {
		t.Fatalf("Validate = %v, want %v", got, want)
	}
}

func TestValidateWithoutDeclarationRefusesAnyValue(t *testing.T) {
	if got, err := Validate(nil, nil); err != nil || len(got) != 0 {
		t.Fatalf("Validate(nil, nil) = %v, %v; want no values, no error", got, err)
	}
	_, err := Validate(nil, map[string]string{"x": "1"})
	if err == nil || err.Field != "x" || !strings.Contains(err.Msg, "declares no inputs") {
		t.Fatalf("err = %v, want x refused: the gate declares no inputs", err)
	}
}

func TestCheckRefusesBadDeclarationsNamingTheAttribute(t *testing.T) {
	many := make([]Field, MaxFields+1)
	for i := range many {
		many[i] = Field{Name: "f" + strings.Repeat("x", i), Type: TypeString}
	}
	for _, c := range []struct {
		name   string
		fields []Field
		field  string
		msg    string
	}{
		{"bad name", []Field{{Name: "Target", Type: TypeString}}, "inputs[0].name", "not a field name"},
		{"long name", []Field{{Name: "a" + strings.Repeat("b", 64), Type: TypeString}}, "inputs[0].name", "not a field name"},
		{"bad type", []Field{{Name: "a", Type: "text"}}, "inputs[0].type", "one of string, number, boolean, enum"},
		{"pattern on number", []Field{{Name: "a", Type: TypeNumber, Pattern: "1"}}, "inputs[0].pattern", "string fields only"},
		{"bad pattern", []Field{{Name: "a", Type: TypeString, Pattern: "(a"}}, "inputs[0].pattern", "not an RE2 expression"},
		{"enum without options", []Field{{Name: "a", Type: TypeEnum}}, "inputs[0].options", "required for enum"},
		{"options on string", []Field{{Name: "a", Type: TypeString, Options: []string{"x"}}}, "inputs[0].options", "enum fields only"},
		{"duplicate option", []Field{{Name: "a", Type: TypeEnum, Options: []string{"x", "x"}}}, "inputs[0].options[1]", "listed twice"},
		{"default not an option", []Field{{Name: "a", Type: TypeEnum, Options: []string{"x"}, Default: "y", HasDefault: true}}, "inputs[0].default", "must be one of x"},
		{"default not a number", []Field{{Name: "a", Type: TypeNumber, Default: "n", HasDefault: true}}, "inputs[0].default", "must be a number"},
		{"duplicate name", []Field{{Name: "a", Type: TypeString}, {Name: "a", Type: TypeNumber}}, "inputs[1].name", "declared twice"},
		{"too many fields", many, "inputs", "at most 20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.fields)
			if err == nil || err.Field != c.field || !strings.Contains(err.Msg, c.msg) {
				t.Fatalf("Check = %v, want field %q and %q", err, c.field, c.msg)
			}
		})
	}
	if err := Check(form); err != nil {
		t.Fatalf("Check(form) = %v, want nil", err)
	}
}
