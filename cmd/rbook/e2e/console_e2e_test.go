package e2e

// Browser tests of the approver's console (docs/console.md): a headless Chromium
// (internal/browsertest) drives the pages that `rbook serve` and the embedded control plane of
// `rbook run` serve, through the selectors and texts of controlplane/console/web/README.md
// ("What the browser tests may rely on").

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/browsertest"
	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// pageReady is true once a console page has loaded its data (main#main aria-busy="false").
const pageReady = `(() => { const m = document.querySelector('main#main'); return !!m && m.getAttribute('aria-busy') === 'false'; })()`

// openPage navigates tab to url and waits until the console says the page is ready.
func openPage(t *testing.T, tab *browsertest.Tab, url string) {
	t.Helper()
	tab.Navigate(t, url)
	tab.WaitFor(t, "the page to be ready", pageReady)
}

// textOf returns the visible text of the first element matching the CSS selector ("" when
// there is none).
func textOf(t *testing.T, tab *browsertest.Tab, selector string) string {
	t.Helper()
	return browsertest.Eval[string](t, tab, fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? e.innerText : ''; })()`, browsertest.JSString(selector)))
}

// waitElementText waits until the element matching selector shows text containing want.
func waitElementText(t *testing.T, tab *browsertest.Tab, selector, want string) {
	t.Helper()
	tab.WaitFor(t, fmt.Sprintf("%s to say %q", selector, want), fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.innerText.includes(%s); })()`,
		browsertest.JSString(selector), browsertest.JSString(want)))
}

var gateURLLine = lazyregexp.New(`https?://[^\s/]+/approvals/(a-[a-z2-7]{26})`)

// osUser is the name of the OS user running the tests (and so the laptop run).
func osUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// gateURLFrom waits for the run to open its gate and returns the gate's page URL as the run
// printed it.
func gateURLFrom(t *testing.T, p *proc) (url, id string) {
	t.Helper()
	id = approvalIDFrom(t, p)
	p.waitFor(t, "/approvals/"+id)
	if m := gateURLLine.FindStringSubmatch(p.output()); m != nil {
		return m[0], id
	}
	t.Fatalf("no gate URL in:\n%s", p.output())
	return "", ""
}

// TestLaptopGateApprovedInTheBrowserCompletesTheRun: `rbook run demo` prints its gate's page
// URL on the embedded control plane; the person at the keyboard opens it, is known without
// signing in, approves with a reason using only the keyboard, and the run completes with the
// decision recorded as unverified:<os user> (docs/console-signin.md, "The laptop run").
func TestLaptopGateApprovedInTheBrowserCompletesTheRun(t *testing.T) {
	skipShort(t)
	b := browsertest.Start(t)
	dir := workdir(t)
	p := start(t, dir, "run", "demo")
	url, id := gateURLFrom(t, p)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/approvals/"+id) {
		t.Fatalf("gate URL %q, want a loopback page of approval %s", url, id)
	}
	me := "unverified:" + osUser(t)
	tab := b.Person(t, "the person at the keyboard").Tab(t)
	openPage(t, tab, url)
	waitElementText(t, tab, "#whoami", me)
	waitElementText(t, tab, "#gate-status", "Waiting for a decision")
	if h := textOf(t, tab, "h1"); h != "Gate confirm-rollout" {
		t.Errorf("h1 %q, want %q", h, "Gate confirm-rollout")
	}
	// With the keyboard only: Tab to the reason, type it, Tab to Approve, press Enter.
	tab.TabTo(t, "textarea#reason")
	tab.Type(t, "checked in the browser")
	tab.TabTo(t, "#approve")
	tab.Type(t, "\r")
	waitElementText(t, tab, "#outcome", "Approved")
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	var gate string
	for _, e := range readState(t, dir).EvidencePack {
		if e.StepName == "confirm-rollout" {
			gate = e.Status + " " + e.Output
		}
	}
	if !strings.HasPrefix(gate, "PASS ") || !strings.Contains(gate, me) || !strings.Contains(gate, "checked in the browser") {
		t.Errorf("gate evidence %q, want PASS by %s with the reason", gate, me)
	}
	if !strings.Contains(p.output(), "| confirm-rollout | ✅ approved | "+me+" |") {
		t.Errorf("the report lacks the gate decision by %s:\n%s", me, p.output())
	}
	tab.NoProblems(t)
}

// injections are the strings that must render as text wherever untrusted text appears: markup
// that would run script if inserted as HTML, and the workflow commands the Action neutralises
// in job logs.
var injections = []string{
	`<script>window.__pwned='script'</script>`,
	`<img src=x onerror="window.__pwned='img';alert('img')">`,
	`"><svg onload=alert('svg')>`,
	`::stop-commands::pwned`,
	`::add-mask::x ##[error]pwned`,
	`javascript:alert('link')`,
}

