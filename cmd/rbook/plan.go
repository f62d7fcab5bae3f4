package main

// rbook plan: what a run would do, before it starts (docs/plan.md). The view is
// internal/planview's; this file loads the runbook or playbook and the policies.

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/preflight"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/controlplane/approval"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/planview"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// planFlags are the flags of rbook plan.
type planFlags struct {
	dir, rules, output, controlPlane string
	gatePolicy, playbookPolicy       string
	inputs                           []string
	inputsFile                       string
	summary                          bool
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:     "plan [RUNBOOK|FILE.yaml|FILE.cantbook]",
		Short:   "Show what a run would do: steps in order, rendered inputs, commands, gates and who decides them, the plan digest",
		Long:    planview.Help,
		Example: planview.Examples,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd, args, f)
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "runbooks", "folder that holds <runbook>.yaml and its values")
	cmd.Flags().StringVar(&f.rules, "rules", "", "rules.yaml to validate steps against instead of the built-in one")
	cmd.Flags().StringArrayVar(&f.inputs, "input", nil, "a playbook input as NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&f.inputsFile, "inputs", "", "a YAML or JSON file mapping playbook input names to values")
	cmd.Flags().StringVar(&f.gatePolicy, "gate-policy", "", "gate policy file, as rbook serve --gate-policy reads it (default: 1 approval, not the run's starter)")
	cmd.Flags().StringVar(&f.playbookPolicy, "playbook-policy", "", "auto-pass policy rules, as rbook serve --playbook-policy reads them (default: the built-in rules)")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "the control plane the run reports to: its policies are asked what they would decide (default $RBOOK_CONTROL_PLANE)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "text, markdown or json")
	cmd.Flags().BoolVar(&f.summary, "summary", false, "append the Markdown to $GITHUB_STEP_SUMMARY instead of printing it")
	return cmd
}

// runPlan loads name (a runbook in --dir, or a playbook file) and the policies, and writes
// the plan as -o says.
func runPlan(cmd *cobra.Command, args []string, f planFlags) error {
	if f.output != "text" && f.output != "markdown" && f.output != "json" {
		return &usageError{cmd: cmd, err: fmt.Errorf("-o %q: use text, markdown or json", f.output)}
	}
	// In a job, text, Markdown and errors (which quote the files) go through the runner log,
	// which wraps them in stop-commands: a runbook's text is never read as a workflow command.
	out, _, _ := ciStreams(cmd.OutOrStdout(), cmd.ErrOrStderr(), f.output)
	c := common{dir: f.dir, rules: f.rules}
	plan, inputs, err := f.load(&c, c.runbookArg(cmd, args))
	if err != nil {
		return err
	}
	o, err := f.policies()
	if err != nil {
		return err
	}
	o.Inputs = inputs
	if cp := f.controlPlane; cp != "" || os.Getenv("RBOOK_CONTROL_PLANE") != "" {
		if cp == "" {
			cp = os.Getenv("RBOOK_CONTROL_PLANE")
		}
		if cp != "off" {
			remotePolicies(cmd, &o, plan, inputs, cp)
		}
	}
	v, err := planview.Build(plan, o)
	if err != nil {
		return abort("%v", err)
	}
	switch {
	case f.summary:
		err = planview.AppendToSummary(out, v, os.Getenv("GITHUB_STEP_SUMMARY"))
	case f.output == "json":
		err = planview.JSON(out, v)
	case f.output == "markdown":
		planview.Markdown(out, v)
	default:
		planview.Text(out, v, termui.ColorAllowed(termui.IsTerminal(out)))
	}
	return abortIf(err)
}

