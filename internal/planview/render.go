package planview

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/internal/termui"
)

// JSON writes v as indented JSON (the `-o json` shape, docs/plan.md, "JSON") and a newline.
func JSON(w io.Writer, v *View) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Text writes v for a terminal: a header with the file, the plan digest and the policies,
// then one numbered block per step in order: its type, on_fail and timeout, its input, what
// would run, and for a gate who must decide it. color turns on bold names and the gate's
// verdict in colour (termui.SGR; pass termui.ColorAllowed).
func Text(w io.Writer, v *View, color bool) {
	bold := func(s string) string { return termui.SGR(color, termui.SGRBold, s) }
	fmt.Fprintf(w, "Plan of %s %s (%s", v.Kind, bold(v.Name), v.File)
	if v.ValuesFile != "" {
		fmt.Fprintf(w, ", values %s", v.ValuesFile)
	}
	fmt.Fprintf(w, "): %s\n", termui.Plural(len(v.Steps), kindWord(v.Kind), kindWord(v.Kind)+"s"))
	fmt.Fprintf(w, "Plan digest: %s (every decision of this run is bound to it)\n", v.Digest)
	fmt.Fprintf(w, "Gate policy: %s\n", v.Policy.Gates)
	if v.Kind == "playbook" {
		fmt.Fprintf(w, "Auto-pass policy: %s\n", v.Policy.AutoPass)
		for _, k := range sortedKeys(v.Inputs) {
			fmt.Fprintf(w, "Input %s = %s\n", k, v.Inputs[k])
		}
	}
	for _, s := range v.Steps {
		fmt.Fprintf(w, "\n%2d. %s  %s%s\n", s.Order, bold(s.Name), s.Type, stepTerms(s))
		for _, l := range detailLines(s) {
			fmt.Fprintf(w, "      %-9s %s\n", l[0]+":", l[1])
		}
		if s.Gate != nil {
			code := termui.SGRYellow
			if !s.Gate.NeedsPerson {
				code = termui.SGRGreen
			}
			fmt.Fprintf(w, "      %-9s %s\n", "gate:", termui.SGR(color, code, verdict(s.Gate)))
			fmt.Fprintf(w, "      %-9s %s\n", "deciders:", deciders(s.Gate))
		}
	}
	if v.Truncated {
		fmt.Fprintln(w, "\nSome inputs are cut to the plan's size limits (marked …cut).")
	}
}

