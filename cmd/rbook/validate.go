package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/runbook"
)

func newValidateCmd() *cobra.Command {
	var rules string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check runbook files and report every error (file:line:col field: message)",
		Long: `Validate runbook files against the step-type rules (rules.yaml) without running
anything. Every error of every file is reported as file:line:col: field: message. Values
come from the sibling <name>.values.yaml, or <name>.values.yaml.example when it is missing.

Exit codes: 0 every file is valid, 2 at least one error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, f := range args {
				ds := runbook.Validate(f, rules)
				for _, d := range ds {
					fmt.Fprintln(cmd.ErrOrStderr(), d.String())
				}
				if len(ds) > 0 {
					bad++
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", f)
			}
			if bad > 0 {
				return &exitError{code: exitAborted, msg: fmt.Sprintf("%d of %d files have errors", bad, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rules, "rules", "", "rules.yaml to validate against instead of the built-in one")
	return cmd
}
