package github

import (
	"fmt"
	"strings"
)

// GraphStep is one node of the job summary's step graph: a runbook step with its final
// status (a specification status word, or "not run") and, for a gate, who decided it.
type GraphStep struct {
	Name, Type, Status string
	// Approver is who decided a gate ("" when not a gate or undecided).
	Approver string
}

// GraphWithdrawn is the graph status of a gate the run stopped at while it waited (its
// approval withdrawn), which the report calls "not run" (docs/spec/playbooks.md, "Report").
const GraphWithdrawn = "withdrawn (run interrupted)"

// mermaidClass is the classDef of each status; unknown statuses get "other".
var mermaidClass = map[string]string{
	"PASS": "pass", "FAIL": "fail", "TIMED_OUT": "timedout", "SKIPPED": "skipped",
	"not run": "notrun", "AWAITING_CONFIRMATION": "waiting", GraphWithdrawn: "withdrawn",
}

// mermaidClassDefs colours the statuses (GitHub renders Mermaid in job summaries).
const mermaidClassDefs = `  classDef pass fill:#d3f9d8,stroke:#2b8a3e,color:#1b4332
  classDef fail fill:#ffe3e3,stroke:#c92a2a,color:#5c0011
  classDef timedout fill:#fff3bf,stroke:#e67700,color:#5c3c00
  classDef skipped fill:#f1f3f5,stroke:#868e96,color:#495057
  classDef notrun fill:#ffffff,stroke:#adb5bd,color:#868e96,stroke-dasharray:4 3
  classDef waiting fill:#d0ebff,stroke:#1864ab,color:#0b3d66
  classDef withdrawn fill:#fff4e6,stroke:#d9480f,color:#5c2400,stroke-dasharray:4 3
  classDef other fill:#f8f9fa,stroke:#495057
`

// MermaidLabel makes text safe inside a quoted Mermaid label and inside the Markdown code
// fence around it: quotes, angle brackets, backticks, #, ; and line breaks become Mermaid
// entity codes or spaces, so a step name can neither end the label nor the fence.
func MermaidLabel(s string) string {
	r := strings.NewReplacer(
		"#", "#35;", `"`, "#quot;", "<", "#lt;", ">", "#gt;", "`", "#96;", ";", "#59;",
		"\r", " ", "\n", " ", "\t", " ",
	)
	return r.Replace(s)
}

// MermaidGraph is a ```mermaid flowchart of steps in runbook order, each node "n. name",
// "type · STATUS" and the approver of a gate, coloured by status with one classDef per
// status (docs/action.md, "Runner-native output").
func MermaidGraph(steps []GraphStep) string {
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TD\n")
	for i, s := range steps {
		label := fmt.Sprintf("%d. %s<br/>%s · %s", i+1, MermaidLabel(s.Name), MermaidLabel(s.Type), MermaidLabel(s.Status))
		if s.Approver != "" {
			label += "<br/>decided by " + MermaidLabel(s.Approver)
		}
		fmt.Fprintf(&b, "  s%d[\"%s\"]\n", i, label)
	}
	for i := 1; i < len(steps); i++ {
		fmt.Fprintf(&b, "  s%d --> s%d\n", i-1, i)
	}
	b.WriteString(mermaidClassDefs)
	for i, s := range steps {
		c, ok := mermaidClass[s.Status]
		if !ok {
			c = "other"
		}
		fmt.Fprintf(&b, "  class s%d %s\n", i, c)
	}
	b.WriteString("```\n")
	return b.String()
}
