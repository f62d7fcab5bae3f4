package store

import (
	"database/sql"
	"fmt"
)

// GitHubJob is the GitHub Actions job that started a run: claims of its OIDC token as the
// control plane verified them (docs/control-plane.md, "OIDC"; migration 0005; proto rbook.v1.GitHubJob).
// Fields are kept as GitHub sends them (ids as text); Environment is "" for a job without one.
type GitHubJob struct {
	Actor, Repository, RepositoryID, RunID, RunAttempt, SHA string
	WorkflowRef, Ref, Environment, JobWorkflowRef           string
}

// githubJobColumns are migration 0005's columns, in the order of GitHubJob's fields.
const githubJobColumns = `github_actor, github_repository, github_repository_id, github_run_id, github_run_attempt,
	github_sha, github_workflow_ref, github_ref, github_environment, github_job_workflow_ref`

func (j *GitHubJob) fields() []*string {
	return []*string{&j.Actor, &j.Repository, &j.RepositoryID, &j.RunID, &j.RunAttempt, &j.SHA,
		&j.WorkflowRef, &j.Ref, &j.Environment, &j.JobWorkflowRef}
}

// githubJobArgs are the INSERT arguments for githubJobColumns: all NULL without a job, else
// every field as text (also "").
func githubJobArgs(j *GitHubJob) []any {
	args := make([]any, 10)
	if j == nil {
		return args
	}
	for i, f := range j.fields() {
		args[i] = *f
	}
	return args
}

// validateGitHubJob caps every field at MaxIDBytes*4 (claims are short; the cap only keeps a
// row bounded) and requires the repository of a job that is there.
func validateGitHubJob(j *GitHubJob) error {
	if j == nil {
		return nil
	}
	if j.Repository == "" {
		return fmt.Errorf("%w: github job: repository is required", ErrInvalidArgument)
	}
	for i, f := range j.fields() {
		if len(*f) > 4*MaxIDBytes {
			return fmt.Errorf("%w: github job field %d is %d bytes, over the limit of %d", ErrInvalidArgument, i, len(*f), 4*MaxIDBytes)
		}
	}
	return nil
}

// githubJobScan holds the scan destinations of githubJobColumns.
type githubJobScan [10]sql.NullString

func (s *githubJobScan) dests() []any {
	d := make([]any, len(s))
	for i := range s {
		d[i] = &s[i]
	}
	return d
}

// job is the scanned job, nil when the run has none (github_repository NULL).
func (s *githubJobScan) job() *GitHubJob {
	if !s[1].Valid {
		return nil
	}
	j := &GitHubJob{}
	for i, f := range j.fields() {
		*f = s[i].String
	}
	return j
}
