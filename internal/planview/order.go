package planview

import (
	"fmt"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// Order is the indexes of plan's steps in the order rbook plan lists them: a runbook's in
// file order (a chain); a playbook's in topological order of depends, a node never before one
// it depends on, ties (nodes that could run side by side) in file order. A cycle cannot load
// (runbook.LoadPlaybook refuses it); were one there, its nodes would follow in file order.
func Order(plan *runbook.Plan) []int {
	n := len(plan.Steps)
	waiting := make([]int, n)
	children := make([][]int, n)
	for i, s := range plan.Steps {
		for _, d := range s.Depends {
			if d >= 0 && d < n && d != i {
				waiting[i]++
				children[d] = append(children[d], i)
			}
		}
	}
	out := make([]int, 0, n)
	done := make([]bool, n)
	for len(out) < n {
		next := -1
		for i := range n {
			if !done[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 { // a cycle: the rest in file order
			for i := range n {
				if !done[i] {
					out, done[i] = append(out, i), true
				}
			}
			break
		}
		out, done[next] = append(out, next), true
		for _, c := range children[next] {
			waiting[c]--
		}
	}
	return out
}

// rendered is plan with a playbook's node templates (args, prompt, agentic inputs) rendered
// from inputs where every name a template uses is bound, the rest as written, and the inputs'
// texts added to ValueTexts so PlanOf masks the secret-looking ones. A runbook, or a playbook
// without inputs, is plan itself; plan is not changed.
func rendered(plan *runbook.Plan, inputs map[string]any) *runbook.Plan {
	if plan.Kind != runbook.KindPlaybook || len(inputs) == 0 {
		return plan
	}
	out := *plan
	out.ValueTexts = inputTexts(inputs)
	for k, v := range plan.ValueTexts {
		out.ValueTexts[k] = v
	}
	out.Steps = make([]runbook.Step, len(plan.Steps))
	for i, s := range plan.Steps {
		if s.Node != nil {
			n := *s.Node
			n.Args = make([]string, len(s.Node.Args))
			for j, a := range s.Node.Args {
				n.Args[j] = renderOr(a, inputs)
			}
			n.Prompt = renderOr(n.Prompt, inputs)
			if len(n.Inputs) > 0 {
				if v, err := runbook.RenderValue(n.Inputs, inputs); err == nil {
					n.Inputs, _ = v.(map[string]any)
				}
			}
			s.Node = &n
		}
		out.Steps[i] = s
	}
	return &out
}

// renderOr is tmpl rendered from bindings, or tmpl as written when a name it uses is unbound.
func renderOr(tmpl string, bindings map[string]any) string {
	if s, err := runbook.Render(tmpl, bindings); err == nil {
		return s
	}
	return tmpl
}

// inputTexts is inputs as runbook.Plan.ValueTexts: each input's name and its value's text.
func inputTexts(inputs map[string]any) map[string][]string {
	out := make(map[string][]string, len(inputs))
	for k, v := range inputs {
		out[k] = []string{fmt.Sprint(v)}
	}
	return out
}
