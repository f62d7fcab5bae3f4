package runbook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// parsePB parses src as t.cantbook and fails the test on an error.
func parsePB(t *testing.T, src string) *Plan {
	t.Helper()
	plan, err := ParsePlaybook("t.cantbook", []byte(src))
	if err != nil {
		var pe *PlaybookParseError
		if errors.As(err, &pe) {
			t.Fatalf("ParsePlaybook: %s", pe.Details())
		}
		t.Fatalf("ParsePlaybook: %v", err)
	}
	return plan
}

// parsePBErr parses src and returns its *PlaybookParseError, failing the test on success.
func parsePBErr(t *testing.T, src string) *PlaybookParseError {
	t.Helper()
	plan, err := ParsePlaybook("t.cantbook", []byte(src))
	var pe *PlaybookParseError
	if !errors.As(err, &pe) || plan != nil {
		t.Fatalf("ParsePlaybook = %+v, %v; want a *PlaybookParseError", plan, err)
	}
	if len(pe.Issues) == 0 {
		t.Fatalf("PlaybookParseError without issues")
	}
	return pe
}

const releasePath = "../../runbooks/release.cantbook"

func TestSpecExampleParsesToThePlan(t *testing.T) {
	src, err := os.ReadFile(releasePath)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := LoadPlaybook(releasePath)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	schema, _ := PlaybookJSONSchema()
	if plan.Kind != KindPlaybook || plan.Name != "release-cut" || plan.Path != releasePath ||
		plan.ContentHash != hex.EncodeToString(sum[:]) || plan.SchemaHash8 != SchemaHash8(schema) || len(plan.SchemaHash8) != 8 {
		t.Fatalf("plan header = kind %q name %q path %q hash %q schema %q", plan.Kind, plan.Name, plan.Path, plan.ContentHash, plan.SchemaHash8)
	}
	pb := plan.Playbook
	if pb.Version != "1.0" || pb.Description != "Cut a CalVer release and publish to npm" || !bytes.Equal(pb.Source, src) || pb.Warnings != nil {
		t.Fatalf("playbook = %+v", pb)
	}
	wantInputs := []PlaybookInput{{Name: "version", Required: true, Description: "Target version (e.g. 2026.4.90)", Line: 6}}
	if !reflect.DeepEqual(pb.Inputs, wantInputs) {
		t.Fatalf("inputs = %+v, want %+v", pb.Inputs, wantInputs)
	}
	wantEdges := []Edge{
		{From: "build", To: "test", Requires: []string{"dist-exists"}, Ensures: []string{"tests-passed"}, Line: 33},
		{From: "test", To: "review", Line: 38},
		{From: "review", To: "publish", Line: 40},
	}
	if !reflect.DeepEqual(pb.Edges, wantEdges) {
		t.Fatalf("edges = %+v, want %+v", pb.Edges, wantEdges)
	}
	wantHandlers := []ErrorHandler{{On: "test-failed", Action: HandlerAbort, Message: "Tests failed — aborting release.", Line: 44}}
	if !reflect.DeepEqual(pb.ErrorHandlers, wantHandlers) {
		t.Fatalf("handlers = %+v, want %+v", pb.ErrorHandlers, wantHandlers)
	}
	wantSteps := []Step{
		{Index: 0, Name: "build", Type: TypeDeterministic, TimeoutSeconds: 300, Line: 11, Column: 5,
			Node: &Node{ID: "build", Command: "pnpm", Args: []string{"run", "build"}, IterationCap: 3}},
		{Index: 1, Name: "test", Type: TypeDeterministic, TimeoutSeconds: 300, Line: 16, Column: 5, Depends: []int{0},
			Node: &Node{ID: "test", Depends: []string{"build"}, Command: "pnpm", Args: []string{"run", "test"}, IterationCap: 3}},
		{Index: 2, Name: "review", Type: TypeApproval, TimeoutSeconds: 86400, Line: 22, Column: 5, Depends: []int{1},
			Node: &Node{ID: "review", Depends: []string{"test"}, Prompt: "Build + tests green. Publish {{ version }} to npm?", IterationCap: 3}},
		{Index: 3, Name: "publish", Type: TypeAgentic, TimeoutSeconds: 300, Line: 27, Column: 5, Depends: []int{2},
			Node: &Node{ID: "publish", Depends: []string{"review"}, Skill: "release-publisher", IterationCap: 3}},
	}
	if !reflect.DeepEqual(plan.Steps, wantSteps) {
		for i := range plan.Steps {
			t.Logf("step %d: %+v node %+v", i, plan.Steps[i], *plan.Steps[i].Node)
		}
		t.Fatalf("steps differ from the expected plan")
	}
}

