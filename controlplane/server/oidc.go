package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// verifyOIDC turns a GitHub Actions OIDC token into a caller with the executor role and the
// identity oidc:<repository>@<ref> (docs/decisions/identity.md). A refused token is
// Unauthenticated (E_UNAUTHENTICATED) with the reason, never the token; an issuer whose keys
// could not be fetched is Unavailable (E_RETRY), which executors retry with back-off.
func (a *Authenticator) verifyOIDC(ctx context.Context, tok string) (Caller, error) {
	claims, err := a.oidc.Verify(ctx, tok)
	var unavailable *auth.UnavailableError
	var refused *auth.RefusedError
	switch {
	case errors.As(err, &unavailable):
		return Caller{}, rpcError(connect.CodeUnavailable, CodeRetry,
			"could not verify the OIDC token now: the keys of issuer %s could not be fetched; try again", unavailable.Issuer)
	case errors.As(err, &refused):
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "%s", refused.Reason)
	case err != nil:
		return Caller{}, rpcError(connect.CodeUnauthenticated, CodeUnauthenticated, "the OIDC token was refused")
	}
	return Caller{Identity: claims.Identity(), Role: RoleExecutor, GitHub: claims}, nil
}

// githubJobOf is the store's record of the job behind an OIDC caller, nil for any other
// caller: it comes from the verified claims only, never from request fields (docs/control-plane.md, "OIDC").
func githubJobOf(ctx context.Context) *store.GitHubJob {
	c, ok := CallerFrom(ctx)
	if !ok || c.GitHub == nil {
		return nil
	}
	g := c.GitHub
	return &store.GitHubJob{
		Actor: g.Actor, Repository: g.Repository, RepositoryID: g.RepositoryID, RunID: g.RunID,
		RunAttempt: g.RunAttempt, SHA: g.SHA, WorkflowRef: g.WorkflowRef, Ref: g.Ref,
		Environment: g.Environment, JobWorkflowRef: g.JobWorkflowRef,
	}
}

// githubJobToProto renders a run's job as rbook.v1.GitHubJob (Run.started_by_job).
func githubJobToProto(j *store.GitHubJob) *rbookv1.GitHubJob {
	if j == nil {
		return nil
	}
	return &rbookv1.GitHubJob{
		Actor: j.Actor, Repository: j.Repository, RepositoryId: j.RepositoryID, RunId: j.RunID,
		RunAttempt: j.RunAttempt, Sha: j.SHA, WorkflowRef: j.WorkflowRef, Ref: j.Ref,
		Environment: j.Environment, JobWorkflowRef: j.JobWorkflowRef,
	}
}

// runStarterIdentities are the identities that count as the run's starter for the four-eyes
// rule (docs/approvals.md, "Gate policy": the four-eyes rule compares the approver with the
// actor of the job that started the run):
// the run's started_by (e.g. token:alice, or oidc:owner/repo@refs/heads/main for a job) and,
// when a GitHub Actions job started it, "github:<actor>" (docs/decisions/identity.md's spelling of a GitHub
// login), so the person who triggered the workflow cannot approve its gates either. Empty
// values are left out; the result may be empty (a run started without any identity).
func runStarterIdentities(run store.Run) []string {
	var ids []string
	if run.StartedBy != "" {
		ids = append(ids, run.StartedBy)
	}
	if run.GitHub != nil && run.GitHub.Actor != "" {
		ids = append(ids, "github:"+run.GitHub.Actor)
	}
	return ids
}
