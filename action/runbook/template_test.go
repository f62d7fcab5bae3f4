package runbook

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRenderInsertsWholeValuesInOnePass(t *testing.T) {
	b := map[string]any{
		"version": "2026.4.90",
		"build":   map[string]any{"stdout": "ok {{ version }}", "exit_code": json.Number("0"), "meta": map[string]any{"tags": []any{"a", "b"}}},
		"flag":    true,
	}
	got, err := Render("v={{ version }} out={{build.stdout}} code={{ build.exit_code }} tags={{ build.meta.tags }} f={{ flag }}", b)
	if err != nil {
		t.Fatal(err)
	}
	want := `v=2026.4.90 out=ok {{ version }} code=0 tags=["a","b"] f=true`
	if got != want {
		t.Fatalf("Render = %q, want %q", got, want)
	}
}

func TestRenderNamesEveryMissingVariable(t *testing.T) {
	_, err := Render("{{ a }} {{ version }} {{ b.c }} {{ a }}", map[string]any{"version": "1"})
	var mv *MissingVarError
	if !errors.As(err, &mv) || !reflect.DeepEqual(mv.Names, []string{"a", "b.c"}) {
		t.Fatalf("err = %v, want MissingVarError [a b.c]", err)
	}
	if err.Error() != `template variables "a", "b.c" have no binding` {
		t.Fatalf("message = %q", err.Error())
	}
	_, err = RenderValue(map[string]any{"z": "{{ z }}", "a": []any{"{{ y }}", 3}}, nil)
	if !errors.As(err, &mv) || !reflect.DeepEqual(mv.Names, []string{"y", "z"}) {
		t.Fatalf("RenderValue err = %v, want MissingVarError [y z]", err)
	}
}

func TestRenderRefusesMalformedAndNull(t *testing.T) {
	for _, tmpl := range []string{"{{ version", "{{ }}", "{{ a b }}", "{{ a..b }}"} {
		var te *TemplateError
		if _, err := Render(tmpl, map[string]any{"version": "1"}); !errors.As(err, &te) {
			t.Errorf("Render(%q) err = %v, want TemplateError", tmpl, err)
		}
	}
	if _, err := Render("{{ n }}", map[string]any{"n": nil}); err == nil || err.Error() != `binding "n" is null` {
		t.Fatalf("null err = %v", err)
	}
}

func TestTruthy(t *testing.T) {
	for v, want := range map[string]bool{`null`: false, `false`: false, `0`: false, `""`: false, `[]`: false, `{}`: false, `1`: true, `"x"`: true, `[0]`: true, `{"a":1}`: true, `true`: true} {
		var x any
		d := json.NewDecoder(stringsReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			t.Fatal(err)
		}
		if Truthy(x) != want {
			t.Errorf("Truthy(%s) = %v, want %v", v, !want, want)
		}
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
