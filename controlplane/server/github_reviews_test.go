package server_test

// GitHub environment reviews as gates, at their edges: re-run attempts, lookups and verdicts
// GitHub refuses, reviews that must change nothing, and malformed payloads.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// ghGateAttempt is ghGate for workflow run attempt attempt.
func ghGateAttempt(t *testing.T, c clients, id string, ghRun int64, attempt, env string) (*rbookv1.Approval, string) {
	t.Helper()
	startRun(t, c, id)
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, id),
		RunId: id, StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), OnFail: "halt", Github: &rbookv1.GitHubWorkflowRun{Repository: "acme/deploys",
			RunId: strconv.FormatInt(ghRun, 10), RunAttempt: attempt, Actor: "octo-starter", Environment: env}})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return res.GetApproval(), res.GetToken()
}

// ruleFor posts a deployment_protection_rule request for deployment dep of run ghRun.
func (s *ghServe) ruleFor(t *testing.T, ghRun, dep int64, env string) {
	t.Helper()
	d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: ghRepo, InstallationID: 77, RunID: ghRun, Environment: env,
		APIURL: s.gh.URL, DeploymentID: dep})
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("protection rule delivery: %d, want 200\n%s", code, s.Stderr.String())
	}
}

// waitLog waits (up to 30 s, woken by each write to the log) until the serve log holds n
// occurrences of every one of want.
func (s *ghServe) waitLog(t *testing.T, n int, want ...string) {
	t.Helper()
	expired := time.After(30 * time.Second)
	for {
		changed := s.Stderr.Changed() // before reading, so no write is missed
		out, ok := s.Stderr.String(), true
		for _, w := range want {
			ok = ok && strings.Count(out, w) >= n
		}
		if ok {
			return
		}
		select {
		case <-changed:
		case <-expired:
			t.Fatalf("serve never logged %d× %q:\n%s", n, want, out)
		}
	}
}

// A re-run (attempt 2) of a workflow whose attempt-1 gate was approved asks again; its rule
// binds only a gate of attempt 2 (learned from GET …/actions/runs/{id} → run_attempt), so
// GitHub gets no verdict until attempt 2's gate is decided.
func TestRerunDoesNotInheritAttemptOneVerdict(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9101
	_, tok1 := ghGateAttempt(t, s.c, "r-att1", run, "1", "production")
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok1, Approver: "alice", Reason: "first"}); err != nil {
		t.Fatal(err)
	}
	s.ruleFor(t, run, 1, "production")
	s.waitBodies(t, run, "attempt 1's verdict", func(b []ruleBody) bool { return len(verdicts(b)) == 1 })

	s.gh.SetRunAttempt(ghRepo.Owner, ghRepo.Name, run, 2)
	s.ruleFor(t, run, 2, "production")
	s.waitLog(t, 1, "github protection rule attempt learned", "run_attempt=2")
	if v := verdicts(s.ruleBodies(t, run)); len(v) != 1 {
		t.Fatalf("verdicts %+v after attempt 2 asked: want only attempt 1's", v)
	}
	a2, tok2 := ghGateAttempt(t, s.c, "r-att2", run, "2", "production")
	s.waitBodies(t, run, "attempt 2's status report", func(b []ruleBody) bool {
		for _, x := range b {
			if x.State == nil && strings.Contains(x.Comment, a2.GetApprovalId()) {
				return true
			}
		}
		return false
	})
	if v := verdicts(s.ruleBodies(t, run)); len(v) != 1 {
		t.Fatalf("verdicts %+v while attempt 2's gate is pending: want only attempt 1's", v)
	}
	if _, err := s.c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: tok2, Approver: "bob", Reason: "second"}); err != nil {
		t.Fatal(err)
	}
	v := verdicts(s.waitBodies(t, run, "attempt 2's verdict", func(b []ruleBody) bool { return len(verdicts(b)) == 2 }))
	if *v[1].State != "rejected" || !strings.Contains(v[1].Comment, a2.GetApprovalId()) {
		t.Fatalf("attempt 2's verdict %+v: want rejected naming %s", v[1], a2.GetApprovalId())
	}
	if n := len(s.gh.RequestsTo(http.MethodGet, ghfake.RunPath(ghRepo.Owner, ghRepo.Name, run))); n != 2 {
		t.Fatalf("GET run %d times, want once per rule request (2)", n)
	}
}

