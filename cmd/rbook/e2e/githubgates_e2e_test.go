package e2e

// End to end, with real processes: rbook serve as a GitHub App
// against the fake GitHub, executors in pause mode as simulated runner jobs (GITHUB_REPOSITORY
// octo/app, GITHUB_RUN_ID 4242, --github-environment production), signed deliveries.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

var e2eGHRepo = ghfake.Repository{Owner: "octo", Name: "app", ID: 11}

// githubGatesServe starts rbook serve with pauseServe's auth file and the GitHub App flags.
func githubGatesServe(t *testing.T, dir string) (url string, gh *ghfake.Server) {
	t.Helper()
	gh = ghfake.New(t, 31337)
	auth := filepath.Join(dir, "auth.txt")
	os.WriteFile(auth, []byte("ci-bot executor "+pauseExecToken+"\nalice approver "+pauseAliceToken+"\n"), 0o600)
	url = serveCP(t, dir, "--auth-file", auth, "--github-app-id", "31337", "--github-app-key", gh.KeyFile,
		"--github-webhook-secret-file", writeWebhookSecret(t, dir), "--github-api-url", gh.URL)
	return url, gh
}

type e2eRulePost struct {
	State   *string `json:"state"`
	Comment string  `json:"comment"`
	Env     string  `json:"environment_name"`
	status  int
}

// waitRulePosts waits (≤ 30 s, woken by each request the fake records) for a 204-answered
// verdict on run 4242's protection rule endpoint and returns every POST it received there.
func waitRulePosts(t *testing.T, gh *ghfake.Server) []e2eRulePost {
	t.Helper()
	var out []e2eRulePost
	if _, done := gh.AwaitRequests(http.MethodPost, ghfake.ProtectionRulePath("octo", "app", 4242), 30*time.Second, func(rs []ghfake.Request) bool {
		out = out[:0]
		verdict := false
		for _, r := range rs {
			var p e2eRulePost
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			p.status = r.Status
			verdict = verdict || (p.State != nil && r.Status == http.StatusNoContent)
			out = append(out, p)
		}
		return verdict
	}); !done {
		t.Fatalf("no verdict reached the fake GitHub; POSTs %+v", out)
	}
	return out
}

// The protection rule is requested before the gate opens; the
// executor pauses at the gate bound to production; `rbook approve APPROVAL_ID` makes the fake
// GitHub receive a status report naming the approval and then exactly one "approved"
// verdict commented "approved by alice in rbook: reason".
func TestRuleBeforeGateApprovedByCLIEndToEnd(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url, gh := githubGatesServe(t, cpDir)
	d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: e2eGHRepo, InstallationID: 5, RunID: 4242,
		Environment: "production", APIURL: gh.URL, DeploymentID: 1})
	if code := postDelivery(t, url+"/github/webhook", d, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("protection rule delivery: %d, want 200", code)
	}
	_, _, id := pauseAtGate(t, url)
	out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url, "--reason", "canary green")
	if code != 0 {
		t.Fatalf("alice approves: exit %d\n%s", code, out)
	}
	posts := waitRulePosts(t, gh)
	var verdicts []e2eRulePost
	for _, p := range posts {
		if p.State != nil {
			verdicts = append(verdicts, p)
		}
	}
	if len(posts) < 2 || posts[0].State != nil || !strings.Contains(posts[0].Comment, id) || !strings.Contains(posts[0].Comment, "confirm-rollout") {
		t.Fatalf("POSTs %+v: want a status report naming %s and the gate first", posts, id)
	}
	if len(verdicts) != 1 || *verdicts[0].State != "approved" || verdicts[0].Env != "production" ||
		!strings.HasPrefix(verdicts[0].Comment, "approved by alice in rbook: canary green") {
		t.Fatalf("verdicts %+v: want exactly one approved by alice with the reason", verdicts)
	}
}

