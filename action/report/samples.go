package report

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"text/template"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// A template that parses can still fail when it is executed (a field the data does not have,
// a nil pointer, a function given the wrong type). A run renders its report only at the end,
// after every step ran, deploys included; so New renders every template against sample runs
// first, and a template that fails on any of them is refused before anything runs, like one
// that does not parse.

// sample is one rendering of one template: what it stands for (for the error) and the call.
type sample struct {
	what   string
	render func(*Renderer) (string, error)
}

// samplesFor returns the samples of the template name; every template New parses has some
// (templateNames, checked by a test).
func samplesFor(name string) []sample {
	var out []sample
	switch name {
	case StepStatusFile:
		for _, node := range []bool{false, true} {
			// Every entry as a run records it, then one with every field set.
			for i, e := range append(sampleRunEvidence(), engine.Evidence{}) {
				d := StepStatus{RunID: sampleRunID, Number: 2, Count: 6, Entry: e}
				what := fmt.Sprintf("%s %s %s step status", e.Type, e.Status, kindWord(node))
				if i == len(sampleRunEvidence()) {
					fillZero(reflect.ValueOf(&d).Elem())
					what = kindWord(node) + " step status with every field set"
				}
				d.Node = node
				out = append(out, sample{what, func(r *Renderer) (string, error) { return r.RenderStepStatus(d) }})
			}
		}
	case ReportFile, PlaybookReportFile:
		playbook := name == PlaybookReportFile
		for _, status := range []engine.RunStatus{engine.RunInProgress, engine.RunCompleted, engine.RunFailed, engine.RunCancelled} {
			full := Report{RunID: sampleRunID, RunbookName: "sample", RunbookPath: "runbooks/sample.yaml", RunStatus: status,
				StartedUTC: "2026-05-12T08:30:00Z", CompletedUTC: "2026-05-12T08:31:00Z", Duration: "1m0s", Message: "Sample outcome.",
				Evidence: sampleRunEvidence(), Steps: sampleSteps(), EvidencePath: ".rbook/sample.evidence.json",
				DAG: "```mermaid\nflowchart TD\n  build --> review\n```"}
			fillZero(reflect.ValueOf(&full).Elem())
			full.RunStatus, full.Playbook, full.Rows = status, playbook, nil
			empty := Report{RunID: sampleRunID, RunbookName: "sample", RunStatus: status, Playbook: playbook}
			for _, d := range []Report{full, empty} {
				what := fmt.Sprintf("%s %s run report", status, kindWord(playbook))
				if len(d.Evidence) == 0 {
					what = fmt.Sprintf("%s %s run report with no evidence", status, kindWord(playbook))
				}
				out = append(out, sample{what, func(r *Renderer) (string, error) { return r.RenderReport(d) }})
			}
		}
	case EvidencePackFile:
		for _, ev := range [][]engine.Evidence{sampleRunEvidence(), nil} {
			out = append(out, sample{fmt.Sprintf("evidence pack of %d entries", len(ev)), func(r *Renderer) (string, error) { return r.RenderEvidencePack(sampleRunID, ev) }})
		}
	case CancelPromptFile:
		for _, deploy := range []string{"sample-deploy-20260512", ""} {
			what := "cancel prompt after a deploy"
			if deploy == "" {
				what = "cancel prompt before any deploy"
			}
			out = append(out, sample{what, func(r *Renderer) (string, error) { return r.RenderCancelPrompt(sampleRunID, deploy) }})
		}
	}
	return out
}

const sampleRunID = "RBOOK-20260512-sample-1a2b3c4d"

func kindWord(playbook bool) string {
	if playbook {
		return "playbook"
	}
	return "runbook"
}

