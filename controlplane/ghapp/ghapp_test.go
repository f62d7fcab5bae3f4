package ghapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rbookhq/rbook-action/controlplane/ghapp"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

const appID = 424242

var repo = ghapp.Repo{InstallationID: 77, Owner: "acme", Name: "deploys"}

func newApp(t *testing.T, gh *ghfake.Server, apiURL string) *ghapp.App {
	t.Helper()
	app, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKeyPEM: gh.KeyPEM, APIURL: apiURL})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// The token request carries an App JWT the fake verifies
// (RS256 with the App's key, iss = app id); the installation token is reused for later
// calls, and a token within a minute of its expiry is refreshed.
func TestAppTokenJWTAndReuse(t *testing.T) {
	gh := ghfake.New(t, appID)
	app := newApp(t, gh, gh.URL)
	ctx := context.Background()
	for range 3 {
		if _, err := app.PendingDeployments(ctx, repo, 11); err != nil {
			t.Fatal(err)
		}
	}
	tokReqs := gh.RequestsTo(http.MethodPost, "/app/installations/77/access_tokens")
	if len(tokReqs) != 1 || tokReqs[0].Status != http.StatusCreated || gh.TokensIssued() != 1 {
		t.Fatalf("token requests %d (status %v), issued %d; want 1 request, 201, 1 token", len(tokReqs), tokReqs, gh.TokensIssued())
	}
	jwt, _ := strings.CutPrefix(tokReqs[0].Header.Get("Authorization"), "Bearer ")
	if err := gh.VerifyAppJWT(jwt); err != nil {
		t.Fatalf("token request's JWT: %v", err)
	}
	api := gh.RequestsTo(http.MethodGet, "/repos/acme/deploys/actions/runs/11/pending_deployments")
	if len(api) != 3 {
		t.Fatalf("%d pending_deployments calls, want 3", len(api))
	}
	for _, r := range api {
		if r.Header.Get("Authorization") != "token ghs_fake0001" || r.Status != http.StatusOK {
			t.Fatalf("API call auth %q status %d, want the one installation token and 200", r.Header.Get("Authorization"), r.Status)
		}
	}

	// A token that expires within the App's one-minute margin is refreshed on each use.
	gh2 := ghfake.New(t, appID)
	gh2.SetTokenTTL(30 * time.Second)
	app2 := newApp(t, gh2, gh2.URL)
	for range 2 {
		if _, err := app2.PendingDeployments(ctx, repo, 11); err != nil {
			t.Fatal(err)
		}
	}
	if gh2.TokensIssued() != 2 {
		t.Fatalf("near-expiry tokens: issued %d, want 2 (one per call)", gh2.TokensIssued())
	}

	// A key the fake does not know is refused with GitHub's 401 and the call fails.
	other := ghfake.New(t, appID)
	bad := newApp(t, gh, other.URL) // gh's key against other's server
	if _, err := bad.PendingDeployments(ctx, repo, 11); err == nil {
		t.Fatal("a token request signed with the wrong key succeeded")
	}
	if r := other.RequestsTo(http.MethodPost, "/app/installations/77/access_tokens"); len(r) != 1 || r[0].Status != http.StatusUnauthorized {
		t.Fatalf("wrong-key token request: %v", r)
	}
}

// The verdict's body is exactly environment_name, state, comment.
func TestVerdictBodyExact(t *testing.T) {
	gh := ghfake.New(t, appID)
	app := newApp(t, gh, gh.URL)
	if err := app.ReviewProtectionRule(context.Background(), repo, 987, "production", ghapp.StateApproved,
		"approved by alice in rbook: change window"); err != nil {
		t.Fatal(err)
	}
	reqs := gh.RequestsTo(http.MethodPost, ghfake.ProtectionRulePath("acme", "deploys", 987))
	if len(reqs) != 1 || reqs[0].Status != http.StatusNoContent {
		t.Fatalf("verdict requests: %v", reqs)
	}
	want := `{"environment_name":"production","state":"approved","comment":"approved by alice in rbook: change window"}` + "\n"
	if got := string(reqs[0].Body); got != want {
		t.Fatalf("verdict body\n got %s\nwant %s", got, want)
	}
	if err := app.ReviewProtectionRule(context.Background(), repo, 987, "production", "pending", "x"); err == nil {
		t.Fatal("state pending accepted as a verdict")
	}
}

// A status report has no "state" and a comment of at most
// MaxCommentChars characters, cut at a character boundary.
func TestStatusReportNoStateCapped(t *testing.T) {
	gh := ghfake.New(t, appID)
	app := newApp(t, gh, gh.URL)
	long := strings.Repeat("é", ghapp.MaxCommentChars+50) // 2 bytes each: a byte cut would split one
	if err := app.ReportProtectionRuleStatus(context.Background(), repo, 987, "production", long); err != nil {
		t.Fatal(err)
	}
	reqs := gh.RequestsTo(http.MethodPost, ghfake.ProtectionRulePath("acme", "deploys", 987))
	if len(reqs) != 1 || reqs[0].Status != http.StatusNoContent {
		t.Fatalf("report requests: %v", reqs)
	}
	var body map[string]string
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["state"]; ok || len(body) != 2 || body["environment_name"] != "production" {
		t.Fatalf("report body has keys %v, want environment_name and comment only", body)
	}
	c := body["comment"]
	if n := utf8.RuneCountInString(c); n != ghapp.MaxCommentChars || !utf8.ValidString(c) || !strings.HasSuffix(c, "…") {
		t.Fatalf("comment: %d characters, valid %v, suffix %q; want %d, true, …", n, utf8.ValidString(c), c[len(c)-3:], ghapp.MaxCommentChars)
	}
	short := "Gate **deploy** waits: `rbook approve A1`"
	if got := ghapp.Truncate(short, ghapp.MaxCommentChars); got != short {
		t.Fatalf("short comment changed: %q", got)
	}
}

