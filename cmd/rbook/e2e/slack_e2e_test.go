package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/notify/smtptest"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/browsertest"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Slack app of the end-to-end test: its bot token, signing secret and channel.
const (
	e2eSlackToken   = "xoxb-3333-4444-e2e-bot-token"
	e2eSlackSecret  = "e2e-slack-signing-secret-0123456"
	e2eSlackChannel = "C0OPS0001"
)

// End to end with real processes (docs/slack.md): `rbook serve` with a slack channel posting
// to a fake Slack; `rbook run` waits at a 2-of-N gate. Slack gets one message with the gate's
// page and buttons; alice approves in Slack (1 of 2); alice approves again in the console,
// signed in with her auth-file token — the same person, so it is not counted and the console
// says she already approved; a forged and a replayed Slack request change nothing; a Slack
// user linked to no person is told so, to them only; bob's `rbook approve` opens the gate,
// the run completes, and the message says who decided. A webhook receiver verifying with the
// Standard Webhooks library gets every event once with a valid signature, and the requester
// (the person of the run's starter) gets the decision by email. With a Chromium installed,
// alice follows the Slack message's link to the gate page and clicks its Approve button.
func TestApproveInSlackThenInTheConsoleThenWithTheCLIOpensTheGateOnce(t *testing.T) {
	skipShort(t)
	fake := slackfake.New(e2eSlackToken, e2eSlackChannel)
	defer fake.Close()
	hooks := newE2EHookReceiver(t)
	mail, smtpAddr := smtptest.Start(t)
	dir := workdir(t)
	files := map[string]string{
		"auth.txt":   "ci-bot executor " + gatesExecToken + "\nalice approver " + gatesAliceToken + "\nbob approver " + gatesBobToken + "\n",
		"gates.yaml": "rules:\n  - approvals: 2\n",
		"people.yaml": "people:\n  - id: alice\n    name: Alice Example\n    identities: [alice, \"slack:T0001/U0001\"]\n" +
			"  - id: bob\n    name: Bob Builder\n    identities: [bob]\n" +
			"  - id: release-owner\n    name: Release Owner\n    identities: [ci-bot, \"email:owner@example.com\"]\n",
		"notify.yaml": fmt.Sprintf("channels:\n  - name: ops-slack\n    kind: slack\n    channel: %s\n    bot_token_env: E2E_SLACK_BOT_TOKEN\n"+
			"    signing_secret_file: %s\n    api_url: %s\n"+
			"  - name: hooks\n    kind: webhook\n    url: %s\n    secret_env: E2E_HOOK_SECRET\n"+
			"  - name: mail\n    kind: email\n    smtp: %s\n    from: rbook@example.com\n    to_requester: true\n"+
			"default:\n  channels: [ops-slack, hooks, mail]\n", e2eSlackChannel, filepath.Join(dir, "slack-signing-secret"), fake.APIURL(), hooks.srv.URL, smtpAddr),
		"slack-signing-secret": e2eSlackSecret + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("E2E_SLACK_BOT_TOKEN", e2eSlackToken)
	t.Setenv("E2E_HOOK_SECRET", e2eHookSecret)
	in := func(name string) string { return filepath.Join(dir, name) }
	// The public URL is the server's own, so the links it sends open its console.
	addr := freeAddr(t)
	url := startServeAt(t, addr, in("cp.db"), "--auth-file", in("auth.txt"), "--gate-policy", in("gates.yaml"), "--people", in("people.yaml"),
		"--notify-config", in("notify.yaml"), "--public-url", "http://"+addr).url()
	t.Setenv("RBOOK_TOKEN", gatesExecToken)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	id := approvalIDFrom(t, p)

	message := func(cond func(m slackfake.Message) bool) slackfake.Message {
		t.Helper()
		var got slackfake.Message
		if !fake.WaitFor(60*time.Second, func(f *slackfake.Fake) bool {
			top := f.TopLevel()
			if len(top) == 0 {
				return false
			}
			got = top[0]
			return cond(got)
		}) {
			t.Fatalf("the gate's Slack message never became as wanted:\n%s", got.AllText())
		}
		return got
	}
	m := message(func(m slackfake.Message) bool { return true })
	var buttons []string
	for _, b := range m.Buttons() {
		buttons = append(buttons, b.ActionID+"="+b.Value)
	}
	if want := []string{notify.SlackActionOpen + "=" + id, notify.SlackActionApprove + "=" + id, notify.SlackActionReject + "=" + id}; !slices.Equal(buttons, want) {
		t.Fatalf("buttons %v, want %v", buttons, want)
	}
	gateLink := m.Buttons()[0].URL
	if gateLink != url+"/approvals/"+id {
		t.Fatalf("the gate's link is %q, want its page %s/approvals/%s", gateLink, url, id)
	}
	// With a browser, alice follows the link and signs in before she approves in Slack; her
	// page's live updates are held back (as a buffering proxy would), so it still offers
	// Approve when she clicks it after her Slack approval.
	aliceBrowser, aliceTab := aliceOpensTheGateLink(t, gateLink)

	endpoint := url + server.SlackInteractionsPath
	alice := slackfake.User{Team: "T0001", ID: "U0001", Name: "alice"}
	press, err := slackfake.NewRequest(endpoint, e2eSlackSecret, time.Now().Unix(),
		slackfake.BlockActions(alice, m.Channel, m.TS, notify.SlackActionApprove, id))
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := press.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("alice's press: %d %s %v", code, body, err)
	}
	message(func(m slackfake.Message) bool {
		return strings.Contains(m.AllText(), "1 of 2: Alice Example (slack:T0001/U0001)")
	})

	forged, _ := slackfake.NewRequest(endpoint, "a-secret-someone-guessed-000000", time.Now().Unix(),
		slackfake.BlockActions(alice, m.Channel, m.TS, notify.SlackActionApprove, id))
	if code, _, err := forged.Send(http.DefaultClient); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("forged request: %d, %v; want 401", code, err)
	}
	if code, _, err := press.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("replayed request: %d, %v; want 200", code, err)
	}

	// Alice again, in the console: the Approve the gate page sends, with her session.
	aliceClicksApproveAgain(t, aliceBrowser, aliceTab, gateLink)
	res := consoleSignIn(t, url, gatesAliceToken).approve(t, id, "again, from the console")
	if got := res.GetApproval().GetCaller(); got.GetCode() != server.CodeAlreadyVoted || got.GetIdentity() != "alice" ||
		!strings.Contains(got.GetReason(), "You already approved this gate; it waits for 1 more approval") {
		t.Errorf("the console's answer to alice's second approval: %+v; want %s for alice, saying she already approved", got, server.CodeAlreadyVoted)
	}
	if a := res.GetApproval(); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || len(a.GetVotes()) != 1 ||
		a.GetVotes()[0].GetApprover() != "slack:T0001/U0001" || a.GetVotes()[0].GetPerson() != "alice" {
		t.Fatalf("the gate after alice's console approval: %s with votes %v; want pending with her one Slack vote (1 of 2)", a.GetStatus(), a.GetVotes())
	}
	if text := fake.TopLevel()[0].AllText(); !strings.Contains(text, "1 of 2: Alice Example (slack:T0001/U0001)") || strings.Contains(text, "2 of 2") {
		t.Fatalf("the Slack message after alice's console approval:\n%s\nwant it still at 1 of 2", text)
	}

	carol := slackfake.User{Team: "T0001", ID: "U0404", Name: "carol"}
	unlinked, _ := slackfake.NewRequest(endpoint, e2eSlackSecret, time.Now().Unix(),
		slackfake.BlockActions(carol, m.Channel, m.TS, notify.SlackActionApprove, id))
	if code, _, err := unlinked.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("carol's press: %d, %v", code, err)
	}
	if !fake.WaitFor(30*time.Second, func(f *slackfake.Fake) bool {
		return slices.Contains(f.Ephemerals(), slackfake.Ephemeral{Channel: e2eSlackChannel, User: "U0404", Text: people.NotLinkedMessage("slack:T0001/U0404")})
	}) {
		t.Fatalf("carol was not told she is not linked: %+v", fake.Ephemerals())
	}

	out, code := runAs(t, dir, gatesBobToken, "approve", id, "--control-plane", url, "--reason", "ship it")
	if code != 0 || !strings.Contains(out, "approved by") {
		t.Fatalf("bob: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d\n%s", code, p.output())
	}
	m = message(func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "*Approved* by") })
	if text := m.AllText(); !strings.Contains(text, "*Approved* by Alice Example (slack:T0001/U0001), Bob Builder (bob) via rpc") ||
		!strings.Contains(text, "Reason: ship it") || !strings.Contains(text, "2 of 2") {
		t.Fatalf("decided message:\n%s", text)
	}
	if n := len(fake.TopLevel()); n != 1 {
		t.Fatalf("%d top-level Slack messages; want one for the gate", n)
	}
	for _, e := range fake.Ephemerals() {
		if e.User != "U0404" {
			t.Errorf("ephemeral to %s: %q (nothing but carol's refusal was expected)", e.User, e.Text)
		}
	}
	if !fake.WaitFor(30*time.Second, func(f *slackfake.Fake) bool { return len(f.Replies(m.TS)) > 0 }) {
		t.Fatalf("no reply in the gate message's thread for the run's end: %+v", fake.Messages())
	}

	hooks.waitFor(t, "gate.opened:"+id, "vote.cast:"+id+":1", "gate.decided:"+id)
	runID := hooks.runOf("gate.decided:" + id)
	hooks.waitFor(t, "run.finished:"+runID)
	hooks.mu.Lock()
	// One vote was cast before the deciding one: alice's repeats made no event.
	if got, want := slices.Sorted(maps.Keys(hooks.accepted)), []string{"gate.decided:" + id, "gate.opened:" + id, "run.finished:" + runID, "vote.cast:" + id + ":1"}; !slices.Equal(got, want) {
		t.Errorf("the webhook receiver accepted events %v, want %v", got, want)
	}
	for eid, n := range hooks.accepted {
		if n != 1 {
			t.Errorf("webhook event %s accepted %d times, want once", eid, n)
		}
	}
	if hooks.badSig != 0 {
		t.Errorf("%d webhook requests failed the Standard Webhooks verification", hooks.badSig)
	}
	hooks.mu.Unlock()
	// The mail of the decision is the one whose Message-ID derives from its event id.
	decidedID := fmt.Sprintf("Message-ID: <%x@rbook>", sha256.Sum256([]byte("gate.decided:"+id)))
	var decided smtptest.Mail
	for n := 1; decided.Data == ""; n++ {
		for _, ml := range mail.WaitFor(t, n) {
			if strings.Contains(ml.Data, decidedID) {
				decided = ml
			}
		}
	}
	if !slices.Equal(decided.To, []string{"owner@example.com"}) {
		t.Fatalf("the requester's mail of the decision went to %v, want the release owner's address", decided.To)
	}
	for _, want := range []string{"Gate confirm-rollout (demo) approved", "bob via rpc", "Reason: ship it", "Gate page: " + gateLink} {
		if !strings.Contains(decided.Data, want) {
			t.Errorf("the requester's mail of the decision lacks %q:\n%s", want, decided.Data)
		}
	}
	if aliceTab != nil {
		// Her page's stream is still held: loaded again, it shows the decision.
		openPage(t, aliceTab, gateLink)
		waitElementText(t, aliceTab, "#gate-status", "Approved")
		waitElementText(t, aliceTab, "#decision .decided-by", "bob")
		aliceTab.NoProblems(t, "status of 401")
	}
}

