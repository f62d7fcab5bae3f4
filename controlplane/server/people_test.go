package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// Tokens of the people tests' auth file (testdata/people.yaml links alice, alice-ci, bob).
const (
	aliceCIToken = "alice-ci-token-0123456789abcdef"
	bobToken     = "bob-token-0123456789abcdef"
	carolToken   = "carol-token-0123456789abcdef"
)

const peopleAuthFile = signInAuthFile + "alice-ci executor " + aliceCIToken + "\nbob approver " + bobToken +
	"\ncarol approver " + carolToken + "\n"

// startPeopleConsole is a console server with testdata/people.yaml and a gate policy rule
// with approvals and approvers (nil: anyone).
func startPeopleConsole(t *testing.T, approvals int, approvers ...string) *consoleServer {
	t.Helper()
	yml := "rules:\n  - approvals: " + string(rune('0'+approvals)) + "\n"
	if len(approvers) > 0 {
		yml += "    approvers: [\"" + strings.Join(approvers, "\", \"") + "\"]\n"
	}
	policy, err := approval.ParseGatePolicy([]byte(yml), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := people.Load("testdata/people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return startConsole(t, consoleOptions{authFile: peopleAuthFile, configure: func(o *server.Options) {
		o.People, o.GatePolicy = dir, policy
	}})
}

// gitHubSession signs login in to the console through the fake GitHub (an approver by the
// team octo-org/sre) and returns the browser.
func gitHubSession(t *testing.T, cs *consoleServer, login string) *http.Client {
	t.Helper()
	cs.gh.SetOAuthUser(ghfake.OAuthUser{Login: login, ID: 77, Orgs: []string{"octo-org"}, Teams: []string{"octo-org/sre"}})
	b := cs.browser(t)
	follow(t, b, cs.URL+"/auth/login/github?return=/runs")
	if who := whoAmI(t, cs, b); who.GetIdentity() != "github:"+login {
		t.Fatalf("GitHub sign-in as %s: WhoAmI = %v", login, who)
	}
	return b
}

// openGate starts run runID as the auth file's executor, opens its gate and returns the
// approval id.
func openGate(t *testing.T, cs *consoleServer, runID string) string {
	t.Helper()
	ex := cs.executor()
	startRun(t, ex, runID)
	a, _ := gate(t, ex, runID, time.Hour)
	return a.GetApprovalId()
}

// tokenApprovals is the approval service with an auth-file token over Connect.
func tokenApprovals(cs *consoleServer, token string) rbookv1connect.ApprovalServiceClient {
	return rbookv1connect.NewApprovalServiceClient(h2cClient(), cs.URL, withBearer(token))
}

func TestOnePersonApprovingThroughTwoChannelsCountsOnce(t *testing.T) {
	cs := startPeopleConsole(t, 2)
	ctx := context.Background()
	id := openGate(t, cs, "R-people")

	console := gitHubSession(t, cs, "alice-gh")
	if who := whoAmI(t, cs, console); who.GetPerson() != "alice" || who.GetPersonName() != "Alice Example" {
		t.Errorf("WhoAmI of alice's GitHub session = %v, want person alice (Alice Example)", who)
	}
	first, err := cs.approvals(console).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: id, Reason: "console"})
	if err != nil {
		t.Fatal(err)
	}
	if got := first.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 1 ||
		got.GetVotes()[0].GetApprover() != "github:alice-gh" || got.GetVotes()[0].GetPerson() != "alice" || got.GetVotes()[0].GetPersonName() != "Alice Example" {
		t.Fatalf("alice in the console = %v; want pending with her vote as github:alice-gh, person alice", got)
	}
	cli := tokenApprovals(cs, aliceToken)
	list, err := cli.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{RunId: "R-people"})
	if err != nil {
		t.Fatal(err)
	}
	if c := list.GetApprovals()[0].GetCaller(); c.GetMayDecide() || c.GetCode() != server.CodeAlreadyVoted {
		t.Errorf("alice's token sees caller = %v, want %s (her person already approved)", c, server.CodeAlreadyVoted)
	}
	again, err := cli.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: id, Reason: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 1 {
		t.Fatalf("alice again with her token = %v; want still pending with one vote", got)
	}
	done, err := tokenApprovals(cs, bobToken).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: id, Reason: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if got := done.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED ||
		got.GetApprover() != "github:alice-gh, bob" || got.GetDecidedPerson() != "alice, bob" {
		t.Fatalf("bob's approval = %v; want APPROVED by github:alice-gh, bob (people alice, bob)", got)
	}
}

func TestIdentityWithNoPersonCountsAsItself(t *testing.T) {
	cs := startPeopleConsole(t, 2)
	ctx := context.Background()
	id := openGate(t, cs, "R-nobody")
	first, err := tokenApprovals(cs, carolToken).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	if v := first.GetApproval().GetVotes()[0]; v.GetApprover() != "carol" || v.GetPerson() != "" {
		t.Fatalf("carol's vote = %v, want identity carol with no person", v)
	}
	done, err := cs.approvals(gitHubSession(t, cs, "carol-gh")).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := done.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetDecidedPerson() != "carol, github:carol-gh" {
		t.Fatalf("a second unlinked identity = %v; want APPROVED, each identity its own person", got)
	}
}

