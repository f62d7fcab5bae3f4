// Package planview is what `rbook plan` shows before a run (docs/plan.md): the steps or nodes
// in the order they run, with their inputs rendered and secrets masked exactly as StartRun's
// plan carries them (cpclient.PlanOf), the commands that would run, which gates need a person
// under the gate policy and the auto-pass policy in force, who may decide them, and the plan
// digest every decision is bound to. It renders the same View as terminal text, Markdown (the
// job summary) and JSON (the documented shape of docs/plan.md, "JSON").
//
// It imports no control-plane package: the caller passes the policies as functions
// (Options.Gates, Options.AutoPass), so cmd/rbook wires controlplane/approval in.
package planview

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
	"github.com/rbookhq/rbook-action/internal/runplan"
)

// Format is the version word of the JSON shape (View.Format); a change that removes or renames
// a field gets a new one.
const Format = "rbook.plan.v1"

// Requirement is what the gate policy asks of one gate (controlplane/approval's
// GateRequirement, as the control plane captures it when the gate opens).
type Requirement struct {
	// Rule names the policy rule that applied ("gates.yaml rule 2 (line 7)") or the default.
	Rule string
	// Approvals is M: the distinct approvals that open the gate (>= 1).
	Approvals int
	// Approvers are the identities, people ("person:…") and groups ("group:…") who may
	// decide; empty means anyone with the approver role.
	Approvers []string
	// StarterMayApprove is true when the run's starter may approve (four-eyes is off).
	StarterMayApprove bool
}

// Options are what Build needs besides the plan.
type Options struct {
	// Inputs are a playbook's validated inputs (runbook.ValidatePlaybookInputs), its first
	// bindings; nil for a runbook. Templates they fill are shown rendered.
	Inputs map[string]any
	// Gates is the gate policy: the requirement of gate step gate of a run of the runbook or
	// playbook named name. Nil: one approval by anyone but the run's starter.
	Gates func(name, gate string) Requirement
	// AutoPass is the playbook auto-pass policy (CEL) as the gate evaluates it; nil: no
	// approval node auto-passes. Runbook confirm steps never auto-pass.
	AutoPass func(*engine.PolicyContext) engine.PolicyDecision
	// GatePolicy and AutoPassPolicy say where the policies came from, as shown
	// ("gates.yaml", "the built-in rules", "none: …").
	GatePolicy, AutoPassPolicy string
}

// View is one plan as rbook plan shows it; its JSON is the `-o json` shape (docs/plan.md).
type View struct {
	// Format is Format.
	Format string `json:"format"`
	// Kind is "runbook" or "playbook".
	Kind string `json:"kind"`
	// Name is the runbook_name or playbook name; File the file as given; ValuesFile the
	// runbook's values file ("" for none and for playbooks).
	Name       string `json:"name"`
	File       string `json:"file"`
	ValuesFile string `json:"values_file,omitempty"`
	// Digest is the plan digest a decision is bound to: the plan's content hash (64
	// lowercase hex digits of SHA-256) exactly as StartRun sends it (content_hash), which every
	// approval of the run carries as plan_digest.
	Digest string `json:"plan_digest"`
	// Inputs are a playbook's inputs, secret-looking ones masked; nil for a runbook.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Policy says which policies decided the gates.
	Policy Policy `json:"policy"`
	// Steps are the steps or nodes in the order they would run.
	Steps []Step `json:"steps"`
	// Truncated is true when inputs were cut to the plan's bounds (internal/runplan).
	Truncated bool `json:"truncated,omitempty"`
}

// Policy names where the gate policy and the auto-pass policy came from.
type Policy struct {
	Gates    string `json:"gate_policy"`
	AutoPass string `json:"playbook_policy"`
}

