package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/notify/smtptest"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// teamsReceiver is a Teams workflow webhook ("When a Teams webhook request is received"):
// it keeps each posted body and answers 202, as Teams does.
type teamsReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	arrived chan struct{}
}

func newTeamsReceiver(t *testing.T) *teamsReceiver {
	t.Helper()
	r := &teamsReceiver{arrived: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		r.arrived <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// waitCard waits for the first card posted (at most 30 s) and returns its title and facts.
func (r *teamsReceiver) waitCard(t *testing.T) (string, map[string]string) {
	t.Helper()
	select {
	case <-r.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the Teams receiver got no card")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var card struct {
		Attachments []struct {
			Content struct {
				Body []struct {
					Text  string `json:"text"`
					Facts []struct{ Title, Value string }
				} `json:"body"`
			} `json:"content"`
		} `json:"attachments"`
	}
	b, _ := json.Marshal(r.bodies[0])
	if err := json.Unmarshal(b, &card); err != nil || len(card.Attachments) != 1 || len(card.Attachments[0].Content.Body) != 2 {
		t.Fatalf("card %s: %v", b, err)
	}
	body := card.Attachments[0].Content.Body
	facts := map[string]string{}
	for _, f := range body[1].Facts {
		facts[f.Title] = f.Value
	}
	return body[0].Text, facts
}

// escalationReceivers are the four channels' receivers of the escalation tests.
type escalationReceivers struct {
	hooks *hookReceiver
	teams *teamsReceiver
	mail  *smtptest.Sink
	addr  string
	slack *slackfake.Fake
}

// serveEscalating serves a control plane on the database file db whose gates need two
// approvals; its one route sends gate.opened to Slack and escalates after the given delay
// to every channel (webhook, Teams, email, Slack). It returns its URL, the server and its store.
func serveEscalating(t *testing.T, db, after string, r escalationReceivers) (string, *server.Server, *store.Store) {
	t.Helper()
	text := fmt.Sprintf(`channels:
  - {name: hooks, kind: webhook, url: %q, secret_env: HOOK_SECRET}
  - {name: teams, kind: teams, url_env: TEAMS_URL}
  - {name: mail, kind: email, smtp: %q, from: rbook@example.com, to: [ops@example.com]}
  - {name: ops-slack, kind: slack, channel: %s, bot_token_env: SLACK_BOT_TOKEN, signing_secret_env: SLACK_SIGNING_SECRET, api_url: %q}
routes:
  - events: [gate.opened]
    channels: [ops-slack]
    escalate:
      - {after: %s, channels: [hooks, teams, mail, ops-slack]}
`, r.hooks.srv.URL, r.addr, slackChannel, r.slack.APIURL(), after)
	env := map[string]string{"HOOK_SECRET": hookSecret, "TEAMS_URL": r.teams.srv.URL, "SLACK_BOT_TOKEN": slackToken, "SLACK_SIGNING_SECRET": slackSecret}
	cfg, err := notify.ParseConfig([]byte(text), "notify.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	policy, err := approval.ParseGatePolicy([]byte("rules:\n  - approvals: 2\n"), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.ParseAuth(strings.NewReader(slackAuthFile), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(st, server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler),
		Notify: &server.NotifyOptions{Config: cfg}, GatePolicy: policy, Auth: auth, PublicURL: "https://rbook.example.com"})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); st.Close() })
	return serveHandler(t, h), h, st
}

