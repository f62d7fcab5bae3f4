// Package ghapi is the part of GitHub's REST API and webhook payloads rbook uses, written
// against GitHub's documented shapes (docs/approvals.md, "Approve in GitHub"): the two
// webhook events the control plane acts on (deployment_protection_rule, deployment_review)
// and the objects they carry, the webhook's headers and its HMAC-SHA256 signature, and a
// small JSON client for the few REST calls of the GitHub App and "Sign in with GitHub"
// (Client). Only the fields rbook reads are declared; encoding/json ignores the others.
//
// Getters (GetLogin, GetID, …) are nil-safe: on a nil pointer they return the zero value,
// since GitHub's schemas make most nested objects optional or nullable.
package ghapi

import (
	"errors"
	"strconv"
	"strings"
)

// User is a GitHub account (a webhook's sender, approver or requestor; GET /user).
type User struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	// Name is the profile's display name (GET /user), "" when unset.
	Name string `json:"name"`
}

// GetLogin is u.Login, "" for nil.
func (u *User) GetLogin() string {
	if u == nil {
		return ""
	}
	return u.Login
}

// GetID is u.ID, 0 for nil.
func (u *User) GetID() int64 {
	if u == nil {
		return 0
	}
	return u.ID
}

// GetName is u.Name, "" for nil.
func (u *User) GetName() string {
	if u == nil {
		return ""
	}
	return u.Name
}

// Repository is a payload's repository.
type Repository struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
}

// GetFullName is "owner/name", "" for nil.
func (r *Repository) GetFullName() string {
	if r == nil {
		return ""
	}
	return r.FullName
}

// Installation is the GitHub App installation a payload was sent for.
type Installation struct {
	ID int64 `json:"id"`
}

// GetID is the installation id, 0 for nil.
func (i *Installation) GetID() int64 {
	if i == nil {
		return 0
	}
	return i.ID
}

// Deployment is a deployment_protection_rule payload's deployment.
type Deployment struct {
	ID          int64  `json:"id"`
	Environment string `json:"environment"`
}

// GetID is the deployment id, 0 for nil.
func (d *Deployment) GetID() int64 {
	if d == nil {
		return 0
	}
	return d.ID
}

// GetEnvironment is the deployment's environment, "" for nil.
func (d *Deployment) GetEnvironment() string {
	if d == nil {
		return ""
	}
	return d.Environment
}

// WorkflowRun is a workflow run (a deployment_review's workflow_run; GET
// /repos/{owner}/{repo}/actions/runs/{run_id}).
type WorkflowRun struct {
	ID int64 `json:"id"`
	// RunAttempt is 1 for the first run, n+1 after each re-run; 0 when the payload omits it.
	RunAttempt int `json:"run_attempt"`
}

// GetID is the run id, 0 for nil.
func (w *WorkflowRun) GetID() int64 {
	if w == nil {
		return 0
	}
	return w.ID
}

// GetRunAttempt is the run's attempt, 0 for nil or when absent.
func (w *WorkflowRun) GetRunAttempt() int {
	if w == nil {
		return 0
	}
	return w.RunAttempt
}

// WorkflowJobRun is a job waiting on an environment in a deployment_review.
type WorkflowJobRun struct {
	ID          int64  `json:"id"`
	Environment string `json:"environment"`
	// HTMLURL is the job's page, …/actions/runs/{run_id}/job/{job_id}.
	HTMLURL string `json:"html_url"`
}

// GetEnvironment is the job's environment, "" for nil.
func (j *WorkflowJobRun) GetEnvironment() string {
	if j == nil {
		return ""
	}
	return j.Environment
}

// GetHTMLURL is the job's page URL, "" for nil.
func (j *WorkflowJobRun) GetHTMLURL() string {
	if j == nil {
		return ""
	}
	return j.HTMLURL
}

// DeploymentProtectionRuleEvent is the deployment_protection_rule webhook payload (GitHub's
// "Webhook events and payloads"): a custom protection rule asks the App for a verdict.
type DeploymentProtectionRuleEvent struct {
	Action      string `json:"action"`
	Environment string `json:"environment"`
	Event       string `json:"event"`
	// DeploymentCallbackURL is where the verdict is posted:
	// …/repos/{owner}/{repo}/actions/runs/{run_id}/deployment_protection_rule.
	DeploymentCallbackURL string        `json:"deployment_callback_url"`
	Deployment            *Deployment   `json:"deployment"`
	Repo                  *Repository   `json:"repository"`
	Sender                *User         `json:"sender"`
	Installation          *Installation `json:"installation"`
}

// GetAction is the event's action ("requested"), "" for nil.
func (e *DeploymentProtectionRuleEvent) GetAction() string {
	if e == nil {
		return ""
	}
	return e.Action
}

// GetEnvironment is the environment the rule guards, "" for nil.
func (e *DeploymentProtectionRuleEvent) GetEnvironment() string {
	if e == nil {
		return ""
	}
	return e.Environment
}

// GetDeploymentCallbackURL is the verdict's URL, "" for nil.
func (e *DeploymentProtectionRuleEvent) GetDeploymentCallbackURL() string {
	if e == nil {
		return ""
	}
	return e.DeploymentCallbackURL
}

// GetDeployment is the payload's deployment (nil when absent).
func (e *DeploymentProtectionRuleEvent) GetDeployment() *Deployment {
	if e == nil {
		return nil
	}
	return e.Deployment
}

// GetRepo is the payload's repository (nil when absent).
func (e *DeploymentProtectionRuleEvent) GetRepo() *Repository {
	if e == nil {
		return nil
	}
	return e.Repo
}

// GetInstallation is the payload's installation (nil when absent).
func (e *DeploymentProtectionRuleEvent) GetInstallation() *Installation {
	if e == nil {
		return nil
	}
	return e.Installation
}

