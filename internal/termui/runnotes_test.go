package termui

import (
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/report"
)

// TestCancelPromptOnATerminalIsText: the cancel prompt's Markdown (heading marks, backticks,
// emphasis, list dashes) becomes text, and every word of it stays.
func TestCancelPromptOnATerminalIsText(t *testing.T) {
	r, err := report.New("")
	if err != nil {
		t.Fatal(err)
	}
	md, err := r.RenderCancelPrompt("RBOOK-20260101-demo-0123abcd", "rbook-deploy-app-config")
	if err != nil {
		t.Fatal(err)
	}
	got := MarkdownText(md)
	for _, mark := range []string{"#", "`", "**", "\n- "} {
		if strings.Contains(got, mark) {
			t.Errorf("text still holds %q:\n%s", mark, got)
		}
	}
	for _, want := range []string{
		"Cancel run RBOOK-20260101-demo-0123abcd?\n",
		"  • Deployment: rbook-deploy-app-config\n",
		"cancel_arm_template_deployment is not called.",
		"ends CANCELLED.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
}

// TestGateLineNamesOnlyWhatTheEvidenceKnows: a gate line says who decided when the evidence
// names them, and never leaves an empty "by" where it does not (a confirm step answered at
// the terminal records only the answer typed).
func TestGateLineNamesOnlyWhatTheEvidenceKnows(t *testing.T) {
	cases := []struct {
		row  report.GateRow
		want string
	}{
		{report.GateRow{Name: "confirm-rollout", Verdict: "approved", Via: "terminal", Reason: `answered "yes"`},
			"  Gate 'confirm-rollout'  approved via terminal: answered \"yes\"\n"},
		{report.GateRow{Name: "confirm-rollout", Verdict: "approved", By: "alice", Via: "rbook-approve", Reason: "looks good"},
			"  Gate 'confirm-rollout'  approved by alice via rbook-approve: looks good\n"},
		{report.GateRow{Name: "publish", Verdict: "approved", By: "policy"},
			"  Gate 'publish'  approved by policy\n"},
		{report.GateRow{Name: "confirm-rollout", Status: "TIMED_OUT"},
			"  Gate 'confirm-rollout'  TIMED_OUT\n"},
	}
	for _, c := range cases {
		var b strings.Builder
		GateLines(&b, []report.GateRow{c.row})
		if b.String() != c.want {
			t.Errorf("GateLines(%+v) = %q, want %q", c.row, b.String(), c.want)
		}
	}
}
