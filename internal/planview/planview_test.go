package planview

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The fixtures' secrets: a values-file key (api_token), a params key (db_password) and a
// playbook input (deploy_token), each a text that must never be shown.
var secrets = []string{"tok-7f3a9c2e51", "literal-pw-417", "dtk-99aa"}

func loadShop(t *testing.T) *runbook.Plan {
	t.Helper()
	plan, err := runbook.Load(runbook.LoadOptions{Dir: filepath.Join("testdata", "runbooks"), Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func loadShip(t *testing.T) (*runbook.Plan, map[string]any) {
	t.Helper()
	plan, err := runbook.LoadPlaybook(filepath.Join("testdata", "ship.cantbook"))
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := runbook.ValidatePlaybookInputs(plan, map[string]string{"version": "1.2.3", "deploy_token": "dtk-99aa"})
	if err != nil {
		t.Fatal(err)
	}
	return plan, inputs
}

// policies are the options of gate policy file gates and auto-pass policy file autoPass
// ("" for none), loaded as rbook serve and rbook plan load them.
func policies(t *testing.T, gates, autoPass string) Options {
	t.Helper()
	var gp *approval.GatePolicy
	if gates != "" {
		var err error
		if gp, err = approval.LoadGatePolicy(filepath.Join("testdata", gates)); err != nil {
			t.Fatal(err)
		}
	}
	if autoPass != "" {
		autoPass = filepath.Join("testdata", autoPass)
	}
	pol, err := approval.LoadPlaybookPolicy(autoPass)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Gates: func(name, gate string) Requirement {
			r := gp.For(name, gate)
			return Requirement{Rule: r.Rule, Approvals: r.ApprovalsRequired, Approvers: r.AllowedApprovers, StarterMayApprove: r.StarterMayApprove}
		},
		AutoPass: func(pc *engine.PolicyContext) engine.PolicyDecision {
			v := pol.Evaluate(approval.PolicyInput{Node: pc.Node, Bindings: pc.Bindings, Playbook: pc.Playbook, Commands: pc.Commands, Tools: pc.Tools})
			return engine.PolicyDecision{AutoPassed: v.AutoPassed, Rule: v.Rule, Action: v.Action, Reason: v.Reason}
		},
		GatePolicy: "gates", AutoPassPolicy: "auto-pass",
	}
}

func build(t *testing.T, plan *runbook.Plan, o Options) *View {
	t.Helper()
	v, err := Build(plan, o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The steps come in the order they run, a playbook's nodes after the nodes they depend on
// whatever the file order, with values and known inputs substituted; a template naming a node
// output stays as written, since that output exists only while the run executes.
func TestPlanListsStepsWithRenderedInputs(t *testing.T) {
	shop := loadShop(t)
	ship, inputs := loadShip(t)
	type want struct {
		name, typ, input, params, runs string
		argv                           []string
		depends                        []string
	}
	for _, c := range []struct {
		name string
		view *View
		want []want
	}{
		{"runbook", build(t, shop, Options{}), []want{
			{name: "shop-has-no-public-ip", typ: "check", runs: "mcp",
				input: "Resources | where resourceGroup == 'rg-shop' and name == 'shop-web' | where subscriptionId in~ ('sub-shop') | project name"},
			{name: "deploy-shop", typ: "deploy", runs: "simulated", input: "remediation/shop.json",
				params: `{"apiToken":"***","appName":"shop-web","db_password":"***","header":"Bearer ***","note":"a | pipe and ` + "`ticks`" + `"}`},
			{name: "rollback-shop", typ: "rollback", runs: "simulated", input: "remediation/shop-previous.json", params: `{"appName":"shop-web"}`},
			{name: "confirm-shop", typ: "confirm", runs: "gate"},
		}},
		{"playbook", build(t, ship, Options{Inputs: inputs}), []want{
			{name: "build", typ: "deterministic", runs: "exec", input: "echo building 1.2.3", argv: []string{"echo", "building", "1.2.3"}},
			{name: "notes", typ: "deterministic", runs: "exec", depends: []string{"build"},
				input: `echo "notes for {{ version }} from {{ build.output }}"`, argv: []string{"echo", "notes for {{ version }} from {{ build.output }}"}},
			{name: "lint-gate", typ: "approval", runs: "gate", input: "Lint 1.2.3?", depends: []string{"notes"}},
			{name: "lint", typ: "deterministic", runs: "exec", input: "echo lint 1.2.3", argv: []string{"echo", "lint", "1.2.3"}, depends: []string{"lint-gate"}},
			{name: "upload-gate", typ: "approval", runs: "gate", input: "Upload 1.2.3?", depends: []string{"lint"}},
			{name: "upload", typ: "deterministic", runs: "exec", depends: []string{"upload-gate"},
				input: `curl -H "Authorization: Bearer ***" https://example.com/1.2.3`, argv: []string{"curl", "-H", "Authorization: Bearer ***", "https://example.com/1.2.3"}},
			{name: "pinned-gate", typ: "approval", runs: "gate", input: "Announce?", depends: []string{"upload"}},
			{name: "announce", typ: "deterministic", runs: "exec", input: "echo announced", argv: []string{"echo", "announced"}, depends: []string{"pinned-gate"}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.view.Steps) != len(c.want) {
				t.Fatalf("%d steps, want %d", len(c.view.Steps), len(c.want))
			}
			for i, w := range c.want {
				s := c.view.Steps[i]
				got := want{s.Name, s.Type, s.Input, string(s.Params), s.Runs, s.Argv, s.Depends}
				if !reflect.DeepEqual(got, w) || s.Order != i+1 {
					t.Errorf("step %d:\n got %+v (order %d)\nwant %+v", i+1, got, s.Order, w)
				}
			}
		})
	}
	if got := build(t, shop, Options{}).Steps[0].Tools; !reflect.DeepEqual(got, []string{"validate_query", "execute_query"}) {
		t.Errorf("check tools %q", got)
	}
}

// No secret text appears in any rendering; each is "***", as in the plan StartRun sends: the
// inputs, params and argv are the same as cpclient.PlanOf's step for step.
func TestPlanMasksSecrets(t *testing.T) {
	shop := loadShop(t)
	ship, inputs := loadShip(t)
	for _, c := range []struct {
		name string
		plan *runbook.Plan
		view *View
	}{
		{"runbook", shop, build(t, shop, Options{})},
		{"playbook", ship, build(t, ship, Options{Inputs: inputs})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var all bytes.Buffer
			Text(&all, c.view, false)
			Markdown(&all, c.view)
			if err := JSON(&all, c.view); err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if strings.Contains(all.String(), s) {
					t.Errorf("the secret %q is shown:\n%s", s, all.String())
				}
			}
			if !strings.Contains(all.String(), "***") {
				t.Error("no masked value shown")
			}
			if c.plan.Kind == runbook.KindPlaybook {
				return // StartRun's plan leaves a playbook's templates unrendered (cpclient.PlanOf)
			}
			sent := cpclient.PlanOf(c.plan)
			for i, s := range c.view.Steps {
				ps := sent.GetSteps()[s.Index]
				if ps.GetInput() != s.Input && !(s.Type == "confirm" && s.Input == "") || ps.GetParamsJson() != string(s.Params) {
					t.Errorf("step %d: shown %q %s, StartRun sends %q %s", i+1, s.Input, s.Params, ps.GetInput(), ps.GetParamsJson())
				}
			}
		})
	}
	if got := build(t, ship, Options{Inputs: inputs}).Inputs; !reflect.DeepEqual(got, map[string]string{"version": "1.2.3", "deploy_token": "***"}) {
		t.Errorf("inputs shown as %v", got)
	}
}

// Each gate says whether a person must decide it under the auto-pass policy in force (a
// playbook's approval nodes; a runbook's confirm steps never auto-pass), and who may: the gate
// policy's M, approvers and four-eyes.
func TestPlanSaysWhichGatesNeedAPerson(t *testing.T) {
	shop := loadShop(t)
	ship, inputs := loadShip(t)
	type verdict struct {
		needsPerson bool
		autoRule    string
		rule        string
		approvals   int
		approvers   []string
		fourEyes    bool
	}
	def := "the default rule (no gate-policy rule matched: 1 approval, any approver, not the run's starter)"
	for _, c := range []struct {
		name               string
		plan               *runbook.Plan
		gates, autoPass    string
		gate               string
		want               verdict
		wantReasonContains string
	}{
		{"confirm step, no gate policy", shop, "", "", "confirm-shop", verdict{true, "", def, 1, []string{}, true}, ""},
		{"confirm step, M of N", shop, "gates.yaml", "", "confirm-shop",
			verdict{true, "", "testdata/gates.yaml rule 1 (line 4)", 2, []string{"person:alice", "group:sre"}, true}, ""},
		{"read-only gate, built-in rules", ship, "", "", "lint-gate", verdict{false, "default-read-only", def, 1, []string{}, true}, "read-only"},
		{"curl gate, built-in rules", ship, "", "", "upload-gate", verdict{true, "default-outbound-http", def, 1, []string{}, true}, "outbound HTTP"},
		{"curl gate, trust-all cannot override a built-in require-human", ship, "gates.yaml", "trust-all.policy.yaml", "upload-gate",
			verdict{true, "default-outbound-http", "testdata/gates.yaml rule 2 (line 8)", 3, []string{}, false}, "overrides auto-approve rule trust-all"},
		{"pinned gate, trust-all", ship, "", "trust-all.policy.yaml", "pinned-gate", verdict{true, "node-policy", def, 1, []string{}, true}, "pins this approval node"},
		{"read-only gate, trust-all", ship, "", "trust-all.policy.yaml", "lint-gate", verdict{false, "trust-all", def, 1, []string{}, true}, "everything is fine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := policies(t, c.gates, c.autoPass)
			o.Inputs = inputs
			if c.plan.Kind != runbook.KindPlaybook {
				o.Inputs = nil
			}
			var g *Gate
			for _, s := range build(t, c.plan, o).Steps {
				if s.Name == c.gate {
					g = s.Gate
				}
			}
			if g == nil {
				t.Fatalf("no gate %s", c.gate)
			}
			got := verdict{g.NeedsPerson, "", g.Rule, g.Approvals, g.Approvers, g.FourEyes}
			if g.AutoPass != nil {
				got.autoRule = g.AutoPass.Rule
				if !strings.Contains(g.AutoPass.Reason, c.wantReasonContains) {
					t.Errorf("reason %q, want it to say %q", g.AutoPass.Reason, c.wantReasonContains)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// The digest shown is the content hash StartRun sends for the same files (cpclient.PlanOf's
// content_hash, runplan.Check's), and it changes when the values change.
func TestPlanDigestIsTheDigestStartRunSends(t *testing.T) {
	shop := loadShop(t)
	v := build(t, shop, Options{})
	if sent := cpclient.PlanOf(shop).GetContentHash(); v.Digest != sent || v.Digest != shop.ContentHash || len(v.Digest) != 64 {
		t.Fatalf("digest %q, StartRun sends %q (plan %q)", v.Digest, sent, shop.ContentHash)
	}
	dir := t.TempDir()
	for _, f := range []string{"shop.yaml", "shop.values.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "runbooks", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "shop.values.yaml" {
			b = bytes.Replace(b, []byte("shop-web"), []byte("shop-api"), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edited, err := runbook.Load(runbook.LoadOptions{Dir: dir, Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if d := build(t, edited, Options{}).Digest; d == v.Digest || d != cpclient.PlanOf(edited).GetContentHash() {
		t.Errorf("edited values: digest %q (before %q, StartRun sends %q)", d, v.Digest, cpclient.PlanOf(edited).GetContentHash())
	}
	ship, inputs := loadShip(t)
	if d := build(t, ship, Options{Inputs: inputs}).Digest; d != ship.ContentHash {
		t.Errorf("playbook digest %q, StartRun sends %q", d, ship.ContentHash)
	}
}

// -o json is the documented shape (docs/plan.md, "JSON"): the golden file holds it, and the
// field names are the stable ones.
func TestPlanJSONShape(t *testing.T) {
	ship, inputs := loadShip(t)
	o := policies(t, "gates.yaml", "")
	o.Inputs = inputs
	var b bytes.Buffer
	if err := JSON(&b, build(t, ship, o)); err != nil {
		t.Fatal(err)
	}
	golden(t, "ship.plan.json", b.Bytes())
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "kind", "name", "file", "plan_digest", "inputs", "policy", "steps"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %q in %s", k, b.String())
		}
	}
	if doc["format"] != Format || doc["kind"] != "playbook" {
		t.Errorf("format %v, kind %v", doc["format"], doc["kind"])
	}
}

// -o markdown is one table a job summary shows: a row per step, whatever the values hold
// (a pipe or backticks in a param cannot add a column or end the code).
func TestPlanMarkdownForTheJobSummary(t *testing.T) {
	shop := loadShop(t)
	var b bytes.Buffer
	Markdown(&b, build(t, shop, policies(t, "gates.yaml", "")))
	golden(t, "shop.plan.md", b.Bytes())
	rows := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "| ") {
			continue
		}
		rows++
		if n := strings.Count(l, "|") - strings.Count(l, `\|`); n != 7 {
			t.Errorf("%d cell separators in %q, want 7", n, l)
		}
	}
	if rows != 2+len(shop.Steps) {
		t.Errorf("%d table rows, want a header, its rule and %d steps", rows, len(shop.Steps))
	}
	for _, want := range []string{"### Plan: runbook `shop`", "🧑 needs a person", "2 approvals from person:alice, group:sre, not the run's starter"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run %s -update to accept):\n%s", p, t.Name(), got)
	}
}

// With a control plane, each gate is asked about with the policy context the plan evaluates
// locally (PreviewRequest), and shown as the control plane answered (FromPreview): its rule,
// M and approvers, its auto-pass verdict, shadow mode passing nothing.
func TestPlanShowsTheControlPlanesVerdicts(t *testing.T) {
	ship, inputs := loadShip(t)
	req, err := PreviewRequest(ship, inputs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range req.GetGates() {
		names = append(names, g.GetStepName())
	}
	if req.GetName() != "ship" || strings.Join(names, ",") != "lint-gate,upload-gate,pinned-gate" {
		t.Fatalf("request %v", req)
	}
	if got := req.GetGates()[1].GetPolicy().GetCommands(); !reflect.DeepEqual(got, []string{`curl -H Authorization: Bearer dtk-99aa https://example.com/1.2.3`}) {
		t.Errorf("upload-gate commands %q", got) // sent as the run sends them; the control plane is trusted with them
	}
	o := Options{Inputs: inputs}
	FromPreview(&o, &rbookv1.PreviewGatesResponse{Gates: []*rbookv1.GatePreview{
		{StepName: "lint-gate", PolicyRule: "cp rule 1", ApprovalsRequired: 2, AllowedApprovers: []string{"person:bo"},
			Policy: &rbookv1.PolicyDecision{AutoPassed: true, Rule: "cp-trust", Action: "auto-approve", Reason: "fine"}},
		{StepName: "upload-gate", PolicyRule: "cp rule 2", ApprovalsRequired: 1, StarterMayApprove: true,
			Policy: &rbookv1.PolicyDecision{Rule: "cp-trust", Action: "auto-approve", Reason: "fine", Shadow: true}},
	}})
	gates := map[string]*Gate{}
	for _, s := range build(t, ship, o).Steps {
		gates[s.Name] = s.Gate
	}
	for name, want := range map[string]Gate{
		"lint-gate":   {NeedsPerson: false, Rule: "cp rule 1", Approvals: 2, Approvers: []string{"person:bo"}, FourEyes: true},
		"upload-gate": {NeedsPerson: true, Rule: "cp rule 2", Approvals: 1, Approvers: []string{}, FourEyes: false, Form: []string{"ticket"}},
		"pinned-gate": {NeedsPerson: true, Rule: "the default rule (the control plane did not say)", Approvals: 1, Approvers: []string{}, FourEyes: true},
	} {
		g := *gates[name]
		g.AutoPass = nil
		if !reflect.DeepEqual(g, want) {
			t.Errorf("%s: got %+v, want %+v", name, g, want)
		}
	}
	if r := gates["upload-gate"].AutoPass.Reason; !strings.Contains(r, "shadow mode: a person decides") {
		t.Errorf("shadow verdict reason %q", r)
	}
}

// A plan no run could send (over internal/runplan's bounds) is refused with the bounds named,
// rather than shown differently from what a run does.
func TestPlanOverTheBoundsIsRefused(t *testing.T) {
	plan := &runbook.Plan{Name: "huge", Path: "runbooks/huge.yaml", ContentHash: strings.Repeat("0", 64)}
	for i := range 1001 {
		plan.Steps = append(plan.Steps, runbook.Step{Index: i, Name: fmt.Sprintf("s%d", i), Type: runbook.TypeDeploy})
	}
	if _, err := Build(plan, Options{}); err == nil || !strings.Contains(err.Error(), "runbooks/huge.yaml: 1001 steps; a plan has at most 1000 steps") {
		t.Errorf("Build: %v", err)
	}
}