// aliceOpensTheGateLink opens the gate's link from the Slack message in a headless Chromium
// as alice, with the page's WatchApproval stream held (browsertest.Tab.HoldRequests): the
// page asks her to sign in, she signs in with her auth-file token on the sign-in page, and is
// back on the gate, offered Approve at 0 of 2. It returns alice at the browser and her tab,
// or nils, with a skipped subtest that says why, when no Chromium is installed.
func aliceOpensTheGateLink(t *testing.T, link string) (*browsertest.Person, *browsertest.Tab) {
	t.Helper()
	if browsertest.Chromium() == "" {
		// Only the browser's part skips: the console's request is still sent as the page sends it.
		t.Run("alice clicks Approve on the gate page", func(t *testing.T) {
			t.Skip("no chromium: alice's console approval is sent as the gate page sends it, without a browser " +
				"(install Debian's chromium package, or set RBOOK_CHROMIUM, to click the page's Approve)")
		})
		return nil, nil
	}
	alice := browsertest.Start(t).Person(t, "alice")
	tab := alice.Tab(t)
	tab.HoldRequests(t, "*/rbook.v1.ApprovalService/WatchApproval")
	openPage(t, tab, link)
	waitElementText(t, tab, "#error", "Sign in")
	tab.Click(t, "#error a")
	tab.WaitFor(t, "the sign-in page", `location.pathname === '/signin' && !!document.querySelector('input#token')`)
	tab.Fill(t, "input#token", gatesAliceToken)
	tab.Click(t, "#token-form button")
	tab.WaitFor(t, "the gate page again", `location.href === `+browsertest.JSString(link))
	tab.WaitFor(t, "the page to be ready", pageReady)
	waitElementText(t, tab, "#whoami", "alice")
	waitElementText(t, tab, "#tally", "0 of 2 approvals")
	tab.WaitFor(t, "the Approve button", `!!document.querySelector('#approve')`)
	return alice, tab
}

