package cpclient

import (
	"encoding/json"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/steps"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs/inputspb"
	"github.com/rbookhq/rbook-action/internal/runplan"
)

// PlanOf is what plan executes, as StartRun sends it (StartRunRequest.plan; run.proto,
// RunPlan; docs/console-plan.md): one PlanStep per runbook step or playbook node in plan
// order, with its name, type, dependencies, gate flag, on_fail and timeout, and its input as
// it will execute:
//   - check: the query with the scope filter injected for the plan's subscriptions, as the
//     check executor sends it (steps.InjectScope);
//   - deploy and rollback: the template path, with the step's params as JSON;
//   - confirm: the step's kql_or_template, else "user-confirmation" (the evidence's input);
//     the prompt a person sees is rendered when the gate opens (Approval.prompt);
//   - deterministic: the argv exec'd without a shell, and the command line as input;
//   - agentic: {"agent", "skill"} as input and the node's inputs as params_json;
//   - approval: the prompt, and its approver-input form as inputs.
//
// Playbook values known only while the run executes ({{ inputs.x }}, {{ node.output }}) stay
// as written, unrendered. Secret-looking values are masked with runplan.Mask as the runner
// masks them: every text of a values-file key that github.LooksSecret, wherever it appears,
// and the value of every params or inputs key that looks secret. Bounds (runplan): an input,
// params_json or argv over runplan.MaxInputBytes is cut and its step's input_truncated set;
// while the plan encodes over runplan.MaxBytes, the last steps' inputs are dropped and
// truncated set. A plan the control plane would refuse (runplan.Check: more than
// runplan.MaxSteps steps, a name over runplan.MaxNameBytes) is not sent: PlanOf returns nil,
// as it does for a nil plan, and the run starts without one.
func PlanOf(plan *runbook.Plan) *rbookv1.RunPlan {
	if plan == nil || len(plan.Steps) > runplan.MaxSteps {
		return nil
	}
	m := masker{texts: github.SecretTexts(plan.ValueTexts)}
	out := &rbookv1.RunPlan{ContentHash: plan.ContentHash, Steps: make([]*rbookv1.PlanStep, len(plan.Steps))}
	for i, st := range plan.Steps {
		ps := &rbookv1.PlanStep{Index: int32(i), Name: st.Name, Type: string(st.Type), OnFail: string(st.OnFail),
			TimeoutSeconds: int32(max(st.TimeoutSeconds, 0)),
			Gate:           st.Type == runbook.TypeConfirm || st.Type == runbook.TypeApproval}
		for _, d := range st.Depends {
			ps.Depends = append(ps.Depends, int32(d))
		}
		if st.Node != nil {
			ps.OnFail = ""
			nodeInputs(ps, st.Node, m)
		} else {
			stepInputs(ps, st, plan, m)
		}
		boundStep(ps)
		out.Steps[i] = ps
	}
	for i := len(out.Steps) - 1; i >= 0 && proto.Size(out) > runplan.MaxBytes; i-- {
		s := out.Steps[i]
		s.Input, s.ParamsJson, s.Argv, s.Inputs, s.InputTruncated = "", "", nil, nil, true
		out.Truncated = true
	}
	if runplan.Check(out, plan.ContentHash, len(plan.Steps)) != nil {
		return nil // e.g. a step name over runplan.MaxNameBytes: the run starts without a plan rather than not at all
	}
	return out
}

// stepInputs fills a runbook step's input and params_json.
func stepInputs(ps *rbookv1.PlanStep, st runbook.Step, plan *runbook.Plan, m masker) {
	switch {
	case st.Type == runbook.TypeCheck && st.Input != nil:
		ps.Input = steps.InjectScope(*st.Input, plan.Subscriptions)
	case st.Input != nil:
		ps.Input = *st.Input
	case st.Type == runbook.TypeConfirm:
		ps.Input = "user-confirmation"
		ps.Inputs = inputspb.ToProto(st.Form)
	}
	ps.Input = m.mask(ps.Input)
	if len(st.Params) > 0 {
		ps.ParamsJson = m.json(st.Params)
	}
}

