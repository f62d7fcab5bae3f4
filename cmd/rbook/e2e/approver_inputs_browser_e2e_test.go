package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/internal/browsertest"
)

// The gate page of an approval node with a form (testdata/approver-inputs/form.cantbook)
// renders it — a select with the options for the enum, a checkbox for the boolean, labels
// with a required marker — and Approve without the required field is refused under that
// field with the gate still waiting; with blue chosen the gate is approved and the later
// node's argv gets blue and the checkbox's true (docs/approver-inputs.md, "Every channel").
func TestGatePageFormIsSentWithTheApprovalAndReachesTheNextNode(t *testing.T) {
	skipShort(t)
	b := browsertest.Start(t)
	dir := playbookWorkdir(t)
	src, err := os.ReadFile(filepath.Join("testdata", "approver-inputs", "form.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "form.cantbook"), src)
	p := start(t, dir, "playbook", "run", "form.cantbook")
	url, _ := gateURLFrom(t, p)
	tab := b.Person(t, "the person at the keyboard").Tab(t)
	openPage(t, tab, url)
	waitElementText(t, tab, "#gate-status", "Waiting for a decision")

	options := browsertest.Eval[[]string](t, tab, `[...document.querySelectorAll('select#input-target option')].map(o => o.textContent)`)
	if strings.Join(options, "|") != "— choose —|blue|green" {
		t.Errorf("target's options %q, want a prompt then blue and green", options)
	}
	if l := textOf(t, tab, `label[for="input-target"]`); l != "target *" {
		t.Errorf("target's label %q, want it marked required", l)
	}
	if !browsertest.Eval[bool](t, tab, `document.querySelector('input#input-notify').type === 'checkbox' && document.querySelector('input#input-notify').checked`) {
		t.Errorf("notify is not a checked checkbox (its default is true)")
	}
	if d := textOf(t, tab, "#input-target-help"); d != "the slot that takes traffic" {
		t.Errorf("target's description %q", d)
	}

	tab.Click(t, "#approve")
	waitElementText(t, tab, "#input-target-error", "is required")
	if !browsertest.Eval[bool](t, tab, `document.querySelector('#input-target').getAttribute('aria-invalid') === 'true'`) {
		t.Errorf("the refused field is not marked aria-invalid")
	}
	waitElementText(t, tab, "#gate-status", "Waiting for a decision")

	browsertest.Eval[string](t, tab, `(() => { const s = document.querySelector('#input-target'); s.value = 'blue'; s.dispatchEvent(new Event('change')); return s.value; })()`)
	tab.Click(t, "#approve")
	waitElementText(t, tab, "#outcome", "Approved")
	waitElementText(t, tab, "#input-values", "blue")
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), `\"stdout\":\"deploying blue true\"`) {
		t.Errorf("deploy's evidence lacks the argv deploying blue true:\n%s", p.output())
	}
	tab.NoProblems(t, "400")
}
