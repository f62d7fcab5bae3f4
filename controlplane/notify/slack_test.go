package notify_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/slackapi"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

const (
	slackToken  = "xoxb-1111-2222-notify-test-token"
	slackSecret = "notify-test-signing-secret-0123"
)

func slackEnv(k string) (string, bool) {
	v, ok := map[string]string{"BOT": slackToken, "SIGNING": slackSecret, "USER_TOKEN": "xoxp-user-token-not-a-bot"}[k]
	return v, ok
}

// A slack channel takes a Slack channel id, the bot token and the signing secret from the
// environment or a file, and an optional api_url; mistakes name file:line and the field and
// never the secrets.
func TestSlackChannelConfigNamesTheFieldOfEachMistake(t *testing.T) {
	ok := "channels:\n  - name: s\n    kind: slack\n    channel: C0123ABCD\n    bot_token_env: BOT\n    signing_secret_env: SIGNING\n"
	c, err := notify.ParseConfig([]byte(ok+"    api_url: http://127.0.0.1:1/api\ndefault: {channels: [s]}\n"), "n.yaml", slackEnv)
	if err != nil {
		t.Fatal(err)
	}
	sl, isSlack := c.Channels["s"].(*notify.Slack)
	if !isSlack || sl.Kind() != "slack" || sl.SlackChannel() != "C0123ABCD" || sl.SigningSecret() != slackSecret {
		t.Fatalf("channel = %+v", c.Channels["s"])
	}
	for _, tc := range []struct{ name, text, want string }{
		{"no channel", "channels:\n  - name: s\n    kind: slack\n    bot_token_env: BOT\n    signing_secret_env: SIGNING\n",
			"n.yaml:2: channels[0]: a slack channel needs channel (a Slack channel id"},
		{"channel name, not id", strings.Replace(ok, "C0123ABCD", "'#ops'", 1), `n.yaml:4: channels[0].channel: "#ops" is not a Slack channel id`},
		{"user token", strings.Replace(ok, "bot_token_env: BOT", "bot_token_env: USER_TOKEN", 1),
			"n.yaml:5: channels[0]: the bot token does not start with xoxb-"},
		{"no signing secret", strings.Replace(ok, "    signing_secret_env: SIGNING\n", "", 1),
			"n.yaml:2: channels[0]: a slack channel needs signing_secret_env or signing_secret_file"},
		{"both token sources", ok + "    bot_token_file: /run/secrets/bot\n", "n.yaml:7: channels[0]: give bot_token_env or bot_token_file, not both"},
		{"bad api_url", ok + "    api_url: slack.com/api\n", `n.yaml:7: channels[0].api_url: "slack.com/api" is not an http(s) URL`},
		{"field of another kind", ok + "    url: https://x.example.com\n", "n.yaml:7: channels[0].url: not a field of a slack channel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := notify.ParseConfig([]byte(tc.text), "n.yaml", slackEnv)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant prefix %s", err, tc.want)
			}
			if strings.Contains(err.Error(), slackToken) || strings.Contains(err.Error(), slackSecret) || strings.Contains(err.Error(), "xoxp-") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func blocksJSON(t *testing.T, blocks []slackapi.Block) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(blocks); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The gate message shows the gate's state: a pending gate its escaped prompt, facts, tally,
// deadline and the three buttons; a decided one who decided, when, how and why, and only the
// link; a gate closed by its deadline is "Timed out".
func TestSlackGateMessageShowsTheGatesCurrentState(t *testing.T) {
	d := store.EventData{RunID: "R1", Runbook: "deploy-web", Environment: "prod", Repository: "acme/web"}
	deadline := time.Date(2026, 5, 12, 11, 0, 0, 0, time.UTC)
	at := deadline.Add(-time.Hour)
	alice := notify.SlackVote{Who: "Alice Example (slack:T1/U1)", Verdict: "approved", Channel: "slack", At: at}
	for _, tc := range []struct {
		name     string
		g        notify.SlackGate
		text     string
		want     []string
		not      []string
		buttons  int
		approveB bool
	}{
		{"pending", notify.SlackGate{ApprovalID: "a-1", Node: "approve", Prompt: "Ship <web> & co?", Status: "pending", ApprovalsRequired: 2,
			Deadline: deadline, URL: "https://rbook.example.com/approvals/a-1"},
			"Approval needed: approve (deploy-web)",
			[]string{"Ship &lt;web&gt; &amp; co?", "*Environment*\\nprod", "*Repository*\\nacme/web", "*Approvals*\\n0 of 2", "<!date^1778583600^", `"url":"https://rbook.example.com/approvals/a-1"`,
				`"text":"Approve","emoji":false},"action_id":"rbook_approve","value":"a-1"`},
			[]string{"Reason"}, 3, true},
		{"one vote", notify.SlackGate{ApprovalID: "a-1", Node: "approve", Status: "pending", ApprovalsRequired: 2, Approvals: 1, Votes: []notify.SlackVote{alice}},
			"Approval needed: approve (deploy-web)",
			[]string{"1 of 2: Alice Example (slack:T1/U1)", "Votes: Alice Example (slack:T1/U1) approved via slack"}, nil, 2, true},
		{"decided", notify.SlackGate{ApprovalID: "a-1", Node: "approve", Status: "approved", ApprovalsRequired: 2, Approvals: 2,
			Votes: []notify.SlackVote{alice, {Who: "Bob Builder (bob)", Verdict: "approved", Channel: "rpc", At: at}}, DecidedBy: "Alice Example (slack:T1/U1), Bob Builder (bob)",
			DecidedAt: at, Channel: "rpc", Reason: "ship it", Deadline: deadline, URL: "https://rbook.example.com/approvals/a-1"},
			"Approved: approve (deploy-web) by Alice Example (slack:T1/U1), Bob Builder (bob)",
			[]string{"*Approved* by Alice Example (slack:T1/U1), Bob Builder (bob) via rpc, <!date^", "Reason: ship it"},
			[]string{"rbook_approve", "rbook_reject", "*Deadline*"}, 1, false},
		{"timed out", notify.SlackGate{ApprovalID: "a-1", Node: "approve", Status: "rejected", ApprovalsRequired: 1, DecidedBy: "system", Channel: "deadline", Reason: "deadline passed"},
			"Timed out: approve (deploy-web) by system", []string{"*Timed out* by system via deadline"}, []string{"rbook_approve"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, blocks := notify.SlackGateMessage(d, tc.g)
			js := blocksJSON(t, blocks)
			if text != tc.text {
				t.Errorf("text = %q, want %q", text, tc.text)
			}
			for _, w := range tc.want {
				if !strings.Contains(js, w) {
					t.Errorf("blocks lack %s:\n%s", w, js)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(js, w) {
					t.Errorf("blocks hold %s:\n%s", w, js)
				}
			}
			if n := strings.Count(js, `"type":"button"`); n != tc.buttons {
				t.Errorf("%d buttons, want %d:\n%s", n, tc.buttons, js)
			}
		})
	}
}

// Web API refusals that retrying cannot fix (a revoked token, a missing channel) are
// permanent; others are retried; neither error names the token.
func TestSlackSendErrorsSayWhetherRetryingHelps(t *testing.T) {
	fake := slackfake.New(slackToken, "C0123ABCD")
	defer fake.Close()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name, token, fail string
		permanent         bool
	}{
		{"wrong token", "xoxb-wrong-token", "", true},
		{"channel archived", slackToken, "is_archived", true},
		{"Slack failing", slackToken, "internal_error", false},
		{"rate limited", slackToken, "ratelimited", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := notify.NewSlack("s", "C0123ABCD", tc.token, slackSecret, fake.APIURL())
			sl.Bind(st, func(context.Context, string) (notify.SlackGate, error) {
				return notify.SlackGate{ApprovalID: "a-1", Node: "approve", Status: "pending", ApprovalsRequired: 1}, nil
			})
			if tc.fail != "" {
				fake.FailNext("chat.postMessage", tc.fail)
			}
			_, err := sl.Send(context.Background(), notify.Message{ID: "gate.opened:a-1", Kind: store.EventGateOpened,
				Data: store.EventData{RunID: "R1", Runbook: "deploy", Gate: &store.GateData{ApprovalID: "a-1"}}})
			if err == nil || notify.IsPermanent(err) != tc.permanent || strings.Contains(err.Error(), "xoxb-") {
				t.Fatalf("Send = %v (permanent %v), want permanent %v", err, notify.IsPermanent(err), tc.permanent)
			}
		})
	}
	if n := len(fake.Messages()); n != 0 {
		t.Fatalf("%d messages posted", n)
	}
}
