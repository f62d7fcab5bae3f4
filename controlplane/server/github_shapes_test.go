package server_test

// The shapes GitHub's published webhook schemas allow for the two events rbook consumes,
// sent signed by the fake GitHub to a real `rbook serve`, each asserting what became of the
// gate. The schemas:
// https://github.com/octokit/webhooks/tree/main/payload-schemas/api.github.com/deployment_review
// and .../deployment_protection_rule/requested.schema.json in the same repository (GitHub's
// REST API description, github/rest-api-description, carries the same webhook schemas).

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const (
	approved = rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED
	rejected = rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED
	pending  = rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING
)

// A deployment_review decides the gates of its workflow run and environments in every shape
// GitHub's schema allows: the environment in workflow_job_runs, in workflow_job_run alone, at
// the top level, in several job runs at once; reviewers, comment, installation, since,
// approver absent or null; workflow_run null or absent (the run id then comes from a job
// run's html_url) or without run_attempt; organization and enterprise present. A review
// that names no environment or no run is refused (422) when the run has rbook gates, and
// one for an environment or run rbook does not guard is answered 200 and changes nothing.
func TestDeploymentReviewShapesDecideTheGate(t *testing.T) {
	s := startGitHubServe(t)
	prod := []ghfake.JobRun{{ID: 11, Name: "deploy", Environment: "production"}}
	rows := []struct {
		name string
		envs []string // gates opened on the row's GitHub run, one rbook run each
		// decidedFirst approves the first gate over the RPC before the review arrives.
		decidedFirst bool
		review       func(run int64) ghfake.Review
		wantCode     int
		want         []rbookv1.ApprovalStatus // per gate of envs
		wantApprover string                   // of every gate the review decided
		wantReason   string
	}{
		{name: "environment in workflow_job_runs", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "github:octo-lead", wantReason: "ship it"},
		{name: "environment only in workflow_job_run", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, JobRunsIn: ghfake.InJobRun} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "github:octo-lead"},
		{name: "rejected with the environment only in workflow_job_run", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{Action: "rejected", JobRuns: prod, JobRunsIn: ghfake.InJobRun}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{rejected}, wantApprover: "github:octo-lead"},
		{name: "environment in workflow_job_run and workflow_job_runs", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, JobRunsIn: ghfake.InBoth} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "environment only at the top level", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{Environment: "production"} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "workflow_job_runs with two environments, a gate in each", envs: []string{"production", "staging"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 11, Name: "deploy", Environment: "production"},
					{ID: 12, Name: "deploy-eu", Environment: "staging"}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved, approved}},
		{name: "workflow_job_run and workflow_job_runs naming different environments", envs: []string{"production", "staging"},
			review: func(int64) ghfake.Review {
				// The first job run goes to workflow_job_run and both to the array; the union counts.
				return ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 12, Name: "deploy-eu", Environment: "staging"},
					{ID: 11, Name: "deploy", Environment: "production"}}, JobRunsIn: ghfake.InBoth}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved, approved}},
		{name: "workflow_job_runs naming an environment rbook does not guard besides the gate's", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 10, Name: "docs", Environment: "github-pages"},
					{ID: 11, Name: "deploy", Environment: "production"}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "reviewers absent", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Omit: []string{"reviewers"}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "reviewers empty", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: prod, Set: map[string]any{"reviewers": []any{}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "comment null", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Set: map[string]any{"comment": nil}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "github:octo-lead", wantReason: "-"},
		{name: "comment absent", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Omit: []string{"comment"}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantReason: "-"},
		{name: "approver absent: the sender reviewed", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: prod, Omit: []string{"approver"},
					Set: map[string]any{"sender": map[string]any{"login": "octo-sender", "id": 4343, "type": "User"}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "github:octo-sender"},
		{name: "installation absent", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Omit: []string{"installation"}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "since absent", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Omit: []string{"since"}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "organization and enterprise present", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Org: true, Enterprise: true} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "workflow_run null: the run id from workflow_job_run's html_url", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: prod, JobRunsIn: ghfake.InJobRun, Set: map[string]any{"workflow_run": nil}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "workflow_run absent: the run id from workflow_job_runs' html_url", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, Omit: []string{"workflow_run"}} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "workflow_run without run_attempt", envs: []string{"production"},
			review: func(run int64) ghfake.Review {
				return ghfake.Review{JobRuns: prod, Set: map[string]any{"workflow_run": map[string]any{"id": run}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}},
		{name: "the gate already decided", envs: []string{"production"}, decidedFirst: true,
			review:   func(int64) ghfake.Review { return ghfake.Review{Action: "rejected", JobRuns: prod} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "unverified:alice"},
		{name: "a re-run's review after the first attempt's gate closed, nothing waiting", envs: []string{"production"}, decidedFirst: true,
			review:   func(int64) ghfake.Review { return ghfake.Review{JobRuns: prod, RunAttempt: 2} },
			wantCode: 200, want: []rbookv1.ApprovalStatus{approved}, wantApprover: "unverified:alice"},
		{name: "requested (nothing to decide)", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{Action: "requested", Environment: "production", JobRuns: prod, RequestorLogin: "octo-starter"}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{pending}},
		{name: "an environment rbook does not guard", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 10, Name: "docs", Environment: "github-pages"}}}
			},
			wantCode: 200, want: []rbookv1.ApprovalStatus{pending}},
		{name: "no environment anywhere, on a run with a gate", envs: []string{"production"},
			review:   func(int64) ghfake.Review { return ghfake.Review{} },
			wantCode: http.StatusUnprocessableEntity, want: []rbookv1.ApprovalStatus{pending}},
		{name: "no environment anywhere, on a run rbook never saw",
			review:   func(int64) ghfake.Review { return ghfake.Review{} },
			wantCode: 200},
		{name: "workflow_run null and no job run names the run", envs: []string{"production"},
			review: func(int64) ghfake.Review {
				return ghfake.Review{Environment: "production", Set: map[string]any{"workflow_run": nil}}
			},
			wantCode: http.StatusUnprocessableEntity, want: []rbookv1.ApprovalStatus{pending}},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			run := int64(9300 + i)
			var ids []string
			var tokens []string
			for j, env := range row.envs {
				a, tok := ghGate(t, s.c, "r-shape-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), run, env, time.Hour)
				ids, tokens = append(ids, a.GetApprovalId()), append(tokens, tok)
			}
			if row.decidedFirst {
				if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tokens[0], Approver: "alice", Reason: "first"}); err != nil {
					t.Fatal(err)
				}
			}
			rv := row.review(run)
			rv.Repo, rv.InstallationID, rv.RunID = ghRepo, 77, run
			if rv.Action == "" {
				rv.Action = "approved"
			}
			if rv.ApproverLogin == "" {
				rv.ApproverLogin, rv.ApproverID = "octo-lead", 4242
			}
			if rv.Comment == "" {
				rv.Comment = "ship it"
			}
			if code := s.post(t, ghfake.DeploymentReview(rv)); code != row.wantCode {
				t.Fatalf("review delivery answered %d, want %d\nserve log:\n%s", code, row.wantCode, s.Stderr.String())
			}
			for j, id := range ids {
				got := ghApproval(t, s.c, id)
				if got.GetStatus() != row.want[j] {
					t.Fatalf("gate %s (%s) is %v, want %v", id, row.envs[j], got.GetStatus(), row.want[j])
				}
				if row.want[j] == pending {
					if len(got.GetVotes()) != 0 {
						t.Fatalf("gate %s has votes %v, want none", id, got.GetVotes())
					}
					continue
				}
				if row.wantApprover != "" && got.GetApprover() != row.wantApprover {
					t.Fatalf("gate %s approver %q, want %q", id, got.GetApprover(), row.wantApprover)
				}
				if !row.decidedFirst && got.GetDecidedBySource() != "github" {
					t.Fatalf("gate %s decided by source %q, want github", id, got.GetDecidedBySource())
				}
				switch row.wantReason {
				case "":
				case "-":
					if got.GetReason() != "" {
						t.Fatalf("gate %s reason %q, want none", id, got.GetReason())
					}
				default:
					if got.GetReason() != row.wantReason {
						t.Fatalf("gate %s reason %q, want %q", id, got.GetReason(), row.wantReason)
					}
				}
			}
		})
	}
}

