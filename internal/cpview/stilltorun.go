package cpview

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// WriteStillToRun writes to w (rbook get), for a run that is not final and whose executor sent its plan
// (GetRunResponse.plan), the steps or nodes still to run with their inputs as the plan holds
// them (secrets masked, inputs cut to one line here): what approving the waiting gate lets
// happen (docs/console-plan.md). A runbook's steps after the last finished one; a playbook's
// nodes not yet finished. Nothing for a final run or a run without a plan.
func WriteStillToRun(w io.Writer, resp *rbookv1.GetRunResponse) {
	r, p := resp.GetRun(), resp.GetPlan()
	if p == nil || r.GetCompletedAt() != nil {
		return
	}
	finished := map[string]bool{}
	for _, n := range r.GetPlaybook().GetNodes() {
		finished[n.GetNodeId()] = n.GetStatus() != "pending" && n.GetStatus() != "running" && n.GetStatus() != "waiting"
	}
	var lines []string
	for _, s := range p.GetSteps() {
		if r.GetKind() == rbookv1.RunKind_RUN_KIND_PLAYBOOK && finished[s.GetName()] ||
			r.GetKind() != rbookv1.RunKind_RUN_KIND_PLAYBOOK && s.GetIndex() <= r.GetLastCompletedStepIndex() {
			continue
		}
		line := fmt.Sprintf("  %3d  %-13s %s", s.GetIndex()+1, s.GetType(), s.GetName())
		if s.GetGate() {
			line += "  (gate)"
		}
		if in := oneLine(s.GetInput(), 100); in != "" {
			line += "  " + in
		}
		if pj := oneLine(s.GetParamsJson(), 60); pj != "" {
			line += "  " + pj
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "Still to run (plan digest %s):\n%s\n", termui.CutRunes(p.GetContentHash(), 13), strings.Join(lines, "\n"))
}

// oneLine is s on one line for a terminal, cut to at most n runes (termui.CutRunes): control and
// bidirectional-text characters become spaces, so plan text cannot move the cursor or hide
// output.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
	return termui.CutRunes(strings.Join(strings.Fields(s), " "), n)
}
