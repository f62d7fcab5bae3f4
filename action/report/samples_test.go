package report

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestTemplateThatFailsWhenRenderedIsRefusedByNew: an override that parses but fails when it
// is executed, for any sample run (a field the data lacks, an unguarded nil input, a branch
// taken only for a FAILED run or a cancel before any deploy, an empty evidence pack), is
// refused by New with its file and the line of the failing action, as a template that does
// not parse is; one that renders every sample is accepted.
func TestTemplateThatFailsWhenRenderedIsRefusedByNew(t *testing.T) {
	tests := []struct{ dir, want string }{
		{"nope-field", "template testdata/nope-field/templates/output-report.md:4: fails when rendered for a sample IN_PROGRESS runbook run report: executing \"templates/output-report.md\" at <.Nope.Field>: can't evaluate field Nope in type report.Report"},
		{"unguarded-input", "template testdata/unguarded-input/templates/output-step-status.md:2: fails when rendered for a sample rollback SKIPPED runbook step status: executing \"templates/output-step-status.md\" at <code .Entry.Input>: error calling code: runtime error: invalid memory address or nil pointer dereference"},
		{"failed-only", "template testdata/failed-only/templates/output-report.md:3: fails when rendered for a sample FAILED runbook run report: executing \"templates/output-report.md\" at <.Outcome>: can't evaluate field Outcome in type report.Report"},
		{"playbook-report", "template testdata/playbook-report/templates/output-playbook-report.md:3: fails when rendered for a sample IN_PROGRESS playbook run report: executing \"templates/output-playbook-report.md\" at <.DAG.Graph>: can't evaluate field Graph in type string"},
		{"cancel-before-deploy", "template testdata/cancel-before-deploy/prompts/cancel.prompt.md:2: fails when rendered for a sample cancel prompt before any deploy: executing \"prompts/cancel.prompt.md\" at <.Deploy>: can't evaluate field Deploy in type struct { RunID string; Deployment string }"},
		{"empty-pack", "template testdata/empty-pack/templates/output-evidence-pack.md:2: fails when rendered for a sample evidence pack of 0 entries: executing \"templates/output-evidence-pack.md\" at <index .Evidence 0>: error calling index: "},
		{"renders", ""},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, err := New(filepath.Join("testdata", tt.dir))
			got := ""
			if err != nil {
				got = err.Error()
				var te *TemplateError
				if !errors.As(err, &te) || te.Line == 0 {
					t.Errorf("New: %v is no *TemplateError with a line", err)
				}
			}
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Errorf("New(%s):\n got %s\nwant %s", tt.dir, got, tt.want)
			}
		})
	}
}

// TestEveryTemplateHasSampleRuns: a template New parses without samples would never be
// rendered before a run ends, so each has some, and the built-in ones render every sample.
func TestEveryTemplateHasSampleRuns(t *testing.T) {
	r, err := New("")
	if err != nil {
		t.Fatalf("the built-in templates: %v", err)
	}
	for _, name := range templateNames {
		ss := samplesFor(name)
		if len(ss) < 2 {
			t.Errorf("%s has %d samples, want at least a full and an empty one", name, len(ss))
		}
		for _, s := range ss {
			if out, err := s.render(r); err != nil || strings.TrimSpace(out) == "" {
				t.Errorf("%s, sample %s: %q, %v", name, s.what, out, err)
			}
		}
	}
}

// TestSampleRunsFillEveryField: the full samples set every exported field of the templates'
// data, so a field added later is rendered before a run ends too.
func TestSampleRunsFillEveryField(t *testing.T) {
	d := Report{}
	fillZero(reflectValue(&d))
	if d.RunID == "" || d.Evidence == nil || d.Evidence[0].Input == nil || d.Evidence[0].SourceInput == nil || d.Steps == nil || !d.Playbook || d.TotalSteps == 0 {
		t.Errorf("fillZero left fields unset: %+v", d)
	}
}

func reflectValue(p *Report) reflect.Value { return reflect.ValueOf(p).Elem() }