// The run lookup failing is retried with back-off, not guessed: the rule binds once GitHub answers.
func TestRunAttemptLookupRetried(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9102
	s.gh.FailNext(http.MethodGet, ghfake.RunPath(ghRepo.Owner, ghRepo.Name, run), 502, 500)
	s.ruleFor(t, run, 1, "production")
	_, tok := ghGateAttempt(t, s.c, "r-lookup", run, "1", "production")
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Approver: "alice"}); err != nil {
		t.Fatal(err)
	}
	s.waitBodies(t, run, "the verdict after two failed lookups", func(b []ruleBody) bool { return len(verdicts(b)) == 1 })
	var failed int
	for _, r := range s.gh.RequestsTo(http.MethodGet, ghfake.RunPath(ghRepo.Owner, ghRepo.Name, run)) {
		if r.Status >= 500 {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d failed lookups, want 2", failed)
	}
}

// A verdict GitHub answers 422 forever is given up after MaxGitHubRefusedAttempts (3)
// attempts, with an error log line that says why; the loop never tries it again.
func TestVerdictRefusedForeverIsGivenUp(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9103
	_, tok := ghGateAttempt(t, s.c, "r-422", run, "1", "production")
	s.ruleFor(t, run, 1, "production")
	s.waitBodies(t, run, "a status report", hasReport)
	path := ghfake.ProtectionRulePath(ghRepo.Owner, ghRepo.Name, run)
	s.gh.FailNext(http.MethodPost, path, 422, 422, 422, 422, 422, 422, 422, 422)
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Approver: "alice"}); err != nil {
		t.Fatal(err)
	}
	s.waitLog(t, 1, "github protection rule delivery given up", "gave up after 3 failed attempts (GitHub refused it with 422)")
	// Drive the loop with another rule; the given-up one must not be tried again.
	_, tok2 := ghGateAttempt(t, s.c, "r-after-422", run+1, "1", "production")
	s.ruleFor(t, run+1, 1, "production")
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok2, Approver: "alice"}); err != nil {
		t.Fatal(err)
	}
	s.waitBodies(t, run+1, "the other run's verdict", func(b []ruleBody) bool { return len(verdicts(b)) == 1 })
	var tries int
	for _, b := range s.ruleBodies(t, run) {
		if b.State != nil {
			tries++
		}
	}
	if tries != 3 {
		t.Fatalf("%d verdict POSTs for the refused rule, want exactly 3 (MaxGitHubRefusedAttempts)", tries)
	}
}

