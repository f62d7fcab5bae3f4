package termui

import (
	"fmt"
	"io"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	"github.com/rbookhq/rbook-action/action/runbook"
	"github.com/rbookhq/rbook-action/action/state"
)

// ReportData is the data of the run report (msg says why the run did not complete; evPath
// is its evidence pack), with the runbook's steps so the table lists each step once, in
// runbook order.
func ReportData(plan *runbook.Plan, st *state.State, msg, evPath string) report.Report {
	d := report.Report{
		RunID: st.RunID, RunbookName: plan.Name, RunbookPath: plan.Path, RunStatus: st.RunStatus,
		StartedUTC: st.StartedUTC, CompletedUTC: st.CompletedUTC, TotalSteps: st.TotalSteps,
		SchemaHash8: st.SchemaHash8, RunbookHash: st.RunbookHash, ChainHead: st.ChainHead, Message: msg,
		Evidence: st.EvidencePack, EvidencePath: evPath,
	}
	for _, s := range plan.Steps {
		d.Steps = append(d.Steps, report.StepRef{Name: s.Name, Type: string(s.Type)})
	}
	if a, err := time.Parse(engine.TimeFormat, st.StartedUTC); err == nil {
		if b, err := time.Parse(engine.TimeFormat, st.CompletedUTC); err == nil {
			d.Duration = report.HumanDuration(b.Sub(a))
		}
	}
	if plan.Kind == runbook.KindPlaybook {
		waiting := ""
		if st.AwaitingConfirmation != nil && !st.RunStatus.Final() {
			waiting = st.AwaitingConfirmation.StepName
		}
		d.DAG = report.MermaidDAG(report.PlaybookGraph(plan, st.EvidencePack, st.IterationCounts, waiting))
		d.Playbook, d.StatusWord = true, PlaybookRunWord(st.RunStatus, waiting != "")
	}
	d.Tally()
	return d
}

// RunResult is the JSON `rbook run -o json` prints: the final state file's fields, plus how
// the run ended and where its files are.
type RunResult struct {
	*state.State
	// Message says why the run did not complete, or how it was interrupted or halted.
	Message string `json:"message,omitempty"`
	// StateFile, EvidenceFile and ReportFile are the paths of the run's files ("" omitted).
	StateFile    string `json:"state_file"`
	EvidenceFile string `json:"evidence_file,omitempty"`
	ReportFile   string `json:"report_file,omitempty"`
	// ExitCode is rbook's exit code for this outcome (see --help).
	ExitCode int `json:"exit_code"`
	// Name, Status and Nodes are a playbook run's : the playbook's
	// name, the run's status in playbook words, each node's status; absent for a runbook.
	Name   string               `json:"name,omitempty"`
	Status string               `json:"status,omitempty"`
	Nodes  []PlaybookNodeResult `json:"nodes,omitempty"`
}

// NewRunResult is the -o json result of the run st of plan: msg says how it ended, evPath and
// reportPath are its evidence pack and --report file ("" for none), code rbook's exit code.
func NewRunResult(plan *runbook.Plan, st *state.State, msg, evPath, reportPath string, code int) RunResult {
	res := RunResult{State: st, Message: msg, StateFile: plan.StateFilePath, EvidenceFile: evPath, ReportFile: reportPath, ExitCode: code}
	playbookResultFields(&res, plan, st)
	return res
}

// PlaybookNodeResult is one node of a playbook run's -o json result: its id, type, status in
// the words of rbook playbook status (NodeState): "pending" (not started), "waiting" (its gate
// is open), or its last execution's PASS, FAIL, TIMED_OUT, SKIPPED; and how many times it
// started (iteration_counts).
type PlaybookNodeResult struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Status     string `json:"status"`
	Iterations int    `json:"iterations"`
}

// playbookResultFields fills the playbook fields of rbook playbook run -o json: name (the
// playbook's name), status in playbook_runs' words (running, paused, succeeded, failed,
// cancelled) and nodes in plan order. kind ("playbook"), bindings and
// iteration_counts come with the state file. A runbook run gets none of them.
func playbookResultFields(res *RunResult, plan *runbook.Plan, st *state.State) {
	if plan == nil || plan.Kind != runbook.KindPlaybook || st == nil {
		return
	}
	res.Name = plan.Name
	res.Status = RunWord(st)
	waiting := ""
	if st.AwaitingConfirmation != nil && !st.RunStatus.Final() {
		waiting = st.AwaitingConfirmation.StepName
	}
	nodes, _ := report.PlaybookGraph(plan, st.EvidencePack, st.IterationCounts, waiting)
	res.Nodes = make([]PlaybookNodeResult, 0, len(nodes))
	for _, n := range nodes {
		status := string(n.Status)
		switch n.Status {
		case report.NotRun:
			status = "pending"
		case engine.StatusAwaitingConfirmation:
			status = "waiting"
		}
		res.Nodes = append(res.Nodes, PlaybookNodeResult{ID: n.ID, Type: n.Type, Status: status, Iterations: n.Iterations})
	}
}

// RunFiles are the paths of a run's files a summary names ("" for none but State).
type RunFiles struct{ Evidence, Report, State, Attestation, KeyID string }

// Summary is the end of a terminal run on w: status (painted when color) and how long it
// took, step counts that match the report's rows (d), the gates (gates prints d.Gates), the
// run's message, and where the evidence pack, the report and the state file are. It never
// prints the evidence pack itself.
func Summary(w io.Writer, d report.Report, st *state.State, msg string, files RunFiles, color bool, gates func(io.Writer, []report.GateRow)) {
	fmt.Fprintln(w)
	took := ""
	if d.Duration != "" {
		took = " in " + d.Duration
	}
	if st.RunStatus == engine.RunInProgress {
		fmt.Fprintf(w, "Run %s is %s%s\n", st.RunID, PaintRun(color, st.RunStatus, "not finished"), took)
	} else {
		fmt.Fprintf(w, "Run %s %s%s\n", st.RunID, PaintRun(color, st.RunStatus, RunWord(st)), took)
	}
	unit := "steps"
	if st.Kind == state.KindPlaybook {
		unit = "nodes"
	}
	fmt.Fprintf(w, "  %d %s: %d passed, %d failed, %d timed out, %d skipped, %d not run\n", len(d.Steps), unit, d.Pass, d.Fail, d.TimedOut, d.Skipped, d.NotRunCount)
	gates(w, d.Gates)
	if msg != "" && st.RunStatus != engine.RunInProgress {
		fmt.Fprintf(w, "  %s\n", msg)
	}
	if st.ChainHead != "" {
		fmt.Fprintf(w, "  Chain head     %s\n", st.ChainHead)
	}
	if files.Evidence != "" {
		fmt.Fprintf(w, "  Evidence pack  %s (%s, JSON)\n", files.Evidence, Plural(len(st.EvidencePack), "entry", "entries"))
	}
	if files.Attestation != "" {
		fmt.Fprintf(w, "  Attestation    %s (signed by key %s)\n", files.Attestation, files.KeyID)
	}
	if files.Report != "" {
		fmt.Fprintf(w, "  Report         %s\n", files.Report)
	}
	fmt.Fprintf(w, "  State file     %s\n", files.State)
}