func TestFanoutDemoParses(t *testing.T) {
	plan, err := LoadPlaybook("../../runbooks/fanout.cantbook")
	if err != nil {
		var pe *PlaybookParseError
		errors.As(err, &pe)
		t.Fatalf("%v\n%s", err, pe.Details())
	}
	if plan.Playbook.Warnings != nil {
		t.Fatalf("warnings: %v", plan.Playbook.Warnings)
	}
	deps := map[string][]string{}
	for _, s := range plan.Steps {
		deps[s.Name] = s.Node.Depends
	}
	want := map[string][]string{
		"prepare": nil, "lint": {"prepare"}, "unit": {"prepare"}, "docs": {"prepare"},
		"package": {"lint", "unit", "docs"}, "stable-notes": {"package"}, "nightly-notes": {"package"},
		"ship-check": {"package"}, "verify": {"ship-check"},
	}
	if !reflect.DeepEqual(deps, want) {
		t.Fatalf("depends = %v, want %v", deps, want)
	}
	edges := plan.Playbook.Edges
	if len(edges) != 2 || *edges[0].When != (When{Binding: "package.channel", Op: WhenNotEquals, Value: "nightly"}) ||
		*edges[1].When != (When{Binding: "package.channel", Op: WhenEquals, Value: "nightly"}) {
		t.Fatalf("edges = %+v", edges)
	}
	if h := plan.Playbook.ErrorHandlers; len(h) != 1 || h[0].On != "prepare-failed" || h[0].Action != HandlerRetry {
		t.Fatalf("handlers = %+v", h)
	}
	if plan.Steps[0].Node.IterationCap != 2 || plan.Playbook.Inputs[0].Default != "stable" || !plan.Playbook.Inputs[0].HasDefault {
		t.Fatalf("prepare cap %d, inputs %+v", plan.Steps[0].Node.IterationCap, plan.Playbook.Inputs)
	}
	// The demo's stub tools exist and are executable (deterministic nodes run with
	// <playbook dir>/bin first on PATH).
	for _, s := range plan.Steps {
		if s.Type != TypeDeterministic || s.Node.Command == "pnpm" { // pnpm: the steps helper's stub
			continue
		}
		fi, err := os.Stat(filepath.Join("../../runbooks/bin", s.Node.Command))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("node %s: runbooks/bin/%s: %v (mode %v); want an executable stub", s.Name, s.Node.Command, err, fi)
		}
	}
}

// TestFanoutDemoToolRetries runs the demo's stub: demo-tool flaky fails its first
// call and succeeds the second (the retry handler's demo), keeping its count in the working
// folder; its other commands print one JSON object each (the node's output bindings).
func TestFanoutDemoToolRetries(t *testing.T) {
	tool, err := filepath.Abs("../../runbooks/bin/demo-tool")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(tool, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("demo-tool %v: %v", args, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	if out, errText, code := run("flaky", "prepare"); code != 1 || out != "" || !strings.Contains(errText, "attempt 1") {
		t.Fatalf("first call: %q %q exit %d; want a failure", out, errText, code)
	}
	if out, _, code := run("flaky", "prepare"); code != 0 || out != "{\"prepared\": true, \"attempt\": 2}\n" {
		t.Fatalf("second call: %q exit %d; want success", out, code)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".rbook", "demo", "prepare.count")); err != nil || string(b) != "2\n" {
		t.Fatalf("counter = %q, %v", b, err)
	}
	for _, args := range [][]string{{"docs"}, {"package", "stable"}, {"notes", "nightly"}} {
		out, _, code := run(args...)
		var v map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v) == 0 {
			t.Fatalf("demo-tool %v: %q exit %d; want one JSON object", args, out, code)
		}
	}
	if _, _, code := run("flaky", "../x"); code != 2 {
		t.Fatalf("a bad name: exit %d, want 2", code)
	}
}

