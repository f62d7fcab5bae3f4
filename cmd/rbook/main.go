// Command rbook runs operational runbooks: from a terminal (`rbook run demo`) or inside a CI
// job as the rbook GitHub Action. It is thin wiring of flags and environment to the packages
// under action/ (and, later, controlplane/).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rbookhq/rbook-action/action/mcp/procgroup"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
	"github.com/spf13/cobra"
)

// Exit codes (documented in --help and docs/cli.md, "Errors and exit codes").
const (
	exitCompleted = 0 // the run completed or paused at a gate (pause mode), or the command succeeded
	exitFailed    = 1 // the run failed (a step failed with halt/rollback, a signal stopped it)
	exitAborted   = 2 // aborted before running: invalid input, missing values, held or corrupt state
	exitCancelled = 3 // the run was cancelled
)

// exitError carries an exit code out of a command; its message (if any) was already printed
// or is printed by main.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func abort(format string, a ...any) error {
	return &exitError{code: exitAborted, msg: fmt.Sprintf(format, a...)}
}

const exitCodesHelp = `Exit codes:
  0  the run completed (or, with --gate-mode pause, paused at a gate: continue with rbook resume)
  1  the run failed (a step failed with on_fail halt or rollback, or a signal stopped it)
  2  aborted: invalid runbook, missing values file, corrupt or held state; or halted
     because the run's records could not be kept (state file, control plane) — resumable
  3  the run was cancelled`

// version is set at build time with -ldflags "-X main.version=…"; "dev" means unset, and
// `rbook version` reads the module version from the build info instead.
var version = "dev"

// exitUsage is the exit code of a usage error (wrong argument count, unknown flag or
// command): the same as exitAborted, since nothing ran.
const exitUsage = exitAborted

// usageError is a command-line mistake; main prints it with the command's usage line and
// where to read more.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

// withUsageErrors makes every argument and flag error of cmd and its subcommands a
// usageError: cobra's SilenceUsage (set so that a failing run does not print the usage)
// would otherwise leave just the bare error.
func withUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{c, err} })
	args := cmd.Args
	if args == nil && cmd.HasSubCommands() && !cmd.Runnable() {
		// A group (rbook, rbook mcp): cobra would print its help for any arguments and
		// exit 0. An unknown subcommand is a usage error, with suggestions; no arguments
		// show the help.
		cmd.SuggestionsMinimumDistance = 2
		args = func(c *cobra.Command, a []string) error {
			if len(a) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", a[0], c.CommandPath())
			if s := c.SuggestionsFor(a[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return errors.New(msg)
		}
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	if args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return &usageError{c, err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		withUsageErrors(sub)
	}
}

// runExample is the run command's --help example (newRunCmd lives in run.go).
const runExample = `  rbook run demo                         # the demo; type "yes" at the gate
  rbook run demo --report report.md      # also write the Markdown report
  rbook run demo -o json < answers.txt   # only the final result, as JSON
  rbook run prod --control-plane http://127.0.0.1:7070
  rbook run prod --step-index 3          # resume at index 3 (step 4 of N) after a "step in unknown state"
  rbook run demo --control-plane off     # the state file only`

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "rbook",
		Short: "Run operational runbooks with durable state, confirm gates and an evidence pack",
		Long: `rbook runs the steps of a runbook (runbooks/<name>.yaml): checks over MCP, simulated
deploys and rollbacks, and confirm gates that wait for a person. Every step is recorded in a
state file so a killed run resumes where it stopped, and every run ends with a report and
an evidence pack. Each command's --help lists its examples and exit codes.

Try it: rbook run demo

` + exitCodesHelp,
		Example: `  rbook run demo
  rbook validate demo
  rbook runs`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read(version).Line(),
	}
	runCmd := newRunCmd()
	runCmd.Example = runExample
	root.AddCommand(runCmd, newStatusCmd(), newCancelCmd(), newRollbackCmd(), newValidateCmd(), newMCPCmd(),
		newResumeCmd(), newDecideCmd(true), newDecideCmd(false), newRunsCmd(), newGetCmd(), newWatchCmd(), newApprovalsCmd(), newServeCmd(),
		newVersionCmd(), newGitHubCmd(), newPlaybookCmd(), newNotificationsCmd(), newAdminCmd(), newPlanCmd(), newEvidenceCmd())
	root.SetVersionTemplate("{{.Version}}\n")
	withUsageErrors(root)
	return root
}

func main() {
	// Before anything reads a credential: processes rbook starts must not read rbook's
	// environment from /proc (docs/decisions/mcp-config.md, "Environment").
	if err := procgroup.HideEnvironment(); err != nil {
		fmt.Fprintf(os.Stderr, "rbook: warning: could not keep other processes from reading rbook's environment: %v\n", err)
	}
	code := execute(newRootCmd(), ciErrWriter{})
	ciClose()
	os.Exit(code)
}

// execute runs the command tree and maps its error to an exit code, printing the message.
func execute(root *cobra.Command, errw io.Writer) int {
	err := root.Execute()
	if err == nil {
		return exitCompleted
	}
	var ue *usageError
	if errors.As(err, &ue) {
		use := ue.cmd.UseLine()
		if ue.cmd.HasAvailableSubCommands() {
			use = ue.cmd.CommandPath() + " COMMAND [flags]"
		}
		fmt.Fprintf(errw, "rbook: %v\nUsage: %s\nSee '%s --help' for examples and exit codes.\n", ue.err, use, ue.cmd.CommandPath())
		return exitUsage
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(errw, ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(errw, "rbook:", err)
	return exitAborted
}
