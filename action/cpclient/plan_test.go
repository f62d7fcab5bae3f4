package cpclient

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/action/runbook"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/runplan"
)

// wantStep is the part of a PlanStep a test states.
type wantStep struct {
	name, typ, input, params string
	argv                     []string
	depends                  []int32
	gate                     bool
	onFail                   string
}

func checkSteps(t *testing.T, got *rbookv1.RunPlan, want []wantStep) {
	t.Helper()
	if len(got.GetSteps()) != len(want) {
		t.Fatalf("plan has %d steps, want %d:\n%s", len(got.GetSteps()), len(want), prototext.Format(got))
	}
	for i, w := range want {
		s := got.GetSteps()[i]
		if s.GetIndex() != int32(i) || s.GetName() != w.name || s.GetType() != w.typ || s.GetInput() != w.input ||
			s.GetParamsJson() != w.params || strings.Join(s.GetArgv(), "\x00") != strings.Join(w.argv, "\x00") ||
			len(s.GetDepends()) != len(w.depends) || s.GetGate() != w.gate || s.GetOnFail() != w.onFail {
			t.Errorf("step %d = %s\nwant %+v", i, prototext.Format(s), w)
			continue
		}
		for j, d := range w.depends {
			if s.GetDepends()[j] != d {
				t.Errorf("step %d depends = %v, want %v", i, s.GetDepends(), w.depends)
			}
		}
	}
}