func TestOneFileBreakingAllTenRulesListsEveryIssue(t *testing.T) {
	_, err := LoadPlaybook("testdata/playbooks/ten-rules.cantbook")
	var pe *PlaybookParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	type want struct {
		rule, field string
		line, col   int
		msg         string
	}
	wants := []want{
		{"1 version", "version", 1, 10, `must be the string "1.0"`},
		{"2 name", "name", 2, 7, "must not be empty"},
		{"7 deterministic", "nodes[0].args", 4, 5, "is required for deterministic nodes"},
		{"3 unique ids", "nodes[1].id", 7, 9, `duplicate node id "build" (first at line 4`},
		{"6 agentic", "nodes[2]", 11, 5, "needs skill or agent"},
		{"8 approval", "nodes[3].prompt", 13, 5, "is required for approval nodes"},
		{"9 depends", "nodes[3].depends[0]", 15, 15, `unknown node id "ghost"`},
		{"10 caps", "nodes[3].iteration_cap", 16, 20, "must be in 0..10"},
		{"5 DAG", "nodes[4].depends[0]", 21, 15, "cycle a → b → c → a"},
		{"4 edges", "edges[0].to", 34, 9, `unknown node id "nowhere"`},
	}
	if len(pe.Issues) != len(wants) {
		t.Fatalf("%d issues, want %d:\n%s", len(pe.Issues), len(wants), pe.Details())
	}
	for i, w := range wants {
		d := pe.Issues[i]
		if d.File != "testdata/playbooks/ten-rules.cantbook" || d.Field != w.field || d.Line != w.line || d.Column != w.col || !strings.Contains(d.Message, w.msg) || d.Line <= 0 {
			t.Errorf("rule %s: issue %v; want %s at %d:%d containing %q", w.rule, d, w.field, w.line, w.col, w.msg)
		}
	}
	if !strings.HasPrefix(err.Error(), `testdata/playbooks/ten-rules.cantbook:1:10: version: must be the string "1.0"`) ||
		!strings.HasSuffix(err.Error(), "(and 9 more errors)") {
		t.Fatalf("Error() = %q", err.Error())
	}
	if n := strings.Count(pe.Details(), "\n"); n != 9 {
		t.Fatalf("Details() has %d lines, want 10:\n%s", n+1, pe.Details())
	}
}

// pbOf returns a playbook (version, name) with the given nodes.
func pbOf(nodes ...string) string {
	var b strings.Builder
	b.WriteString("version: \"1.0\"\nname: t\nnodes:\n")
	for _, n := range nodes {
		b.WriteString(n)
	}
	return b.String()
}

// det is a deterministic node "true" (args: [] unless an extra line sets args), plus extra lines.
func det(id string, extra ...string) string {
	s := "  - id: " + id + "\n    type: deterministic\n    command: \"true\"\n"
	if !slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, "args:") }) {
		s += "    args: []\n"
	}
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

