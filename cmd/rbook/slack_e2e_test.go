package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// The Slack app of the end-to-end test: its bot token, signing secret and channel.
const (
	e2eSlackToken   = "xoxb-3333-4444-e2e-bot-token"
	e2eSlackSecret  = "e2e-slack-signing-secret-0123456"
	e2eSlackChannel = "C0OPS0001"
)

// End to end with real processes (docs/slack.md): `rbook serve` with a slack channel posting
// to a fake Slack; `rbook run` waits at a 2-of-N gate. Slack gets one message with the gate's
// page and buttons; alice approves in Slack (1 of 2); her own `rbook approve` with her token
// (the same person) is not counted again; a forged and a replayed Slack request change
// nothing; a Slack user linked to no person is told so, to them only; bob's `rbook approve`
// opens the gate, the run completes, and the message says who decided.
func TestApproveInSlackThenWithTheCLIOpensTheGateOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs rbook serve and rbook run")
	}
	fake := slackfake.New(e2eSlackToken, e2eSlackChannel)
	defer fake.Close()
	dir := workdir(t)
	files := map[string]string{
		"auth.txt":   "ci-bot executor " + gatesExecToken + "\nalice approver " + gatesAliceToken + "\nbob approver " + gatesBobToken + "\n",
		"gates.yaml": "rules:\n  - approvals: 2\n",
		"people.yaml": "people:\n  - id: alice\n    name: Alice Example\n    identities: [alice, \"slack:T0001/U0001\"]\n" +
			"  - id: bob\n    name: Bob Builder\n    identities: [bob]\n",
		"notify.yaml": fmt.Sprintf("channels:\n  - name: ops-slack\n    kind: slack\n    channel: %s\n    bot_token_env: E2E_SLACK_BOT_TOKEN\n"+
			"    signing_secret_file: %s\n    api_url: %s\ndefault:\n  channels: [ops-slack]\n", e2eSlackChannel, filepath.Join(dir, "slack-signing-secret"), fake.APIURL()),
		"slack-signing-secret": e2eSlackSecret + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("E2E_SLACK_BOT_TOKEN", e2eSlackToken)
	in := func(name string) string { return filepath.Join(dir, name) }
	url := serveCP(t, dir, "--auth-file", in("auth.txt"), "--gate-policy", in("gates.yaml"), "--people", in("people.yaml"),
		"--notify-config", in("notify.yaml"), "--public-url", "https://rbook.example.com")
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
	if link := m.Buttons()[0].URL; link != "https://rbook.example.com/approvals/"+id {
		t.Fatalf("the gate's link is %q", link)
	}

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
	out, code := runAs(t, dir, gatesAliceToken, "approve", id, "--control-plane", url)
	if code != 0 || !strings.Contains(out, "1 of 2 approvals") {
		t.Fatalf("alice again with her token: exit %d\n%s\nwant still 1 of 2 (one person)", code, out)
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

	out, code = runAs(t, dir, gatesBobToken, "approve", id, "--control-plane", url, "--reason", "ship it")
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
}