// load is the plan of name and a playbook's validated inputs; errors name file:line:col.
func (f planFlags) load(c *common, name string) (*runbook.Plan, map[string]any, error) {
	file := name
	if !runbook.LooksLikePlaybook(file) {
		if c.dir, name = planview.RunbookTarget(f.dir, name); playbookGiven(c.dir, name, "run") == nil {
			plan, err := c.loadPlan(name)
			if err == nil && (len(f.inputs) > 0 || f.inputsFile != "") {
				return nil, nil, abort("--input and --inputs are for a playbook; %s is a runbook, whose values come from %s", name, plan.ValuesPath)
			}
			return plan, nil, err
		}
		file = c.dir + string(os.PathSeparator) + name + ".yaml"
	} else if msg := planview.MissingPlaybook(f.dir, file); msg != "" {
		return nil, nil, abort("%s", msg)
	}
	plan, err := runbook.LoadPlaybook(file)
	if err != nil {
		var b strings.Builder
		n := preflight.PrintParseError(&b, file, err)
		return nil, nil, abort("%s%s has %d issue(s); nothing is shown.", b.String(), file, n)
	}
	given, err := pipeline.GivenInputs(f.inputsFile, f.inputs)
	if err != nil {
		return nil, nil, abort("%v", err)
	}
	inputs, err := runbook.ValidatePlaybookInputs(plan, given)
	if err != nil {
		return nil, nil, abort("%v", err)
	}
	return plan, inputs, nil
}

// policies are the gate policy and the auto-pass policy of --gate-policy and
// --playbook-policy, and the words that say where they came from.
func (f planFlags) policies() (planview.Options, error) {
	gp, err := approval.LoadGatePolicy(f.gatePolicy)
	if f.gatePolicy == "" {
		gp, err = nil, nil
	}
	if err != nil {
		return planview.Options{}, abort("--gate-policy: %v", err)
	}
	pol, err := approval.LoadPlaybookPolicy(f.playbookPolicy)
	if err != nil {
		return planview.Options{}, abort("--playbook-policy: %v", err)
	}
	o := planview.Options{AutoPass: policyFunc(pol), GatePolicy: "none given: " + approval.DefaultRuleName, AutoPassPolicy: "the built-in rules"}
	o.Gates = func(name, gate string) planview.Requirement {
		r := gp.For(name, gate)
		if r.Rule == approval.DefaultRuleName {
			r.Rule = "the default rule"
		}
		return planview.Requirement{Rule: r.Rule, Approvals: r.ApprovalsRequired, Approvers: r.AllowedApprovers, StarterMayApprove: r.StarterMayApprove}
	}
	if f.gatePolicy != "" {
		o.GatePolicy = f.gatePolicy
	}
	if f.playbookPolicy != "" {
		o.AutoPassPolicy = f.playbookPolicy + ", then the built-in rules"
	}
	return o, nil
}

// remotePolicies asks the control plane cp what its policies would decide at plan's gates
// (ApprovalService.PreviewGates) and sets o to answer from its reply. When it cannot be asked
// (unreachable, refused, an older control plane), o keeps the local policies and says so: the
// plan is still shown, so the Action's plan input never stops a run the control plane would run.
func remotePolicies(cmd *cobra.Command, o *planview.Options, plan *runbook.Plan, inputs map[string]any, cp string) {
	req, err := planview.PreviewRequest(plan, inputs)
	var resp *rbookv1.PreviewGatesResponse
	if err == nil {
		var c *cpclient.Client
		var done func()
		if c, done, err = (&cpFlags{url: cp}).client(cmd); err == nil {
			defer done()
			resp, err = c.Approvals.PreviewGates(cmd.Context(), req)
		}
	}
	if err != nil {
		note := fmt.Sprintf(" (the control plane %s decides with its own policy when the gate opens, and could not be asked: %s; shown: this one)",
			cp, strings.ReplaceAll(err.Error(), "\n", " "))
		o.GatePolicy += note
		o.AutoPassPolicy += note
		return
	}
	planview.FromPreview(o, resp)
	o.GatePolicy = "the control plane " + cp + " (its --gate-policy)"
	o.AutoPassPolicy = "the control plane " + cp + " (its --playbook-policy)"
}
