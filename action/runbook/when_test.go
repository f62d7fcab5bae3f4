package runbook

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhenThatCannotBeDecidedByTheRunIsRefused: an edge condition that is never true (in: []),
// one whose binding is no output of a node upstream of the edge's node (beside it, after it,
// the node itself), and one on "error" (never bound when a when is tested) are refused with
// file:line:col: field, like the parser's other errors; conditions on inputs and on upstream
// nodes load.
func TestWhenThatCannotBeDecidedByTheRunIsRefused(t *testing.T) {
	tests := []struct {
		file string
		want []string // every issue, in order; nil: the playbook loads
	}{
		{"empty-in.cantbook", []string{
			"empty-in.cantbook:11:11: edges[0].when.in: is an empty list: no value is in it, so the condition is never true and the edge's node would be skipped on every run; list the values that let it run",
		}},
		{"beside.cantbook", []string{
			`beside.cantbook:11:16: edges[0].when.binding: binding "lint.exit_code" names node "lint", which is not upstream of node "ship" (no chain of depends and edges leads from it to "ship"), so its output may not exist when the condition is tested and the condition is decided by timing, not by the run; make "ship" depend on "lint", or test a node upstream of it`,
		}},
		{"downstream.cantbook", []string{
			`downstream.cantbook:11:16: edges[0].when.binding: binding "announce.sent" names node "announce", which is not upstream of node "ship"`,
			`downstream.cantbook:16:16: edges[1].when.binding: binding "announce.sent" names node "announce", which is not upstream of node "announce"`,
		}},
		{"error-binding.cantbook", []string{
			`error-binding.cantbook:10:16: edges[0].when.binding: binding "error.message": error is bound only in an inject_hint target's templates and handler messages, never when an edge's when is tested, so this condition is always true; test a node's output instead`,
		}},
		{"upstream.cantbook", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "playbooks", "when", tt.file)
			_, err := LoadPlaybook(path)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("LoadPlaybook: %v", err)
				}
				return
			}
			var pe *PlaybookParseError
			if !errors.As(err, &pe) {
				t.Fatalf("LoadPlaybook: %v, want a *PlaybookParseError", err)
			}
			if len(pe.Issues) != len(tt.want) {
				t.Fatalf("%d issues, want %d:\n%v", len(pe.Issues), len(tt.want), err)
			}
			for i, d := range pe.Issues {
				got := strings.TrimPrefix(d.String(), filepath.Join("testdata", "playbooks", "when")+string(filepath.Separator))
				if !strings.HasPrefix(got, tt.want[i]) {
					t.Errorf("issue %d:\n got %s\nwant %s…", i, got, tt.want[i])
				}
			}
		})
	}
}

// TestExistsOnAnInputEveryRunBindsIsDecidedBeforeTheRun: exists: false on a required input is
// never true (refused); exists: true on an input with a default is always true (a warning);
// exists on an optional input without a default depends on the run (accepted).
func TestExistsOnAnInputEveryRunBindsIsDecidedBeforeTheRun(t *testing.T) {
	_, err := LoadPlaybook(filepath.Join("testdata", "playbooks", "when", "input-exists.cantbook"))
	var pe *PlaybookParseError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadPlaybook: %v, want a *PlaybookParseError", err)
	}
	dir := filepath.Join("testdata", "playbooks", "when") + string(filepath.Separator)
	var issues, warnings []string
	for _, d := range pe.Issues {
		issues = append(issues, strings.TrimPrefix(d.String(), dir))
	}
	for _, d := range pe.Warnings {
		warnings = append(warnings, strings.TrimPrefix(d.String(), dir))
	}
	wantIssues := []string{`input-exists.cantbook:13:45: edges[0].when.binding: binding "version" is an input every run has (required or with a default), so exists: false is never true and node "ship" would be skipped on every run; test its value instead`}
	wantWarnings := []string{`input-exists.cantbook:14:46: edges[1].when.binding: binding "channel" is an input every run has (required or with a default), so exists: true is always true; remove the when or test its value`}
	if strings.Join(issues, "\n") != strings.Join(wantIssues, "\n") || strings.Join(warnings, "\n") != strings.Join(wantWarnings, "\n") {
		t.Errorf("issues:\n%s\nwarnings:\n%s\nwant issues:\n%s\nwant warnings:\n%s", strings.Join(issues, "\n"), strings.Join(warnings, "\n"), strings.Join(wantIssues, "\n"), strings.Join(wantWarnings, "\n"))
	}
}
