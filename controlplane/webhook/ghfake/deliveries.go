package ghfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Delivery is a webhook delivery as GitHub sends it: event name, delivery id (a GUID), JSON
// body and the headers that go with them.
type Delivery struct {
	Event, ID string
	Body      []byte
}

// Sign is GitHub's X-Hub-Signature-256 value for body: "sha256=" + hex(HMAC-SHA256(secret, body)).
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// NewDeliveryID is a fresh GUID like GitHub's X-GitHub-Delivery.
func NewDeliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Request builds the POST of d to url, signed with secret, with GitHub's headers
// (X-GitHub-Event, X-GitHub-Delivery, X-GitHub-Hook-ID, X-Hub-Signature-256, a
// GitHub-Hookshot User-Agent, Content-Type application/json).
func (d Delivery) Request(url string, secret []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Delivery", d.ID)
	req.Header.Set("X-GitHub-Hook-ID", "1")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, d.Body))
	return req, nil
}

// Repository names the repository of a payload.
type Repository struct {
	Owner, Name string
	ID          int64
}

func (r Repository) payload() map[string]any {
	return map[string]any{"id": r.ID, "name": r.Name, "full_name": r.Owner + "/" + r.Name, "private": false,
		"owner":    map[string]any{"login": r.Owner, "id": r.ID + 1, "type": "Organization"},
		"html_url": "https://github.com/" + r.Owner + "/" + r.Name}
}

func user(login string, id int64) map[string]any {
	return map[string]any{"login": login, "id": id, "type": "User", "html_url": "https://github.com/" + login}
}

// ProtectionRule describes a deployment_protection_rule "requested" delivery.
type ProtectionRule struct {
	Repo           Repository
	InstallationID int64
	RunID          int64
	Environment    string
	// APIURL is the API base URL the callback URL is under (the fake's URL; "" means api.github.com).
	APIURL       string
	Event        string // the workflow's trigger, e.g. "workflow_dispatch"
	SHA, Ref     string
	SenderLogin  string
	DeploymentID int64
	// Omit lists top-level fields left out of the payload and Set replaces top-level fields
	// (nil sends JSON null): GitHub's published schema requires only action, repository and
	// sender.
	Omit []string
	Set  map[string]any
	// Org and Enterprise add the organization and enterprise objects.
	Org, Enterprise bool
}

