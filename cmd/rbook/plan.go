package main

// rbook plan: what a run would do, before it starts (docs/plan.md). The view is
// internal/planview's; this file loads the runbook or playbook and the policies.

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
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
	o, err := planview.LocalPolicies(f.gatePolicy, f.playbookPolicy)
	if err != nil {
		return abort("%v", err)
	}
	o.Inputs = inputs
	if cp, _ := pipeline.ControlPlaneFrom(f.controlPlane); cp != "" && cp != "off" {
		connect := func() (*cpclient.Client, func(), error) { return (&cpFlags{url: cp}).client(cmd) }
		planview.AskControlPlane(cmd.Context(), &o, plan, inputs, cp, connect)
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
	if err != nil {
		return abort("rbook: %v", err)
	}
	return nil
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
	plan, err := pipeline.LoadPlaybook(file, "nothing is shown.")
	if err != nil {
		return nil, nil, abort("%v", err)
	}
	inputs, err := pipeline.ValidInputs(plan, f.inputsFile, f.inputs)
	return plan, inputs, aborted(err)
}