// A review that arrives before the gate it decides is open (the protection rule of the run
// and environment was requested, so rbook expects that gate) is answered 409, not recorded;
// GitHub's redelivery of the same delivery once the gate is open decides it.
func TestDeploymentReviewBeforeItsGateOpensIsRedeliverable(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9401
	s.rule(t, run, "production")
	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: run,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "early", JobRunsIn: ghfake.InJobRun,
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := s.post(t, d); code != http.StatusConflict {
		t.Fatalf("review before the gate opened: %d, want 409\n%s", code, s.Stderr.String())
	}
	if out := s.Stderr.String(); !strings.Contains(out, "is open yet") || !strings.Contains(out, "redeliver") {
		t.Fatalf("the refusal does not say to redeliver:\n%s", out)
	}
	a, _ := ghGate(t, s.c, "r-early", run, "production", time.Hour)
	if got := ghApproval(t, s.c, a.GetApprovalId()); got.GetStatus() != pending {
		t.Fatalf("gate opened after the refused review: %v, want PENDING", got.GetStatus())
	}
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("redelivery once the gate is open: %d, want 200\n%s", code, s.Stderr.String())
	}
	got := ghApproval(t, s.c, a.GetApprovalId())
	if got.GetStatus() != approved || got.GetApprover() != "github:octo-lead" || got.GetReason() != "early" {
		t.Fatalf("gate after the redelivery: %v, want APPROVED by github:octo-lead with reason early", got)
	}
}

