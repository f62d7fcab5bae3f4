package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/browsertest"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// Bearer tokens of the sign-in scenario's auth file: the CI executor, and the same service
// account as an approver (the run's starter, who may sign in to the console with it).
const (
	signinExecToken    = "ci-exec-token-0123456789"
	signinStarterToken = "ci-appr-token-0123456789"
)

// signInRulesOIDC: everyone of example.com may see; group sre may decide (and is group:sre).
const signInRulesOIDC = "      - email_domain: example.com\n        role: viewer\n      - group: sre\n        role: approver\n        groups: [sre]\n"

// signInRulesGitHub: team octo-org/sre may decide (and is group:sre).
const signInRulesGitHub = "      - github_team: octo-org/sre\n        role: approver\n        groups: [sre]\n"

// signInServe starts `rbook serve` with an auth file, a sign-in config naming the local OpenID
// provider and the fake GitHub, and a gate policy under which the demo's confirm gate needs 2
// approvals from group sre or ci-bot, never from the run's starter (docs/console-signin.md,
// "Testing with the fakes"). It returns the server's public URL.
func signInServe(t *testing.T, dir string) (url string, iss *authtest.Issuer) {
	t.Helper()
	iss = authtest.NewIssuer(t)
	gh := ghfake.New(t, 1)
	gh.SetOAuthUser(ghfake.OAuthUser{Login: "bob", Name: "Bob B.", ID: 4242, Orgs: []string{"octo-org"}, Teams: []string{"octo-org/sre"}})
	cfg := "session_ttl: 1h\nproviders:\n" + iss.SignInConfigYAML(t, "okta", "OKTA_SECRET", signInRulesOIDC) +
		gh.SignInConfigYAML("github", "GH_SECRET", signInRulesGitHub)
	files := map[string]string{
		"signin.yaml": cfg,
		"auth.txt":    "ci-bot executor " + signinExecToken + "\nci-bot approver " + signinStarterToken + "\n",
		"gates.yaml":  "rules:\n  - runbook: demo\n    gate: confirm-*\n    approvals: 2\n    approvers: [\"group:sre\", ci-bot]\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("OKTA_SECRET", authtest.ClientSecret)
	t.Setenv("GH_SECRET", ghfake.OAuthClientSecret)
	addr := freeAddr(t)
	s := &cpServer{t: t, addr: addr, db: filepath.Join(dir, "cp.db"), recorded: make(chan struct{}, 1<<16), extra: []string{
		"--auth-file", filepath.Join(dir, "auth.txt"), "--gate-policy", filepath.Join(dir, "gates.yaml"),
		"--sign-in-config", filepath.Join(dir, "signin.yaml"), "--public-url", "http://" + addr}}
	if err := s.launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s.url(), iss
}

var summaryPageRow = lazyregexp.New(`\| Page \| (\S+) \|`)

// signInVia opens the sign-in page from the gate page the person was sent to (the error's
// "Sign in" link) and follows the provider's link whose href starts with /auth/login/<id>; the
// fakes consent at once, and the person lands back on the gate, signed in as want.
func signInVia(t *testing.T, tab *browsertest.Tab, gateURL, provider, want string) {
	t.Helper()
	openPage(t, tab, gateURL)
	waitElementText(t, tab, "#error", "Sign in")
	tab.Click(t, "#error a")
	tab.WaitFor(t, "the sign-in page", `location.pathname === '/signin' && !!document.querySelector('ul#providers a')`)
	tab.Click(t, `ul#providers a[href^="/auth/login/`+provider+`"]`)
	tab.WaitFor(t, "the gate page again", `location.pathname.startsWith('/approvals/')`)
	tab.WaitFor(t, "the page to be ready", pageReady)
	waitElementText(t, tab, "#whoami", want)
}

// signInWithToken signs the person in on the sign-in page with an auth-file token and waits
// until the page at next says who they are.
func signInWithToken(t *testing.T, tab *browsertest.Tab, base, token, next, want string) {
	t.Helper()
	openPage(t, tab, base+"/signin?return="+next)
	tab.Fill(t, "input#token", token)
	tab.Click(t, "#token-form button")
	tab.WaitFor(t, "the return page", `location.pathname === `+browsertest.JSString(next))
	tab.WaitFor(t, "the page to be ready", pageReady)
	waitElementText(t, tab, "#whoami", want)
}

// approveByHand calls ApprovalService.Approve as a script would, with the person's console
// session cookie and Connect's JSON encoding, and returns the HTTP status and body.
func approveByHand(t *testing.T, tab *browsertest.Tab, base, approvalID string) (int, string) {
	t.Helper()
	cookie := tab.Cookie(t, base, "rbook_session")
	if cookie == "" {
		t.Fatalf("no rbook_session cookie for %s", base)
	}
	body, _ := json.Marshal(map[string]string{"approvalId": approvalID, "reason": "by hand"})
	req, _ := http.NewRequest("POST", base+"/rbook.v1.ApprovalService/Approve", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: "rbook_session", Value: cookie})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// votesOf is the gate's votes as "identity=verdict" and, once decided, its status.
func votesOf(t *testing.T, api *cpclient.Client, id string) string {
	t.Helper()
	res, err := api.Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range res.GetApproval().GetVotes() {
		out = append(out, v.GetApprover()+"="+v.GetVerdict().String())
	}
	if st := res.GetApproval().GetStatus(); st != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		out = append(out, st.String())
	}
	return strings.Join(out, " ")
}