func TestFourEyesRefusesTheRunStartersOtherIdentity(t *testing.T) {
	cs := startPeopleConsole(t, 1)
	ctx := context.Background()
	aliceCI := clients{runs: rbookv1connect.NewRunServiceClient(h2cClient(), cs.URL, withBearer(aliceCIToken)),
		apps: rbookv1connect.NewApprovalServiceClient(h2cClient(), cs.URL, withBearer(aliceCIToken))}
	startRun(t, aliceCI, "R-alice")
	a, _ := gate(t, aliceCI, "R-alice", time.Hour)
	console := gitHubSession(t, cs, "alice-gh")
	got, err := cs.approvals(console).GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: a.GetApprovalId()})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.GetApproval().GetCaller(); c.GetMayDecide() || c.GetCode() != server.CodeSelfApproval {
		t.Errorf("caller of the starter's GitHub session = %v, want %s", c, server.CodeSelfApproval)
	}
	_, err = cs.approvals(console).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()})
	wantCode(t, err, connect.CodePermissionDenied, server.CodeSelfApproval)
	_, err = tokenApprovals(cs, aliceToken).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()})
	wantCode(t, err, connect.CodePermissionDenied, server.CodeSelfApproval)
	if _, err := tokenApprovals(cs, bobToken).Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()}); err != nil {
		t.Fatalf("bob, another person, approving alice's run: %v", err)
	}
}

func TestPolicyNamingPeopleAllowsOnlyThem(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed string
		token   string
		want    string // "" allowed, else the rbook code
	}{
		{"person entry, that person's token", "person:alice", aliceToken, ""},
		{"person entry, another person", "person:alice", bobToken, server.CodePermissionDenied},
		{"person entry, an identity with no person", "person:alice", carolToken, server.CodePermissionDenied},
		{"directory group, a member", "group:leads", bobToken, ""},
		{"directory group, not a member", "group:leads", aliceToken, server.CodePermissionDenied},
		{"identity entry, another identity of the same person", "github:alice-gh", aliceToken, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := startPeopleConsole(t, 1, c.allowed)
			id := openGate(t, cs, "R-policy")
			res, err := tokenApprovals(cs, c.token).Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id})
			if c.want == "" {
				if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
					t.Fatalf("Approve = %v, %v; want APPROVED", res, err)
				}
				return
			}
			wantCode(t, err, connect.CodePermissionDenied, c.want)
		})
	}
}

func TestAuthFileGitHubLinkToAnotherPersonStopsTheServer(t *testing.T) {
	dir, err := people.Load("testdata/people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.ParseAuth(strings.NewReader("bob approver "+bobToken+" github=alice-gh\n"), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = server.New(st, server.Options{Secret: []byte(testSecret), Auth: a, People: dir})
	if err == nil || !strings.Contains(err.Error(), "auth.txt:1: bob has github=alice-gh") || !strings.Contains(err.Error(), "testdata/people.yaml:") {
		t.Fatalf("New = %v; want the clash named with both lines", err)
	}
}

// writeFile writes text to name in a new temporary folder and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGitHubReviewAndTheSamePersonsTokenCountOnce(t *testing.T) {
	s := startGitHubServe(t, "--auth-file", writeFile(t, "auth.txt", peopleAuthFile), "--people", "testdata/people.yaml",
		"--gate-policy", writeFile(t, "gates.yaml", "rules:\n  - approvals: 2\n"))
	s.c = newClients(s.URL, withBearer(execToken))
	a, _ := ghGate(t, s.c, "r-people", 9100, "production", time.Hour)
	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghRepo, InstallationID: 77, RunID: 9100, ApproverLogin: "Alice-GH",
		ApproverID: 4243, Comment: "from GitHub", JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := s.post(t, d); code != http.StatusOK {
		t.Fatalf("review delivery: %d, want 200", code)
	}
	got := ghApproval(t, s.c, a.GetApprovalId())
	if got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(got.GetVotes()) != 1 || got.GetVotes()[0].GetPerson() != "alice" {
		t.Fatalf("after alice's GitHub review: %v; want PENDING with her vote, person alice", got)
	}
	ctx := context.Background()
	aliceCLI := rbookv1connect.NewApprovalServiceClient(h2cClient(), s.URL, withBearer(aliceToken))
	if res, err := aliceCLI.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()}); err != nil ||
		res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(res.GetApproval().GetVotes()) != 1 {
		t.Fatalf("alice again with her token = %v, %v; want still PENDING with one vote", res, err)
	}
	bobCLI := rbookv1connect.NewApprovalServiceClient(h2cClient(), s.URL, withBearer(bobToken))
	res, err := bobCLI.Approve(ctx, &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId()})
	if err != nil || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || res.GetApproval().GetDecidedPerson() != "alice, bob" {
		t.Fatalf("bob's approval = %v, %v; want APPROVED by the people alice, bob", res, err)
	}
}

func TestSlackUserWithoutAPersonIsNotLinkedAndALinkedOneVotesAsThePerson(t *testing.T) {
	cs := startPeopleConsole(t, 1)
	if _, ok := cs.h.PersonOf("slack:T0001/U9999"); ok {
		t.Error("an unlinked Slack user has a person")
	}
	per, ok := cs.h.PersonOf("slack:T0001/U0001")
	if !ok || per.ID != "alice" {
		t.Fatalf("PersonOf(alice's Slack user) = %+v, %v; want alice", per, ok)
	}
	v := cs.h.VoterFor("slack:T0001/U0001")
	if !v.Verified || v.Person != "alice" || v.Key() != "person:alice" {
		t.Fatalf("VoterFor = %+v; want verified, person alice", v)
	}
	err := approval.CheckVote(approval.Default(), approval.Starter{StartedBy: "alice-ci"}, v, true)
	if !errors.Is(err, approval.ErrSelfApproval) {
		t.Fatalf("alice from Slack approving a run alice-ci started: %v, want four-eyes refusal", err)
	}
}