// Reviews that change nothing: a login outside the policy's approvers, a review of the right run
// but another environment, and an approve and a reject delivered at once: the first two change
// nothing; of the racing two exactly one decides the gate, and GitHub gets that one verdict.
func TestUnentitledOrMismatchedReviewsChangeNothing(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "gates.yaml")
	if err := os.WriteFile(policy, []byte("rules:\n  - approvals: 1\n    approvers: [\"github:octo-lead\", \"github:octo-ops\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startGitHubServe(t, "--gate-policy", policy)
	const run = 9105
	a, _ := ghGateAttempt(t, s.c, "r-hostile", run, "1", "production")
	s.ruleFor(t, run, 1, "production")
	review := func(action, login, env string) int {
		d := ghfake.DeploymentReview(ghfake.Review{Action: action, Repo: ghRepo, InstallationID: 77, RunID: run, ApproverLogin: login,
			ApproverID: 4242, Comment: action + " by " + login, JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: env}}})
		return s.post(t, d)
	}
	if review("approved", "mallory", "production") != http.StatusOK || review("approved", "octo-lead", "staging") != http.StatusOK {
		t.Fatal("review deliveries not answered 200")
	}
	if got := ghApproval(t, s.c, a.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("after a stranger's and another environment's review: %v, want PENDING with no votes", got)
	}
	if out := s.Stderr.String(); !strings.Contains(out, "allows only github:octo-lead, github:octo-ops") {
		t.Fatalf("the stranger's refusal was not logged:\n%s", out)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, rv := range [][2]string{{"approved", "octo-lead"}, {"rejected", "octo-ops"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := ghfake.DeploymentReview(ghfake.Review{Action: rv[0], Repo: ghRepo, InstallationID: 77, RunID: run, ApproverLogin: rv[1],
				ApproverID: int64(100 + i), Comment: rv[0], JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
			req, err := d.Request(s.hookURL, []byte(ghSecret))
			if err != nil {
				return
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("racing reviews answered %v, want 200 200", codes)
	}
	got := ghApproval(t, s.c, a.GetApprovalId())
	want := map[rbookv1.ApprovalStatus]string{rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED: "approved",
		rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED: "rejected"}[got.GetStatus()]
	if want == "" {
		t.Fatalf("after racing reviews: %v, want APPROVED or REJECTED", got)
	}
	v := verdicts(s.waitBodies(t, run, "the verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
	if len(v) != 1 || *v[0].State != want {
		t.Fatalf("verdicts %+v, want one %q matching the gate %v", v, want, got.GetStatus())
	}
}

// A deployment_review of a re-run (workflow_run.run_attempt 2) decides attempt 2's gate only,
// never the gate attempt 1 left pending; a review arriving before any gate opened decides no
// gate opened later.
func TestReviewDecidesOnlyItsAttemptsGate(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9106
	review := func(attempt int) {
		t.Helper()
		d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: run, RunAttempt: attempt,
			ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "ok", JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
		if code := s.post(t, d); code != http.StatusOK {
			t.Fatalf("review delivery: %d, want 200", code)
		}
	}
	review(1) // before any gate of the run opened
	a1, _ := ghGateAttempt(t, s.c, "r-stale1", run, "1", "production")
	if got := ghApproval(t, s.c, a1.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("a gate opened after a review: %v, want PENDING with no votes", got)
	}
	a2, _ := ghGateAttempt(t, s.c, "r-rerun2", run, "2", "production")
	review(2)
	if got := ghApproval(t, s.c, a2.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("attempt 2's gate after attempt 2's review: %v, want APPROVED", got)
	}
	if got := ghApproval(t, s.c, a1.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("attempt 1's gate after attempt 2's review: %v, want PENDING with no votes", got)
	}
}

// Odd payloads: a rule request with a null installation or a non-numeric run id in its
// callback URL is refused (400) and stores nothing; a review comment with terminal escapes,
// CR/LF, bidi controls and 5000 bytes becomes a safe one-line reason of at most 1024 bytes.
func TestMalformedGitHubPayloadsRefusedOrSanitised(t *testing.T) {
	s := startGitHubServe(t)
	const run = 9107
	odd := func(mut func(m map[string]any)) int {
		d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: ghRepo, InstallationID: 77, RunID: run, Environment: "production",
			APIURL: s.gh.URL, DeploymentID: 1})
		var m map[string]any
		if err := json.Unmarshal(d.Body, &m); err != nil {
			t.Fatal(err)
		}
		mut(m)
		d.Body, _ = json.Marshal(m)
		return s.post(t, d)
	}
	if code := odd(func(m map[string]any) { m["installation"] = nil }); code != http.StatusBadRequest {
		t.Fatalf("null installation: %d, want 400", code)
	}
	if code := odd(func(m map[string]any) {
		m["deployment_callback_url"] = s.gh.URL + "/repos/acme/deploys/actions/runs/12ab/deployment_protection_rule"
	}); code != http.StatusBadRequest {
		t.Fatalf("non-numeric run id: %d, want 400", code)
	}
	a, _ := ghGateAttempt(t, s.c, "r-odd", run, "1", "production")
	comment := "\x1b[2J\x1b]0;pwned\x07LGTM\r\nship\u202eit\u0000 " + strings.Repeat("é", 2500)
	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: run, ApproverLogin: "octo-lead",
		ApproverID: 4242, Comment: comment, JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("review: %d, want 200", code)
	}
	got := ghApproval(t, s.c, a.GetApprovalId())
	r := got.GetReason()
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || len(r) > 1024 || !utf8.ValidString(r) ||
		!strings.HasPrefix(r, "[2J ]0;pwned LGTM ship it ") {
		t.Fatalf("reason %q (%d bytes): want a one-line reason ≤ 1024 bytes", r, len(r))
	}
	for _, c := range r {
		if unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c) {
			t.Fatalf("reason %q keeps control character %U", r, c)
		}
	}
	// Only the gate's RPCs ran: no rule was stored, so GitHub was never called.
	if n := len(s.gh.Requests()); n != 0 {
		t.Fatalf("GitHub got %d requests after refused rule requests, want 0", n)
	}
}
