// Package report renders rbook's Markdown outputs from templates (docs/spec/runbooks.md,
// Step 9 and "Output contract"): the per-step status, the final run report, the evidence
// pack and the cancel prompt. The templates ship embedded and can be overridden file by file.
package report

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

//go:embed templates/*.md prompts/*.md
var embedded embed.FS

// The template files, by their path relative to a templates folder (docs/spec/runbooks.md, "Step 8" to "Step 9").
const (
	StepStatusFile = "templates/output-step-status.md"
	ReportFile     = "templates/output-report.md"
	// PlaybookReportFile is the final report of a playbook run (docs/spec/playbooks.md, "Report"): the runbook
	// report's shape, saying playbook and node, with the playbook status words.
	PlaybookReportFile = "templates/output-playbook-report.md"
	EvidencePackFile   = "templates/output-evidence-pack.md"
	CancelPromptFile   = "prompts/cancel.prompt.md"
)

// templateNames are the templates New parses and checks, in this order.
var templateNames = []string{StepStatusFile, ReportFile, PlaybookReportFile, EvidencePackFile, CancelPromptFile}

// ReportHeading is the first H1 line of every run report (docs/spec/runbooks.md, "Output contract").
const ReportHeading = "# Runbook Execution Report"

// PlaybookReportHeading is the first H1 line of every playbook run report (docs/spec/playbooks.md, "Report");
// a runbook run's report keeps ReportHeading (docs/spec/runbooks.md, "Output contract").
const PlaybookReportHeading = "# Playbook Execution Report"

// Renderer holds the parsed templates.
type Renderer struct {
	t map[string]*template.Template
}

// TemplateError is a template that cannot be used: it does not parse, cannot be read, or
// (the report) does not start with ReportHeading. Line is 1-based, 0 when unknown.
type TemplateError struct {
	// Path is the override file, or "embedded <name>" for a built-in template.
	Path string
	Line int
	Msg  string
}