// Pending deployments and the run's approvals are read and
// parsed; a GHES-style URL (…/api/v3) reaches the same endpoints.
func TestPendingDeploymentsAndApprovals(t *testing.T) {
	gh := ghfake.New(t, appID)
	app := newApp(t, gh, gh.URL+"/api/v3")
	gh.SetPendingDeployments("acme", "deploys", 5, `[{"environment":{"id":161171787,"name":"production"},"wait_timer":0,
		"current_user_can_approve":false,"reviewers":[{"type":"User","reviewer":{"login":"octo-lead","id":31337}}]}]`)
	gh.SetApprovals("acme", "deploys", 5, `[{"state":"approved","comment":"ship it","user":{"login":"octo-lead","id":31337},
		"environments":[{"id":161171787,"name":"production"}]}]`)
	ctx := context.Background()
	pd, err := app.PendingDeployments(ctx, repo, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(pd) != 1 || pd[0].GetEnvironment().GetID() != 161171787 || pd[0].GetEnvironment().GetName() != "production" ||
		len(pd[0].Reviewers) != 1 {
		t.Fatalf("pending deployments: %+v", pd)
	}
	ap, err := app.RunApprovals(ctx, repo, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(ap) != 1 || ap[0].State != "approved" || ap[0].Comment != "ship it" || ap[0].User.GetLogin() != "octo-lead" ||
		ap[0].User.GetID() != 31337 || len(ap[0].Environments) != 1 || ap[0].Environments[0].Name != "production" {
		t.Fatalf("approvals: %+v", ap)
	}
	for _, r := range gh.Requests() {
		if r.Status/100 != 2 {
			t.Fatalf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
	if n := len(gh.RequestsTo(http.MethodGet, "/repos/acme/deploys/actions/runs/5/approvals")); n != 1 {
		t.Fatalf("%d approvals calls, want 1", n)
	}
}

// New refuses bad configuration with errors naming what is wrong.
func TestAppConfigRefused(t *testing.T) {
	gh := ghfake.New(t, appID)
	for _, c := range []struct {
		cfg  ghapp.Config
		want string
	}{
		{ghapp.Config{AppID: 0, PrivateKeyPEM: gh.KeyPEM}, "App id 0"},
		{ghapp.Config{AppID: 1, PrivateKeyPEM: []byte("not a key")}, "no PEM block"},
		{ghapp.Config{AppID: 1, PrivateKeyPEM: gh.KeyPEM, APIURL: "api.github.com"}, "absolute http(s) URL"},
	} {
		if _, err := ghapp.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%d, %q): %v, want %q", c.cfg.AppID, c.cfg.APIURL, err, c.want)
		}
	}
}

// Calls for several installations at once each get their own
// token, once per installation, without data races (run with -race).
func TestInstallationsConcurrent(t *testing.T) {
	gh := ghfake.New(t, appID)
	app := newApp(t, gh, gh.URL)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		wg.Go(func() {
			_, err := app.PendingDeployments(context.Background(), ghapp.Repo{InstallationID: int64(1 + i%3), Owner: "acme", Name: "deploys"}, 5)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for inst := 1; inst <= 3; inst++ {
		if n := len(gh.RequestsTo(http.MethodPost, fmt.Sprintf("/app/installations/%d/access_tokens", inst))); n != 1 {
			t.Errorf("installation %d: %d token requests, want 1", inst, n)
		}
	}
}

// A comment's tail (a gate's page link) survives the cap whole: the head is cut before it. A
// tail longer than half the cap is cut with the head as one text.
func TestCommentWithTailKeepsTheTailUnderTheCap(t *testing.T) {
	tail := "\n\nDecide it at https://rbook.example.com/approvals/a-1"
	long := strings.Repeat("é", 2000)
	for _, c := range []struct {
		name, head, tail, want string
	}{
		{"fits", "short report", tail, "short report" + tail},
		{"head cut", long, tail, strings.Repeat("é", ghapp.MaxCommentChars-utf8.RuneCountInString(tail)-1) + "…" + tail},
		{"tail too long", "head", strings.Repeat("x", 600), ghapp.Truncate("head"+strings.Repeat("x", 600), ghapp.MaxCommentChars)},
	} {
		got := ghapp.CommentWithTail(c.head, c.tail)
		if got != c.want {
			t.Errorf("%s: CommentWithTail = %.60q… (%d characters), want %.60q… (%d)", c.name, got, utf8.RuneCountInString(got), c.want, utf8.RuneCountInString(c.want))
		}
		if n := utf8.RuneCountInString(got); n > ghapp.MaxCommentChars {
			t.Errorf("%s: %d characters, over %d", c.name, n, ghapp.MaxCommentChars)
		}
	}
}