// An escalation tells of the gate as it stands when the step fires, not as it opened: after
// one of two approvals, the webhook payload has 1 of 2 and the step, the Teams card and the
// mail are titled "escalated" with "1 of 2", and the gate's Slack message gets a thread reply
// saying it escalated. The gate opens and is voted on under a control plane whose step is an
// hour away; the next to start on the database, whose step is due, fires it.
func TestEscalationReportsTheGatesTallyWhenItFires(t *testing.T) {
	sink, addr := smtptest.Start(t)
	fake := slackfake.New(slackToken, slackChannel)
	t.Cleanup(fake.Close)
	r := escalationReceivers{hooks: newHookReceiver(t), teams: newTeamsReceiver(t), mail: sink, addr: addr, slack: fake}
	db := filepath.Join(t.TempDir(), "cp.db")

	url, first, st := serveEscalating(t, db, "1h", r)
	c := newClients(url, withBearer(execToken))
	startRun(t, c, "R1")
	a, tok := gate(t, c, "R1", 2*time.Hour)
	id := a.GetApprovalId()
	alice := newClients(url, withBearer(aliceToken))
	if _, err := alice.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok}); err != nil {
		t.Fatal(err)
	}
	waitDeliveries(t, st, id, "delivered") // the Slack message is posted and kept, so the next control plane updates it
	first.Close()
	st.Close()

	serveEscalating(t, db, "1ms", r)
	esc := "gate.escalated:" + id + ":1"
	r.hooks.waitFor(t, esc)
	r.hooks.mu.Lock()
	g := r.hooks.bodies[esc].Data.Gate
	r.hooks.mu.Unlock()
	if g == nil || g.Approvals != 1 || g.ApprovalsRequired != 2 || g.Status != "pending" || g.Escalation == nil ||
		g.Escalation.Step != 1 || g.Escalation.After != "1ms" {
		t.Errorf("webhook gate = %+v", g)
	}

	title, facts := r.teams.waitCard(t)
	if title != "Still waiting for approval: approve (demo), escalated (step 1, after 1ms)" || facts["Approvals"] != "1 of 2" {
		t.Errorf("Teams card %q, facts %v", title, facts)
	}

	mail := sink.WaitFor(t, 1)[0].Data
	for _, want := range []string{"Subject: Still waiting for approval: approve (demo), escalated (step 1, after 1ms)", "Approvals: 1 of 2"} {
		if !strings.Contains(mail, want) {
			t.Errorf("mail lacks %q:\n%s", want, mail)
		}
	}

	msg := fake.TopLevel()[0]
	if !fake.WaitFor(30*time.Second, func(f *slackfake.Fake) bool { return len(f.Replies(msg.TS)) == 1 }) {
		t.Fatalf("no escalation reply in the gate message's thread; calls %v", fake.Calls())
	}
	if reply := fake.Replies(msg.TS)[0].Text; reply != "Still waiting for approval: escalated (step 1, after 1ms)." {
		t.Errorf("thread reply %q", reply)
	}
}

// An escalation step's notify list — a person, a people-directory group and an address —
// is mailed by the step's email channel with the escalation, each at their email: identity
// and each once; the gate's opening, sent by the same channel, goes only to its to.
func TestEscalationStepMailsThePeopleItNames(t *testing.T) {
	sink, addr := smtptest.Start(t)
	cfg, err := notify.ParseConfig([]byte(fmt.Sprintf(`channels:
  - {name: mail, kind: email, smtp: %q, from: rbook@example.com, to: [ops@example.com]}
routes:
  - events: [gate.opened]
    channels: [mail]
    escalate:
      - {after: 1ms, channels: [mail], notify: [person:alice, group:oncall, email:pager@example.com]}
`, addr)), "notify.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(openStore(t, filepath.Join(t.TempDir(), "cp.db")), server.Options{Secret: []byte(testSecret),
		Logger: slog.New(slog.DiscardHandler), Notify: &server.NotifyOptions{Config: cfg}, People: gatePeople(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(serveHandler(t, h))
	startRun(t, c, "R1")
	gate(t, c, "R1", time.Hour)
	got := map[string][]string{}
	for _, m := range sink.WaitFor(t, 2) {
		subject := m.Data[strings.Index(m.Data, "Subject: ")+len("Subject: "):]
		got[subject[:strings.Index(subject, "\r\n")]] = m.To
	}
	want := map[string][]string{
		"Approval needed: approve (demo)": {"ops@example.com"},
		"Still waiting for approval: approve (demo), escalated (step 1, after 1ms)": {"ops@example.com", "alice@example.com",
			"dave@example.com", "pager@example.com"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mails by subject:\n%v\nwant:\n%v", got, want)
	}
}

// rbook serve warns about escalation notify entries that reach nobody, as it does for a gate
// policy's: a person the directory lacks or who has no email identity, a group whose members
// have none; the warning names the notification config's file and line.
func TestEscalationNotifyWarningsNameEntriesWithoutAnAddress(t *testing.T) {
	cfg, err := notify.ParseConfig([]byte(`channels:
  - {name: mail, kind: email, smtp: "127.0.0.1:25", from: rbook@example.com, to: [ops@example.com]}
routes:
  - channels: [mail]
    escalate:
      - {after: 1h, channels: [mail], notify: [person:alice, person:nomail]}
default:
  channels: [mail]
  escalate:
    - {after: 2h, channels: [mail], notify: [group:oncall, person:ghost, group:sre, email:pager@example.com]}
`), "notify.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	got := server.EscalationNotifyWarnings(cfg, gatePeople(t))
	want := []string{
		`notify.yaml:6: escalation step 1: notify "person:nomail" has no email: identity in the people directory, so it is mailed nothing`,
		`notify.yaml:10: escalation step 1: notify "person:ghost" is not a person of the people directory (--people), so it is mailed nothing`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
