package webhook_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

// A Handler's *webhook.Refusal answers its own status with its reason (GitHub shows both in
// the App's Recent Deliveries) instead of 500, and leaves the delivery unrecorded, so the
// redelivery is acted on.
func TestHandlerRefusalAnswersItsStatusAndIsRedeliverable(t *testing.T) {
	f := newFixture(t)
	f.h.fail, f.h.failErr = 1, &webhook.Refusal{Status: http.StatusConflict, Reason: "no rbook gate is open yet; redeliver this delivery once it is"}
	d := approved()
	req, err := d.Request(f.srv.URL+webhook.Path, testWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "redeliver this delivery once it is") {
		t.Fatalf("refused delivery: %d %q, want 409 with the reason", resp.StatusCode, body)
	}
	if f.seen(t, d.ID) {
		t.Fatal("a refused delivery was recorded as processed")
	}
	if code := f.post(t, d, testWebhookSecret, nil); code != http.StatusOK || len(f.h.reviews) != 1 || !f.seen(t, d.ID) {
		t.Fatalf("redelivery: %d, reviews %d, recorded %v; want 200, 1, true", code, len(f.h.reviews), f.seen(t, d.ID))
	}
}

// The endpoint fills what the handler needs from wherever GitHub's schema lets the payload
// carry it: the environments from environment, workflow_job_run and workflow_job_runs; the
// run id from a job run's html_url when workflow_run is null; the approver from the sender.
func TestReviewNormalizedFromEveryPlaceTheSchemaAllows(t *testing.T) {
	rows := []struct {
		name     string
		review   ghfake.Review
		wantEnvs string
		wantRun  int64
		wantWho  string
	}{
		{"workflow_job_runs", ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 1, Environment: "production"}}}, "production", 9001, "octo-lead"},
		{"workflow_job_run alone", ghfake.Review{JobRunsIn: ghfake.InJobRun, JobRuns: []ghfake.JobRun{{ID: 1, Environment: "production"}}}, "production", 9001, "octo-lead"},
		{"top level, job run and job runs", ghfake.Review{Environment: "qa", JobRunsIn: ghfake.InBoth,
			JobRuns: []ghfake.JobRun{{ID: 1, Environment: "staging"}, {ID: 2, Environment: "production"}, {ID: 3, Environment: "staging"}}},
			"qa,staging,production", 9001, "octo-lead"},
		{"no environment", ghfake.Review{}, "", 9001, "octo-lead"},
		{"workflow_run null", ghfake.Review{JobRunsIn: ghfake.InJobRun, JobRuns: []ghfake.JobRun{{ID: 1, Environment: "production"}},
			Set: map[string]any{"workflow_run": nil}}, "production", 9001, "octo-lead"},
		{"approver absent", ghfake.Review{JobRuns: []ghfake.JobRun{{ID: 1, Environment: "production"}}, Omit: []string{"approver"},
			Set: map[string]any{"sender": map[string]any{"login": "octo-sender", "id": 7}}}, "production", 9001, "octo-sender"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixture(t)
			rv := row.review
			rv.Action, rv.Repo, rv.InstallationID, rv.RunID, rv.ApproverLogin, rv.ApproverID = "approved", repo, 77, 9001, "octo-lead", 31337
			if code := f.post(t, ghfake.DeploymentReview(rv), testWebhookSecret, nil); code != http.StatusOK || len(f.h.reviews) != 1 {
				t.Fatalf("status %d, reviews %d; want 200, 1\n%s", code, len(f.h.reviews), f.log.String())
			}
			ev := f.h.reviews[0]
			if got := strings.Join(webhook.ReviewEnvironments(ev), ","); got != row.wantEnvs {
				t.Fatalf("environments %q, want %q", got, row.wantEnvs)
			}
			if ev.GetWorkflowRun().GetID() != row.wantRun || ev.GetApprover().GetLogin() != row.wantWho {
				t.Fatalf("run %d approver %q, want %d %q", ev.GetWorkflowRun().GetID(), ev.GetApprover().GetLogin(), row.wantRun, row.wantWho)
			}
		})
	}
}
