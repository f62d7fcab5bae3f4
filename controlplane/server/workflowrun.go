package server

import (
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// workflowRunOf is the store's copy of a reported workflow run (StartRunRequest.
// reported_workflow_run, RequestApprovalRequest.github; docs/approvals.md, "Approve in GitHub"), nil when unset. The store
// validates it (repository required, MaxWorkflowRunField bytes a field: E_INVALID_ARGUMENT).
func workflowRunOf(w *rbookv1.GitHubWorkflowRun) *store.WorkflowRun {
	if w == nil {
		return nil
	}
	return &store.WorkflowRun{Repository: w.GetRepository(), RunID: w.GetRunId(), RunAttempt: w.GetRunAttempt(),
		Actor: w.GetActor(), SHA: w.GetSha(), Environment: w.GetEnvironment()}
}

// workflowRunToProto renders a stored workflow run (Run.reported_workflow_run,
// Approval.github), nil when none was reported.
func workflowRunToProto(w *store.WorkflowRun) *rbookv1.GitHubWorkflowRun {
	if w == nil {
		return nil
	}
	return &rbookv1.GitHubWorkflowRun{Repository: w.Repository, RunId: w.RunID, RunAttempt: w.RunAttempt,
		Actor: w.Actor, Sha: w.SHA, Environment: w.Environment}
}
