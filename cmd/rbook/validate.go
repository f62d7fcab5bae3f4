package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/runbook"
)

func newValidateCmd() *cobra.Command {
	var rules, dir string
	cmd := &cobra.Command{
		Use:   "validate [FILE...]",
		Short: "Check runbook files and report every error (file:line:col field: message)",
		Long: `Validate runbook files against the step-type rules (rules.yaml) without running
anything. Every error of every file is reported as file:line:col: field: message. Values
come from the sibling <name>.values.yaml, or <name>.values.yaml.example when it is missing.
Without FILE, every runbook in --dir is checked; values files (*.values.yaml) are skipped,
since they are checked with their runbook.

Exit codes: 0 every file is valid, 2 at least one error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				found, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
				if err != nil {
					return abort("%v", err)
				}
				args = found
			}
			var files []string
			for _, f := range args {
				if strings.HasSuffix(f, ".values.yaml") {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: skipped (a values file is checked with its runbook)\n", f)
					continue
				}
				files = append(files, f)
			}
			if len(files) == 0 {
				return abort("no runbook files to validate in %s", dir)
			}
			args = files
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
	cmd.Flags().StringVar(&dir, "dir", "runbooks", "folder whose runbooks are checked when no FILE is given")
	return cmd
}
