package main

// How a run shows itself: short text lines and a gate box on a terminal (internal/termui),
// the Markdown templates when stdout is not a terminal (so `rbook run demo > report.md` keeps
// working), and JSON with -o json. The Markdown report also goes to
// --report FILE and the GitHub job summary, whatever stdout is.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	pipeline "github.com/rbookhq/rbook-action/action/run"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/termui"
)

// ttys says which of a command's streams are terminals.
type ttys struct{ stdin, stdout, stderr bool }

// terminals decides which of stdin, out and errw are terminals. It is a variable so tests can
// exercise the terminal rendering without a pty.
var terminals = func(out, errw io.Writer) ttys {
	return ttys{stdin: termui.IsTerminal(os.Stdin), stdout: termui.IsTerminal(out), stderr: termui.IsTerminal(errw)}
}

// outputMode is which rendering a command uses.
type outputMode int

const (
	// modeMarkdown is for a stdout that is not a terminal: the Markdown templates (docs/decisions/two-renderings.md) (step status
	// after every step, the report, the evidence pack) on stdout, progress on stderr.
	modeMarkdown outputMode = iota
	// modeTerminal is for a stdout that is a terminal: one text line per step, a summary
	// that says where the evidence pack and the report are.
	modeTerminal
	// modeJSON is -o json: stdout holds only the final result as one JSON object; the
	// text lines go to stderr.
	modeJSON
)

// view renders one command's run. It is also the engine.Recorder that shows progress
// (progress.go).
type view struct {
	out, errw io.Writer
	mode      outputMode
	// color colours the step lines; boxColor the gate box (which goes to stderr).
	color, boxColor bool
	// gateBox draws the confirm gate as a box: stderr, where it is shown, is a terminal.
	gateBox bool
	// reportPath is --report FILE ("" for none).
	reportPath string
	rend       *report.Renderer
	plan       *runbook.Plan
	started    time.Time
	// runStart is when the run itself started (its state file's started_utc, see
	// setRunStart), which is before started for a resumed, cancelled or rolled-back run;
	// zero when unknown.
	runStart  time.Time
	nameWidth int
	// resumeCmd and cancelCmd are how a person resumes or ends this run ("rbook run demo",
	// "rbook cancel demo"; for a playbook "rbook playbook run FILE", "rbook playbook cancel
	// RUN_ID"); empty means the runbook commands of the name finish is given.
	resumeCmd, cancelCmd string
	// attestation is the finished run's signed attestation file (pipeline.AttestationFile).
	attestation pipeline.AttestationFile

	mu        sync.Mutex
	stepStart map[int]time.Time
	// ci is the GitHub runner output (ci_output.go), nil outside a runner.
	ci *ciOutput
}

// setRunStart records the run's started_utc (engine.TimeFormat) so that "Run … ended … after
// D" says how long the run took, not how long this rbook process ran: a resumed run, or a
// cancel of one started minutes ago, said "after 3ms" (found trying the README as a new
// user). An unparsable value leaves it unknown.
func (v *view) setRunStart(startedUTC string) {
	if t, err := time.Parse(engine.TimeFormat, startedUTC); err == nil {
		v.runStart = t
	}
}

// newView picks the rendering from -o (output: "", "text" or "json") and which streams are
// terminals. It returns an error naming the flag for another -o value or a --report FILE
// whose folder does not exist, before anything ran.
func newView(out, errw io.Writer, tt ttys, rend *report.Renderer, plan *runbook.Plan, output, reportPath string) (*view, error) {
	v := &view{out: out, errw: errw, rend: rend, plan: plan, started: time.Now(), reportPath: reportPath, stepStart: map[int]time.Time{}}
	switch output {
	case "", "text":
		if tt.stdout {
			v.mode, v.color = modeTerminal, termui.ColorAllowed(true)
		}
	case "json":
		v.mode, v.color = modeJSON, termui.ColorAllowed(tt.stderr)
	default:
		return nil, fmt.Errorf("-o/--output %q: use text or json", output)
	}
	v.gateBox, v.boxColor = tt.stderr, termui.ColorAllowed(tt.stderr)
	if err := termui.CheckReportPath(reportPath); err != nil {
		return nil, err
	}
	v.nameWidth = len("CANCEL")
	for _, s := range plan.Steps {
		v.nameWidth = max(v.nameWidth, min(utf8.RuneCountInString(s.Name), termui.MaxNameColumn))
	}
	return v, nil
}

// dim paints s dim when the step lines are coloured.
func (v *view) dim(s string) string { return termui.SGR(v.color, termui.SGRDim, s) }

// lines is where the text step lines go: stdout on a terminal, stderr with -o json.
func (v *view) lines() io.Writer {
	if v.mode == modeJSON {
		return v.errw
	}
	return v.out
}

// renderGate draws a confirm gate or a playbook approval node as a box for a terminal
// (termui.GateBox); it is the TerminalGate's Render when stderr is a terminal.
func (v *view) renderGate(req engine.GateRequest) string {
	return termui.GateBox(req, v.plan != nil && v.plan.Kind == runbook.KindPlaybook, v.boxColor)
}

// printReport renders the run report, prints it to out and returns it.
func printReport(out io.Writer, rend *report.Renderer, plan *runbook.Plan, st *state.State, msg, evPath string) (string, error) {
	s, err := rend.RenderReport(termui.ReportData(plan, st, msg, evPath))
	if err != nil {
		return "", err
	}
	fmt.Fprint(out, "\n"+s)
	return s, nil
}

