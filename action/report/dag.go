package report

import (
	"fmt"
	"strings"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
)

// DAGNode is one playbook node in the report's graph (docs/spec/playbooks.md, "Report"): its id, type, final
// status (a step status word, NotRun, or AWAITING_CONFIRMATION for an open gate) and how
// many times it executed.
type DAGNode struct {
	ID, Type   string
	Status     engine.StepStatus
	Iterations int
}

// DAGEdge is one dependency of the graph: To waited for From. When is the edge's condition
// as text ("" for none).
type DAGEdge struct {
	From, To, When string
}

// PlaybookGraph derives the graph of a playbook run from its plan and evidence: every node in
// plan order with the status of its last evidence entry (NotRun without one; waiting, when
// it is the open gate), and one edge per dependency (depends ∪ edges, each once), labelled
// with an edge's when. counts are the run's iteration_counts (may be nil). It returns nils
// for a runbook plan.
func PlaybookGraph(plan *runbook.Plan, ev []engine.Evidence, counts map[string]int, waiting string) ([]DAGNode, []DAGEdge) {
	if plan == nil || plan.Kind != runbook.KindPlaybook {
		return nil, nil
	}
	last := map[string]engine.StepStatus{}
	for _, e := range ev {
		last[e.StepName] = e.Status
	}
	nodes := make([]DAGNode, 0, len(plan.Steps))
	when := map[[2]string]string{}
	if plan.Playbook != nil {
		for _, e := range plan.Playbook.Edges {
			if e.When != nil {
				when[[2]string{e.From, e.To}] = whenText(e.When)
			}
		}
	}
	var edges []DAGEdge
	for _, s := range plan.Steps {
		st, ok := last[s.Name]
		if !ok {
			st = NotRun
		}
		if s.Name == waiting {
			st = engine.StatusAwaitingConfirmation
		}
		nodes = append(nodes, DAGNode{ID: s.Name, Type: string(s.Type), Status: st, Iterations: counts[s.Name]})
		for _, d := range s.Depends {
			if d < 0 || d >= len(plan.Steps) {
				continue
			}
			from := plan.Steps[d].Name
			edges = append(edges, DAGEdge{From: from, To: s.Name, When: when[[2]string{from, s.Name}]})
		}
	}
	return nodes, edges
}

func whenText(w *runbook.When) string {
	switch w.Op {
	case runbook.WhenExists, runbook.WhenTruthy:
		return fmt.Sprintf("%s %s", w.Binding, w.Op)
	}
	return fmt.Sprintf("%s %s %v", w.Binding, w.Op, w.Value)
}

// dagClass is the Mermaid classDef of each node status; others get "other".
var dagClass = map[engine.StepStatus]string{
	engine.StatusPass: "pass", engine.StatusFail: "fail", engine.StatusTimedOut: "timedout",
	engine.StatusSkipped: "skipped", NotRun: "notrun", engine.StatusAwaitingConfirmation: "waiting",
}

const dagClassDefs = `  classDef pass fill:#d3f9d8,stroke:#2b8a3e,color:#1b4332
  classDef fail fill:#ffe3e3,stroke:#c92a2a,color:#5c0011
  classDef timedout fill:#fff3bf,stroke:#e67700,color:#5c3c00
  classDef skipped fill:#f1f3f5,stroke:#868e96,color:#495057
  classDef notrun fill:#ffffff,stroke:#adb5bd,color:#868e96,stroke-dasharray:4 3
  classDef waiting fill:#d0ebff,stroke:#1864ab,color:#0b3d66
  classDef other fill:#f8f9fa,stroke:#495057
`

// dagLabel makes text safe inside a quoted Mermaid label and the code fence around it (the
// same escaping as the job summary's step graph, action/github.MermaidLabel).
var dagLabel = strings.NewReplacer(
	"#", "#35;", `"`, "#quot;", "<", "#lt;", ">", "#gt;", "`", "#96;", ";", "#59;", "|", "#124;",
	"\r", " ", "\n", " ", "\t", " ",
).Replace

// MermaidDAG renders the graph as a ```mermaid flowchart: one box per node ("id", "type ·
// STATUS", "×n" when it executed more than once), one arrow per edge (labelled with its when),
// coloured by status. Node ids are [A-Za-z0-9_-] (the parser's rule), but the Mermaid ids are
// n0, n1, … so no id can clash with Mermaid keywords. Empty for no nodes.
func MermaidDAG(nodes []DAGNode, edges []DAGEdge) string {
	if len(nodes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TD\n")
	ids := make(map[string]string, len(nodes))
	for i, n := range nodes {
		ids[n.ID] = fmt.Sprintf("n%d", i)
		label := fmt.Sprintf("%s<br/>%s · %s", dagLabel(n.ID), dagLabel(n.Type), dagLabel(string(n.Status)))
		if n.Iterations > 1 {
			label += fmt.Sprintf(" ×%d", n.Iterations)
		}
		fmt.Fprintf(&b, "  n%d[\"%s\"]\n", i, label)
	}
	for _, e := range edges {
		from, ok1 := ids[e.From]
		to, ok2 := ids[e.To]
		if !ok1 || !ok2 {
			continue
		}
		if e.When != "" {
			fmt.Fprintf(&b, "  %s -->|\"%s\"| %s\n", from, dagLabel(e.When), to)
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", from, to)
		}
	}
	b.WriteString(dagClassDefs)
	for i, n := range nodes {
		c, ok := dagClass[n.Status]
		if !ok {
			c = "other"
		}
		fmt.Fprintf(&b, "  class n%d %s\n", i, c)
	}
	b.WriteString("```\n")
	return b.String()
}