// nodeInputs fills a playbook node's input, argv and params_json.
func nodeInputs(ps *rbookv1.PlanStep, n *runbook.Node, m masker) {
	switch runbook.StepType(ps.Type) {
	case runbook.TypeDeterministic:
		ps.Argv = append([]string{m.mask(n.Command)}, make([]string, len(n.Args))...)
		for i, a := range n.Args {
			ps.Argv[i+1] = m.mask(a)
		}
		ps.Input = commandLine(ps.Argv)
	case runbook.TypeAgentic:
		call := map[string]string{"agent": n.Agent}
		if n.Skill != "" {
			call["skill"] = n.Skill
		}
		b, _ := json.Marshal(call) // strings only
		ps.Input = m.mask(string(b))
		if len(n.Inputs) > 0 {
			ps.ParamsJson = m.json(n.Inputs)
		}
	case runbook.TypeApproval:
		ps.Input = m.mask(n.Prompt)
		ps.Inputs = inputspb.ToProto(n.Form)
	}
}

// commandLine shows argv as one line a person reads: entries with spaces, quotes or nothing
// in them are quoted (Go syntax); the node itself runs without a shell.
func commandLine(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\r\n\"'\\") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// boundStep cuts a step's input, params_json and argv to runplan.MaxInputBytes each.
func boundStep(ps *rbookv1.PlanStep) {
	var cut bool
	if ps.Input, cut = runplan.Cut(ps.Input, runplan.MaxInputBytes); cut {
		ps.InputTruncated = true
	}
	if ps.ParamsJson, cut = runplan.Cut(ps.ParamsJson, runplan.MaxInputBytes); cut {
		ps.InputTruncated = true
	}
	left := runplan.MaxInputBytes
	for i, a := range ps.Argv {
		if a, cut = runplan.Cut(a, left); cut {
			ps.Argv, ps.InputTruncated = append(ps.Argv[:i], a), true
			break
		}
		ps.Argv[i], left = a, left-len(a)
	}
}

// MaskText is s with every text of valueTexts (runbook.Plan.ValueTexts: a key's scalar texts)
// whose key looks secret (github.SecretTexts) replaced by runplan.Mask, as PlanOf masks a
// plan's inputs; rbook plan masks a playbook's inputs with it (internal/planview).
func MaskText(valueTexts map[string][]string, s string) string {
	return masker{texts: github.SecretTexts(valueTexts)}.mask(s)
}

// masker hides secret-looking values in a plan's text (PlanOf).
type masker struct {
	// texts are the secret values, longest first (github.SecretTexts).
	texts []string
}

// mask replaces every part of a secret text in s (github.MaskParts: the whole text and each
// of its lines) with runplan.Mask.
func (m masker) mask(s string) string {
	for _, t := range m.texts {
		for _, p := range github.MaskParts(t) {
			s = strings.ReplaceAll(s, p, runplan.Mask)
		}
	}
	return s
}

// json is v as JSON text with the value of every key that looks secret (github.LooksSecret)
// replaced by runplan.Mask and every string masked; "" when v cannot be encoded.
func (m masker) json(v map[string]any) string {
	b, err := json.Marshal(m.value(v, false))
	if err != nil {
		return ""
	}
	return string(b)
}

func (m masker) value(v any, secret bool) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = m.value(e, secret || github.LooksSecret(k))
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = m.value(e, secret)
		}
		return out
	case nil:
		return nil
	}
	if secret {
		return runplan.Mask
	}
	switch s := v.(type) {
	case string:
		return m.mask(s)
	case json.Number:
		if m.mask(string(s)) != string(s) {
			return runplan.Mask // a number holding a secret text, e.g. a PIN
		}
	}
	return v
}
