package store

import (
	"database/sql"
	"fmt"
)

// WorkflowRun is a GitHub Actions workflow run as an executor reports it from the runner's
// environment, with the GitHub environment a gate is bound to (docs/approvals.md, "Approve in GitHub"; migration
// 0007; proto rbook.v1.GitHubWorkflowRun). Reported, never verified: nothing authorizes on
// it (the verified job is GitHubJob). Fields are text as GitHub gives them.
type WorkflowRun struct {
	Repository, RunID, RunAttempt, Actor, SHA, Environment string
}

// MaxWorkflowRunField caps each WorkflowRun field (bytes; docs/approvals.md, "Approve in GitHub").
const MaxWorkflowRunField = 512

// runWorkflowColumns and approvalWorkflowColumns are migration 0007's columns, in the
// order of WorkflowRun's fields.
const (
	runWorkflowColumns = `reported_repository, reported_run_id, reported_run_attempt, reported_actor,
	reported_sha, reported_environment`
	approvalWorkflowColumns = `github_repository, github_run_id, github_run_attempt, github_actor,
	github_sha, github_environment`
)

func (w *WorkflowRun) fields() []*string {
	return []*string{&w.Repository, &w.RunID, &w.RunAttempt, &w.Actor, &w.SHA, &w.Environment}
}

// workflowArgs are the arguments for the 0007 columns: all NULL without a workflow run.
func workflowArgs(w *WorkflowRun) []any {
	args := make([]any, 6)
	if w == nil {
		return args
	}
	for i, f := range w.fields() {
		args[i] = *f
	}
	return args
}

// validateWorkflowRun requires the repository of a reported workflow run and caps every
// field at MaxWorkflowRunField bytes. Errors: ErrInvalidArgument naming the field.
func validateWorkflowRun(w *WorkflowRun) error {
	if w == nil {
		return nil
	}
	if w.Repository == "" {
		return fmt.Errorf("%w: github workflow run: repository is required", ErrInvalidArgument)
	}
	names := []string{"repository", "run_id", "run_attempt", "actor", "sha", "environment"}
	for i, f := range w.fields() {
		if len(*f) > MaxWorkflowRunField {
			return fmt.Errorf("%w: github workflow run %s is %d bytes, over the limit of %d", ErrInvalidArgument, names[i], len(*f), MaxWorkflowRunField)
		}
	}
	return nil
}

// workflowScan holds the scan destinations of the 0007 columns.
type workflowScan [6]sql.NullString

func (s *workflowScan) dests() []any {
	d := make([]any, len(s))
	for i := range s {
		d[i] = &s[i]
	}
	return d
}

// run is the scanned workflow run, nil when none was reported (repository NULL).
func (s *workflowScan) run() *WorkflowRun {
	if !s[0].Valid {
		return nil
	}
	w := &WorkflowRun{}
	for i, f := range w.fields() {
		*f = s[i].String
	}
	return w
}
