package server_test

// Against a real `rbook serve` process configured as a GitHub App,
// the fake GitHub (ghfake) and signed webhook deliveries.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

const ghSecret = "gates-webhook-secret-0123456789abcdef"

var ghRepo = ghfake.Repository{Owner: "acme", Name: "deploys", ID: 7}

// ghServe is rbook serve with the GitHub App flags against a fresh fake GitHub.
type ghServe struct {
	*serveProc
	gh      *ghfake.Server
	hookURL string
	c       clients
}

func startGitHubServe(t *testing.T, extra ...string) *ghServe {
	t.Helper()
	gh := ghfake.New(t, 4711)
	secret := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secret, []byte(ghSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, append([]string{"--github-app-id", "4711", "--github-app-key", gh.KeyFile,
		"--github-webhook-secret-file", secret, "--github-api-url", gh.URL}, extra...)...)
	return &ghServe{serveProc: p, gh: gh, hookURL: p.URL + "/github/webhook", c: newClients(p.URL)}
}

func (s *ghServe) post(t *testing.T, d ghfake.Delivery) int {
	t.Helper()
	req, err := d.Request(s.hookURL, []byte(ghSecret))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (s *ghServe) rule(t *testing.T, runID int64, env string) {
	t.Helper()
	d := ghfake.ProtectionRuleRequested(ghfake.ProtectionRule{Repo: ghRepo, InstallationID: 77, RunID: runID, Environment: env,
		APIURL: s.gh.URL, DeploymentID: runID * 10})
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("protection rule delivery: %d, want 200\n%s", code, s.Stderr.String())
	}
}

// ruleBody is one POST the fake received on a run's deployment_protection_rule endpoint.
type ruleBody struct {
	Env     string  `json:"environment_name"`
	State   *string `json:"state"`
	Comment string  `json:"comment"`
	status  int
}

func (s *ghServe) ruleBodies(t *testing.T, runID int64) []ruleBody {
	t.Helper()
	var out []ruleBody
	for _, r := range s.gh.RequestsTo(http.MethodPost, ghfake.ProtectionRulePath(ghRepo.Owner, ghRepo.Name, runID)) {
		var b ruleBody
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("protection rule POST body %q: %v", r.Body, err)
		}
		b.status = r.Status
		out = append(out, b)
	}
	return out
}

// waitBodies waits (up to 30 s, woken by each request the fake records) until ok holds for
// the run's protection rule POSTs.
func (s *ghServe) waitBodies(t *testing.T, runID int64, what string, ok func([]ruleBody) bool) []ruleBody {
	t.Helper()
	var b []ruleBody
	if _, done := s.gh.AwaitRequests(http.MethodPost, ghfake.ProtectionRulePath(ghRepo.Owner, ghRepo.Name, runID), 30*time.Second,
		func([]ghfake.Request) bool { b = s.ruleBodies(t, runID); return ok(b) }); !done {
		t.Fatalf("fake GitHub never got %s; got %+v\nserve log:\n%s", what, b, s.Stderr.String())
	}
	return b
}

func verdicts(b []ruleBody) (out []ruleBody) {
	for _, x := range b {
		if x.State != nil && x.status == http.StatusNoContent {
			out = append(out, x)
		}
	}
	return out
}

func hasReport(b []ruleBody) bool {
	for _, x := range b {
		if x.State == nil && x.status == http.StatusNoContent {
			return true
		}
	}
	return false
}

// ghGate starts run id and opens its gate bound to GitHub run ghRun and environment env.
func ghGate(t *testing.T, c clients, id string, ghRun int64, env string, in time.Duration) (*rbookv1.Approval, string) {
	t.Helper()
	startRun(t, c, id)
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, id),
		RunId: id, StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(in)),
		PlanDigest: digest("plan"), OnFail: "halt", Github: &rbookv1.GitHubWorkflowRun{Repository: "acme/deploys",
			RunId: strconv.FormatInt(ghRun, 10), RunAttempt: "1", Actor: "octo-starter", Environment: env}})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return res.GetApproval(), res.GetToken()
}