// A deployment_protection_rule "requested" binds the gate of its run and environment in
// every shape GitHub's schema allows that still names the run (deployment_callback_url) and
// the installation: environment only in deployment.environment, deployment absent,
// pull_requests absent, event absent, organization and enterprise present, a GitHub
// Enterprise Server callback URL; the proof is the status report the control plane posts for
// the bound gate. Without a callback URL, an environment or an installation it is refused
// (400), since no verdict could be posted, and nothing is posted.
func TestProtectionRuleShapesBindTheGate(t *testing.T) {
	s := startGitHubServe(t)
	rows := []struct {
		name     string
		rule     func(*ghfake.ProtectionRule)
		wantCode int
	}{
		{name: "GitHub's usual shape", rule: func(*ghfake.ProtectionRule) {}, wantCode: 200},
		{name: "environment only in deployment.environment", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"environment"} }, wantCode: 200},
		{name: "deployment absent", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"deployment"} }, wantCode: 200},
		{name: "pull_requests and event absent", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"pull_requests", "event"} }, wantCode: 200},
		{name: "organization and enterprise present", rule: func(p *ghfake.ProtectionRule) { p.Org, p.Enterprise = true, true }, wantCode: 200},
		{name: "GitHub Enterprise Server callback URL", rule: func(p *ghfake.ProtectionRule) { p.APIURL = "https://ghe.example.com/api/v3" }, wantCode: 200},
		{name: "environment absent everywhere", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"environment", "deployment"} }, wantCode: 400},
		{name: "deployment_callback_url absent", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"deployment_callback_url"} }, wantCode: 400},
		{name: "installation absent", rule: func(p *ghfake.ProtectionRule) { p.Omit = []string{"installation"} }, wantCode: 400},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			run := int64(9500 + i)
			ghGate(t, s.c, "r-rule-shape-"+strconv.Itoa(i), run, "production", time.Hour)
			p := ghfake.ProtectionRule{Repo: ghRepo, InstallationID: 77, RunID: run, Environment: "production",
				APIURL: s.gh.URL, DeploymentID: run * 10}
			row.rule(&p)
			if code := s.post(t, ghfake.ProtectionRuleRequested(p)); code != row.wantCode {
				t.Fatalf("rule delivery answered %d, want %d\nserve log:\n%s", code, row.wantCode, s.Stderr.String())
			}
			if row.wantCode == 200 {
				s.waitBodies(t, run, "the bound gate's status report", hasReport)
				return
			}
			if b := s.ruleBodies(t, run); len(b) != 0 {
				t.Fatalf("a refused rule request made the control plane post %+v", b)
			}
		})
	}
}

// A review that arrives while an rbook run that reported its workflow run and environment
// has not opened its gate yet (the runbook job is still at its checks) is answered 409 and
// not recorded; the same delivery, redelivered once the gate is open, decides it.
func TestDeploymentReviewWhileTheRunbookRunsIsRedeliverable(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9402
	if _, err := s.c.runs.StartRun(context.Background(), &rbookv1.StartRunRequest{OwnerId: testOwner, RunId: "r-running", Name: "demo",
		ContentHash: digest("plan"), SchemaHash8: "0123abcd", TotalSteps: 5, StartedBy: "tester",
		ReportedWorkflowRun: &rbookv1.GitHubWorkflowRun{Repository: "acme/deploys", RunId: strconv.Itoa(run), RunAttempt: "1",
			Actor: "octo-starter", Environment: "production"}}); err != nil {
		t.Fatal(err)
	}
	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: run,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "go", JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := s.post(t, d); code != http.StatusConflict {
		t.Fatalf("review while the runbook runs: %d, want 409\n%s", code, s.Stderr.String())
	}
	res, err := s.c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, s.c, "r-running"),
		RunId: "r-running", StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), OnFail: "halt", Github: &rbookv1.GitHubWorkflowRun{Repository: "acme/deploys",
			RunId: strconv.Itoa(run), RunAttempt: "1", Actor: "octo-starter", Environment: "production"}})
	if err != nil {
		t.Fatal(err)
	}
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("redelivery once the gate is open: %d, want 200\n%s", code, s.Stderr.String())
	}
	if got := ghApproval(t, s.c, res.GetApproval().GetApprovalId()); got.GetStatus() != approved || got.GetApprover() != "github:octo-lead" {
		t.Fatalf("gate after the redelivery: %v, want APPROVED by github:octo-lead", got)
	}
}
