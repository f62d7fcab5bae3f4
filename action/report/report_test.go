package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
)

func sampleEvidence() []engine.Evidence {
	q := "Resources | where a == 'x|y' | project name"
	return []engine.Evidence{
		{StepName: "q|pipe", Type: "check", Input: &q, Output: "```\n{\"count\":1}", Status: engine.StatusFail, TimestampUTC: "2026-05-12T08:30:00.000000001Z"},
		{StepName: "CANCEL", Type: "cancel", Output: "Cancel confirmed by user.", Status: engine.StatusPass, TimestampUTC: "2026-05-12T08:30:01.000000000Z"},
	}
}

func TestReportHeadingAndCounts(t *testing.T) {
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.RenderReport(Report{RunID: "RBOOK-1", RunbookName: "demo", RunStatus: engine.RunCancelled, TotalSteps: 4, Evidence: sampleEvidence()})
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(s, "\n"); first != ReportHeading {
		t.Fatalf("first line %q", first)
	}
	if strings.Count(s, "\n# ") != 0 {
		t.Errorf("a second H1 in the report:\n%s", s)
	}
	for _, want := range []string{"**CANCELLED**", "4 in the runbook: 0 passed, 1 failed, 0 timed out, 0 skipped, 0 not run · and 1 other evidence entry", `q\|pipe`} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestEvidencePackIsAJSONArrayInOrder(t *testing.T) {
	for _, ev := range [][]engine.Evidence{nil, sampleEvidence()} {
		js, err := state.EvidencePackJSON(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back []map[string]any
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("not a JSON array: %v\n%s", err, js)
		}
		if len(back) != len(ev) {
			t.Fatalf("%d entries, want %d", len(back), len(ev))
		}
		for i, e := range back {
			if len(e) != 6 || e["step_name"] != ev[i].StepName {
				t.Errorf("entry %d = %v; want the seed's six fields in execution order", i, e)
			}
		}
	}
	js, _ := state.EvidencePackJSON(sampleEvidence())
	if err := json.Unmarshal(js, new([]any)); err != nil || strings.Contains(string(js), ",\n]") {
		t.Errorf("trailing comma")
	}
	if !strings.Contains(string(js), `"input": null`) {
		t.Errorf("a missing input must be null:\n%s", js)
	}
}

func TestStepStatusFencesHostileOutput(t *testing.T) {
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	ev := sampleEvidence()[0]
	s, err := r.RenderStepStatus(StepStatus{RunID: "R", Number: 2, Count: 6, Entry: ev, Elapsed: "1.2s"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, "Step 2/6") || !strings.Contains(s, "FAIL") || !strings.Contains(s, "````text\n```\n") {
		t.Errorf("step status:\n%s", s)
	}
}

func TestOverrideTemplates(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "prompts"), 0o755)
	os.WriteFile(filepath.Join(dir, "prompts", "cancel.prompt.md"), []byte("Really cancel {{.Deployment}}?"), 0o600)
	r, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := r.RenderCancelPrompt("R", "rbook-deploy-x-20260512"); s != "Really cancel rbook-deploy-x-20260512?\n" {
		t.Errorf("override not used: %q", s)
	}
	os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
	bad := filepath.Join(dir, "templates", "output-report.md")
	os.WriteFile(bad, []byte("# Some Other Title\n"), 0o600)
	if _, err := New(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a report template without the seed heading: %v", err)
	}
	os.WriteFile(bad, []byte("# Runbook Execution Report\n{{.Nope"), 0o600)
	if _, err := New(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a broken template: %v", err)
	}
}

