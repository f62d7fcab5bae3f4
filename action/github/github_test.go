package github

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPublishWritesSummaryAndOutputs(t *testing.T) {
	dir := t.TempDir()
	summary, output := filepath.Join(dir, "summary.md"), filepath.Join(dir, "output")
	t.Setenv("GITHUB_ACTIONS", "true")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	t.Setenv("GITHUB_OUTPUT", output)
	Publish("# Runbook Execution Report\n", "RBOOK-20260512-demo-a1b2c3d4", "COMPLETED")
	s, _ := os.ReadFile(summary)
	o, _ := os.ReadFile(output)
	if !strings.Contains(string(s), "# Runbook Execution Report") {
		t.Errorf("summary %q", s)
	}
	if !strings.Contains(string(o), "run-id") || !strings.Contains(string(o), "RBOOK-20260512-demo-a1b2c3d4") || !strings.Contains(string(o), "COMPLETED") {
		t.Errorf("outputs %q", o)
	}
}

func TestPublishOutsideRunnerDoesNothing(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "summary.md")
	t.Setenv("GITHUB_ACTIONS", "")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	Publish("report", "id", "COMPLETED")
	if _, err := os.Stat(summary); !os.IsNotExist(err) {
		t.Errorf("wrote a summary outside a runner: %v", err)
	}
}