func ghApproval(t *testing.T, c clients, id string) *rbookv1.Approval {
	t.Helper()
	res, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetApproval()
}

// A rule requested before its gate opens is bound when the gate opens; a
// status report naming the gate, plan digest and approval id goes first; the Approve RPC's
// decision reaches GitHub as exactly one "approved" verdict with "approved by X in rbook: reason".
func TestRuleBeforeGateThenApprove(t *testing.T) {
	s := startGitHubServe(t)
	s.rule(t, 9001, "production")
	a, token := ghGate(t, s.c, "r-before", 9001, "production", time.Hour)
	b := s.waitBodies(t, 9001, "a status report", hasReport)
	rep := b[0]
	for _, want := range []string{"`approve`", "r-before", a.GetApprovalId(), digest("plan"), "rbook approve " + a.GetApprovalId()} {
		if !strings.Contains(rep.Comment, want) || rep.Env != "production" {
			t.Fatalf("status report %+v: want environment production and %q in the comment", rep, want)
		}
	}
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "alice", Reason: "ship it"}); err != nil {
		t.Fatal(err)
	}
	b = s.waitBodies(t, 9001, "an approved verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 })
	v := verdicts(b)
	if len(v) != 1 || *v[0].State != "approved" || v[0].Env != "production" ||
		!strings.HasPrefix(v[0].Comment, "approved by unverified:alice in rbook: ship it") || !strings.Contains(v[0].Comment, a.GetApprovalId()) {
		t.Fatalf("verdicts %+v: want one approved, commented 'approved by unverified:alice in rbook: ship it …'", v)
	}
	if b[0].State != nil {
		t.Fatalf("the first POST was not the status report: %+v", b)
	}
	// A redelivery of a rule request for the same deployment changes nothing.
	s.rule(t, 9001, "production")
	if n := len(verdicts(s.ruleBodies(t, 9001))); n != 1 {
		t.Fatalf("%d verdicts after a repeated rule request, want 1", n)
	}
}