// Markdown writes v for a job summary: a heading, the plan digest, the policies, a table of
// the steps in order, and one line per gate saying whether a person must decide and who may.
// Every value is written as inline code, so nothing in a runbook can add Markdown.
func Markdown(w io.Writer, v *View) {
	fmt.Fprintf(w, "### Plan: %s %s\n\n", v.Kind, code(v.Name))
	fmt.Fprintf(w, "- File: %s", code(v.File))
	if v.ValuesFile != "" {
		fmt.Fprintf(w, ", values %s", code(v.ValuesFile))
	}
	fmt.Fprintf(w, "\n- Plan digest: %s (every decision of this run is bound to it)\n", code(v.Digest))
	fmt.Fprintf(w, "- Gate policy: %s\n", md(v.Policy.Gates))
	if v.Kind == "playbook" {
		fmt.Fprintf(w, "- Auto-pass policy: %s\n", md(v.Policy.AutoPass))
		for _, k := range sortedKeys(v.Inputs) {
			fmt.Fprintf(w, "- Input %s = %s\n", code(k), code(v.Inputs[k]))
		}
	}
	fmt.Fprintf(w, "\n| # | %s | type | input | runs | gate |\n| ---: | --- | --- | --- | --- | --- |\n", kindWord(v.Kind))
	for _, s := range v.Steps {
		lines := detailLines(s)
		var detail []string
		for _, l := range lines[:len(lines)-1] {
			detail = append(detail, l[0]+": "+code(l[1]))
		}
		runs := code(lines[len(lines)-1][1])
		g := ""
		if s.Gate != nil {
			g = md(verdict(s.Gate)) + "<br>" + md(deciders(s.Gate))
			if s.Gate.NeedsPerson {
				g = "🧑 " + g
			} else {
				g = "🤖 " + g
			}
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", s.Order, code(s.Name), s.Type+md(stepTerms(s)), strings.Join(detail, "<br>"), runs, g)
	}
	if v.Truncated {
		fmt.Fprintln(w, "\nSome inputs are cut to the plan's size limits (marked …cut).")
	}
}

// kindWord is "step" for a runbook and "node" for a playbook.
func kindWord(kind string) string {
	if kind == "playbook" {
		return "node"
	}
	return "step"
}

// stepTerms is a step's depends, on_fail and timeout as ", after a, b; on_fail halt; 30s".
func stepTerms(s Step) string {
	var t []string
	if len(s.Depends) > 0 {
		t = append(t, "after "+strings.Join(s.Depends, ", "))
	}
	if s.OnFail != "" {
		t = append(t, "on_fail "+s.OnFail)
	}
	if s.TimeoutSeconds > 0 {
		t = append(t, fmt.Sprintf("timeout %ds", s.TimeoutSeconds))
	}
	if len(t) == 0 {
		return ""
	}
	return " (" + strings.Join(t, "; ") + ")"
}

// detailLines are a step's labelled lines, the last always "runs": what would run.
func detailLines(s Step) [][2]string {
	var out [][2]string
	cut := ""
	if s.InputTruncated {
		cut = " …cut"
	}
	switch s.Runs {
	case "exec":
		out = append(out, [2]string{"command", s.Input + cut})
	case "simulated":
		out = append(out, [2]string{"template", s.Input + cut})
	case "gate":
		if s.Input != "" {
			out = append(out, [2]string{"prompt", s.Input + cut})
		}
	default:
		if s.Input != "" {
			out = append(out, [2]string{"input", s.Input + cut})
		}
	}
	if len(s.Params) > 0 {
		out = append(out, [2]string{"params", string(s.Params)})
	}
	if s.When != "" {
		out = append(out, [2]string{"when", s.When})
	}
	if s.Limits != "" {
		out = append(out, [2]string{"limits", s.Limits})
	}
	if s.Resolves != "" {
		out = append(out, [2]string{"resolves", s.Resolves})
	}
	return append(out, [2]string{"runs", runsText(s)})
}

// runsText says what would run for s.
func runsText(s Step) string {
	switch s.Runs {
	case "exec":
		b, _ := json.Marshal(s.Argv) // strings only
		return "exec without a shell, argv " + string(b)
	case "mcp":
		if len(s.Tools) == 0 {
			return "the MCP server's only tool"
		}
		return "MCP tool " + strings.Join(s.Tools, ", then ")
	case "simulated":
		return "a simulated " + s.Type + " of the template (not executed in v1)"
	}
	return "a gate: the run waits for its decision"
}

// verdict says whether g needs a person and why.
func verdict(g *Gate) string {
	if g.AutoPass != nil && g.AutoPass.Passes {
		return fmt.Sprintf("auto-passes by rule %s: %s", g.AutoPass.Rule, g.AutoPass.Reason)
	}
	if g.AutoPass != nil {
		return "needs a person: " + g.AutoPass.Reason
	}
	return "needs a person (confirm steps never auto-pass)"
}

// deciders says who may decide g: M of whom, four-eyes, the rule.
func deciders(g *Gate) string {
	who := "anyone with the approver role"
	if len(g.Approvers) > 0 {
		who = strings.Join(g.Approvers, ", ")
	}
	s := fmt.Sprintf("%s from %s", termui.Plural(g.Approvals, "approval", "approvals"), who)
	if g.FourEyes {
		s += ", not the run's starter"
	}
	s += "; " + g.Rule
	if len(g.Form) > 0 {
		s += "; asks for " + strings.Join(g.Form, ", ")
	}
	return s
}

// code is s as Markdown inline code that s cannot close, on one line, safe in a table cell.
func code(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	n := 0
	for run, i := 0, 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			n = max(n, run)
		} else {
			run = 0
		}
	}
	tick := strings.Repeat("`", n+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return tick + " " + s + " " + tick
	}
	return tick + s + tick
}

// md is plain text for a Markdown line or table cell: characters that start Markdown or HTML
// are escaped, and line breaks become spaces.
func md(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>|#~!", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sortedKeys is m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
