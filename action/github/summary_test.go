package github

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublishWritesOutputsWhenSummaryUnwritable: a job summary that cannot be
// written (GITHUB_STEP_SUMMARY in a folder that does not exist) is an error naming it, and
// the step outputs are still written: a broken summary must not cost the workflow its
// run-id and status.
func TestPublishWritesOutputsWhenSummaryUnwritable(t *testing.T) {
	dir := t.TempDir()
	summary, output := filepath.Join(dir, "no-such-dir", "summary.md"), filepath.Join(dir, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	err := Publish("# Runbook Execution Report\n", "RBOOK-20260512-demo-a1b2c3d4", "FAILED")
	if err == nil || !strings.Contains(err.Error(), "job summary "+summary) {
		t.Errorf("Publish = %v, want the summary's error", err)
	}
	o, _ := os.ReadFile(output)
	if !strings.Contains(string(o), "run-id<<") || !strings.Contains(string(o), "\nRBOOK-20260512-demo-a1b2c3d4\n") || !strings.Contains(string(o), "\nFAILED\n") {
		t.Errorf("outputs %q", o)
	}
}

// TestSummaryAlreadyFullGetsNothing: a summary file already at the limit gets
// nothing more (not even the note), one just under it gets the note only.
func TestSummaryAlreadyFullGetsNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", MaxSummaryBytes-len(SummaryTruncatedNote)-10)), 0o644); err != nil {
		t.Fatal(err)
	}
	cut, err := AppendSummary(p, strings.Repeat("line\n", 100))
	if err != nil || !cut {
		t.Fatalf("AppendSummary = %v, %v", cut, err)
	}
	b, _ := os.ReadFile(p)
	if len(b) > MaxSummaryBytes || !strings.HasSuffix(string(b), SummaryTruncatedNote) {
		t.Errorf("summary is %d bytes, ends %q", len(b), b[len(b)-40:])
	}
	cut, err = AppendSummary(p, "more\n")
	if b2, _ := os.ReadFile(p); err != nil || !cut || len(b2) != len(b) {
		t.Errorf("a full summary grew to %d bytes (%v, %v)", len(b2), cut, err)
	}
}