// aliceClicksApproveAgain clicks Approve on alice's gate page, loaded before her Slack
// approval: the console says her approval is already counted at 1 of 2 and offers no more
// Approve, and the page opened afresh from the link says the same. Nothing when tab is nil.
func aliceClicksApproveAgain(t *testing.T, alice *browsertest.Person, tab *browsertest.Tab, link string) {
	t.Helper()
	if tab == nil {
		return
	}
	const counted = "Your approval is already counted; 1 of 2 approvals."
	tab.Fill(t, "textarea#reason", "again, from the console")
	tab.Click(t, "#approve")
	waitElementText(t, tab, "#outcome", counted)
	waitElementText(t, tab, "#tally", "1 of 2 approvals")
	waitElementText(t, tab, "#not-eligible", counted)
	fresh := alice.Tab(t)
	openPage(t, fresh, link)
	waitElementText(t, fresh, "#tally", "1 of 2 approvals")
	waitElementText(t, fresh, "#not-eligible", counted)
	waitElementText(t, fresh, "#votes-list", "slack:T0001/U0001")
	if n := browsertest.Eval[int](t, fresh, `document.querySelectorAll('#approve').length`); n != 0 {
		t.Errorf("alice is offered Approve again on the gate page after her approval")
	}
	fresh.NoProblems(t)
}

