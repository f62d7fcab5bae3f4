package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// A playbook whose approval node declares a form (testdata/approver-inputs/deploy.cantbook):
// `rbook approve --input target=red` is refused naming the field, exit 1, and the gate stays
// pending; `rbook approve --input target=blue` approves it, and the later deterministic
// node's argv receives blue and the default 3 — read from the run's evidence on the control
// plane — and the report's gate decisions show the values (docs/approver-inputs.md).
func TestApproverInputReachesALaterNodesArgv(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	src, err := os.ReadFile(filepath.Join("testdata", "approver-inputs", "deploy.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "deploy.cantbook"), src)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "deploy.cantbook", "--control-plane", url)
	p.waitFor(t, "rbook playbook approve ")
	p.waitFor(t, "  replicas (a number) [3]")
	tok := playbookApproveLine.FindStringSubmatch(p.output())[1]
	if !strings.Contains(p.output(), "  target (one of blue, green; required) — the slot that takes traffic\n") {
		t.Errorf("the run does not say which inputs the gate asks for:\n%s", p.output())
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "deploy-slot.playbook.state.json"))

	out, code := run2(t, dir, "approve", tok, "--input", "target=red", "--control-plane", url)
	if code == 0 || !strings.Contains(out, "input target: must be one of blue, green") || !strings.Contains(out, "E_INVALID_ARGUMENT") {
		t.Fatalf("rbook approve --input target=red: exit %d\n%s\nwant a refusal naming target", code, out)
	}
	aps, err := cpclient.New(url, "").Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: st.RunID})
	if err != nil || len(aps.GetApprovals()) != 1 {
		t.Fatalf("approvals of run %s: %v %v", st.RunID, aps.GetApprovals(), err)
	}
	if a := aps.GetApprovals()[0]; a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(a.GetVotes()) != 0 ||
		len(a.GetInputs()) != 2 || a.GetInputs()[0].GetName() != "target" {
		t.Fatalf("after the refusal the gate is %v with %d votes and form %v; want pending, no vote, the form", a.GetStatus(), len(a.GetVotes()), a.GetInputs())
	}

	out, code = run2(t, dir, "approve", tok, "--input", "target=blue", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Inputs: replicas=3, target=blue") {
		t.Fatalf("rbook approve --input target=blue: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the approval\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "| review | ✅ approved | ") || !strings.Contains(p.output(), "(inputs: replicas=3, target=blue) |") {
		t.Errorf("the report's gate decisions lack the input values:\n%s", p.output())
	}
	resp := getRun(t, url, st.RunID)
	var review map[string]any
	var deployInput, deployOutput string
	for _, tr := range resp.GetTransitions() {
		switch e := tr.GetEvidence(); e.GetStepName() {
		case "review":
			if err := json.Unmarshal([]byte(e.GetOutput()), &review); err != nil {
				t.Fatalf("review's evidence output %q: %v", e.GetOutput(), err)
			}
		case "deploy":
			deployInput, deployOutput = e.GetInput(), e.GetOutput()
		}
	}
	if in, _ := review["inputs"].(map[string]any); in["target"] != "blue" || in["replicas"] != "3" {
		t.Errorf("review's evidence output %v; want inputs target=blue, replicas=3", review)
	}
	var argv []string
	if err := json.Unmarshal([]byte(deployInput), &argv); err != nil || !slices.Equal(argv, []string{"echo", "deploying", "blue", "3"}) {
		t.Errorf("deploy's evidence input %q (%v); want the argv [echo deploying blue 3]", deployInput, err)
	}
	var res struct{ Stdout string }
	if err := json.Unmarshal([]byte(deployOutput), &res); err != nil || res.Stdout != "deploying blue 3" {
		t.Errorf("deploy's evidence output %q (%v); want stdout deploying blue 3", deployOutput, err)
	}
}

// A runbook whose confirm step declares a form (testdata/approver-inputs/confirm-form.yaml):
// the waiting run lists the fields, `rbook approve --input target=red` is refused naming the
// field, and `--input target=blue --input ticket=OPS-7` approves it; the report's gate
// decisions show the values (docs/approver-inputs.md, "Runbook confirm steps").
func TestApproverInputIsKeptWithARunbookConfirmStep(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "runbooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"confirm-form.yaml", "confirm-form.values.yaml"} {
		src, err := os.ReadFile(filepath.Join("testdata", "approver-inputs", f))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(dir, "runbooks", f), src)
	}
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "run", "confirm-form", "--control-plane", url)
	tok := tokenFrom(t, p)
	p.waitFor(t, "  ticket (matching [A-Z]+-[0-9]+)")
	out, code := run2(t, dir, "approve", tok, "--input", "target=red", "--control-plane", url)
	if code == 0 || !strings.Contains(out, "input target: must be one of blue, green") {
		t.Fatalf("rbook approve --input target=red: exit %d\n%s\nwant a refusal naming target", code, out)
	}
	out, code = run2(t, dir, "approve", tok, "--input", "target=blue", "--input", "ticket=OPS-7", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Inputs: replicas=3, target=blue, ticket=OPS-7") {
		t.Fatalf("rbook approve --input target=blue: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the approval\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "| confirm-slot | ✅ approved | ") || !strings.Contains(p.output(), "(inputs: replicas=3, target=blue, ticket=OPS-7) |") ||
		!strings.Contains(p.output(), `\"inputs\":{\"replicas\":\"3\",\"target\":\"blue\",\"ticket\":\"OPS-7\"}`) {
		t.Errorf("the report's gate decisions or the evidence lack the input values:\n%s", p.output())
	}
}