// GetRunID is the workflow run id in DeploymentCallbackURL (the number after
// "/actions/runs/" in a URL ending "/deployment_protection_rule"). Errors: a URL of
// another shape, or a run id that is not a positive number.
func (e *DeploymentProtectionRuleEvent) GetRunID() (int64, error) {
	u := e.GetDeploymentCallbackURL()
	rest, ok := strings.CutSuffix(u, "/deployment_protection_rule")
	if !ok || !strings.Contains(rest, "repos/") {
		return -1, errors.New("deployment_callback_url does not end in /actions/runs/{run_id}/deployment_protection_rule")
	}
	i := strings.LastIndex(rest, "/actions/runs/")
	if i < 0 {
		return -1, errors.New("deployment_callback_url has no /actions/runs/{run_id}")
	}
	id, err := strconv.ParseInt(rest[i+len("/actions/runs/"):], 10, 64)
	if err != nil || id <= 0 {
		return -1, errors.New("deployment_callback_url's run id is not a positive number")
	}
	return id, nil
}

// DeploymentReviewEvent is the deployment_review webhook payload (GitHub's "Webhook events
// and payloads"): a reviewer approved or rejected jobs waiting on environments.
type DeploymentReviewEvent struct {
	// Action is "requested", "approved" or "rejected".
	Action string `json:"action"`
	// Requester is who triggered the run (GitHub names it "requestor"; sent with "requested").
	Requester   *User  `json:"requestor"`
	Environment string `json:"environment"`
	// Approver is the reviewer of an "approved" or "rejected" review.
	Approver        *User             `json:"approver"`
	Comment         string            `json:"comment"`
	WorkflowJobRuns []*WorkflowJobRun `json:"workflow_job_runs"`
	Installation    *Installation     `json:"installation"`
	Repo            *Repository       `json:"repository"`
	Sender          *User             `json:"sender"`
	WorkflowJobRun  *WorkflowJobRun   `json:"workflow_job_run"`
	WorkflowRun     *WorkflowRun      `json:"workflow_run"`
}

// GetAction is the review's action, "" for nil.
func (e *DeploymentReviewEvent) GetAction() string {
	if e == nil {
		return ""
	}
	return e.Action
}

// GetEnvironment is the top-level environment, "" for nil.
func (e *DeploymentReviewEvent) GetEnvironment() string {
	if e == nil {
		return ""
	}
	return e.Environment
}

// GetComment is the reviewer's comment, "" for nil.
func (e *DeploymentReviewEvent) GetComment() string {
	if e == nil {
		return ""
	}
	return e.Comment
}

// GetApprover is the reviewer (nil when absent).
func (e *DeploymentReviewEvent) GetApprover() *User {
	if e == nil {
		return nil
	}
	return e.Approver
}

// GetSender is the user whose action sent the event (nil when absent).
func (e *DeploymentReviewEvent) GetSender() *User {
	if e == nil {
		return nil
	}
	return e.Sender
}

// GetRepo is the payload's repository (nil when absent).
func (e *DeploymentReviewEvent) GetRepo() *Repository {
	if e == nil {
		return nil
	}
	return e.Repo
}

// GetInstallation is the payload's installation (nil when absent).
func (e *DeploymentReviewEvent) GetInstallation() *Installation {
	if e == nil {
		return nil
	}
	return e.Installation
}

// GetWorkflowRun is the reviewed run (nil when absent or null).
func (e *DeploymentReviewEvent) GetWorkflowRun() *WorkflowRun {
	if e == nil {
		return nil
	}
	return e.WorkflowRun
}

// GetWorkflowJobRun is the single job run (nil when absent).
func (e *DeploymentReviewEvent) GetWorkflowJobRun() *WorkflowJobRun {
	if e == nil {
		return nil
	}
	return e.WorkflowJobRun
}

// PendingDeployment is one entry of GET …/actions/runs/{run_id}/pending_deployments.
type PendingDeployment struct {
	Environment           *PendingDeploymentEnvironment `json:"environment"`
	WaitTimer             int64                         `json:"wait_timer"`
	CurrentUserCanApprove bool                          `json:"current_user_can_approve"`
	Reviewers             []*RequiredReviewer           `json:"reviewers"`
}

// GetEnvironment is the deployment's environment (nil when absent).
func (p *PendingDeployment) GetEnvironment() *PendingDeploymentEnvironment {
	if p == nil {
		return nil
	}
	return p.Environment
}

// PendingDeploymentEnvironment is a pending deployment's environment.
type PendingDeploymentEnvironment struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// GetID is the environment id, 0 for nil.
func (p *PendingDeploymentEnvironment) GetID() int64 {
	if p == nil {
		return 0
	}
	return p.ID
}

// GetName is the environment's name, "" for nil.
func (p *PendingDeploymentEnvironment) GetName() string {
	if p == nil {
		return ""
	}
	return p.Name
}

// RequiredReviewer is a reviewer a pending deployment waits for: Type "User" or "Team", and
// the reviewer's object, kept as raw JSON (a user or a team).
type RequiredReviewer struct {
	Type     string         `json:"type"`
	Reviewer map[string]any `json:"reviewer"`
}

// Organization is an organisation as the user endpoints name it.
type Organization struct {
	Login string `json:"login"`
}

// GetLogin is the organisation's login, "" for nil.
func (o *Organization) GetLogin() string {
	if o == nil {
		return ""
	}
	return o.Login
}

// Team is one of GET /user/teams.
type Team struct {
	Slug         string        `json:"slug"`
	Organization *Organization `json:"organization"`
}

// Membership is GET /user/memberships/orgs/{org}: State "active" or "pending".
type Membership struct {
	State string `json:"state"`
}