// e2eHookSecret is the webhook channel's Standard Webhooks secret in end-to-end tests.
const e2eHookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// e2eHookReceiver is a webhook receiver that verifies each request with the Standard
// Webhooks library and counts the accepted ones per webhook-id.
type e2eHookReceiver struct {
	srv      *httptest.Server
	wh       *standardwebhooks.Webhook
	mu       sync.Mutex
	accepted map[string]int
	runs     map[string]string // event id -> data.run_id
	badSig   int
	arrived  chan struct{}
}

func newE2EHookReceiver(t *testing.T) *e2eHookReceiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(e2eHookSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &e2eHookReceiver{wh: wh, accepted: map[string]int{}, runs: map[string]string{}, arrived: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.wh.Verify(body, req.Header); err != nil {
			r.badSig++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev notify.WebhookBody
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := req.Header.Get("webhook-id")
		r.accepted[id]++
		r.runs[id] = ev.Data.RunID
		w.WriteHeader(http.StatusNoContent)
		select {
		case r.arrived <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitFor waits (at most 60 s) until every event id in ids was accepted.
func (r *e2eHookReceiver) waitFor(t *testing.T, ids ...string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return r.accepted[id] > 0 })
		got := len(r.accepted)
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-r.arrived:
		case <-deadline:
			t.Fatalf("the webhook receiver never got %v (it got %d events)", missing, got)
		}
	}
}

// runOf is the run id an accepted event carried.
func (r *e2eHookReceiver) runOf(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}