// sampleRunEvidence is an evidence pack with an entry of every step and node type and every
// status: a check with its query as executed and as written, a gate decision, a skipped
// rollback, a cancel audit entry, playbook nodes, an entry that is no step of the plan.
func sampleRunEvidence() []engine.Evidence {
	q, src, in := "Resources | where a == 'x|y'", "Resources | where a == '${x}'", "user-confirmation"
	call := `{"agent":"demo-release","skill":"publish","arguments":{}}`
	at := "2026-05-12T08:30:00.000000001Z"
	return []engine.Evidence{
		{StepName: "web-apps-enforce-https", Type: "check", Input: &q, SourceInput: &src, Output: "```\n{\"count\":1}", Status: engine.StatusFail, TimestampUTC: at},
		{StepName: "resources-have-owner-tag", Type: "check", Input: &q, Output: `{"count":0}`, Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "deploy-app-config", Type: "deploy", Input: &q, Output: "simulated deploy sample-deploy-20260512", Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "rollback-app-config", Type: "rollback", Output: "skipped: not reached by a failure", Status: engine.StatusSkipped, TimestampUTC: at},
		{StepName: "confirm-rollout", Type: "confirm", Input: &in, Output: "approved by sample (terminal): looks good", Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "confirm-rollout", Type: "confirm", Input: &in, Status: engine.StatusAwaitingConfirmation, TimestampUTC: at},
		{StepName: "app-running-after-rollout", Type: "check", Input: &q, Output: "context deadline exceeded", Status: engine.StatusTimedOut, TimestampUTC: at},
		{StepName: "build", Type: "deterministic", Output: `{"stdout":"ok","exit_code":0}`, Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "publish", Type: "agentic", Input: &call, Output: `{"published":true}`, Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "review", Type: "approval", Output: "auto-passed by policy rule 'sample'", Status: engine.StatusPass, TimestampUTC: at},
		{StepName: "not-in-plan", Type: "check", Status: engine.StatusFail, TimestampUTC: at},
		{StepName: "CANCEL", Type: "cancel", Output: "Cancel confirmed by sample.", Status: engine.StatusPass, TimestampUTC: at},
	}
}

// sampleSteps are the steps of the sample run's plan (one not run).
func sampleSteps() []StepRef {
	return []StepRef{
		{"web-apps-enforce-https", "check"}, {"resources-have-owner-tag", "check"}, {"deploy-app-config", "deploy"},
		{"rollback-app-config", "rollback"}, {"confirm-rollout", "confirm"}, {"app-running-after-rollout", "check"},
		{"build", "deterministic"}, {"publish", "agentic"}, {"review", "approval"}, {"never-reached", "check"},
	}
}

// fillZero sets every exported field of the struct v that holds its zero value, recursively:
// strings to "sample", numbers to 1, booleans to true, pointers to a filled value, slices
// and maps to one filled element. Fields added to the templates' data later are then filled
// in the samples without anyone having to remember them.
func fillZero(v reflect.Value) { fill(v, 0) }

func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch {
	case v.Kind() == reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
		return
	case !v.IsZero():
		// Set by the sample's author: keep it, and fill what it holds.
		switch v.Kind() {
		case reflect.Pointer:
			fill(v.Elem(), depth+1)
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				fill(v.Index(i), depth+1)
			}
		}
		return
	case !v.CanSet():
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("sample")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(reflect.ValueOf("sample").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Interface:
		if reflect.TypeOf("").Implements(v.Type()) {
			v.Set(reflect.ValueOf("sample"))
		}
	}
}

// execLineRE finds the line in a text/template execution error
// ("template: NAME:LINE:COL: executing …").
var execLineRE = lazyregexp.New(`^template: [^:]*:(\d+):\d+: (.*)$`)

// checkSamples renders every parsed template against its samples and returns one
// *TemplateError per template that fails (the first sample that fails it), with the line of
// the failing action; from maps a template name to its source (the override file or
// "embedded <name>").
func (r *Renderer) checkSamples(from map[string]string) []error {
	var errs []error
	for _, name := range templateNames {
		if r.t[name] == nil {
			continue
		}
		for _, s := range samplesFor(name) {
			_, err := s.render(r)
			if err == nil {
				continue
			}
			te := &TemplateError{Path: from[name], Msg: fmt.Sprintf("fails when rendered for a sample %s: %v", s.what, err)}
			var ee template.ExecError
			if errors.As(err, &ee) {
				te.Msg = fmt.Sprintf("fails when rendered for a sample %s: %v", s.what, ee.Err)
				if m := execLineRE.FindStringSubmatch(ee.Err.Error()); m != nil {
					te.Line, _ = strconv.Atoi(m[1])
					te.Msg = fmt.Sprintf("fails when rendered for a sample %s: %s", s.what, m[2])
				}
			}
			errs = append(errs, te)
			break
		}
	}
	return errs
}
