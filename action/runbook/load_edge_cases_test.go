package runbook

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// loadErr loads path and returns its *LoadError, failing the test when loading succeeds.
func loadErr(t *testing.T, path string) *LoadError {
	t.Helper()
	plan, err := LoadFile(path, "")
	var lerr *LoadError
	if !errors.As(err, &lerr) {
		t.Fatalf("LoadFile(%s) = %+v, %v; want a *LoadError", path, plan, err)
	}
	return lerr
}

// copyRunbook copies testdata/<name>.yaml into a temp dir with the given values file text
// and returns the runbook's path there.
func copyRunbook(t *testing.T, name, values string) string {
	t.Helper()
	rb, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, name+".yaml")
	writeFile(t, path, string(rb))
	writeFile(t, filepath.Join(dir, name+".values.yaml"), values)
	return path
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestYAML11ScalarsKeepTheirText(t *testing.T) {
	plan, err := LoadFile("testdata/scalars.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Steps[0].Input
	want := "Resources | where c == 'NO' and v == '1.10' and m == '0755' | project name"
	if in == nil || *in != want {
		t.Fatalf("check input = %v, want %q", in, want)
	}
	if !strings.Contains(*in, "c == 'NO' and v == '1.10' and m == '0755'") {
		t.Fatalf("check input %q lost the scalars' source text", *in)
	}
}

func TestAliasBombAndDeepNestingRejected(t *testing.T) {
	nested := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	deepDir := t.TempDir()
	writeFile(t, filepath.Join(deepDir, "deep.yaml"), "runbook_name: deep\nsubscriptions: [s]\nstate_file_path: s.json\nrunbook_steps:\n"+
		"  - name: d\n    type: deploy\n    kql_or_template: remediation/a.json\n    on_fail: halt\n    params:\n      p: "+nested+"\n")
	writeFile(t, filepath.Join(deepDir, "deep.values.yaml"), "{}\n")
	writeFile(t, filepath.Join(deepDir, "brackets.yaml"), nested)
	writeFile(t, filepath.Join(deepDir, "brackets.values.yaml"), "{}\n")
	deepValuesDir := t.TempDir()
	writeFile(t, filepath.Join(deepValuesDir, "valid.yaml"), mustRead(t, "testdata/valid.yaml"))
	writeFile(t, filepath.Join(deepValuesDir, "valid.values.yaml"), "subs: "+nested+"\n")
	tooDeepDir := t.TempDir() // past yaml.v3's own limit of 10,000 levels
	writeFile(t, filepath.Join(tooDeepDir, "x.yaml"), strings.Repeat("[", 10_001)+strings.Repeat("]", 10_001))
	writeFile(t, filepath.Join(tooDeepDir, "x.values.yaml"), "{}\n")

	for _, tc := range []struct {
		name, path, file, field, limit string
		line, col                      int
	}{
		{"alias bomb in params", "testdata/bomb.yaml", "testdata/bomb.yaml", "runbook_steps[0].params.f[0]", "MaxNodes", 15, 14},
		{"alias bomb in values", "testdata/values-bomb.yaml", "testdata/values-bomb.values.yaml", "f[0]", "MaxNodes", 6, 8},
		{"10,000 [ then 10,000 ]", filepath.Join(deepDir, "brackets.yaml"), filepath.Join(deepDir, "brackets.yaml"), "[0][0]", "MaxDepth", 1, 65},
		{"10,000 nested lists in params", filepath.Join(deepDir, "deep.yaml"), filepath.Join(deepDir, "deep.yaml"), "runbook_steps[0].params.p[0][0]", "MaxDepth", 10, 70},
		{"10,000 nested lists in values", filepath.Join(deepValuesDir, "valid.yaml"), filepath.Join(deepValuesDir, "valid.values.yaml"), "subs[0][0]", "MaxDepth", 1, 70},
		{"10,001 nested lists", filepath.Join(tooDeepDir, "x.yaml"), filepath.Join(tooDeepDir, "x.yaml"), "", "MaxDepth", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			lerr := loadErr(t, tc.path)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if elapsed > raceSlowdown*time.Second {
				t.Errorf("took %v, want under a second", elapsed)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > 50<<20 {
				t.Errorf("allocated %d MiB, want under 50 MiB", alloc>>20)
			}
			t.Logf("rejected in %v, allocating %.1f MiB in total", elapsed, float64(alloc)/(1<<20))
			d := lerr.Diagnostics[0]
			if len(lerr.Diagnostics) != 1 || d.File != tc.file || !strings.HasPrefix(d.Field, tc.field) ||
				!strings.Contains(d.Message, tc.limit) || d.Line != tc.line || d.Column != tc.col {
				t.Fatalf("diagnostics = %v; want one at %s:%d:%d, field %s…, naming %s", lerr.Diagnostics, tc.file, tc.line, tc.col, tc.field, tc.limit)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSubstitutionDoesNotOverMatchReExpandOrInject(t *testing.T) {
	lerr := loadErr(t, "testdata/inject.yaml")
	var got []string
	for _, d := range lerr.Diagnostics {
		got = append(got, d.String())
	}
	want := []string{
		`testdata/inject.yaml:3:14: description: values key "owner" is not defined in testdata/inject.values.yaml`,
		`testdata/inject.yaml:3:14: description: values key "ticket" is not defined in testdata/inject.values.yaml`,
		`testdata/inject.yaml:9:22: runbook_steps[0].kql_or_template: values key "owner" is not defined in testdata/inject.values.yaml`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if lerr.Abort != "" || !strings.HasSuffix(lerr.Error(), "(and 2 more errors)") {
		t.Fatalf("Error() = %q, Abort = %q", lerr.Error(), lerr.Abort)
	}

	path := copyRunbook(t, "inject", mustRead(t, "testdata/inject.values.yaml")+"owner: alice\nticket: T-1\n")
	plan, err := LoadFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	step := plan.Steps[0]
	query := "AzureActivity | where RG == 'prod-rg\non_fail: continue' | extend r=replace_regex(x, @'(a)', @'$1')" +
		" | extend s='${{ github.sha }}' | extend o='alice'"
	if step.Input == nil || *step.Input != query {
		t.Fatalf("query = %q\nwant    %q", deref(step.Input), query)
	}
	if len(plan.Steps) != 1 || step.OnFail != OnFailHalt {
		t.Fatalf("steps = %+v; the newline value must not add an on_fail key or a step", plan.Steps)
	}
	wantParams := map[string]any{"note": "${rg}", "quoted_note": "${rg}", "dollars": "$$ stays $$"}
	if len(step.Params) != len(wantParams) {
		t.Fatalf("params = %v, want %v", step.Params, wantParams)
	}
	for k, v := range wantParams {
		if step.Params[k] != v {
			t.Errorf("params[%s] = %#v, want %#v (one pass, no re-scan)", k, step.Params[k], v)
		}
	}
	if plan.Name != "inject" || plan.Subscriptions[0] != "sub-1" {
		t.Fatalf("plan = %+v", plan)
	}
}

func TestStepTimeoutRejectedNotClamped(t *testing.T) {
	rb := func(timeout string) string {
		return "runbook_name: t\nsubscriptions: [s]\nstate_file_path: s.json\nmax_step_timeout_seconds: 10\nrunbook_steps:\n" +
			"  - name: slow\n    type: check\n    kql_or_template: Resources\n    on_fail: continue\n" + timeout
	}
	for _, tc := range []struct{ timeout, abort string }{
		{"    max_timeout_seconds: 120\n", "ABORT: step 'slow' failed schema validation for type 'check': max_timeout_seconds: 120 exceeds max_step_timeout_seconds (10); it is rejected, not clamped."},
		{"    max_timeout_seconds: 0\n", "ABORT: step 'slow' failed schema validation for type 'check': max_timeout_seconds: must be at least 1, got 0."},
	} {
		_, lerr := loadString(t, rb(tc.timeout), "")
		if lerr == nil || lerr.Abort != tc.abort {
			t.Errorf("%q: got %v, want %q", tc.timeout, lerr, tc.abort)
			continue
		}
		if d := lerr.Diagnostics[0]; d.Line != 10 || d.Column != 26 || d.Field != "runbook_steps[0].max_timeout_seconds" {
			t.Errorf("%q: diagnostic %v, want line 10 col 26", tc.timeout, d)
		}
	}
	plan, lerr := loadString(t, rb(""), "")
	if lerr != nil || plan.Steps[0].TimeoutSeconds != 10 {
		t.Fatalf("omitted timeout: plan %+v, err %v; want the runbook cap 10", plan, lerr)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