// A signed deployment_review "rejected" by a
// GitHub reviewer decides the paused gate; `rbook resume` records the gate FAIL with the
// reviewer github:<login> and the comment, runs its on_fail (rollback) and exits 1; the
// protection rule requested after the gate opened gets the "rejected" verdict.
func TestGitHubReviewRejectsEndToEnd(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url, gh := githubGatesServe(t, cpDir)
	_, _, id := pauseAtGate(t, url)
	d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: e2eGHRepo, InstallationID: 5, RunID: 4242,
		Environment: "production", APIURL: gh.URL, DeploymentID: 2})
	if code := postDelivery(t, url+"/github/webhook", d, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("protection rule delivery: %d, want 200", code)
	}
	rev := ghfake.DeploymentReview(ghfake.Review{Action: "rejected", Repo: e2eGHRepo, InstallationID: 5, RunID: 4242,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "error budget spent",
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := postDelivery(t, url+"/github/webhook", rev, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("review delivery: %d, want 200", code)
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	out, code := rbookIn(t, dirB, envB, "resume", "demo", "--control-plane", url)
	if code != 1 || !strings.Contains(out, "was rejected by github:octo-lead") || !strings.Contains(out, "error budget spent") {
		t.Fatalf("resume after the GitHub rejection: exit %d, want 1\n%s", code, out)
	}
	st := readState(t, dirB)
	if st.RunStatus != "FAILED" || !strings.Contains(st.steps(), "confirm-rollout=FAIL") || !strings.Contains(st.steps(), "rollback-app-config=PASS") {
		t.Fatalf("after the rejection: %s %q", st.RunStatus, st.steps())
	}
	posts := waitRulePosts(t, gh)
	last := posts[len(posts)-1]
	if last.State == nil || *last.State != "rejected" || !strings.HasPrefix(last.Comment, "rejected by github:octo-lead in rbook: error budget spent") ||
		!strings.Contains(last.Comment, id) {
		t.Fatalf("POSTs %+v: want the rejected verdict by github:octo-lead last", posts)
	}
}

// The end-to-end pause flow: `rbook serve` as a GitHub App against the
// fake GitHub; an executor in pause mode (folder A) stops at the gate bound to production;
// the protection rule is requested; a signed deployment_review "approved" by a GitHub
// reviewer decides the gate (a replay of that delivery changes nothing, a forged one is 401);
// a second executor in an empty folder B runs `rbook resume` and completes the run. The
// control plane shows one run, every step once, the gate decided by github:<login> with the
// comment (source github); the fake GitHub received the "approved" verdict for the rule.
func TestPauseApprovedByAGitHubReviewThenResume(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url, gh := githubGatesServe(t, cpDir)
	_, runID, id := pauseAtGate(t, url)
	rule := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: e2eGHRepo, InstallationID: 5, RunID: 4242,
		Environment: "production", APIURL: gh.URL, DeploymentID: 3})
	if code := postDelivery(t, url+"/github/webhook", rule, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("protection rule delivery: %d, want 200", code)
	}
	rev := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: e2eGHRepo, InstallationID: 5, RunID: 4242,
		ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "canary is green",
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := postDelivery(t, url+"/github/webhook", rev, "not-the-webhook-secret-0123456789"); code != http.StatusUnauthorized {
		t.Fatalf("forged review: %d, want 401", code)
	}
	if a := approvalByID(t, url, id); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("after a forged review the gate is %v, want still pending", a.GetStatus())
	}
	for range 2 { // the second is a replay of the same delivery id
		if code := postDelivery(t, url+"/github/webhook", rev, e2eWebhookSecret); code != http.StatusOK {
			t.Fatalf("review delivery: %d, want 200", code)
		}
	}
	a := approvalByID(t, url, id)
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || a.GetApprover() != "github:octo-lead" ||
		a.GetReason() != "canary is green" || a.GetDecidedBySource() != "github" || len(a.GetVotes()) != 1 {
		t.Fatalf("approval after the review: %v; want APPROVED by github:octo-lead, one vote", a)
	}

	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	out, code := rbookIn(t, dirB, envB, "resume", "demo", "--control-plane", url)
	if code != 0 {
		t.Fatalf("resume in an empty folder: exit %d, want 0\n%s", code, out)
	}
	if st := readState(t, dirB); st.RunID != runID || st.RunStatus != "COMPLETED" || st.steps() != demoPass {
		t.Fatalf("folder B: run %s %s %q; want %s COMPLETED %q", st.RunID, st.RunStatus, st.steps(), runID, demoPass)
	}
	resp := getRunAs(t, url, runID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	finished := map[string]int{}
	for _, tr := range resp.GetTransitions() {
		if tr.GetKind() == rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED {
			finished[tr.GetStepName()]++
		}
	}
	for name, n := range finished {
		if n != 1 {
			t.Errorf("step %s finished %d times on the control plane", name, n)
		}
	}
	if len(finished) != 6 {
		t.Errorf("%d steps finished on the control plane, want 6: %v", len(finished), finished)
	}
	posts := waitRulePosts(t, gh)
	var verdicts []e2eRulePost
	for _, p := range posts {
		if p.State != nil {
			verdicts = append(verdicts, p)
		}
	}
	if len(verdicts) != 1 || *verdicts[0].State != "approved" || !strings.HasPrefix(verdicts[0].Comment, "approved by github:octo-lead in rbook: canary is green") {
		t.Fatalf("verdicts %+v: want exactly one approved by github:octo-lead", verdicts)
	}
}

// approvalByID is GetApproval as alice (githubGatesServe needs auth).
func approvalByID(t *testing.T, url, id string) *rbookv1.Approval {
	t.Helper()
	resp, err := cpclient.New(url, pauseAliceToken).Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetApproval()
}
