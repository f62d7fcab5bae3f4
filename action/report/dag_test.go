package report

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// TestReportMermaidDAG: the report of a playbook run shows the DAG with each node's
// status, its edges (a when edge labelled), iteration counts, and labels that cannot end the
// Mermaid label or the code fence.
func TestReportMermaidDAG(t *testing.T) {
	plan := &runbook.Plan{Name: "fan", Kind: runbook.KindPlaybook, Playbook: &runbook.Playbook{
		Edges: []runbook.Edge{{From: "a", To: "c", When: &runbook.When{Binding: "a.ok", Op: runbook.WhenEquals, Value: true}}},
	}}
	for i, id := range []string{"a", "b", "c", "d"} {
		s := runbook.Step{Index: i, Name: id, Type: runbook.TypeDeterministic}
		switch id {
		case "b", "c":
			s.Depends = []int{0}
		case "d":
			s.Depends, s.Type = []int{1, 2}, runbook.TypeApproval
		}
		plan.Steps = append(plan.Steps, s)
	}
	ev := []engine.Evidence{{StepName: "a", Status: engine.StatusFail}, {StepName: "a", Status: engine.StatusPass}, {StepName: "b", Status: engine.StatusPass}, {StepName: "c", Status: engine.StatusSkipped}}
	g := MermaidDAG(PlaybookGraph(plan, ev, map[string]int{"a": 2, "b": 1}, "d"))
	for _, want := range []string{
		"```mermaid\nflowchart TD\n",
		`n0["a<br/>deterministic · PASS ×2"]`,
		`n1["b<br/>deterministic · PASS"]`,
		`n2["c<br/>deterministic · SKIPPED"]`,
		`n3["d<br/>approval · AWAITING_CONFIRMATION"]`,
		"  n0 --> n1\n", `  n0 -->|"a.ok equals true"| n2`, "  n1 --> n3\n", "  n2 --> n3\n",
		"  class n0 pass\n", "  class n2 skipped\n", "  class n3 waiting\n",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("graph lacks %q:\n%s", want, g)
		}
	}
	if got := MermaidDAG(nil, nil); got != "" {
		t.Errorf("no nodes: %q", got)
	}
	evil := MermaidDAG([]DAGNode{{ID: "x\"]\n```", Type: "t", Status: NotRun}}, nil)
	if strings.Count(evil, "```") != 2 || strings.Contains(evil, "x\"]") {
		t.Errorf("label escapes: %s", evil)
	}
	// A runbook plan has no graph; the report of one is unchanged.
	if n, e := PlaybookGraph(&runbook.Plan{Steps: plan.Steps}, ev, nil, ""); n != nil || e != nil {
		t.Errorf("runbook graph: %v %v", n, e)
	}
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.RenderReport(Report{RunID: "r", RunStatus: engine.RunCompleted, DAG: g})
	if err != nil || !strings.Contains(out, "## Playbook graph\n\n```mermaid") {
		t.Errorf("report: %v\n%s", err, out)
	}
}