// injectedRun records, through the API as an executor would, a run whose name, plan, outputs
// and gate prompt carry the injection strings, and opens its gate. It returns the run and
// approval ids.
func injectedRun(t *testing.T, url, token string) (runID, approvalID string) {
	t.Helper()
	ctx := context.Background()
	c := cpclient.New(url, token)
	all := strings.Join(injections, " ")
	runID = "RBOOK-20261202-injected-0123abcd"
	const owner = "browser-test-executor"
	plan := &rbookv1.RunPlan{ContentHash: strings.Repeat("ab", 32)}
	for i, s := range injections {
		plan.Steps = append(plan.Steps, &rbookv1.PlanStep{Index: int32(i), Name: fmt.Sprintf("step-%d", i), Type: "check", Input: s, ParamsJson: `{"p":` + jsonString(s) + `}`, OnFail: "halt"})
	}
	gateIndex := int32(len(injections))
	plan.Steps = append(plan.Steps, &rbookv1.PlanStep{Index: gateIndex, Name: "confirm", Type: "confirm", Gate: true, OnFail: "halt"},
		&rbookv1.PlanStep{Index: gateIndex + 1, Name: "after", Type: "check", Input: all, OnFail: "halt"})
	res, err := c.Runs.StartRun(ctx, &rbookv1.StartRunRequest{RunId: runID, Name: "injected", ContentHash: plan.ContentHash, SchemaHash8: "0123abcd",
		TotalSteps: int32(len(plan.Steps)), StartedBy: all, OwnerId: owner, Plan: plan})
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	epoch := res.GetRun().GetLease().GetEpoch()
	at := time.Now()
	seq := int64(0)
	rec := func(tr *rbookv1.Transition) {
		seq++
		tr.RunId, tr.Seq, tr.Time = runID, seq, timestamppb.New(at.Add(time.Duration(seq)*time.Millisecond))
		if tr.RunStatus == rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED {
			tr.RunStatus = rbookv1.RunStatus_RUN_STATUS_RUNNING
		}
		if _, err := c.Runs.RecordTransition(ctx, &rbookv1.RecordTransitionRequest{Transition: tr, OwnerId: owner, Epoch: epoch}); err != nil {
			t.Fatalf("RecordTransition %d: %v", seq, err)
		}
	}
	rec(&rbookv1.Transition{Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_STARTED, StepIndex: -1})
	for i, s := range injections {
		name := fmt.Sprintf("step-%d", i)
		rec(&rbookv1.Transition{Kind: rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED, StepIndex: int32(i), StepName: name, StepType: "check"})
		rec(&rbookv1.Transition{Kind: rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED, StepIndex: int32(i), StepName: name, StepType: "check",
			Evidence: &rbookv1.Evidence{StepName: name, Type: "check", Input: &s, Output: s, Status: rbookv1.StepStatus_STEP_STATUS_PASS,
				TimestampUtc: at.UTC().Format("2006-01-02T15:04:05.000000000Z")}})
	}
	ap, err := c.Approvals.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{RunId: runID, StepName: "confirm", StepIndex: gateIndex, Prompt: all,
		Deadline: timestamppb.New(at.Add(time.Hour)), PlanDigest: plan.ContentHash, OnFail: "halt", OwnerId: owner, Epoch: epoch})
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return runID, ap.GetApproval().GetApprovalId()
}