// A rule requested after its gate opened is bound at once; a reject reaches
// GitHub as "rejected by X in rbook: reason"; a rule for a gate already decided gets the
// verdict at once (pause mode: approved before the held job asked).
func TestRuleAfterGateOpenedAndAfterDecision(t *testing.T) {
	s := startGitHubServe(t)
	_, token := ghGate(t, s.c, "r-after", 9002, "production", time.Hour)
	s.rule(t, 9002, "production")
	s.waitBodies(t, 9002, "a status report", hasReport)
	if _, err := s.c.apps.Reject(context.Background(), &rbookv1.RejectRequest{Token: token, Approver: "bob", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	v := verdicts(s.waitBodies(t, 9002, "a rejected verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
	if len(v) != 1 || *v[0].State != "rejected" || !strings.HasPrefix(v[0].Comment, "rejected by unverified:bob in rbook: not today") {
		t.Fatalf("verdicts %+v: want one rejected by unverified:bob", v)
	}

	_, token = ghGate(t, s.c, "r-decided", 9003, "staging", time.Hour)
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "carol", Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	s.rule(t, 9003, "staging")
	b := s.waitBodies(t, 9003, "an approved verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 })
	if v := verdicts(b); len(v) != 1 || *v[0].State != "approved" || v[0].Env != "staging" || b[0].State != nil {
		t.Fatalf("POSTs %+v: want a status report then one approved verdict for staging", b)
	}
}

// At the gate's deadline GitHub gets "rejected" with "timed out after …".
func TestDeadlineRejectsTimedOut(t *testing.T) {
	s := startGitHubServe(t)
	s.rule(t, 9004, "production")
	ghGate(t, s.c, "r-deadline", 9004, "production", 2*time.Second)
	v := verdicts(s.waitBodies(t, 9004, "a timed-out verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
	if len(v) != 1 || *v[0].State != "rejected" || !strings.HasPrefix(v[0].Comment, "timed out after 2s") {
		t.Fatalf("verdicts %+v: want one rejected 'timed out after 2s …'", v)
	}
}

// GitHub failing twice is retried with back-off; exactly one verdict lands.
func TestAPIFailuresRetriedOneVerdict(t *testing.T) {
	s := startGitHubServe(t)
	_, token := ghGate(t, s.c, "r-retry", 9005, "production", time.Hour)
	s.rule(t, 9005, "production")
	s.waitBodies(t, 9005, "a status report", hasReport)
	s.gh.FailNext(http.MethodPost, ghfake.ProtectionRulePath(ghRepo.Owner, ghRepo.Name, 9005), 502, 500)
	if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "alice"}); err != nil {
		t.Fatal(err)
	}
	b := s.waitBodies(t, 9005, "the verdict after two failures", func(b []ruleBody) bool { return len(verdicts(b)) > 0 })
	var failed int
	for _, x := range b {
		if x.State != nil && x.status >= 500 {
			failed++
		}
	}
	if v := verdicts(b); failed != 2 || len(v) != 1 || *v[0].State != "approved" {
		t.Fatalf("POSTs %+v: want two failed verdict attempts then one approved", b)
	}
	if out := s.Stderr.String(); strings.Count(out, "github protection rule delivery failed; retrying") != 2 {
		t.Fatalf("want two logged retries:\n%s", out)
	}
}

// A signed deployment_review decides the bound gate with approver
// github:<login>, source github and the comment as the reason (its rejected twin rejects);
// the run's own actor may not approve (four-eyes); a review for an unknown run changes nothing.
func TestGitHubReviewDecidesGate(t *testing.T) {
	s := startGitHubServe(t)
	a, _ := ghGate(t, s.c, "r-review", 9006, "production", time.Hour)
	b, _ := ghGate(t, s.c, "r-review-rej", 9007, "production", time.Hour)
	review := func(action string, run int64, login, comment string) {
		t.Helper()
		d := ghfake.DeploymentReview(ghfake.Review{Action: action, Repo: ghRepo, InstallationID: 77, RunID: run, ApproverLogin: login,
			ApproverID: 4242, Comment: comment, JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
		if code := s.post(t, d); code != http.StatusOK {
			t.Fatalf("review delivery: %d, want 200", code)
		}
	}
	// Unknown run, and the run's starter: nothing changes.
	review("approved", 123456, "octo-lead", "ok")
	review("approved", 9006, "octo-starter", "my own")
	if got := ghApproval(t, s.c, a.GetApprovalId()); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 0 {
		t.Fatalf("after an unknown-run review and a self-review: %v, want PENDING with no votes", got)
	}
	if out := s.Stderr.String(); !strings.Contains(out, "no pending rbook gate of this run") || !strings.Contains(out, "started the run") {
		t.Fatalf("refusals not logged:\n%s", out)
	}
	review("approved", 9006, "octo-lead", "LGTM\nship it")
	got := ghApproval(t, s.c, a.GetApprovalId())
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetApprover() != "github:octo-lead" ||
		got.GetDecidedBySource() != "github" || got.GetReason() != "LGTM ship it" {
		t.Fatalf("approved review: %v; want APPROVED by github:octo-lead, source github, reason 'LGTM ship it'", got)
	}
	review("rejected", 9007, "octo-lead", "broken canary")
	got = ghApproval(t, s.c, b.GetApprovalId())
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_REJECTED || got.GetApprover() != "github:octo-lead" || got.GetReason() != "broken canary" {
		t.Fatalf("rejected review: %v; want REJECTED by github:octo-lead with the comment", got)
	}
	if n := len(s.gh.Requests()); n != 0 {
		t.Fatalf("no protection rule was requested, yet GitHub got %d requests", n)
	}
}