// Step is one step or node.
type Step struct {
	// Index is the step's position in the file (StartRun's PlanStep.index); Order is its
	// 1-based place in the order shown.
	Index int    `json:"index"`
	Order int    `json:"order"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	// Depends are the names of the steps this one waits for (playbook nodes).
	Depends        []string `json:"depends,omitempty"`
	OnFail         string   `json:"on_fail,omitempty"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
	// Input is the rendered input (a check's scoped query, a template path, a command line,
	// a prompt; a confirm step without kql_or_template has none); Params the rendered params or agentic inputs as JSON; Argv a deterministic
	// node's argv. Secrets are masked ("***").
	Input          string          `json:"input,omitempty"`
	Params         json.RawMessage `json:"params,omitempty"`
	Argv           []string        `json:"argv,omitempty"`
	InputTruncated bool            `json:"input_truncated,omitempty"`
	// Runs says what would run: "exec" (argv without a shell), "mcp" (Tools of the check's
	// or agentic node's MCP server), "simulated" (a deploy or rollback template with params,
	// never executed in v1) or "gate".
	Runs  string   `json:"runs"`
	Tools []string `json:"tools,omitempty"`
	// Gate is the gate's verdict under the policies; nil for steps that are no gate.
	Gate *Gate `json:"gate,omitempty"`
	// When says when the step runs if not always in its turn: a rollback step's trigger
	// (docs/runbooks.md), or the when of a playbook edge into the node, with its verdict when
	// the inputs decide it.
	When string `json:"when,omitempty"`
	// Limits are a playbook node's iteration cap and the handlers that act when it fails.
	Limits string `json:"limits,omitempty"`
	// Resolves says where a playbook node's command is found (the playbook folder's bin/ is
	// first on PATH) or which MCP server an agentic node calls.
	Resolves string `json:"resolves,omitempty"`
}

// Gate is what a gate would need.
type Gate struct {
	// NeedsPerson is false only when the auto-pass policy would pass it.
	NeedsPerson bool `json:"needs_person"`
	// AutoPass is the auto-pass policy's verdict (playbook approval nodes only).
	AutoPass *AutoPass `json:"auto_pass,omitempty"`
	// Rule is the gate-policy rule; Approvals M; Approvers who may decide (empty: anyone
	// with the approver role); FourEyes true when the run's starter may not approve.
	Rule      string   `json:"rule"`
	Approvals int      `json:"approvals"`
	Approvers []string `json:"approvers"`
	FourEyes  bool     `json:"four_eyes"`
	// Form names the approver-input fields the gate asks for.
	Form []string `json:"form,omitempty"`
}

// AutoPass is the auto-pass policy's verdict on an approval node.
type AutoPass struct {
	Passes bool   `json:"passes"`
	Rule   string `json:"rule,omitempty"`
	Action string `json:"action"`
	Reason string `json:"reason"`
}

// Build is the View of plan under o. The inputs, argv and params are StartRun's plan
// (cpclient.PlanOf) of plan with a playbook's templates rendered from o.Inputs where every
// name they use is known (node outputs are known only while the run executes, so such
// templates stay as written), and with input values whose name looks secret masked as
// values-file secrets are. Error: plan is nil, or too large for StartRun to send a plan
// (internal/runplan bounds: more steps than runplan.MaxSteps, a name over its limit).
func Build(plan *runbook.Plan, o Options) (*View, error) {
	if plan == nil {
		return nil, fmt.Errorf("no plan to show")
	}
	shown := rendered(plan, o.Inputs)
	rp := cpclient.PlanOf(shown)
	if rp == nil {
		return nil, fmt.Errorf("%s: %d steps; a plan has at most %d steps with names of at most %d bytes (internal/runplan), so no run sends one for it and it cannot be shown",
			plan.Path, len(plan.Steps), runplan.MaxSteps, runplan.MaxNameBytes)
	}
	v := &View{Format: Format, Kind: "runbook", Name: plan.Name, File: plan.Path, ValuesFile: plan.ValuesPath,
		Digest: rp.GetContentHash(), Truncated: rp.GetTruncated(),
		Policy: Policy{Gates: o.GatePolicy, AutoPass: o.AutoPassPolicy}}
	if plan.Kind == runbook.KindPlaybook {
		v.Kind, v.ValuesFile = "playbook", ""
		v.Inputs = maskedInputs(o.Inputs)
	}
	var r *resolver
	if plan.Kind == runbook.KindPlaybook {
		r = newResolver(plan)
	}
	for n, i := range Order(plan) {
		s := step(plan, shown, rp.GetSteps()[i], n+1, o)
		switch {
		case r != nil && s.Runs == "exec":
			s.Resolves = r.command(s.Argv)
		case r != nil && s.Type == string(runbook.TypeAgentic):
			r.agentic(plan.Steps[s.Index], &s)
		}
		v.Steps = append(v.Steps, s)
	}
	return v, nil
}

