package server_test

// GitHub protection-rule status reports and verdicts link the gate's page on the console when
// rbook serve has --public-url (docs/console-links.md), within GitHub's 1024-character cap.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/controlplane/ghapp"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// ghGateNamed is ghGate with the gate's step name.
func ghGateNamed(t *testing.T, c clients, id, step string, ghRun int64) (*rbookv1.Approval, string) {
	t.Helper()
	startRun(t, c, id)
	res, err := c.apps.RequestApproval(context.Background(), &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, c, id),
		RunId: id, StepName: step, StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		PlanDigest: digest("plan"), OnFail: "halt", Github: &rbookv1.GitHubWorkflowRun{Repository: "acme/deploys",
			RunId: strconv.FormatInt(ghRun, 10), RunAttempt: "1", Actor: "octo-starter", Environment: "production"}})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return res.GetApproval(), res.GetToken()
}

// The status report ends with "Decide it at <page>" and the verdict with "Gate page: <page>";
// neither carries the approval token, and both stay within the cap — also for a gate with
// the longest step name and run id the RPCs take behind a long public URL, where the report
// is cut before the link, not the link.
func TestGitHubReportsLinkTheGatePage(t *testing.T) {
	for i, c := range []struct{ name, publicURL, base, runID, step string }{
		{"short", "https://rbook.example.com/", "https://rbook.example.com", "r-link", "approve"},
		{"longest", "https://rbook.example.com/" + strings.Repeat("p", 300), "https://rbook.example.com/" + strings.Repeat("p", 300),
			strings.Repeat("r", 128), strings.Repeat("g", 256)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startGitHubServe(t, "--public-url", c.publicURL)
			ghRun := int64(9101 + i)
			s.rule(t, ghRun, "production")
			a, token := ghGateNamed(t, s.c, c.runID, c.step, ghRun)
			page := c.base + "/approvals/" + a.GetApprovalId()
			if a.GetApprovalUrl() != page {
				t.Fatalf("approval_url %q, want %q", a.GetApprovalUrl(), page)
			}
			rep := s.waitBodies(t, ghRun, "a status report", hasReport)[0]
			if !strings.HasSuffix(rep.Comment, "\n\nDecide it at "+page) {
				t.Errorf("status report does not end with its page %s:\n%s", page, rep.Comment)
			}
			if c.name == "short" && !strings.Contains(rep.Comment, "rbook approve "+a.GetApprovalId()) {
				t.Errorf("status report lost its rbook approve command:\n%s", rep.Comment)
			}
			if _, err := s.c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: token, Approver: "alice", Reason: "ship it"}); err != nil {
				t.Fatal(err)
			}
			v := verdicts(s.waitBodies(t, ghRun, "an approved verdict", func(b []ruleBody) bool { return len(verdicts(b)) > 0 }))
			if len(v) != 1 || !strings.HasPrefix(v[0].Comment, "approved by unverified:alice in rbook: ship it") || !strings.HasSuffix(v[0].Comment, "\n\nGate page: "+page) {
				t.Errorf("verdicts %+v: want one, 'approved by unverified:alice in rbook: ship it …' ending with the gate page %s", v, page)
			}
			for _, b := range s.ruleBodies(t, ghRun) {
				if n := utf8.RuneCountInString(b.Comment); n > ghapp.MaxCommentChars {
					t.Errorf("a comment of %d characters, over GitHub's %d", n, ghapp.MaxCommentChars)
				}
				if strings.Contains(b.Comment, token) {
					t.Errorf("a comment carries the approval token:\n%s", b.Comment)
				}
			}
		})
	}
}

// Without --public-url the reports carry no page link.
func TestGitHubReportsWithoutPublicURLHaveNoLink(t *testing.T) {
	s := startGitHubServe(t)
	s.rule(t, 9111, "production")
	a, _ := ghGateNamed(t, s.c, "r-nolink", "approve", 9111)
	rep := s.waitBodies(t, 9111, "a status report", hasReport)[0]
	if a.GetApprovalUrl() != "" || strings.Contains(rep.Comment, "/approvals/") || strings.Contains(rep.Comment, "Decide it at") {
		t.Errorf("approval_url %q; status report with a link:\n%s", a.GetApprovalUrl(), rep.Comment)
	}
}
