// Package github is the runner glue of the rbook GitHub Action (DESIGN "The house"): it
// writes the run report to the job summary and the run id and status to the step outputs,
// through github.com/sethvargo/go-githubactions. Outside a runner it does nothing.
package github

import (
	"os"

	"github.com/sethvargo/go-githubactions"
)

// InRunner reports whether rbook runs inside a GitHub Actions job (GITHUB_ACTIONS=true).
func InRunner() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// Publish appends the Markdown report to $GITHUB_STEP_SUMMARY and sets the step outputs
// run-id and status. Outside a runner (no GITHUB_ACTIONS) it does nothing.
func Publish(report, runID, status string) {
	if !InRunner() {
		return
	}
	a := githubactions.New()
	if os.Getenv("GITHUB_STEP_SUMMARY") != "" {
		a.AddStepSummary(report)
	}
	if os.Getenv("GITHUB_OUTPUT") != "" {
		a.SetOutput("run-id", runID)
		a.SetOutput("status", status)
	}
}