func TestCyclesNamedOnceEach(t *testing.T) {
	// a → b by depends, b → c by an edge, c → a by depends: one cycle, named once; plus a
	// self-dependency and a second, separate cycle.
	src := pbOf(det("a", "depends: [c]"), det("b", "depends: [a]"), det("c"), det("self", "depends: [self]"),
		det("x", "depends: [y]"), det("y", "depends: [x]")) +
		"edges:\n  - from: b\n    to: c\n  - from: a\n    to: b\n"
	pe := parsePBErr(t, src)
	var got []string
	for _, d := range pe.Issues {
		got = append(got, d.Field+": "+d.Message)
	}
	want := []string{
		"nodes[0].depends[0]: cycle a → b → c → a (nodes + edges + depends must form a DAG)",
		"nodes[3].depends[0]: cycle self → self (nodes + edges + depends must form a DAG)",
		"nodes[4].depends[0]: cycle x → y → x (nodes + edges + depends must form a DAG)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("issues:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Linear: a 1000-node chain closed into one cycle, and 1000 nodes all depending on all
	// earlier ones plus one back edge, are both checked quickly.
	var nodes []string
	for i := range MaxPlaybookNodes {
		dep := fmt.Sprintf("n%d", (i+MaxPlaybookNodes-1)%MaxPlaybookNodes)
		nodes = append(nodes, det(fmt.Sprintf("n%d", i), "depends: ["+dep+"]"))
	}
	start := time.Now()
	pe = parsePBErr(t, pbOf(nodes...))
	if len(pe.Issues) != 1 || !strings.HasPrefix(pe.Issues[0].Message, "cycle n0 → n1 → n2 → ") ||
		!strings.Contains(pe.Issues[0].Message, "→ n999 → n0 (nodes + edges") {
		t.Fatalf("issues = %.300v", pe.Issues)
	}
	if el := time.Since(start); el > raceSlowdown*time.Second {
		t.Fatalf("a 1000-node cycle took %v", el)
	}
}

func TestEveryOtherCheckNamesFieldAndLine(t *testing.T) {
	long := strings.Repeat("x", MaxCommandBytes+1)
	manyArgs := "args: [" + strings.Repeat("a, ", MaxNodeArgs) + "a]"
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"id shape", pbOf(det("a.b")), "nodes[0].id", "must match [A-Za-z0-9_-]{1,64}", 4},
		{"reserved id", pbOf(det("error")), "nodes[0].id", `"error" is reserved`, 4},
		{"reserved input", "inputs:\n  - name: run\n" + pbOf(det("a")), "inputs[0].name", `"run" is reserved`, 2},
		{"id equals input", "inputs:\n  - name: a\n" + pbOf(det("a")), "nodes[0].id", `node id "a" is also the name of an input (line 2)`, 6},
		{"duplicate input", "inputs:\n  - name: v\n  - name: v\n" + pbOf(det("a")), "inputs[1].name", `duplicate input "v" (first at line 2)`, 3},
		{"unknown top key", "nodez: []\n" + pbOf(det("a")), "nodez", `unknown field (did you mean "nodes"?)`, 1},
		{"unknown node key", pbOf(det("a", "dependz: []")), "nodes[0].dependz", `did you mean "depends"?`, 8},
		{"key of another type", pbOf(det("a", "prompt: hi")), "nodes[0].prompt", "is for approval nodes only; this node is deterministic", 8},
		{"unknown type", pbOf("  - id: a\n    type: shell\n"), "nodes[0].type", "must be one of deterministic, agentic, approval", 5},
		{"depends not a list", pbOf(det("a"), det("b", "depends: a")), "nodes[1].depends", "must be a list, got a scalar", 12},
		{"args not a list", pbOf("  - id: a\n    type: deterministic\n    command: x\n    args: run\n"), "nodes[0].args", "must be a list", 7},
		{"cap not a number", pbOf(det("a", "max_iterations: many")), "nodes[0].max_iterations", "must be a decimal integer", 8},
		{"on_failure cap", pbOf(det("a", "on_failure: {max_iterations: 11}")), "nodes[0].on_failure.max_iterations", "must be in 0..10", 8},
		{"inject_into unknown", pbOf(det("a", "on_failure: {inject_into: fixr}"), det("fixer")), "nodes[0].on_failure.inject_into", `unknown node id "fixr"`, 8},
		{"inject_into self", pbOf(det("a", "on_failure: {inject_into: a}")), "nodes[0].on_failure.inject_into", "cannot inject into itself", 8},
		{"handler on unknown node", pbOf(det("a")) + "error_handlers:\n  - on: b-failed\n    action: abort\n", "error_handlers[0].on", `unknown node id "b"`, 9},
		{"handler on bad event", pbOf(det("a")) + "error_handlers:\n  - on: node_faild\n    action: abort\n", "error_handlers[0].on", `did you mean "node_failed"?`, 9},
		{"handler action", pbOf(det("a")) + "error_handlers:\n  - on: a-failed\n    action: rerty\n", "error_handlers[0].action", `did you mean "retry"?`, 10},
		{"inject_hint without inject_into", pbOf(det("a")) + "error_handlers:\n  - on: a-failed\n    action: inject_hint\n", "error_handlers[0].action", `inject_hint needs on_failure.inject_into on node "a"`, 10},
		{"inject_hint any node", pbOf(det("a")) + "error_handlers:\n  - on: node_failed\n    action: inject_hint\n", "error_handlers[0].action", "no node has one", 10},
		{"when two ops", pbOf(det("a"), det("b")) + "edges:\n  - from: a\n    to: b\n    when: {binding: a.stdout, equals: x, truthy: true}\n", "edges[0].when", "needs exactly one of equals, notEquals, exists, in, truthy, got 2", 15},
		{"when no op", pbOf(det("a"), det("b")) + "edges:\n  - from: a\n    to: b\n    when: {binding: a.stdout}\n", "edges[0].when", "got 0", 15},
		{"when no binding", pbOf(det("a"), det("b")) + "edges:\n  - from: a\n    to: b\n    when: {equals: x}\n", "edges[0].when.binding", "is required", 15},
		{"when in scalar", pbOf(det("a"), det("b")) + "edges:\n  - from: a\n    to: b\n    when: {binding: a.x, in: x}\n", "edges[0].when.in", "must be a list", 15},
		{"when unknown binding", pbOf(det("a"), det("b")) + "edges:\n  - from: a\n    to: b\n    when: {binding: ab.x, truthy: true}\n", "edges[0].when.binding", `binding "ab.x" names no input, node id or error`, 15},
		{"edge from unknown", pbOf(det("a")) + "edges:\n  - from: z\n    to: a\n", "edges[0].from", `unknown node id "z"`, 9},
		{"template unknown", pbOf(det("a", "env: {V: \"{{ nope }} {{ also.x }} {{ a.stdout }}\"}")), "nodes[0].env.V", `template names "nope", "also.x": no input, node id or error`, 8},
		{"template unclosed", pbOf(det("a", "cwd: \"{{ a\"")), "nodes[0].cwd", "unclosed {{", 8},
		{"templated command", pbOf("  - id: a\n    type: deterministic\n    command: \"{{ x }}\"\n    args: []\n"), "nodes[0].command", "is not templated", 6},
		{"env name", pbOf(det("a", "env: {1X: y}")), "nodes[0].env.1X", "environment variable name", 8},
		{"too many args", pbOf("  - id: a\n    type: deterministic\n    command: x\n    " + manyArgs + "\n"), "nodes[0].args", "at most 256 (MaxNodeArgs)", 7},
		{"long command", pbOf("  - id: a\n    type: deterministic\n    command: " + long + "\n    args: []\n"), "nodes[0].command", "at most 4096 (MaxCommandBytes)", 6},
		{"timeout zero", pbOf(det("a", "timeout: 0")), "nodes[0].timeout", "must be in 1..86400 seconds", 8},
		{"timeout too long", pbOf(det("a", "timeout: 25h")), "nodes[0].timeout", "whole seconds in 1..86400", 8},
		{"fact shape", pbOf(det("a", "ensures: [\"a b\"]")), "nodes[0].ensures[0]", "a fact is a binding name or path", 8},
		{"no nodes", "version: \"1.0\"\nname: t\nnodes: []\n", "nodes", "at least one node", 3},
		{"nodes missing", "version: \"1.0\"\nname: t\n", "nodes", "is required", 1},
		{"name shape", "version: \"1.0\"\nname: a b\n" + "nodes:\n" + det("a"), "name", "must match [A-Za-z0-9._-]{1,64}", 2},
		{"not a mapping", "- a\n", "", "a playbook must be a mapping", 1},
		{"input required not bool", "inputs:\n  - name: v\n    required: yes\n" + pbOf(det("a")), "inputs[0].required", `must be true or false, got "yes"`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) { wantIssue(t, tc.src, tc.field, tc.msg, tc.line) })
	}
}

