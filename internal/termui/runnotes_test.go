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