// step is the Step of plan's step ps (index ps.Index), shown at place order.
func step(plan, shown *runbook.Plan, ps *rbookv1.PlanStep, order int, o Options) Step {
	st := plan.Steps[ps.GetIndex()]
	s := Step{Index: int(ps.GetIndex()), Order: order, Name: st.Name, Type: string(st.Type), OnFail: ps.GetOnFail(),
		TimeoutSeconds: int(ps.GetTimeoutSeconds()), Input: ps.GetInput(), Argv: ps.GetArgv(), InputTruncated: ps.GetInputTruncated()}
	if p := ps.GetParamsJson(); p != "" && json.Valid([]byte(p)) {
		s.Params = json.RawMessage(p)
	}
	if st.Type == runbook.TypeConfirm && st.Input == nil {
		s.Input = "" // StartRun's "user-confirmation": the evidence's word, no text a person wrote
	}
	for _, d := range st.Depends {
		s.Depends = append(s.Depends, plan.Steps[d].Name)
	}
	if plan.Playbook != nil && st.Node != nil {
		s.When, s.Limits = nodeWhen(plan.Playbook, st.Name, o.Inputs), nodeLimits(plan.Playbook, st.Name, st.Node)
	}
	switch st.Type {
	case runbook.TypeDeterministic:
		s.Runs = "exec"
	case runbook.TypeCheck:
		s.Runs, s.Tools = "mcp", []string{steps.DefaultValidateTool, steps.DefaultExecuteTool}
	case runbook.TypeAgentic:
		s.Runs = "mcp"
		if st.Node.Skill != "" {
			s.Tools = []string{st.Node.Skill}
		}
	case runbook.TypeDeploy, runbook.TypeRollback:
		s.Runs = "simulated"
		if st.Type == runbook.TypeRollback && plan.Playbook == nil {
			s.When = rollbackWhen(plan, st)
		}
	case runbook.TypeConfirm, runbook.TypeApproval:
		s.Runs, s.Gate = "gate", gate(plan, shown.Steps[st.Index], o)
	}
	return s
}

// gate is the verdict on gate step st of plan under o's policies, as the control plane
// reaches it when the gate opens (docs/approvals.md, "Gate policy";
// docs/decisions/auto-pass-policy.md): the auto-pass policy first for a playbook approval
// node, not passing one whose form needs a person; then the gate policy's requirement.
func gate(plan *runbook.Plan, st runbook.Step, o Options) *Gate {
	need := Requirement{Rule: "the default rule (1 approval, any approver, not the run's starter)", Approvals: 1}
	if o.Gates != nil {
		need = o.Gates(plan.Name, st.Name)
	}
	g := &Gate{NeedsPerson: true, Rule: need.Rule, Approvals: need.Approvals, Approvers: slices.Clone(need.Approvers),
		FourEyes: !need.StarterMayApprove}
	if g.Approvers == nil {
		g.Approvers = []string{}
	}
	form := st.Form
	if st.Node != nil {
		form = st.Node.Form
	}
	for _, f := range form {
		g.Form = append(g.Form, f.Name)
	}
	if st.Type != runbook.TypeApproval || st.Node == nil {
		return g // a runbook's confirm step always asks a person
	}
	ap := &AutoPass{Action: "require-human", Reason: "no auto-pass policy: a person decides"}
	if o.AutoPass != nil {
		d := o.AutoPass(engine.PolicyContextOf(plan, st, st.Node.Prompt, o.Inputs))
		ap = &AutoPass{Passes: d.AutoPassed, Rule: d.Rule, Action: d.Action, Reason: d.Reason}
	}
	if name := gateinputs.NeedsPerson(form); ap.Passes && name != "" {
		ap.Passes, ap.Reason = false, ap.Reason+"; not auto-passed: the input "+name+" is required and has no default, so a person must give it"
	}
	g.AutoPass, g.NeedsPerson = ap, !ap.Passes
	return g
}

// maskedInputs are the playbook's inputs as text, masked as the plan masks values
// (cpclient.MaskText: a value whose name looks secret is "***" wherever it appears).
func maskedInputs(inputs map[string]any) map[string]string {
	if len(inputs) == 0 {
		return nil
	}
	texts := inputTexts(inputs)
	out := map[string]string{}
	for k, v := range inputs {
		out[k] = cpclient.MaskText(texts, fmt.Sprint(v))
	}
	return out
}