// ProtectionRuleRequested is a deployment_protection_rule "requested" delivery shaped as
// GitHub documents it
// (https://github.com/octokit/webhooks/blob/main/payload-schemas/api.github.com/deployment_protection_rule/requested.schema.json):
// action, environment, event, deployment_callback_url
// ({api}/repos/{o}/{r}/actions/runs/{run_id}/deployment_protection_rule), deployment,
// pull_requests, repository, installation, sender.
func ProtectionRuleRequested(p ProtectionRule) Delivery {
	api := p.APIURL
	if api == "" {
		api = "https://api.github.com"
	}
	if p.Event == "" {
		p.Event = "workflow_dispatch"
	}
	if p.SenderLogin == "" {
		p.SenderLogin = "octo-starter"
	}
	body := map[string]any{
		"action":                  "requested",
		"environment":             p.Environment,
		"event":                   p.Event,
		"deployment_callback_url": fmt.Sprintf("%s/repos/%s/%s/actions/runs/%d/deployment_protection_rule", api, p.Repo.Owner, p.Repo.Name, p.RunID),
		"deployment": map[string]any{"id": p.DeploymentID, "sha": p.SHA, "ref": p.Ref, "task": "deploy", "environment": p.Environment,
			"creator": user(p.SenderLogin, 9001), "created_at": time.Now().UTC().Format(time.RFC3339)},
		"pull_requests": []any{},
		"repository":    p.Repo.payload(),
		"installation":  map[string]any{"id": p.InstallationID, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u"},
		"sender":        user(p.SenderLogin, 9001),
	}
	shape(body, p.Repo, p.Org, p.Enterprise, p.Omit, p.Set)
	return Delivery{Event: "deployment_protection_rule", ID: NewDeliveryID(), Body: mustJSON(body)}
}

// JobRun is one of a deployment_review's workflow_job_runs.
type JobRun struct {
	ID          int64
	Name        string
	Environment string
}

// Review describes a deployment_review delivery.
type Review struct {
	Action         string // "approved", "rejected" or "requested"
	Repo           Repository
	InstallationID int64
	RunID          int64
	Environment    string
	ApproverLogin  string // approved/rejected
	ApproverID     int64
	Comment        string
	RequestorLogin string // requested
	JobRuns        []JobRun
	// RunAttempt is workflow_run.run_attempt (0 means 1).
	RunAttempt int
	// JobRunsIn is where JobRuns go; "" is GitHub's usual place for the action:
	// InJobRuns for approved/rejected, InJobRun for requested.
	JobRunsIn JobRunsField
	// Omit lists top-level fields left out of the payload and Set replaces top-level fields
	// (nil sends JSON null): the shapes GitHub's published schema allows (every field but
	// action, workflow_run, since, repository, organization and sender is optional;
	// workflow_run may be null).
	Omit []string
	Set  map[string]any
	// Org and Enterprise add the organization and enterprise objects of an organization's
	// (or enterprise's) repository.
	Org, Enterprise bool
}

// JobRunsField says where a deployment_review carries its job runs: GitHub's schema has
// both workflow_job_run (one object) and workflow_job_runs (an array), each optional.
type JobRunsField string

// The places of Review.JobRuns.
const (
	InJobRuns JobRunsField = "workflow_job_runs" // every job run in the array
	InJobRun  JobRunsField = "workflow_job_run"  // the first job run alone, as an object
	InBoth    JobRunsField = "both"              // the first in workflow_job_run, all in workflow_job_runs
)

// DeploymentReview is a deployment_review delivery shaped as GitHub documents it
// (https://github.com/octokit/webhooks/tree/main/payload-schemas/api.github.com/deployment_review
// and the webhook-deployment-review-* schemas of GitHub's REST API description): action,
// since, workflow_run, repository, installation, sender, reviewers; for approved/rejected
// approver, comment and workflow_job_runs; for requested environment, requestor (so spelt in
// the payload) and workflow_job_run. Environment is sent at the top level whenever it is
// set. Review's JobRunsIn, Omit, Set, Org and Enterprise pick the other shapes the schema
// allows.
func DeploymentReview(p Review) Delivery {
	if p.RunAttempt == 0 {
		p.RunAttempt = 1
	}
	run := map[string]any{"id": p.RunID, "name": "deploy", "status": "waiting", "event": "workflow_dispatch",
		"head_sha": "0123456789abcdef0123456789abcdef01234567", "head_branch": "main", "run_attempt": p.RunAttempt,
		"html_url": fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d", p.Repo.Owner, p.Repo.Name, p.RunID)}
	body := map[string]any{
		"action":       p.Action,
		"since":        time.Now().UTC().Format(time.RFC3339),
		"workflow_run": run,
		"repository":   p.Repo.payload(),
		"installation": map[string]any{"id": p.InstallationID},
		"reviewers":    []any{map[string]any{"type": "User", "reviewer": user("octo-reviewer", 9100)}},
	}
	var jobs []any
	for _, j := range p.JobRuns {
		jobs = append(jobs, map[string]any{"id": j.ID, "name": j.Name, "environment": j.Environment, "status": "waiting",
			"conclusion": nil, "created_at": time.Now().UTC().Format(time.RFC3339), "updated_at": time.Now().UTC().Format(time.RFC3339),
			"html_url": fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d/job/%d", p.Repo.Owner, p.Repo.Name, p.RunID, j.ID)})
	}
	if p.Environment != "" {
		body["environment"] = p.Environment
	}
	in := p.JobRunsIn
	switch p.Action {
	case "requested":
		body["requestor"] = user(p.RequestorLogin, 9200)
		body["sender"] = user(p.RequestorLogin, 9200)
		if in == "" {
			in = InJobRun
		}
	default:
		body["approver"] = user(p.ApproverLogin, p.ApproverID)
		body["comment"] = p.Comment
		body["sender"] = user(p.ApproverLogin, p.ApproverID)
		if in == "" {
			in = InJobRuns
		}
	}
	if (in == InJobRun || in == InBoth) && len(jobs) > 0 {
		body["workflow_job_run"] = jobs[0]
	}
	if (in == InJobRuns || in == InBoth) && len(jobs) > 0 {
		body["workflow_job_runs"] = jobs
	}
	shape(body, p.Repo, p.Org, p.Enterprise, p.Omit, p.Set)
	return Delivery{Event: "deployment_review", ID: NewDeliveryID(), Body: mustJSON(body)}
}

// shape adds the organization and enterprise objects to a payload body when asked, then
// removes the omitted fields and sets the replaced ones.
func shape(body map[string]any, repo Repository, org, enterprise bool, omit []string, set map[string]any) {
	if org {
		body["organization"] = map[string]any{"login": repo.Owner, "id": repo.ID + 1, "node_id": "O_kgDOfake",
			"url": "https://api.github.com/orgs/" + repo.Owner, "description": nil}
	}
	if enterprise {
		body["enterprise"] = map[string]any{"id": 31, "slug": "acme-corp", "name": "Acme Corp", "node_id": "E_kgDOfake",
			"html_url": "https://github.com/enterprises/acme-corp"}
	}
	for _, k := range omit {
		delete(body, k)
	}
	for k, v := range set {
		body[k] = v
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
