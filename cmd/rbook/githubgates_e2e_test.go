package main

// End to end, with real processes (issue 8, items 2 and 3): rbook serve as a GitHub App
// against the fake GitHub, executors in pause mode as simulated runner jobs (GITHUB_REPOSITORY
// octo/app, GITHUB_RUN_ID 4242, --github-environment production), signed deliveries.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
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

// waitRulePosts waits (≤ 30 s) for a 204-answered verdict on run 4242's protection rule
// endpoint and returns every POST it received there.
func waitRulePosts(t *testing.T, gh *ghfake.Server) []e2eRulePost {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out []e2eRulePost
		verdict := false
		for _, r := range gh.RequestsTo(http.MethodPost, ghfake.ProtectionRulePath("octo", "app", 4242)) {
			var p e2eRulePost
			if err := json.Unmarshal(r.Body, &p); err != nil {
				t.Fatal(err)
			}
			p.status = r.Status
			verdict = verdict || (p.State != nil && r.Status == http.StatusNoContent)
			out = append(out, p)
		}
		if verdict {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verdict reached the fake GitHub; POSTs %+v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 8, item 2, acceptance: the protection rule is requested before the gate opens; the
// executor pauses at the gate bound to production; `rbook approve APPROVAL_ID` makes the fake
// GitHub receive a status report naming the approval and then exactly one "approved"
// verdict commented "approved by alice in rbook: reason".
func TestIssue8_2_RuleBeforeGateApprovedByCLIEndToEnd(t *testing.T) {
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

// Issue 8, item 3, acceptance (reject twin): a signed deployment_review "rejected" by a
// GitHub reviewer decides the paused gate; `rbook resume` records the gate FAIL with the
// reviewer github:<login> and the comment, runs its on_fail (rollback) and exits 1; the
// protection rule requested after the gate opened gets the "rejected" verdict.
func TestIssue8_3_GitHubReviewRejectsEndToEnd(t *testing.T) {
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