// showReport is how the cancel and rollback verbs end: the Markdown report when stdout is not
// a terminal (as before), the text summary when it is.
func (v *view) showReport(st *state.State, msg, evPath string) error {
	if v.mode == modeTerminal {
		v.summary(st, msg, evPath)
		return nil
	}
	_, err := printReport(v.out, v.rend, v.plan, st, msg, evPath)
	return err
}

// printJSON prints the run's -o json result (termui.RunResult).
func (v *view) printJSON(st *state.State, msg, evPath string, code int) {
	res := termui.NewRunResult(v.plan, st, msg, evPath, v.reportPath, code)
	enc := json.NewEncoder(v.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		fmt.Fprintln(v.errw, err)
	}
}

// exitFor maps a run status to rbook's exit code (see exitCodesHelp).
func exitFor(s engine.RunStatus) int {
	switch s {
	case engine.RunCompleted:
		return exitCompleted
	case engine.RunCancelled:
		return exitCancelled
	}
	return exitFailed // FAILED, or IN_PROGRESS: a signal stopped it
}

// finish ends a run's output: the Markdown report goes to --report FILE
// and the job summary; stdout gets the report and the evidence pack (not a terminal), a
// short summary (a terminal) or the JSON result (-o json). An interrupted run prints no
// final-looking outcome, only that it was interrupted and how to resume.
// It returns the exit code's error.
func (v *view) finish(name string, st *state.State, res engine.Result, evPath string) error {
	rep, err := v.rend.RenderReport(termui.ReportData(v.plan, st, res.Message, evPath))
	if err != nil {
		return abort("%v", err)
	}
	if v.reportPath != "" {
		if err := state.WriteFileAtomic(v.reportPath, []byte(rep)); err != nil {
			fmt.Fprintf(v.errw, "warning: the report was not written to %s: %v\n", v.reportPath, err)
			v.reportPath = ""
		}
	}
	v.ci.publish(v, rep, st, evPath)
	code := exitFor(st.RunStatus)
	interrupted := st.RunStatus == engine.RunInProgress
	switch v.mode {
	case modeTerminal:
		v.summary(st, res.Message, evPath)
		if interrupted {
			fmt.Fprintln(v.out, v.interruptedText(name, st, res.Message))
		}
	case modeJSON:
		v.printJSON(st, res.Message, evPath, code)
		v.trailer(name, st, res.Message, evPath)
	default:
		if !interrupted {
			fmt.Fprint(v.out, "\n"+rep)
			if pack, err := v.rend.RenderEvidencePack(st.RunID, st.EvidencePack); err == nil {
				fmt.Fprint(v.out, "\n"+pack)
			}
		}
		v.trailer(name, st, res.Message, evPath)
	}
	if code == exitCompleted {
		return nil
	}
	return &exitError{code: code}
}

// halted is called when the run stopped because its records could not be kept; with -o json
// it prints the result so far (the caller prints the reason and exits 2).
func (v *view) halted(st *state.State, err error) {
	if v.mode == modeJSON {
		v.printJSON(st, err.Error(), "", exitAborted)
	}
}

// trailer is the closing lines on stderr, where a person at a terminal looks last.
func (v *view) trailer(name string, st *state.State, msg, evPath string) {
	fmt.Fprintln(v.errw)
	if st.RunStatus == engine.RunInProgress {
		fmt.Fprintln(v.errw, v.interruptedText(name, st, msg))
		return
	}
	if msg != "" {
		fmt.Fprintln(v.errw, msg)
	}
	fmt.Fprintf(v.errw, "Run %s %s. Evidence pack: %s\n", st.RunID, termui.RunWord(st), evPath)
	if a := v.attestation; a.Path != "" {
		fmt.Fprintf(v.errw, "Attestation: %s (signed by key %s)\n", a.Path, a.KeyID)
	}
	if v.reportPath != "" {
		fmt.Fprintf(v.errw, "Report: %s\n", v.reportPath)
	}
}

// interruptedText says that a signal stopped the run, that nothing is final, and how to go
// on (termui.InterruptedText): v.resumeCmd and v.cancelCmd, else the runbook commands of name.
func (v *view) interruptedText(name string, st *state.State, msg string) string {
	resume, cancel := v.resumeCmd, v.cancelCmd
	if resume == "" {
		resume, cancel = "rbook run "+name, "rbook cancel "+name
	}
	return termui.InterruptedText(st, msg, resume, cancel, v.plan.StateFilePath)
}

// summary is the end of a terminal run: status, step counts that match the report's rows,
// the run's message, and where the evidence pack, the report and the state file are. It never
// prints the evidence pack itself.
func (v *view) summary(st *state.State, msg, evPath string) {
	files := termui.RunFiles{Evidence: evPath, Report: v.reportPath, State: v.plan.StateFilePath, Attestation: v.attestation.Path, KeyID: v.attestation.KeyID}
	termui.Summary(v.out, termui.ReportData(v.plan, st, msg, evPath), st, msg, files, v.color, termui.GateLines)
}

// statusLines prints a recorded run's steps as text, one line per runbook step in runbook
// order with its final status or "not run" (rbook status without --report).
func (v *view) statusLines(st *state.State) {
	termui.StatusLines(v.out, termui.ReportData(v.plan, st, "", "").Rows, v.lineStyle())
}
