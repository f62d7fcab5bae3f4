package runbook

import (
	"fmt"
	"strings"
	"testing"
)

// TestMissingVarErrorNamesWhatTheRootHas: a missing dotted
// binding whose root exists says what the root holds: its keys (sorted, capped at MaxHasKeys),
// or that it is no object; a missing root adds nothing.
func TestMissingVarErrorNamesWhatTheRootHas(t *testing.T) {
	b := map[string]any{"detect": map[string]any{"stdout": "x", "exit_code": 0.0}, "version": "1.2", "deep": map[string]any{"a": map[string]any{"k": 1.0}}}
	for tmpl, want := range map[string]string{
		"{{ detect.nokey }}":           `template variable "detect.nokey" has no binding (detect has: exit_code, stdout)`,
		"{{ version.major }}":          `template variable "version.major" has no binding (version is a string, not an object)`,
		"{{ deep.a.z }}":               `template variable "deep.a.z" has no binding (deep.a has: k)`,
		"{{ ghost.x }}":                `template variable "ghost.x" has no binding`,
		"{{ detect.a }}{{ detect.b }}": `template variables "detect.a", "detect.b" have no binding (detect has: exit_code, stdout)`,
	} {
		_, err := Render(tmpl, b)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", tmpl, err, want)
		}
	}
	big := map[string]any{}
	for i := range MaxHasKeys + 3 {
		big[fmt.Sprintf("k%02d", i)] = i
	}
	_, err := RenderValue(map[string]any{"x": "{{ big.nope }}"}, map[string]any{"big": big})
	if err == nil || !strings.HasSuffix(err.Error(), "k19 … and 3 more)") || strings.Contains(err.Error(), "k20") {
		t.Errorf("capped keys: %v", err)
	}
}