// wantIssue parses src as t.cantbook and fails unless one issue is at line, with a column,
// for field, and contains msg.
func wantIssue(t *testing.T, src, field, msg string, line int) {
	t.Helper()
	pe := parsePBErr(t, src)
	for _, d := range pe.Issues {
		if d.Field == field && strings.Contains(d.Message, msg) && d.Line == line && d.Column > 0 && d.File == "t.cantbook" {
			return
		}
	}
	t.Fatalf("issues:\n%s\nwant one at t.cantbook line %d, field %q, containing %q", pe.Details(), line, field, msg)
}

func TestTimeoutsCapsAndExtensions(t *testing.T) {
	// testdata/playbooks/timeouts-caps-extensions.cantbook: deterministic nodes a and b with
	// timeouts, caps, env, cwd, requires/ensures and on_failure; approval nodes with and without
	// a timeout; an agentic node with inputs; edges with when conditions.
	plan := parsePB(t, mustRead(t, "testdata/playbooks/timeouts-caps-extensions.cantbook"))
	s := plan.Steps
	if s[0].TimeoutSeconds != 90 || !s[0].Node.TimeoutSet || s[0].Node.IterationCap != 4 ||
		!reflect.DeepEqual(s[0].Node.Env, map[string]string{"MODE": "0755", "TAG": "{{ tag }}"}) || s[0].Node.Cwd != "out/{{ tag }}" ||
		!reflect.DeepEqual(s[0].Node.Requires, []string{"file:go.mod"}) || !reflect.DeepEqual(s[0].Node.Ensures, []string{"ok", "a.stdout"}) {
		t.Fatalf("a = %+v %+v", s[0], *s[0].Node)
	}
	if s[1].TimeoutSeconds != 5400 || s[1].Node.IterationCap != 2 || *s[1].Node.OnFailure != (OnFailure{InjectInto: "a", MaxIterations: 2}) ||
		!reflect.DeepEqual(s[1].Depends, []int{0}) || !reflect.DeepEqual(s[1].Node.Depends, []string{"a"}) {
		t.Fatalf("b = %+v %+v", s[1], *s[1].Node)
	}
	if s[2].TimeoutSeconds != 600 || s[4].TimeoutSeconds != DefaultApprovalTimeoutSeconds || s[4].Node.TimeoutSet || s[3].TimeoutSeconds != DefaultNodeTimeoutSeconds {
		t.Fatalf("timeouts %d %d %d", s[2].TimeoutSeconds, s[3].TimeoutSeconds, s[4].TimeoutSeconds)
	}
	wantInputs := map[string]any{"version": "{{ tag }}", "n": json.Number("2"), "list": []any{"{{ a.stdout }}", true}}
	if !reflect.DeepEqual(s[3].Node.Inputs, wantInputs) || s[3].Node.Agent != "srv" || !reflect.DeepEqual(s[3].Depends, []int{1, 2}) {
		t.Fatalf("ai = %+v %+v", s[3], *s[3].Node)
	}
	e := plan.Playbook.Edges
	if !reflect.DeepEqual(e[1].When, &When{Binding: "b.exit_code", Op: WhenIn, Value: []any{json.Number("0"), "1"}}) ||
		!reflect.DeepEqual(e[2].When, &When{Binding: "tag", Op: WhenExists, Value: true}) {
		t.Fatalf("whens = %+v %+v", e[1].When, e[2].When)
	}
	if in := plan.Playbook.Inputs; in[0].Default != json.Number("1.10") || !in[0].HasDefault || in[1].HasDefault || in[1].Required {
		t.Fatalf("inputs = %+v", in)
	}
	for _, st := range s {
		if st.OnFail != "" || st.Name != st.Node.ID || st.Line <= 0 {
			t.Fatalf("step %+v", st)
		}
	}
}

