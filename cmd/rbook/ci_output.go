package main

// The runner output of `rbook run` in a GitHub Actions job is action/github/runner's; this is
// its wiring: the process's one Output and the error stream of execute (the pipeline places
// the Output's gates: pipeline.RunnerGates).

import (
	"fmt"
	"io"
	"os"

	"github.com/rbookhq/rbook-action/action/github"
	"github.com/rbookhq/rbook-action/action/github/runner"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// ciOut is this process's runner output, set by ciStreams; nil outside a runner. execute
// prints a failed command's message through it (ciErrWriter), so an error that quotes a
// runbook string or an MCP answer is wrapped too.
var ciOut *ciOutput

// ciOutput is the runner output of one `rbook run`; its methods are nil-safe (nil outside a
// runner). log is the Output's log.
type ciOutput struct {
	*runner.Output
	log *github.Log
}

// ciStreams is the writers `rbook run` prints to (runner.Streams) and its runner output.
func ciStreams(out, errw io.Writer, output string) (io.Writer, io.Writer, *ciOutput) {
	o, e, r := runner.Streams(out, errw, output)
	if r == nil {
		return o, e, nil
	}
	ciOut = &ciOutput{Output: r, log: r.Log()}
	return o, e, ciOut
}

// ciErrWriter is execute's error stream: the runner log when there is one, else os.Stderr.
type ciErrWriter struct{}

func (ciErrWriter) Write(p []byte) (int, error) {
	if ciOut != nil {
		return ciOut.log.Write(p)
	}
	return os.Stderr.Write(p)
}

// ciClose ends the runner log's open stop-commands block and the MCP stderr copy.
func ciClose() {
	if ciOut != nil {
		ciOut.Close()
	}
}

// attach binds the runner output to the run's view and plan (runner.Output.Attach).
func (c *ciOutput) attach(v *view, plan *runbook.Plan) {
	if c != nil {
		v.ci = c
		c.Attach(plan)
	}
}

// publish ends a run's runner output (runner.Output.Publish); without one, as for rbook cancel
// and rollback, it is github.Publish: the report and run-id/status, nothing outside a runner.
func (c *ciOutput) publish(v *view, rep string, st *state.State, evPath string) {
	if c == nil {
		if err := github.Publish(rep, st.RunID, string(st.RunStatus)); err != nil {
			fmt.Fprintf(v.errw, "warning: %v\n", err)
		}
		return
	}
	c.Publish(rep, termui.ReportData(v.plan, st, "", evPath), st, runner.Files{Runbook: v.plan.Path, Report: v.reportPath, Evidence: evPath,
		Attestation: v.attestation.Path, KeyID: v.attestation.KeyID})
}