// TestReportNamesWhoDecidedEachGateHowAndWhy: the report's "Gate decisions" table reads each
// decided gate's evidence back into approver, channel and reason (the policy's note with
// them); a confirm step passed at the terminal says so with the answer typed; a gate that
// timed out shows its output as the reason; a gate still waiting is not listed.
func TestReportNamesWhoDecidedEachGateHowAndWhy(t *testing.T) {
	ev := []engine.Evidence{
		{StepName: "deploy", Type: "deploy", Status: engine.StatusPass, Output: "approved by x via y"},
		{StepName: "confirm-rollout", Type: "confirm", Status: engine.StatusPass, Output: "approved by unverified:alice via control-plane: checked the canary | ok"},
		{StepName: "second-look", Type: "confirm", Status: engine.StatusFail, Output: "rejected by bob via terminal"},
		{StepName: "review", Type: "approval", Status: engine.StatusPass, Output: "approved by carol via github; policy: a person decides (no auto-pass rule matched)"},
		{StepName: "late", Type: "confirm", Status: engine.StatusTimedOut, Output: "no decision before the deadline"},
		{StepName: "typed", Type: "confirm", Status: engine.StatusPass, Output: "yes"},
		{StepName: "waiting", Type: "confirm", Status: engine.StatusAwaitingConfirmation, Output: ""},
	}
	want := []GateRow{
		{Name: "confirm-rollout", Status: engine.StatusPass, Verdict: "approved", By: "unverified:alice", Via: "control-plane", Reason: "checked the canary | ok"},
		{Name: "second-look", Status: engine.StatusFail, Verdict: "rejected", By: "bob", Via: "terminal"},
		{Name: "review", Status: engine.StatusPass, Verdict: "approved", By: "carol", Via: "github", Reason: "policy: a person decides (no auto-pass rule matched)"},
		{Name: "late", Status: engine.StatusTimedOut, Reason: "no decision before the deadline"},
		{Name: "typed", Status: engine.StatusPass, Verdict: "approved", Via: "terminal", Reason: `answered "yes"`},
	}
	if got := GateRows(ev); !reflect.DeepEqual(got, want) {
		t.Fatalf("GateRows:\n got %+v\nwant %+v", got, want)
	}
	r, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.RenderReport(Report{RunID: "RBOOK-20260101-demo-0123abcd", RunStatus: engine.RunCompleted, Evidence: ev[:3]})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"## Gate decisions",
		"| confirm-rollout | ✅ approved | unverified:alice | control-plane | checked the canary \\| ok |",
		"| second-look | ❌ rejected | bob | terminal | - |",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("report lacks %q:\n%s", line, out)
		}
	}
}

// An approval node's decision object in the evidence is read into the Gates row, with the
// approver-input values it was approved with (docs/approver-inputs.md).
func TestGateRowsReadAnApprovalNodesDecisionAndInputs(t *testing.T) {
	rows := GateRows([]engine.Evidence{{StepName: "review", Type: "approval", Status: engine.StatusPass,
		Output: `{"approved":true,"auto_passed":false,"by":"unverified:ann","inputs":{"target":"blue","replicas":"3"},"reason":"ok","rule":""}`}})
	want := GateRow{Name: "review", Status: engine.StatusPass, Verdict: "approved", By: "unverified:ann", Reason: "ok", Inputs: "replicas=3, target=blue"}
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("GateRows = %+v, want %+v", rows, want)
	}
}

// A push-back's evidence (docs/push-back.md) is a Gates row saying where the run was sent
// back and at which iteration, with the reviewer and the comment; the gate's later approval
// is its own row.
func TestGateRowsShowAPushBack(t *testing.T) {
	rows := GateRows([]engine.Evidence{
		{StepName: "review", Type: "approval", Status: engine.StatusFail,
			Output: `{"approved":false,"auto_passed":false,"by":"bob","feedback":"add a test","iteration":1,"reason":"add a test","redo_from":"build","rule":"","sent_back":true}`},
		{StepName: "review", Type: "approval", Status: engine.StatusPass,
			Output: `{"approved":true,"auto_passed":false,"by":"bob","feedback":"","iteration":2,"reason":"","redo_from":"","rule":"","sent_back":false}`},
	})
	want := []GateRow{
		{Name: "review", Status: engine.StatusFail, Verdict: "sent back to build (iteration 1)", By: "bob", Reason: "add a test", SentBack: true},
		{Name: "review", Status: engine.StatusPass, Verdict: "approved", By: "bob"},
	}
	if len(rows) != 2 || rows[0] != want[0] || rows[1] != want[1] {
		t.Fatalf("GateRows = %+v\nwant %+v", rows, want)
	}
}