func TestValidatePlaybookInputs(t *testing.T) {
	// Inputs version and region are required; channel, n and note have defaults; opt has none.
	plan := parsePB(t, mustRead(t, "testdata/playbooks/inputs.cantbook"))
	got, err := ValidatePlaybookInputs(plan, map[string]string{"version": "2026.4.90", "region": "eu", "channel": "nightly"})
	want := map[string]any{"version": "2026.4.90", "region": "eu", "channel": "nightly", "n": json.Number("3"), "note": nil}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("bindings = %#v, %v; want %#v", got, err, want)
	}
	_, err = ValidatePlaybookInputs(plan, map[string]string{"verison": "1", "zzz": "z"})
	var ie *PlaybookInputError
	if !errors.As(err, &ie) || !reflect.DeepEqual(ie.Missing, []string{"version", "region"}) || !reflect.DeepEqual(ie.Unknown, []string{"verison", "zzz"}) {
		t.Fatalf("err = %#v", err)
	}
	wantMsg := `playbook t: missing required input(s) "version", "region" (give each with --input name=value); ` +
		`unknown input(s) "verison" (did you mean "version"?), "zzz" (declared: version, region, channel, n, note, opt)`
	if err.Error() != wantMsg {
		t.Fatalf("message:\n%s\nwant:\n%s", err, wantMsg)
	}
	if _, err := ValidatePlaybookInputs(&Plan{}, nil); err == nil {
		t.Fatal("a runbook plan was accepted")
	}
}