// Error formats the error as "template PATH:LINE: MSG" (":LINE" only when known).
func (e *TemplateError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("template %s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("template %s: %s", e.Path, e.Msg)
}

// templateLineRE finds the line in a text/template parse error ("template: NAME:LINE: …").
var templateLineRE = lazyregexp.New(`^template: [^:]*:(\d+): (.*)$`)

// New parses the embedded templates, each replaced by DIR/<same path> when overrideDir is
// set and that file exists. It returns an error naming the folder when overrideDir is set
// but does not exist or is not a folder (the --templates flag; a mistyped
// folder must not silently fall back to the built-in templates). Otherwise it checks every
// template and returns all their problems at once (docs/runbooks.md, "Validating") as errors.Join of
// *TemplateError: a template that does not parse or cannot be read, a report template that
// does not start with ReportHeading, a template that fails when rendered for one of its
// sample runs (samples.go: every step and node type and status, every run status, every
// field of the data set and unset), with the line of the failing action.
func New(overrideDir string) (*Renderer, error) {
	if overrideDir != "" {
		info, err := os.Stat(overrideDir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("templates folder %s (--templates) does not exist", overrideDir)
		case err != nil:
			return nil, fmt.Errorf("templates folder %s (--templates): %w", overrideDir, err)
		case !info.IsDir():
			return nil, fmt.Errorf("templates folder %s (--templates) is not a folder", overrideDir)
		}
	}
	r := &Renderer{t: map[string]*template.Template{}}
	var errs []error
	froms := map[string]string{}
	for _, name := range templateNames {
		src, from, err := load(overrideDir, name)
		froms[name] = from
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(string(src))
		if err != nil {
			te := &TemplateError{Path: from, Msg: err.Error()}
			if m := templateLineRE.FindStringSubmatch(err.Error()); m != nil {
				te.Line, _ = strconv.Atoi(m[1])
				te.Msg = m[2]
			}
			errs = append(errs, te)
			continue
		}
		if name == ReportFile && !strings.HasPrefix(string(src), ReportHeading+"\n") {
			errs = append(errs, &TemplateError{Path: from, Line: 1, Msg: fmt.Sprintf("the first line must be exactly %q (docs/spec/runbooks.md, section Output contract)", ReportHeading)})
			continue
		}
		if name == PlaybookReportFile && !strings.HasPrefix(string(src), PlaybookReportHeading+"\n") {
			errs = append(errs, &TemplateError{Path: from, Line: 1, Msg: fmt.Sprintf("the first line must be exactly %q (docs/spec/playbooks.md, section Report)", PlaybookReportHeading)})
			continue
		}
		r.t[name] = t
	}
	errs = append(errs, r.checkSamples(froms)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func load(dir, name string) ([]byte, string, error) {
	if dir != "" {
		p := filepath.Join(dir, filepath.FromSlash(name))
		b, err := os.ReadFile(p)
		if err == nil {
			return b, p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			msg := err.Error()
			var pe *fs.PathError
			if errors.As(err, &pe) {
				msg = pe.Err.Error()
			}
			return nil, p, &TemplateError{Path: p, Msg: msg}
		}
	}
	b, err := embedded.ReadFile(name)
	return b, "embedded " + name, err
}

func (r *Renderer) render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := r.t[name].Execute(&b, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// StepStatus is the data of templates/output-step-status.md.
type StepStatus struct {
	RunID string
	// Number and Count are "step n of N" (1-based).
	Number, Count int
	Entry         engine.Evidence
	// Elapsed is the run's elapsed time so far, rounded for people ("" to leave out).
	Elapsed string
	// Node is true for a playbook node: the heading says "Node n/N" instead of the specification's
	// "Step n/N" (docs/spec/playbooks.md, "Report"). A runbook step's status is byte-for-byte the specification's.
	Node bool
}

// RenderStepStatus renders the per-step status (docs/spec/runbooks.md, "Step 9").
func (r *Renderer) RenderStepStatus(d StepStatus) (string, error) { return r.render(StepStatusFile, d) }

// Report is the data of templates/output-report.md.
type Report struct {
	RunID, RunbookName, RunbookPath string
	RunStatus                       engine.RunStatus
	StartedUTC, CompletedUTC        string
	Duration                        string
	TotalSteps                      int
	SchemaHash8, RunbookHash        string
	// ChainHead is the hash of the run's last transition, which pins every transition and
	// evidence entry before it (docs/evidence-chain.md); "" for a run without the chain.
	ChainHead string
	Message   string
	// Evidence is the evidence pack in execution order (docs/spec/runbooks.md, "Step 7").
	Evidence []engine.Evidence
	// Steps are the runbook's steps in runbook order. When set, the report's step table has
	// one row per step (Rows); when nil, one row per evidence entry.
	Steps []StepRef
	// Rows is filled by RenderReport from Steps and Evidence (see Rows).
	Rows []Row
	// EvidencePath is where the evidence pack JSON was written ("" when it was not).
	EvidencePath string
	// DAG is a playbook run's graph as a Mermaid block (MermaidDAG of PlaybookGraph;
	// docs/spec/playbooks.md, "Report"); "" for a runbook run.
	DAG string
	// Playbook selects PlaybookReportFile (docs/spec/playbooks.md, "Report"): "Playbook", "Nodes", and
	// StatusWord for the status. False: the specification's runbook report (ReportFile).
	Playbook bool
	// StatusWord is the status a playbook report shows: the specification's playbook word (running |
	// paused | failed | succeeded | cancelled); RunStatus (the state file's word) still
	// decides "So far" / "Outcome". Unused by the runbook report.
	StatusWord string
	// Counts over the runbook-step rows by final status; Done counts the rows with an
	// outcome (not NotRun), Extra the rows that are no runbook step (the CANCEL audit entry).
	Done, Pass, Fail, TimedOut, Skipped, NotRunCount, Extra int
	// Gates is who decided each gate (confirm step, approval node), how and why, in
	// execution order; filled by Tally from Evidence (GateRows).
	Gates []GateRow
}

// GateRow is one decided gate in the report's "Gate decisions" table: the gate's final
// evidence entry read back into its parts.
type GateRow struct {
	Name   string
	Status engine.StepStatus
	// Verdict is "approved", "rejected" or "cancel requested"; By the approver identity
	// ("unverified:NAME" for a name nobody verified, "github:LOGIN", a terminal user); Via the
	// channel that decided ("terminal", "control-plane", "github", "policy"); Reason the
	// approver's reason and any policy note. A confirm step passed at the terminal records only
	// the answer typed: By is then "". When the entry's output is no decision (a gate that
	// timed out, a refusal typed at the terminal), Verdict is "" and Reason holds the output.
	Verdict, By, Via, Reason string
	// Inputs are the approver-input values an approval node was approved with, as
	// "name=value" sorted by name and joined by ", " (docs/approver-inputs.md); "" for none.
	Inputs string
	// SentBack is true for a rejection that sent a playbook run back (docs/push-back.md):
	// Verdict is then "sent back to <node> (iteration <n>)" and Reason the reviewer's comment.
	SentBack bool
}

// decidedRE reads a gate's evidence output, the engine's "<verdict> by <who> via
// <channel>[: reason]" (engine.gateDecidedMessage).
var decidedRE = lazyregexp.New(`^(approved|rejected|cancel requested) by (.+?) via ([a-z-]+)(?:: ([\s\S]*)|(; [\s\S]*))?$`)

// GateRows lists the gates of ev that have an outcome (a confirm step or an approval node
// whose entry is not AWAITING_CONFIRMATION), in execution order.
func GateRows(ev []engine.Evidence) []GateRow {
	var rows []GateRow
	for _, e := range ev {
		if (e.Type != "confirm" && e.Type != "approval") || e.Status == engine.StatusAwaitingConfirmation {
			continue
		}
		r := GateRow{Name: e.StepName, Status: e.Status, Reason: e.Output}
		if d, ok := approvalOutput(e); ok {
			r.Verdict, r.By, r.Reason, r.Inputs = "rejected", d.By, d.Reason, d.inputsText()
			if *d.Approved {
				r.Verdict = "approved"
			}
			if d.AutoPassed {
				r.Via = "policy"
			}
			if d.Via != "" {
				r.Via = d.Via
			}
			if d.SentBack && d.RedoFrom != "" {
				r.SentBack, r.Verdict = true, fmt.Sprintf("sent back to %s (iteration %d)", d.RedoFrom, max(d.Iteration, 1))
			}
		} else if m := decidedRE.FindStringSubmatch(e.Output); m != nil {
			r.Verdict, r.By, r.Via, r.Reason = m[1], m[2], m[3], m[4]+strings.TrimPrefix(m[5], "; ")
		} else if e.Type == "confirm" && e.Status == engine.StatusPass {
			// A confirm step answered at the terminal keeps the answer typed (docs/spec/runbooks.md, "Step 7":
			// the user's input) rather than the decision's words.
			r.Verdict, r.Via, r.Reason = "approved", "terminal", fmt.Sprintf("answered %q", e.Output)
		}
		rows = append(rows, r)
	}
	return rows
}

// StepRef names one runbook step for the report: its name and type.
type StepRef struct {
	Name, Type string
}

// NotRun is the status a report row shows for a runbook step with no evidence entry: the run
// ended (halt, rollback, cancel) or stopped before it, or has not reached it yet (docs/decisions/two-renderings.md).
const NotRun engine.StepStatus = "not run"

// Row is one line of the report's step table (docs/decisions/two-renderings.md).
type Row struct {
	// Number is the step's 1-based position in the runbook; 0 for an entry that is no
	// runbook step (the CANCEL audit entry, a rollback that found no rollback step).
	Number int
	Name   string
	Type   string
	// Status is the step's final status: that of its last evidence entry, or NotRun.
	Status engine.StepStatus
	// At is the final entry's timestamp_utc ("" when not run).
	At string
	// Earlier are the statuses of the step's earlier entries, in execution order (a rollback
	// step SKIPPED in forward flow and then run by on_fail: rollback; a step run again after
	// a --step-index jump back).
	Earlier []engine.StepStatus
}

// Rows lists every runbook step once, in runbook order, with its final status or NotRun,
// followed by the evidence entries that belong to no runbook step, in execution order, with
// the CANCEL audit entry last (docs/spec/runbooks.md, "Step 8"). An entry belongs to the step with its step_name
// and type. The evidence pack itself stays in execution order (docs/spec/runbooks.md, "Step 7").
func Rows(steps []StepRef, ev []engine.Evidence) []Row {
	rows := make([]Row, len(steps))
	at := make(map[StepRef]int, len(steps))
	for i, s := range steps {
		rows[i] = Row{Number: i + 1, Name: s.Name, Type: s.Type, Status: NotRun}
		at[s] = i
	}
	var extra, cancel []Row
	for _, e := range ev {
		i, ok := at[StepRef{e.StepName, e.Type}]
		if !ok {
			r := Row{Name: e.StepName, Type: e.Type, Status: e.Status, At: e.TimestampUTC}
			if e.Type == "cancel" {
				cancel = append(cancel, r)
			} else {
				extra = append(extra, r)
			}
			continue
		}
		r := &rows[i]
		if r.Status != NotRun {
			r.Earlier = append(r.Earlier, r.Status)
		}
		r.Status, r.At = e.Status, e.TimestampUTC
	}
	return append(append(rows, extra...), cancel...)
}

// Tally fills Rows (when Steps is set and Rows is not) and the counts.
func (d *Report) Tally() {
	if d.Steps != nil && d.Rows == nil {
		d.Rows = Rows(d.Steps, d.Evidence)
	}
	if d.Steps == nil && d.Rows == nil {
		d.Rows = Rows(nil, d.Evidence)
		// Without the runbook's steps every entry is its own row (execution order).
		for i := range d.Rows {
			if d.Rows[i].Type != "cancel" {
				d.Rows[i].Number = i + 1
			}
		}
	}
	d.Gates = GateRows(d.Evidence)
	d.Done, d.Pass, d.Fail, d.TimedOut, d.Skipped, d.NotRunCount, d.Extra = 0, 0, 0, 0, 0, 0, 0
	for _, r := range d.Rows {
		if r.Number == 0 {
			d.Extra++
			continue
		}
		if r.Status != NotRun {
			d.Done++
		}
		switch r.Status {
		case engine.StatusPass:
			d.Pass++
		case engine.StatusFail:
			d.Fail++
		case engine.StatusTimedOut:
			d.TimedOut++
		case engine.StatusSkipped:
			d.Skipped++
		case NotRun:
			d.NotRunCount++
		}
	}
	if d.Steps != nil {
		d.TotalSteps = len(d.Steps)
	}
}

// RenderReport renders the final run report; its first line is ReportHeading (docs/spec/runbooks.md, "Step 9"),
// or PlaybookReportHeading for a playbook run (d.Playbook; docs/spec/playbooks.md, "Report"). Its step table
// lists every runbook step (playbook node) once, in plan order (Rows).
func (r *Renderer) RenderReport(d Report) (string, error) {
	d.Rows = nil
	d.Tally()
	if d.Playbook {
		if d.StatusWord == "" {
			d.StatusWord = string(d.RunStatus)
		}
		return r.render(PlaybookReportFile, d)
	}
	return r.render(ReportFile, d)
}

// RenderEvidencePack renders templates/output-evidence-pack.md (docs/spec/runbooks.md, "Step 9").
func (r *Renderer) RenderEvidencePack(runID string, ev []engine.Evidence) (string, error) {
	js, err := state.EvidencePackJSON(ev)
	if err != nil {
		return "", err
	}
	return r.render(EvidencePackFile, struct {
		RunID    string
		Evidence []engine.Evidence
		JSON     string
	}{runID, ev, strings.TrimRight(string(js), "\n")})
}

// RenderCancelPrompt renders prompts/cancel.prompt.md for one deployment (docs/spec/runbooks.md, "Step 8").
func (r *Renderer) RenderCancelPrompt(runID, deployment string) (string, error) {
	return r.render(CancelPromptFile, struct{ RunID, Deployment string }{runID, deployment})
}

// HumanDuration rounds d for people: 850ms, 12.3s, 4m05s.
func HumanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

var funcs = template.FuncMap{
	"inc": func(i int) int { return i + 1 },
	// cell makes a value safe inside a Markdown table cell.
	"cell": func(s string) string {
		return strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ").Replace(s)
	},
	"icon": func(s engine.StepStatus) string {
		switch s {
		case engine.StatusPass:
			return "✅"
		case engine.StatusFail:
			return "❌"
		case engine.StatusTimedOut:
			return "⏱️"
		case engine.StatusSkipped:
			return "⏭️"
		case engine.StatusAwaitingConfirmation:
			return "⏸️"
		case NotRun:
			return "➖"
		}
		return "•"
	},
	"statuses": func(ss []engine.StepStatus) string {
		w := make([]string, len(ss))
		for i, s := range ss {
			w[i] = string(s)
		}
		return strings.Join(w, ", ")
	},
	"code":      inlineCode,
	"textblock": func(s string) string { return fenced("text", s) },
	"fenced":    fenced,
}

// inlineCode wraps a one-line value in backticks that its content cannot close.
func inlineCode(p *string) string {
	s := strings.ReplaceAll(*p, "\n", " ")
	tick := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return tick + " " + s + " " + tick
	}
	return tick + s + tick
}

// fenced wraps s in a code fence longer than any backtick run inside it.
func fenced(lang, s string) string {
	n := max(3, longestRun(s, '`')+1)
	f := strings.Repeat("`", n)
	return f + lang + "\n" + strings.TrimRight(s, "\n") + "\n" + f
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// approvalDecision is an approval node's evidence output when the engine recorded its
// decision as a JSON object (engine: {approved, by, reason, auto_passed, rule, inputs}), or
// a confirm step's that declares a form ({approved, by, via, reason, inputs}).
type approvalDecision struct {
	Approved   *bool          `json:"approved"`
	By         string         `json:"by"`
	Via        string         `json:"via"`
	Reason     string         `json:"reason"`
	AutoPassed bool           `json:"auto_passed"`
	Inputs     map[string]any `json:"inputs"`
	// SentBack, RedoFrom and Iteration are a push-back's (engine.PushBackSentBack and the
	// other push-back keys; docs/push-back.md).
	SentBack  bool   `json:"sent_back"`
	RedoFrom  string `json:"redo_from"`
	Iteration int    `json:"iteration"`
}

// approvalOutput reads e's output as a gate's decision object; false when e is no gate or
// its output is not such an object (a timeout's text, a confirm step's answer).
func approvalOutput(e engine.Evidence) (approvalDecision, bool) {
	var d approvalDecision
	if (e.Type != "approval" && e.Type != "confirm") || !strings.HasPrefix(e.Output, "{") || json.Unmarshal([]byte(e.Output), &d) != nil || d.Approved == nil {
		return approvalDecision{}, false
	}
	if e.Type == "confirm" && *d.Approved != (e.Status == engine.StatusPass) {
		return approvalDecision{}, false // an answer typed at a terminal that looks like an object
	}
	return d, true
}

// inputsText is d's input values as "name=value, …" sorted by name; "" for none.
func (d approvalDecision) inputsText() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d.Inputs)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, d.Inputs[k]))
	}
	return strings.Join(parts, ", ")
}
