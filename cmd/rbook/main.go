// Command rbook runs operational runbooks: from a terminal (`rbook run demo`) or inside a CI
// job as the rbook GitHub Action. It is thin wiring of flags and environment to the packages
// under action/ (and, later, controlplane/).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes (documented in --help and the README).
const (
	exitCompleted = 0 // the run completed (or the command succeeded)
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
  0  the run completed
  1  the run failed (a step failed with on_fail halt or rollback, or a signal stopped it)
  2  aborted: invalid runbook, missing values file, corrupt or held state; or halted
     because the run's records could not be kept (state file, control plane) — resumable
  3  the run was cancelled`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:   "rbook",
		Short: "Run operational runbooks with durable state, confirm gates and an evidence pack",
		Long: `rbook runs the steps of a runbook (runbooks/<name>.yaml): checks over MCP, simulated
deploys and rollbacks, and confirm gates that wait for a person. Every step is recorded in a
state file so a killed run resumes where it stopped, and every run ends with a report and
an evidence pack.

Try it: rbook run demo

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newRunCmd(), newStatusCmd(), newCancelCmd(), newRollbackCmd(), newValidateCmd(), newMCPCmd(),
		newDecideCmd(true), newDecideCmd(false), newRunsCmd(), newGetCmd(), newWatchCmd(), newApprovalsCmd(), newServeCmd())
	err := root.Execute()
	if err == nil {
		os.Exit(exitCompleted)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, ee.msg)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "rbook:", err)
	os.Exit(exitAborted)
}