func TestPlaybookJSONSchemaInSync(t *testing.T) {
	got, err := PlaybookJSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "runbooks", "schema", "cantbook.schema.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(committed, got) {
		t.Fatalf("%s differs from PlaybookJSONSchema() (%v); run: go test ./action/runbook -run TestPlaybookJSONSchemaInSync -update", path, err)
	}
	var schema struct {
		Schema     string         `json:"$schema"`
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
		Defs       struct {
			Node struct {
				Required   []string       `json:"required"`
				Properties map[string]any `json:"properties"`
				AllOf      []any          `json:"allOf"`
			} `json:"node"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(got, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || !reflect.DeepEqual(schema.Required, []string{"version", "name", "nodes"}) ||
		len(schema.Properties) != len(pbTopKeys) || len(schema.Defs.Node.AllOf) != 3 || !reflect.DeepEqual(schema.Defs.Node.Required, []string{"id", "type"}) {
		t.Fatalf("schema = %+v", schema)
	}
	// The schema names exactly the keys the parser accepts.
	var nodeKeys []string
	nodeKeys = append(nodeKeys, pbCommonKeys...)
	for _, keys := range pbTypeKeys {
		nodeKeys = append(nodeKeys, keys...)
	}
	slices.Sort(nodeKeys) // a key of two node types (inputs) is one property
	nodeKeys = slices.Compact(nodeKeys)
	for _, k := range nodeKeys {
		if schema.Defs.Node.Properties[k] == nil {
			t.Errorf("schema node has no property %q", k)
		}
	}
	if len(schema.Defs.Node.Properties) != len(nodeKeys) {
		t.Errorf("schema node has %d properties, parser %d", len(schema.Defs.Node.Properties), len(nodeKeys))
	}
}

func TestLoadPlaybookUnreadable(t *testing.T) {
	_, err := LoadPlaybook("testdata/playbooks/missing.cantbook")
	var pe *PlaybookParseError
	if !errors.As(err, &pe) || err.Error() != "testdata/playbooks/missing.cantbook: playbook file not found" {
		t.Fatalf("err = %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.cantbook")
	writeFile(t, big, "# "+strings.Repeat("x", MaxFileBytes))
	if _, err := LoadPlaybook(big); err == nil || !strings.Contains(err.Error(), "MaxFileBytes") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestPlaybookScalarsKeepTheirMeaning(t *testing.T) {
	body := "name: t\n" + "nodes:\n" + det("test", "args: [NO, 1.10, 0755, on, yes]") +
		"error_handlers:\n  - on: test-failed\n    action: abort\n"
	plan := parsePB(t, "version: \"1.0\"\n"+body)
	if h := plan.Playbook.ErrorHandlers; len(h) != 1 || h[0].On != "test-failed" {
		t.Fatalf("handlers = %+v; the key on must stay the string \"on\"", h)
	}
	if args := plan.Steps[0].Node.Args; !reflect.DeepEqual(args, []string{"NO", "1.10", "0755", "on", "yes"}) {
		t.Fatalf("args = %q; scalars must keep their source text", args)
	}
	if plan.Playbook.Warnings != nil {
		t.Fatalf("quoted version warned: %v", plan.Playbook.Warnings)
	}
	for _, v := range []string{"'1.0'", "!!str 1.0"} {
		if p := parsePB(t, "version: "+v+"\n"+body); p.Playbook.Version != "1.0" || p.Playbook.Warnings != nil {
			t.Fatalf("version %s: %+v", v, p.Playbook)
		}
	}
	plain := parsePB(t, "version: 1.0\n"+body)
	w := plain.Playbook.Warnings
	if plain.Playbook.Version != "1.0" || len(w) != 1 || w[0].Field != "version" || w[0].Line != 1 || w[0].Column != 10 ||
		!strings.Contains(w[0].Message, `write version: "1.0" (quoted)`) {
		t.Fatalf("plain 1.0: version %q warnings %v", plain.Playbook.Version, w)
	}
	for _, v := range []string{"1.00", "2.0", "1", `"2.0"`, "!!float 1.0", "[1.0]", "1.0.0"} {
		pe := parsePBErr(t, "version: "+v+"\n"+body)
		d := pe.Issues[0]
		if len(pe.Issues) != 1 || d.Field != "version" || d.Line != 1 || !strings.Contains(d.Message, `write version: "1.0" (quoted)`) {
			t.Errorf("version %s: %s", v, pe.Details())
		}
	}
	// The warning also comes with the error when something else is wrong.
	if pe := parsePBErr(t, "version: 1.0\nname: \"\"\n"+body[len("name: t\n"):]); len(pe.Warnings) != 1 || pe.Warnings[0].Field != "version" ||
		len(pe.Issues) != 1 || pe.Issues[0].Field != "name" {
		t.Errorf("plain 1.0 with a bad name: issues %v warnings %v", pe.Issues, pe.Warnings)
	}
	if pe := parsePBErr(t, body); pe.Issues[0].Field != "version" || !strings.Contains(pe.Issues[0].Message, "is required") {
		t.Errorf("no version: %s", pe.Details())
	}
}

func TestPlaybookBombsAndDeepNestingRejected(t *testing.T) {
	// Nine levels of nine aliases under x, used by node a's inputs.
	bomb := mustRead(t, "testdata/playbooks/alias-bomb.cantbook")
	nested := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	for _, tc := range []struct {
		name, src, field, limit string
		line                    int
	}{
		{"alias bomb", bomb, "x.f[0]", "MaxNodes", 9},
		{"10,000 [ then 10,000 ]", nested, "[0][0]", "MaxDepth", 1},
		{"10,000 nested lists in args", pbOf(det("a", "env:\n      A: "+nested)), "nodes[0].env.A[0]", "MaxDepth", 9},
		{"10,001 nested lists", strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001), "", "MaxDepth", 0},
		{"duplicate key", pbOf("  - id: a\n    id: b\n    type: approval\n    prompt: p\n"), "nodes[0].id", `duplicate key "id" (first at line 4)`, 5},
		{"non-core tag", pbOf("  - id: a\n    type: approval\n    prompt: !!binary aGk=\n"), "nodes[0].prompt", "tag !!binary is not allowed", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			pe := parsePBErr(t, tc.src)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if elapsed > raceSlowdown*time.Second {
				t.Errorf("took %v, want under a second", elapsed)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 50<<20 {
				t.Errorf("allocated %d MiB, want under 50 MiB", alloc>>20)
			}
			d := pe.Issues[0]
			if len(pe.Issues) != 1 || !strings.HasPrefix(d.Field, tc.field) || !strings.Contains(d.Message, tc.limit) || d.Line != tc.line || d.File != "t.cantbook" {
				t.Fatalf("issues = %v; want one at line %d, field %s…, naming %s", pe.Issues, tc.line, tc.field, tc.limit)
			}
		})
	}
}

func TestPlaybookTemplatingIsLiteralAndListsEveryMissingVar(t *testing.T) {
	src := "inputs:\n  - name: notes\n    required: true\n  - name: version\n" +
		pbOf(det("a", `args: [--notes, "{{ notes }}", "v={{ version }}"]`, `env: {NOTES: "{{ notes }}"}`))
	plan := parsePB(t, src)
	hostile := "{{ version }}\nnodes: []\non_fail: continue"
	bindings, err := ValidatePlaybookInputs(plan, map[string]string{"notes": hostile, "version": "$1 ${{ github.sha }}"})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range plan.Steps[0].Node.Args {
		r, err := Render(a, bindings)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, r)
	}
	// The value is one argument, byte for byte: its {{ version }} is not expanded again and its
	// newlines make no structure (the plan was fixed before any value was seen).
	if want := []string{"--notes", hostile, "v=$1 ${{ github.sha }}"}; !reflect.DeepEqual(args, want) {
		t.Fatalf("args = %q, want %q", args, want)
	}
	env, err := RenderValue(map[string]any{"NOTES": plan.Steps[0].Node.Env["NOTES"]}, bindings)
	if err != nil || env.(map[string]any)["NOTES"] != hostile || len(plan.Steps) != 1 {
		t.Fatalf("env = %v, %v", env, err)
	}
	// Every missing variable is listed, at parse time (no such input or node) ...
	pe := parsePBErr(t, pbOf(det("a", `args: ["{{ owner }}", "{{ ticket }}-{{ owner }}", "{{ a.stdout }}"]`)))
	if len(pe.Issues) != 2 || !strings.Contains(pe.Issues[0].Message, `template names "owner"`) || !strings.Contains(pe.Issues[1].Message, `template names "ticket", "owner"`) {
		t.Fatalf("issues = %s", pe.Details())
	}
	// ... and at run time, when an optional input has no value.
	_, err = Render(plan.Steps[0].Node.Args[1]+" {{ version }} {{ notes }}", map[string]any{})
	var mv *MissingVarError
	if !errors.As(err, &mv) || !slices.Equal(mv.Names, []string{"notes", "version"}) {
		t.Fatalf("Render err = %v", err)
	}
}

// FuzzParsePlaybook feeds arbitrary bytes to ParsePlaybook: it never panics, and it returns
// either a plan that keeps the rules (ids unique, depends in range and acyclic) or a
// *PlaybookParseError with issues.
func FuzzParsePlaybook(f *testing.F) {
	for _, p := range []string{releasePath, "../../runbooks/fanout.cantbook", "testdata/playbooks/ten-rules.cantbook"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(pbOf(det("a", "depends: [b]"), det("b", "on_failure: {inject_into: a}")) + "edges:\n  - {from: a, to: b, when: {binding: a.x, in: [1]}}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		plan, err := ParsePlaybook("f.cantbook", src)
		if err != nil {
			var pe *PlaybookParseError
			if plan != nil || !errors.As(err, &pe) || len(pe.Issues) == 0 {
				t.Fatalf("plan %v with error %#v", plan, err)
			}
			return
		}
		if plan.Kind != KindPlaybook || len(plan.Steps) == 0 || plan.Playbook.Version != "1.0" || plan.Name == "" {
			t.Fatalf("invalid plan accepted: %+v", plan)
		}
		ids := map[string]bool{}
		for i, s := range plan.Steps {
			if s.Index != i || ids[s.Name] || !nodeIDRE.MatchString(s.Name) || s.TimeoutSeconds < 1 || s.TimeoutSeconds > MaxNodeTimeoutSeconds {
				t.Fatalf("invalid step accepted: %+v", s)
			}
			ids[s.Name] = true
			for _, d := range s.Depends {
				if d >= i && !dependsBefore(plan, d, i) {
					t.Fatalf("step %d depends on %d", i, d)
				}
			}
		}
		if cyclic(plan) {
			t.Fatalf("cyclic plan accepted")
		}
	})
}

func dependsBefore(plan *Plan, d, i int) bool { return d >= 0 && d < len(plan.Steps) && d != i }

// cyclic is a simple oracle for the fuzz test: repeatedly remove steps with no remaining
// dependencies (Kahn); anything left is on a cycle.
func cyclic(plan *Plan) bool {
	done := make([]bool, len(plan.Steps))
	for left := len(plan.Steps); left > 0; {
		progress := false
		for i, s := range plan.Steps {
			if done[i] {
				continue
			}
			if !slices.ContainsFunc(s.Depends, func(d int) bool { return !done[d] }) {
				done[i], progress = true, true
				left--
			}
		}
		if !progress {
			return true
		}
	}
	return false
}