// TestConsoleRendersInjectedTextAsTextUnderAStrictCSP: prompts, step names, inputs, outputs
// and the starter carrying markup and workflow commands render as the same text on every page;
// no script runs, no dialog opens and the page needs no CSP exception (no violation reported);
// every page is served with a Content-Security-Policy that allows no inline script.
func TestConsoleRendersInjectedTextAsTextUnderAStrictCSP(t *testing.T) {
	skipShort(t)
	b := browsertest.Start(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	runID, approvalID := injectedRun(t, url, "")
	tab := b.Person(t, "reader").Tab(t)
	for _, pg := range []struct{ name, path string }{
		{"gate", "/approvals/" + approvalID}, {"run", "/runs/" + runID}, {"waiting", "/"}, {"runs", "/runs"},
	} {
		path := pg.path
		t.Run(pg.name, func(t *testing.T) {
			resp, err := http.Get(url + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			csp := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("GET %s: Content-Security-Policy %q, want script-src 'self' and no unsafe-inline/unsafe-eval", path, csp)
			}
			openPage(t, tab, url+path)
			text := tab.Text(t)
			if path == "/approvals/"+approvalID || path == "/runs/"+runID {
				for _, s := range injections {
					if !strings.Contains(text, s) {
						t.Errorf("%s does not show %q as text:\n%s", path, s, text)
					}
				}
			}
			if pwned := browsertest.Eval[bool](t, tab, `window.__pwned !== undefined`); pwned {
				t.Errorf("%s ran injected script", path)
			}
			if n := browsertest.Eval[int](t, tab, `document.querySelectorAll('main script, main svg[onload], main img[onerror], main [onclick]').length`); n != 0 {
				t.Errorf("%s holds %d element(s) made from injected markup", path, n)
			}
		})
	}
	tab.NoProblems(t)
}

// TestCrossSiteRequestsToTheControlPlaneAreRefused: a page on another site (a second server on
// localhost, the control plane on 127.0.0.1) posts to the control plane with the visitor's
// browser — a Connect call that would approve a gate and a sign-in form — and gets 403
// Forbidden for each; the gate is still pending.
func TestCrossSiteRequestsToTheControlPlaneAreRefused(t *testing.T) {
	skipShort(t)
	b := browsertest.Start(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1") // the run's output is this test's
	p := start(t, dir, "run", "demo", "--control-plane", url)
	token := tokenFrom(t, p)
	id := approvalIDFrom(t, p)
	approve := url + "/rbook.v1.ApprovalService/Approve"
	signIn := url + "/auth/token"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>elsewhere</title><body>
<form id="f" method="POST" action="%s"><input name="token" value="x"></form>
<script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"},
  body: JSON.stringify({token: %q, approver: "mallory", reason: "cross-site"})})
  .then(() => { document.body.dataset.sent = "1"; }, () => { document.body.dataset.sent = "1"; });
</script></body></html>`, signIn, approve, token)
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	tab := b.Person(t, "visitor").Tab(t)
	ctx, cancel := context.WithTimeout(tab.Ctx, browsertest.Timeout)
	defer cancel()
	responses := chromedp.Events(ctx, network.ResponseReceived)
	tab.Navigate(t, evilURL)
	tab.WaitFor(t, "the cross-site fetch to finish", `document.body.dataset.sent === "1"`)
	tab.Do(t, chromedp.Submit(chromedp.CSS("#f")))
	statuses := map[string]int64{}
	for ev, err := range responses {
		if err != nil {
			t.Fatalf("waiting for the responses of %s and %s: %v (seen %v)", approve, signIn, err, statuses)
		}
		if ev.Response.URL == approve || ev.Response.URL == signIn {
			statuses[ev.Response.URL] = ev.Response.Status
		}
		if len(statuses) == 2 {
			break
		}
	}
	for _, u := range []string{approve, signIn} {
		if statuses[u] != http.StatusForbidden {
			t.Errorf("cross-site POST %s: status %d, want 403", u, statuses[u])
		}
	}
	out, code := run(t, dir, "", "approvals", "--pending", "--control-plane", url)
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("the gate should still be pending: exit %d\n%s", code, out)
	}
}

// screenshotsWanted is true when the test run should rewrite docs/screenshots
// (RBOOK_UPDATE_SCREENSHOTS=1).
func screenshotsWanted() bool { return os.Getenv("RBOOK_UPDATE_SCREENSHOTS") == "1" }

// screenshot writes docs/screenshots/<name>.png from tab when screenshots are wanted.
func screenshot(t *testing.T, tab *browsertest.Tab, name string) {
	t.Helper()
	if screenshotsWanted() {
		tab.Screenshot(t, filepath.Join("..", "..", "..", "docs", "screenshots", name+".png"))
	}
}

// TestConsolePagesAreAccessible: with a demo run waiting at its gate on `rbook serve`, each
// page of the console — Waiting for me, the gate, the run, the runs list, sign-in — has no
// serious or critical axe-core violation (WCAG 2 A/AA). (The signed-in pages are checked in
// TestApproversSignedInDecideATwoOfNGateInTheBrowser, which also takes docs/screenshots.)
func TestConsolePagesAreAccessible(t *testing.T) {
	skipShort(t)
	browsertest.RequireAxe(t)
	b := browsertest.Start(t)
	dir := workdir(t)
	url := serveCP(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)
	runID := demoRunID.FindString(p.output())
	tab := b.Person(t, "reader").Tab(t)
	for _, pg := range []struct{ path, what, wait string }{
		{"/", "Waiting for me", "#gate-" + id},
		{"/approvals/" + id, "the gate", "#plan"},
		{"/runs/" + runID, "the run", "#timeline"},
		{"/runs", "the runs list", "#runs-table"},
		{"/signin", "sign-in", "h1"},
	} {
		openPage(t, tab, url+pg.path)
		tab.WaitFor(t, pg.wait, fmt.Sprintf(`!!document.querySelector(%s)`, browsertest.JSString(pg.wait)))
		tab.Accessible(t, pg.what+" ("+pg.path+")")
	}
	tab.NoProblems(t)
}
