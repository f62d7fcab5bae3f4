package runbook

import (
	"encoding/json"
	"strings"
	"testing"
)

// Two << merge keys in one mapping, and tags outside the YAML 1.2 core
// schema (or that do not fit their node), are errors with file:line:col and field — in the
// runbook and in the values file alike — instead of being silently dropped.
func TestYAMLMergeKeysAndOddTagsRefused(t *testing.T) {
	check := "  - name: c\n    type: check\n    kql_or_template: Resources\n    on_fail: halt\n"
	anchors := "    params:\n      base: &a {x: 1}\n      more: &b {y: 2}\n"
	for _, tc := range []struct {
		name, runbook, values, want string
	}{
		{"two merge keys", header + check + anchors + "      both:\n        <<: *a\n        <<: *b\n", "",
			"rb.yaml:14:9: runbook_steps[0].params.both.<<: a second << merge key in one mapping (the first is at line 13); merge several mappings with one key: <<: [*a, *b]"},
		{"two merge keys in a flow mapping", header + check + anchors + "      both: {<<: *a, z: 3, <<: *b}\n", "",
			"rb.yaml:12:28: runbook_steps[0].params.both.<<: a second << merge key"},
		{"two merge keys in the values file", header + check, "a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n",
			"rb.values.yaml:5:3: c.<<: a second << merge key in one mapping (the first is at line 4)"},
		{"python object tag", header + check + "    params: !!python/object:os.system {a: 1}\n", "",
			"rb.yaml:9:13: runbook_steps[0].params: tag !!python/object:os.system is not allowed: only the YAML core schema tags !!str, !!int, !!float, !!bool, !!null, !!map and !!seq are"},
		{"binary tag", header + check + "    params: {blob: !!binary aGVsbG8=}\n", "",
			"rb.yaml:9:20: runbook_steps[0].params.blob: tag !!binary is not allowed"},
		{"timestamp tag", header + check + "    params: {at: !!timestamp 2026-01-01}\n", "",
			"rb.yaml:9:18: runbook_steps[0].params.at: tag !!timestamp is not allowed"},
		{"set tag", header + check + "    params: {s: !!set {a: null}}\n", "",
			"rb.yaml:9:17: runbook_steps[0].params.s: tag !!set is not allowed"},
		{"local tag", header + strings.Replace(check, "type: check", "type: !foo check", 1), "",
			"rb.yaml:6:11: runbook_steps[0].type: tag !foo is not allowed"},
		{"verbatim tag", header + check + "    params: {a: !<tag:example.com,2026:x> 1}\n", "",
			"rb.yaml:9:17: runbook_steps[0].params.a: tag tag:example.com,2026:x is not allowed"},
		{"%TAG handle", "%TAG !e! tag:example.com,2026:\n---\n" + header + check + "    params: {a: !e!thing 1}\n", "",
			"rb.yaml:11:17: runbook_steps[0].params.a: tag tag:example.com,2026:thing is not allowed"},
		{"tag on a key", header + check + "    params: {!!binary aGk=: 1}\n", "",
			"rb.yaml:9:14: runbook_steps[0].params.aGk=: tag !!binary is not allowed"},
		{"explicit merge tag", header + check + anchors + "      c: {!!merge <<: *a}\n", "",
			"rb.yaml:12:11: runbook_steps[0].params.c.<<: tag !!merge is not allowed"},
		{"tag in the values file", header + strings.Replace(check, "Resources", "${q}", 1), "q: !!binary UmVzb3VyY2Vz\n",
			"rb.values.yaml:1:4: q: tag !!binary is not allowed"},
		{"local tag in the values file", header + check, "a: !secret x\n",
			"rb.values.yaml:1:4: a: tag !secret is not allowed"},
		{"map tag on a scalar", header + check + "    params: {a: !!map x}\n", "",
			"rb.yaml:9:17: runbook_steps[0].params.a: tag !!map cannot be applied to a scalar"},
		{"seq tag on a mapping", header + check + "    params: !!seq {a: 1}\n", "",
			"rb.yaml:9:13: runbook_steps[0].params: tag !!seq cannot be applied to a mapping"},
		{"int tag on text", header + check + "    params: {a: !!int abc}\n", "",
			`rb.yaml:9:17: runbook_steps[0].params.a: the value does not fit its tag !!int, got "abc"`},
		{"null tag on text", header + check + "    params: {a: !!null dropped}\n", "",
			`rb.yaml:9:17: runbook_steps[0].params.a: the value does not fit its tag !!null, got "dropped"`},
		{"bool tag on text", header + check + "    params: {a: !!bool maybe}\n", "",
			`rb.yaml:9:17: runbook_steps[0].params.a: the value does not fit its tag !!bool, got "maybe"`},
		{"int tag in values hides the value", header + check, "secret: !!int hunter2\n",
			"rb.values.yaml:1:9: secret: the value does not fit its tag !!int (the value comes from rb.values.yaml and is not shown)"},
		{"tag on a token", header + check + "    params: {a: !!int \"${n}\"}\n", "n: 3\n",
			"rb.yaml:9:17: runbook_steps[0].params.a: tag !!int on a value with a ${key} token; remove the tag"},
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

	// What stays accepted: one merge key (also of a list), core tags that fit, !!float on an
	// integer, !!str on anything (it keeps the source text), and YAML's implicit types.
	rb := header + check + anchors +
		"      one: {<<: *a, z: 3}\n" +
		"      list: {<<: [*a, *b]}\n" +
		"      s: !!str 0755\n      i: !!int 42\n      f: !!float 1\n      b: !!bool true\n      n: !!null ~\n" +
		"      m: !!map {k: v}\n      q: !!seq [1]\n      tok: !!str \"${v}\"\n      day: 2026-01-01\n"
	plan, lerr := loadString(t, rb, "v: x\n")
	if lerr != nil {
		t.Fatal(lerr)
	}
	got, _ := json.Marshal(plan.Steps[0].Params)
	want := `{"b":true,"base":{"x":1},"day":"2026-01-01","f":1,"i":42,"list":{"x":1,"y":2},"m":{"k":"v"},"more":{"y":2},"n":null,"one":{"x":1,"z":3},"q":[1],"s":"0755","tok":"x"}`
	if string(got) != want {
		t.Fatalf("params:\n got %s\nwant %s", got, want)
	}
}