// A runbook's plan carries each step's input as it will execute: the check's query with the
// scope filter, the deploy's template and params; the values whose key looks secret are
// masked wherever they appear, and params keys that look secret are masked too.
func TestPlanOfRunbookRendersInputsAndMasksSecrets(t *testing.T) {
	plan, err := runbook.LoadFile("testdata/plan/secrets.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	got := PlanOf(plan)
	if got.GetContentHash() != plan.ContentHash || got.GetTruncated() {
		t.Fatalf("content_hash %q truncated %v, want %q and false", got.GetContentHash(), got.GetTruncated(), plan.ContentHash)
	}
	checkSteps(t, got, []wantStep{
		{name: "no-public-ips", typ: "check", onFail: "halt",
			input: "Resources | where type =~ 'microsoft.network/publicipaddresses' and tags.key == '***' | where subscriptionId in~ ('sub-a', 'sub-b')"},
		{name: "confirm-deploy", typ: "confirm", input: "user-confirmation", gate: true, onFail: "halt"},
		{name: "deploy-app", typ: "deploy", input: "remediation/app.json", onFail: "rollback",
			params: `{"appName":"app-checkout","db_password":"***","header":"Bearer ***","replicas":3}`},
		{name: "rollback-app", typ: "rollback", input: "remediation/app-previous.json", onFail: "halt"},
	})
	if text := prototext.Format(got); strings.Contains(text, "s3cr3t") || strings.Contains(text, "not-from-values") {
		t.Fatalf("a secret is in the plan:\n%s", text)
	}
	if err := runplan.Check(got, plan.ContentHash, len(plan.Steps)); err != nil {
		t.Fatalf("the control plane's check refuses the plan: %v", err)
	}
}

// A playbook's plan lists its nodes with their dependencies: the deterministic argv exactly as
// exec'd, the agent call with its inputs, the approval prompt; run-time templates stay as
// written, and an input key that looks secret is masked.
func TestPlanOfPlaybookListsNodesWithArgvCallsAndPrompts(t *testing.T) {
	plan, err := runbook.LoadPlaybook("testdata/plan/release.cantbook")
	if err != nil {
		t.Fatal(err)
	}
	got := PlanOf(plan)
	checkSteps(t, got, []wantStep{
		{name: "build", typ: "deterministic", argv: []string{"pnpm", "run", "build", "--out dir"}, input: `pnpm run build "--out dir"`},
		{name: "review", typ: "approval", input: "Build green. Publish {{ version }}?", gate: true, depends: []int32{0}},
		{name: "publish", typ: "agentic", input: `{"agent":"npm","skill":"publish"}`, depends: []int32{1},
			params: `{"npm_token":"***","version":"{{ version }}"}`},
	})
	if err := runplan.Check(got, plan.ContentHash, len(plan.Steps)); err != nil {
		t.Fatalf("the control plane's check refuses the plan: %v", err)
	}
}

// Inputs over 16 KiB are cut (at a UTF-8 boundary) and flagged; a plan over 1 MiB drops the
// last steps' inputs and says so, keeping every name; a plan of more than 1000 steps, or one
// the control plane would refuse otherwise, is not sent at all.
func TestPlanOfKeepsToTheBounds(t *testing.T) {
	long := strings.Repeat("é", 10<<10) // 20 KiB of two-byte runes
	p := &runbook.Plan{Name: "big", ContentHash: strings.Repeat("a", 64)}
	for i := range 100 {
		in := long
		p.Steps = append(p.Steps, runbook.Step{Index: i, Name: "deploy-" + strings.Repeat("x", i%7), Type: runbook.TypeDeploy, Input: &in,
			Params: map[string]any{"blob": long}, OnFail: runbook.OnFailHalt})
	}
	got := PlanOf(p)
	if size := proto.Size(got); size > runplan.MaxBytes || !got.GetTruncated() {
		t.Fatalf("plan is %d bytes, truncated %v; want at most %d and truncated", size, got.GetTruncated(), runplan.MaxBytes)
	}
	first, last := got.GetSteps()[0], got.GetSteps()[99]
	if len(first.GetInput()) != runplan.MaxInputBytes || !strings.HasPrefix(long, first.GetInput()) || !first.GetInputTruncated() {
		t.Fatalf("step 0 input is %d bytes (truncated %v), want the first %d bytes of the input", len(first.GetInput()), first.GetInputTruncated(), runplan.MaxInputBytes)
	}
	if last.GetInput() != "" || !last.GetInputTruncated() || last.GetName() != p.Steps[99].Name {
		t.Fatalf("step 99 = %s, want its name kept and its input dropped", prototext.Format(last))
	}
	if err := runplan.Check(got, p.ContentHash, 100); err != nil {
		t.Fatalf("the control plane's check refuses the plan: %v", err)
	}

	argv := &runbook.Plan{Name: "argv", ContentHash: p.ContentHash, Kind: runbook.KindPlaybook, Steps: []runbook.Step{{Name: "run", Type: runbook.TypeDeterministic,
		Node: &runbook.Node{ID: "run", Command: "echo", Args: []string{long[:12000], long[:12000]}}}}}
	s := PlanOf(argv).GetSteps()[0]
	if n := runplan.ArgvBytes(s.GetArgv()); n > runplan.MaxInputBytes || len(s.GetArgv()) != 3 || !s.GetInputTruncated() {
		t.Fatalf("argv of %d entries, %d bytes, truncated %v; want 3 entries within %d bytes, truncated", len(s.GetArgv()), n, s.GetInputTruncated(), runplan.MaxInputBytes)
	}

	huge := &runbook.Plan{Name: "huge", ContentHash: p.ContentHash, Steps: make([]runbook.Step, runplan.MaxSteps+1)}
	if got := PlanOf(huge); got != nil {
		t.Fatalf("a plan of %d steps was built (%d steps); want none", len(huge.Steps), len(got.GetSteps()))
	}
	longName := &runbook.Plan{Name: "long", ContentHash: p.ContentHash, Steps: []runbook.Step{{Name: strings.Repeat("n", runplan.MaxNameBytes+1), Type: runbook.TypeConfirm}}}
	if got := PlanOf(longName); got != nil {
		t.Fatal("a plan the control plane refuses (a step name over its bound) was built; want none, so the run still starts")
	}
}

// An approval node's approver-input form is in its plan step, as the gate will carry it.
func TestPlanOfCarriesAnApprovalNodesForm(t *testing.T) {
	plan, err := runbook.LoadPlaybook("testdata/plan/form.cantbook")
	if err != nil {
		t.Fatal(err)
	}
	got := PlanOf(plan).GetSteps()[0].GetInputs()
	if len(got) != 2 || got[0].GetName() != "target" || got[0].GetType() != "enum" || !got[0].GetRequired() ||
		strings.Join(got[0].GetOptions(), ",") != "blue,green" || got[1].GetDefaultValue() != "3" || !got[1].GetHasDefault() {
		t.Fatalf("review's plan step inputs = %v; want the form as declared", got)
	}
}

// A runbook confirm step's approver-input form is in its plan step too.
func TestPlanOfCarriesAConfirmStepsForm(t *testing.T) {
	plan, err := runbook.Load(runbook.LoadOptions{Dir: "../runbook/testdata/forms", Name: "confirm-form"})
	if err != nil {
		t.Fatal(err)
	}
	st := PlanOf(plan).GetSteps()[0]
	got := st.GetInputs()
	if st.GetInput() != "user-confirmation" || len(got) != 3 || got[0].GetName() != "target" || got[0].GetType() != "enum" ||
		!got[0].GetRequired() || got[1].GetDefaultValue() != "3" || got[2].GetPattern() != "[A-Z]+-[0-9]+" {
		t.Fatalf("confirm-slot's plan step = %v; want the form as declared", st)
	}
}