// axeIfInstalled runs the accessibility check when axe-core is installed (TestConsolePagesAreAccessible
// skips without it; this scenario does not).
func axeIfInstalled(t *testing.T, tab *browsertest.Tab, what string) {
	t.Helper()
	if _, err := browsertest.AxePath(); err == nil {
		tab.Accessible(t, what)
	}
}

// TestApproversSignedInDecideATwoOfNGateInTheBrowser is the console's end-to-end story
// (docs/console.md): a CI executor runs the demo against `rbook serve` with sign-in, and its
// gate needs 2 approvals. Approver A signs in with the OpenID provider from the link in the job
// summary, sees the steps still to run and the plan digest, and approves: 1 of 2. A's approval
// from a page loaded before it is refused as a repeat. The run's starter, signed in, may not
// decide (four-eyes) and is told so. A viewer sees the gate with no Approve button, and the API
// refuses the viewer's Approve made by hand. Approver B signs in with GitHub and approves; the
// waiting `rbook run` resumes and exits 0, and the run page open in another tab shows it
// finished without a reload. The votes are recorded as the signed-in identities.
func TestApproversSignedInDecideATwoOfNGateInTheBrowser(t *testing.T) {
	skipShort(t)
	b := browsertest.Start(t)
	dir := workdir(t)
	url, iss := signInServe(t, dir)
	p, _, sumPath := ciJob(t, dir, url, "RBOOK_TOKEN="+signinExecToken)
	p.waitFor(t, "  Deadline ") // the gate's announcement ends; the live summary is written
	id := approvalIDFrom(t, p)
	runID := demoRunID.FindString(p.output())
	m := summaryPageRow.FindStringSubmatch(readFile(t, sumPath))
	if m == nil || m[1] != url+"/approvals/"+id {
		t.Fatalf("the job summary's page row %q, want %s/approvals/%s:\n%s", m, url, id, readFile(t, sumPath))
	}
	gateURL := m[1]
	api := cpclient.New(url, signinStarterToken)
	gate, err := api.Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil {
		t.Fatal(err)
	}
	digest := gate.GetApproval().GetPlanDigest()

	// Approver A: OpenID Connect, from the job summary's link.
	alice := b.Person(t, "alice")
	aliceEarly := alice.Tab(t) // loaded before A's approval, for the repeat
	a := alice.Tab(t)
	signInVia(t, a, gateURL, "okta", "oidc:alice@example.com")
	if got := textOf(t, a, "#plan-digest"); !strings.Contains(got, digest) || digest == "" {
		t.Errorf("#plan-digest %q, want the gate's plan digest %q", got, digest)
	}
	if steps := textOf(t, a, "ol#plan-steps"); !strings.Contains(steps, "app-running-after-rollout") || strings.Contains(steps, "deploy-app-config") {
		t.Errorf("the steps still to run %q, want app-running-after-rollout and not the finished deploy-app-config", steps)
	}
	waitElementText(t, a, "#tally", "0 of 2 approvals")
	axeIfInstalled(t, a, "the gate, as an approver")
	screenshot(t, a, "gate")
	openPage(t, aliceEarly, gateURL)
	aliceEarly.WaitFor(t, "the Approve button", `!!document.querySelector('#approve')`)
	a.Fill(t, "textarea#reason", "canary is green")
	a.Click(t, "#approve")
	waitElementText(t, a, "#outcome", "Your approval is counted: 1 of 2 approvals.")
	waitElementText(t, a, "#tally", "1 of 2 approvals")
	// The page A loaded before approving follows the gate live: no second Approve is offered.
	waitElementText(t, aliceEarly, "#not-eligible", "Your approval is already counted; 1 of 2 approvals.")
	if n := browsertest.Eval[int](t, aliceEarly, `document.querySelectorAll('#approve').length`); n != 0 {
		t.Errorf("A is offered Approve again on a page loaded before the approval")
	}
	// A's second Approve, sent by hand with A's session, is not counted again.
	if code, body := approveByHand(t, a, url, id); code != http.StatusOK || !strings.Contains(body, "E_ALREADY_VOTED") {
		t.Errorf("A's second Approve: %d %s, want 200 with caller code E_ALREADY_VOTED", code, body)
	}
	if v := votesOf(t, api, id); v != "oidc:alice@example.com=APPROVAL_STATUS_APPROVED" {
		t.Errorf("votes after A's repeat %q, want only A's one approval", v)
	}

	// The run's page, open in another tab until the end.
	runTab := alice.Tab(t)
	openPage(t, runTab, url+"/runs/"+runID)
	browsertest.Eval[bool](t, runTab, `window.__loadedOnce = true`)
	waitElementText(t, runTab, "#run-status", "Waiting at a gate")

	// The run's starter, signed in with its approver token: four-eyes.
	starter := b.Person(t, "ci-bot").Tab(t)
	signInWithToken(t, starter, url, signinStarterToken, "/approvals/"+id, "ci-bot")
	waitElementText(t, starter, "#not-eligible", "You started this run; another person must approve it (four-eyes).")
	if n := browsertest.Eval[int](t, starter, `document.querySelectorAll('#approve').length`); n != 0 {
		t.Errorf("the run's starter is offered %d Approve button(s)", n)
	}
	if code, body := approveByHand(t, starter, url, id); code != http.StatusForbidden || !strings.Contains(body, "E_SELF_APPROVAL") {
		t.Errorf("the starter's Approve by hand: %d %s, want 403 E_SELF_APPROVAL", code, body)
	}

	// A viewer (example.com, not in sre) sees everything and no Approve button.
	iss.SetUser(map[string]any{"sub": "carol", "email": "carol@example.com", "email_verified": true, "name": "Carol C.", "groups": []string{"finance"}})
	viewer := b.Person(t, "carol").Tab(t)
	signInVia(t, viewer, gateURL, "okta", "oidc:carol@example.com")
	waitElementText(t, viewer, "#not-eligible", "You have the viewer role: you can see this gate but not decide it.")
	for _, sel := range []string{"#prompt", "#plan-digest", "ol#plan-steps", "table#evidence-table", "#votes-list"} {
		if textOf(t, viewer, sel) == "" {
			t.Errorf("the viewer does not see %s", sel)
		}
	}
	if got := textOf(t, viewer, "#votes-list"); !strings.Contains(got, "oidc:alice@example.com") {
		t.Errorf("the viewer's votes list %q lacks alice's vote", got)
	}
	if n := browsertest.Eval[int](t, viewer, `document.querySelectorAll('#approve, #reject, form#decide').length`); n != 0 {
		t.Errorf("the viewer is offered %d decision control(s)", n)
	}
	if code, body := approveByHand(t, viewer, url, id); code != http.StatusForbidden || !strings.Contains(body, "E_PERMISSION_DENIED") {
		t.Errorf("the viewer's Approve by hand: %d %s, want 403 E_PERMISSION_DENIED", code, body)
	}

	// Approver B: Sign in with GitHub; the second approval opens the gate.
	bobs := b.Person(t, "bob")
	bob := bobs.Tab(t)
	signInVia(t, bob, gateURL, "github", "github:bob")
	waiting := bobs.Tab(t)
	openPage(t, waiting, url+"/")
	waitElementText(t, waiting, "#gate-"+id+" .tally", "1 of 2 approvals")
	if got := textOf(t, waiting, "#gate-"+id+" .voters"); !strings.Contains(got, "oidc:alice@example.com") {
		t.Errorf("Waiting for me names the voters %q, want alice", got)
	}
	axeIfInstalled(t, waiting, "Waiting for me, as an approver")
	screenshot(t, waiting, "waiting")
	bob.Fill(t, "textarea#reason", "ship it")
	bob.Click(t, "#approve")
	waitElementText(t, bob, "#outcome", "Approved. The run continues.")
	if code := p.wait(t); code != 0 {
		t.Fatalf("the waiting rbook run exit %d\n%s", code, p.output())
	}
	waitElementText(t, runTab, "#run-status", "Succeeded")
	// A's gate page, still open, says the gate is decided, by whom and why.
	waitElementText(t, a, "#gate-status", "Approved")
	waitElementText(t, a, "#decision .decided-by", "github:bob")
	waitElementText(t, a, "#decision .decided-reason", "ship it")
	if !browsertest.Eval[bool](t, runTab, `window.__loadedOnce === true`) {
		t.Error("the run page reloaded to show the end of the run")
	}
	axeIfInstalled(t, runTab, "the finished run")
	screenshot(t, runTab, "run")

	if want, got := "oidc:alice@example.com=APPROVAL_STATUS_APPROVED github:bob=APPROVAL_STATUS_APPROVED APPROVAL_STATUS_APPROVED", votesOf(t, api, id); got != want {
		t.Errorf("recorded votes and status %q, want %q", got, want)
	}

	// The runs list, signed in: the finished run is listed with its status.
	openPage(t, a, url+"/runs")
	waitElementText(t, a, "table#runs-table", runID)
	axeIfInstalled(t, a, "the runs list, as an approver")

	// The pages a person loaded before signing in were refused by the API (401), which the
	// browser logs; nothing else may go wrong.
	for _, tab := range []*browsertest.Tab{a, aliceEarly, runTab, starter, viewer, bob, waiting} {
		tab.NoProblems(t, "status of 401")
	}
}
