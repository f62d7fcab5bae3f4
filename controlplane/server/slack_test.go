package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/approval"
	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/notify/slackfake"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The Slack tests' app: its bot token, signing secret and channel, and its users.
const (
	slackToken   = "xoxb-1111-2222-fake-bot-token"
	slackSecret  = "8f742231b10e8888abcd99yyyzzz85a5"
	slackChannel = "C0RBOOK01"
)

var (
	slackAlice = slackfake.User{Team: "T0001", ID: "U0001", Name: "alice"}
	slackBob   = slackfake.User{Team: "T0001", ID: "U0002", Name: "bob"}
	slackCarol = slackfake.User{Team: "T0001", ID: "U0404", Name: "carol"}
)

// slackPeople links alice's auth-file identities and Slack user, and bob's; carol's Slack
// user is linked to nobody.
const slackPeople = `people:
  - id: alice
    name: Alice Example
    identities: [alice, alice-ci, "slack:T0001/U0001"]
  - id: bob
    name: Bob Builder
    identities: [bob, "slack:T0001/U0002"]
`

const slackAuthFile = "exec executor " + execToken + "\nalice-ci executor " + aliceCIToken + "\nalice approver " + aliceToken +
	"\nbob approver " + bobToken + "\n"

// slackPlane is an in-process control plane whose notifications go to a fake Slack.
type slackPlane struct {
	URL  string
	st   *store.Store
	db   string
	fake *slackfake.Fake
	log  *syncBuffer
	exec clients
}

// slackOptions says how to start a slackPlane: gates need approvals; policy, when set, is
// the whole gate policy file instead; routes is the config's routing ("" sends every event to
// the slack channel); db and fake, when set, are another replica's database file and fake Slack.
type slackOptions struct {
	approvals int
	policy    string
	routes    string
	db        string
	fake      *slackfake.Fake
}

// startSlackPlane serves a control plane with gates needing approvals, the people above, and
// one slack channel (every event) posting to a fake Slack.
func startSlackPlane(t *testing.T, approvals int) *slackPlane {
	t.Helper()
	return startSlackPlaneWith(t, slackOptions{approvals: approvals})
}

func startSlackPlaneWith(t *testing.T, o slackOptions) *slackPlane {
	t.Helper()
	fake := o.fake
	if fake == nil {
		fake = slackfake.New(slackToken, slackChannel)
		t.Cleanup(fake.Close)
	}
	if o.routes == "" {
		o.routes = "default:\n  channels: [ops-slack]\n"
	}
	if o.db == "" {
		o.db = filepath.Join(t.TempDir(), "cp.db")
	}
	text := fmt.Sprintf("channels:\n  - name: ops-slack\n    kind: slack\n    channel: %s\n    bot_token_env: SLACK_BOT_TOKEN\n"+
		"    signing_secret_env: SLACK_SIGNING_SECRET\n    api_url: %s\n", slackChannel, fake.APIURL()) + o.routes
	env := map[string]string{"SLACK_BOT_TOKEN": slackToken, "SLACK_SIGNING_SECRET": slackSecret}
	cfg, err := notify.ParseConfig([]byte(text), "notify.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	dir, err := people.Parse([]byte(slackPeople), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.ParseAuth(strings.NewReader(slackAuthFile), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	if o.policy == "" {
		o.policy = fmt.Sprintf("rules:\n  - approvals: %d\n", o.approvals)
	}
	policy, err := approval.ParseGatePolicy([]byte(o.policy), "gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := &slackPlane{st: openStore(t, o.db), db: o.db, fake: fake, log: &syncBuffer{}}
	h, err := server.New(p.st, server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.NewTextHandler(p.log, nil)),
		Notify: &server.NotifyOptions{Config: cfg}, People: dir, Auth: auth, GatePolicy: policy, PublicURL: "https://rbook.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p.URL = serveHandler(t, h)
	p.exec = newClients(p.URL, withBearer(execToken))
	return p
}

// openSlackGate starts run id as executor token and opens its gate (with form, if any:
// openForm);
// it waits for the gate's Slack message and returns the gate and that message.
func (p *slackPlane) openSlackGate(t *testing.T, token, id string, form []*rbookv1.InputField) (*rbookv1.Approval, slackfake.Message) {
	t.Helper()
	a, _ := openForm(t, newClients(p.URL, withBearer(token)), id, form)
	return a, p.waitMessage(t, a.GetApprovalId(), func(m slackfake.Message) bool { return true })
}

// waitMessage waits until the top-level message carrying approval id's buttons satisfies
// cond, and returns it.
func (p *slackPlane) waitMessage(t *testing.T, id string, cond func(m slackfake.Message) bool) slackfake.Message {
	t.Helper()
	var got slackfake.Message
	find := func(f *slackfake.Fake) bool {
		for _, m := range f.TopLevel() {
			if strings.Contains(string(m.Blocks), id) {
				got = m
				return cond(m)
			}
		}
		return false
	}
	if !p.fake.WaitFor(20*time.Second, find) {
		t.Fatalf("no Slack message for %s as wanted; last seen:\n%s\nlog:\n%s", id, got.AllText(), p.log.String())
	}
	return got
}

// press sends a signed button press by u on message m.
func (p *slackPlane) press(t *testing.T, u slackfake.User, m slackfake.Message, action, value string) (int, string) {
	t.Helper()
	return p.send(t, slackfake.BlockActions(u, m.Channel, m.TS, action, value))
}

// send signs payload with the app's secret now and posts it to the interaction endpoint.
func (p *slackPlane) send(t *testing.T, payload any) (int, string) {
	t.Helper()
	req, err := slackfake.NewRequest(p.URL+server.SlackInteractionsPath, slackSecret, time.Now().Unix(), payload)
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := req.Send(http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(body)
}

// waitEphemeral waits for an ephemeral message to u containing want.
func (p *slackPlane) waitEphemeral(t *testing.T, u slackfake.User, want string) {
	t.Helper()
	ok := p.fake.WaitFor(10*time.Second, func(f *slackfake.Fake) bool {
		return slices.ContainsFunc(f.Ephemerals(), func(e slackfake.Ephemeral) bool { return e.User == u.ID && strings.Contains(e.Text, want) })
	})
	if !ok {
		t.Fatalf("no ephemeral message to %s containing %q; got %+v", u.ID, want, p.fake.Ephemerals())
	}
}

func (p *slackPlane) approval(t *testing.T, id string) store.Approval {
	t.Helper()
	a, err := p.st.GetApproval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// modal is a views.open call's modal as the tests read it.
type modal struct {
	CallbackID      string `json:"callback_id"`
	PrivateMetadata string `json:"private_metadata"`
	Blocks          []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Optional bool   `json:"optional"`
	} `json:"blocks"`
}

// pressForModal presses action on message m as u and returns the modal it opened.
func (p *slackPlane) pressForModal(t *testing.T, u slackfake.User, m slackfake.Message, action, id string) modal {
	t.Helper()
	n := len(p.fake.Views())
	p.press(t, u, m, action, id)
	if !p.fake.WaitFor(10*time.Second, func(f *slackfake.Fake) bool { return len(f.Views()) == n+1 }) {
		t.Fatalf("no modal opened; ephemerals %+v", p.fake.Ephemerals())
	}
	var view modal
	if err := json.Unmarshal(p.fake.Views()[n].View, &view); err != nil {
		t.Fatal(err)
	}
	return view
}

func buttonIDs(m slackfake.Message) []string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.ActionID)
	}
	return out
}

// A 2-of-N gate gets one Slack message with its page's link and Approve/Reject buttons
// carrying the approval id; alice's Slack approval shows "1 of 2: Alice Example (…)"; bob's
// RPC approval decides it and the message names both, with no buttons left; the run's end
// is a reply in the message's thread.
func TestSlackMessageIsPostedOnceAndUpdatedInPlaceAsTheGateIsDecided(t *testing.T) {
	p := startSlackPlane(t, 2)
	a, m := p.openSlackGate(t, execToken, "R1", nil)
	id := a.GetApprovalId()
	if !slices.Equal(buttonIDs(m), []string{notify.SlackActionOpen, notify.SlackActionApprove, notify.SlackActionReject}) {
		t.Fatalf("buttons = %+v", m.Buttons())
	}
	for _, b := range m.Buttons() {
		if b.Value != id {
			t.Errorf("button %s carries %q, want the approval id %s", b.ActionID, b.Value, id)
		}
	}
	text := m.AllText()
	for _, want := range []string{"Approval needed: approve (demo)", "0 of 2", "Deploy?", "*Run*\nR1", "*Deadline*"} {
		if !strings.Contains(text, want) {
			t.Errorf("message lacks %q:\n%s", want, text)
		}
	}
	if m.Buttons()[0].URL != "https://rbook.example.com/approvals/"+id {
		t.Errorf("link button URL = %q", m.Buttons()[0].URL)
	}

	if code, body := p.press(t, slackAlice, m, notify.SlackActionApprove, id); code != http.StatusOK {
		t.Fatalf("alice's press: %d %s", code, body)
	}
	p.waitMessage(t, id, func(m slackfake.Message) bool {
		return strings.Contains(m.AllText(), "1 of 2: Alice Example (slack:T0001/U0001)")
	})
	if v := p.approval(t, id).Votes; len(v) != 1 || v[0].Source != "slack" || v[0].Person != "alice" {
		t.Fatalf("votes after alice's press = %+v; want one slack vote by the person alice", v)
	}

	bob := newClients(p.URL, withBearer(bobToken))
	if _, err := bob.apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id, Reason: "ship it"}); err != nil {
		t.Fatal(err)
	}
	m = p.waitMessage(t, id, func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "*Approved* by") })
	text = m.AllText()
	if !strings.Contains(text, "Alice Example (slack:T0001/U0001), Bob Builder (bob) via rpc") || !strings.Contains(text, "Reason: ship it") {
		t.Errorf("decided message does not say who decided, how and why:\n%s", text)
	}
	if !slices.Equal(buttonIDs(m), []string{notify.SlackActionOpen}) {
		t.Errorf("decided message buttons = %v; want only the link", buttonIDs(m))
	}
	if n := len(p.fake.TopLevel()); n != 1 {
		t.Errorf("%d top-level messages; want one per gate", n)
	}

	if _, err := p.exec.runs.RecordTransitions(context.Background(), &rbookv1.RecordTransitionsRequest{OwnerId: testOwner,
		Epoch: epochOf(t, p.exec, "R1"), Transitions: []*rbookv1.Transition{transition("R1", 1, 0), transition("R1", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)}}); err != nil {
		t.Fatal(err)
	}
	if !p.fake.WaitFor(10*time.Second, func(f *slackfake.Fake) bool { return len(f.Replies(m.TS)) == 1 }) {
		t.Fatalf("no threaded reply for the run's end; messages %+v", p.fake.Messages())
	}
	if r := p.fake.Replies(m.TS)[0]; !strings.Contains(r.Text, "R1") || !strings.Contains(r.Text, "succeeded") {
		t.Errorf("run reply = %q", r.Text)
	}
}

// The interaction endpoint acts only on a request signed with the app's secret within five
// minutes, once: a forged, stale, unsigned or replayed request changes nothing (401, or 200
// for the replay), and the refusal is logged in one line without the secret or the body.
func TestForgedStaleUnsignedAndReplayedSlackRequestsChangeNothing(t *testing.T) {
	p := startSlackPlane(t, 2)
	a, m := p.openSlackGate(t, execToken, "R1", nil)
	id := a.GetApprovalId()
	url := p.URL + server.SlackInteractionsPath
	payload := slackfake.BlockActions(slackAlice, m.Channel, m.TS, notify.SlackActionApprove, id)
	now := time.Now().Unix()
	good, err := slackfake.NewRequest(url, slackSecret, now, payload)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := slackfake.NewRequest(url, "not-the-signing-secret-at-all", now, payload)
	stale, _ := slackfake.NewRequest(url, slackSecret, now-6*60, payload)
	unsigned := &slackfake.Request{URL: url, Body: good.Body}
	tampered := &slackfake.Request{URL: url, Body: []byte(strings.Replace(string(good.Body), "U0001", "U0002", 1)), Timestamp: now, Signature: good.Signature}
	for _, tc := range []struct {
		name string
		req  *slackfake.Request
		code int
		log  string
	}{
		{"forged signature", forged, http.StatusUnauthorized, "the signature does not match"},
		{"stale timestamp", stale, http.StatusUnauthorized, "more than five minutes"},
		{"missing headers", unsigned, http.StatusUnauthorized, "is missing"},
		{"body changed after signing", tampered, http.StatusUnauthorized, "the signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, err := tc.req.Send(http.DefaultClient)
			if err != nil || code != tc.code {
				t.Fatalf("status %d, %v; want %d", code, err, tc.code)
			}
			if v := p.approval(t, id).Votes; len(v) != 0 {
				t.Fatalf("votes = %+v; want none", v)
			}
			if !strings.Contains(p.log.String(), tc.log) {
				t.Fatalf("log lacks %q:\n%s", tc.log, p.log.String())
			}
		})
	}
	if code, _, err := good.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("signed request: %d, %v", code, err)
	}
	if v := p.approval(t, id).Votes; len(v) != 1 {
		t.Fatalf("votes after the signed request = %+v; want alice's", v)
	}
	ephemerals := len(p.fake.Ephemerals())
	if code, _, err := good.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("replay: %d, %v; want 200", code, err)
	}
	if v := p.approval(t, id).Votes; len(v) != 1 || len(p.fake.Ephemerals()) != ephemerals {
		t.Fatalf("the replay changed something: votes %+v, ephemerals %+v", v, p.fake.Ephemerals())
	}
	logs := p.log.String()
	if !strings.Contains(logs, "slack interaction replay ignored") {
		t.Errorf("the replay is not logged:\n%s", logs)
	}
	for _, secret := range []string{slackSecret, slackToken, "payload=", forged.Signature} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
}

// A Slack user linked to no person is told, to them only, how to get linked; nothing is
// counted.
func TestUnlinkedSlackUserIsToldHowToGetLinkedAndNotCounted(t *testing.T) {
	p := startSlackPlane(t, 1)
	a, m := p.openSlackGate(t, execToken, "R1", nil)
	if code, _ := p.press(t, slackCarol, m, notify.SlackActionApprove, a.GetApprovalId()); code != http.StatusOK {
		t.Fatalf("press: %d", code)
	}
	p.waitEphemeral(t, slackCarol, people.NotLinkedMessage("slack:T0001/U0404"))
	if got := p.approval(t, a.GetApprovalId()); got.Status != store.ApprovalPending || len(got.Votes) != 0 {
		t.Fatalf("gate after an unlinked user's press = %s with %d votes; want pending, none", got.Status, len(got.Votes))
	}
}

// Refusals reach the person who pressed, only: approving twice (the same person through Slack
// and then their token counts once), approving a run your own identity started (four-eyes,
// through another identity of the same person), and pressing on a gate already decided.
func TestSlackRefusalsAreToldOnlyToThePersonAndCountNothing(t *testing.T) {
	p := startSlackPlane(t, 2)
	a, m := p.openSlackGate(t, execToken, "R1", nil)
	id := a.GetApprovalId()
	p.press(t, slackAlice, m, notify.SlackActionApprove, id)
	p.waitMessage(t, id, func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "1 of 2") })
	p.press(t, slackAlice, m, notify.SlackActionApprove, id)
	p.waitEphemeral(t, slackAlice, "You already approved this gate")
	alice := newClients(p.URL, withBearer(aliceToken))
	res, err := alice.apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id})
	if err != nil || len(res.GetApproval().GetVotes()) != 1 || res.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING {
		t.Fatalf("alice again with her token: %v, %v; want still 1 of 2", res, err)
	}

	own, om := p.openSlackGate(t, aliceCIToken, "R2", nil)
	p.press(t, slackAlice, om, notify.SlackActionApprove, own.GetApprovalId())
	p.waitEphemeral(t, slackAlice, "four-eyes")
	if v := p.approval(t, own.GetApprovalId()).Votes; len(v) != 0 {
		t.Fatalf("four-eyes refusal counted: %+v", v)
	}
	if _, err := newClients(p.URL, withBearer(bobToken)).apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id}); err != nil {
		t.Fatal(err)
	}
	p.press(t, slackAlice, m, notify.SlackActionApprove, id)
	p.waitEphemeral(t, slackAlice, "This gate was already approved by")
	for _, e := range p.fake.Ephemerals() {
		if e.User != slackAlice.ID {
			t.Errorf("an ephemeral went to %s: %+v", e.User, e)
		}
	}
}

// A Slack user whose person the gate's policy does not name is refused on both buttons, and
// a press on a gate that timed out is refused: each is told only to the user who pressed (an
// ephemeral message saying what happened and what to do) and counts nothing
// (docs/slack.md, "Deciding in Slack").
func TestSlackRefusalsOfANotAllowedApproverAndOfATimedOutGateCountNothing(t *testing.T) {
	p := startSlackPlaneWith(t, slackOptions{policy: "rules:\n  - approvers: [\"person:alice\"]\n"})
	ctx := context.Background()

	a, m := p.openSlackGate(t, execToken, "R1", nil)
	id := a.GetApprovalId()
	p.press(t, slackBob, m, notify.SlackActionApprove, id)
	p.waitEphemeral(t, slackBob, "Only person:alice may decide this gate; you are not one of them: ask one of them to decide it.")
	view := p.pressForModal(t, slackBob, m, notify.SlackActionReject, id)
	p.send(t, slackfake.ViewSubmission(slackBob, view.CallbackID, view.PrivateMetadata,
		map[string]map[string]any{notify.SlackReasonBlock: slackfake.TextValue("not yet")}))
	p.waitEphemeral(t, slackBob, "Not counted: slack:T0001/U0002 may not decide approval "+id+": gates.yaml rule 1 (line 2) allows only person:alice; ask one of them to decide it")
	if got := p.approval(t, id); got.Status != store.ApprovalPending || len(got.Votes) != 0 {
		t.Fatalf("gate after bob's presses = %s with votes %+v; want pending, none", got.Status, got.Votes)
	}

	startRun(t, p.exec, "R2")
	res, err := p.exec.apps.RequestApproval(ctx, &rbookv1.RequestApprovalRequest{OwnerId: testOwner, Epoch: epochOf(t, p.exec, "R2"),
		RunId: "R2", StepName: "approve", StepIndex: 1, Prompt: "Deploy?", Deadline: timestamppb.New(time.Now().Add(1500 * time.Millisecond)),
		PlanDigest: digest("plan")})
	if err != nil {
		t.Fatal(err)
	}
	late := res.GetApproval()
	lm := p.waitMessage(t, late.GetApprovalId(), func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "Timed out") })
	p.press(t, slackAlice, lm, notify.SlackActionApprove, late.GetApprovalId())
	deadline := late.GetDeadline().AsTime().UTC().Format(time.RFC3339)
	p.waitEphemeral(t, slackAlice, "This gate timed out at its deadline "+deadline+" and was rejected, so it can no longer be decided; starting the run again opens a new gate.")
	if got := p.approval(t, late.GetApprovalId()); got.Status != store.ApprovalRejected || got.DecidedBySource != store.SourceDeadline || len(got.Votes) != 0 {
		t.Fatalf("timed-out gate after alice's press = %s by %q with votes %+v; want rejected by the deadline, no votes", got.Status, got.DecidedBySource, got.Votes)
	}
	want := map[string]int{slackBob.ID: 2, slackAlice.ID: 1}
	for _, e := range p.fake.Ephemerals() {
		want[e.User]--
	}
	for u, n := range want {
		if n != 0 {
			t.Errorf("user %s got %d ephemerals more than expected: %+v", u, -n, p.fake.Ephemerals())
		}
	}
}

// A gate with approver inputs opens a form (views.open) with an input block per field;
// an invalid value is answered with response_action "errors" naming its block and nothing
// is counted; valid values are counted with the vote.
func TestSlackApproveOpensTheInputFormAndNamesAnInvalidField(t *testing.T) {
	p := startSlackPlane(t, 1)
	a, m := p.openSlackGate(t, execToken, "R1", reviewForm)
	id := a.GetApprovalId()
	view := p.pressForModal(t, slackBob, m, notify.SlackActionApprove, id)
	var inputs []string
	for _, b := range view.Blocks {
		if b.Type == "input" {
			inputs = append(inputs, fmt.Sprintf("%s optional=%v", b.BlockID, b.Optional))
		}
	}
	want := []string{"input_target optional=false", "input_ticket optional=true", "input_replicas optional=true", "input_dry_run optional=true"}
	if view.CallbackID != notify.SlackModalApprove || !slices.Equal(inputs, want) {
		t.Fatalf("form %s with %v; want %v", view.CallbackID, inputs, want)
	}
	submit := func(values map[string]map[string]any) (int, string) {
		return p.send(t, slackfake.ViewSubmission(slackBob, view.CallbackID, view.PrivateMetadata, values))
	}
	code, body := submit(map[string]map[string]any{"input_target": slackfake.Selected("blue"), "input_ticket": slackfake.TextValue("not a ticket")})
	var resp struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK || resp.ResponseAction != "errors" || resp.Errors["input_ticket"] == "" {
		t.Fatalf("invalid ticket: %d %s; want response_action errors on input_ticket", code, body)
	}
	if v := p.approval(t, id).Votes; len(v) != 0 {
		t.Fatalf("an invalid form was counted: %+v", v)
	}
	code, body = submit(map[string]map[string]any{"input_target": slackfake.Selected("green"), "input_ticket": slackfake.TextValue("OPS-7"),
		"input_dry_run": slackfake.Selected("true")})
	if code != http.StatusOK || body != "" {
		t.Fatalf("valid form: %d %q; want 200 and an empty body (the modal closes)", code, body)
	}
	got := p.approval(t, id)
	if got.Status != store.ApprovalApproved || got.InputValues["target"] != "green" || got.InputValues["replicas"] != "3" || got.InputValues["dry_run"] != "true" {
		t.Fatalf("gate = %s with %v; want approved with the form's values and defaults", got.Status, got.InputValues)
	}
}

// Reject opens a form for the reason; submitting it rejects the gate with that reason, and
// the message says so.
func TestSlackRejectAsksForAReasonAndRejects(t *testing.T) {
	p := startSlackPlane(t, 1)
	a, m := p.openSlackGate(t, execToken, "R1", nil)
	id := a.GetApprovalId()
	view := p.pressForModal(t, slackBob, m, notify.SlackActionReject, id)
	if view.CallbackID != notify.SlackModalReject || len(view.Blocks) != 1 || view.Blocks[0].BlockID != notify.SlackReasonBlock {
		t.Fatalf("reject modal = %+v; want the reason alone (this gate has no rewind targets)", view)
	}
	code, body := p.send(t, slackfake.ViewSubmission(slackBob, view.CallbackID, view.PrivateMetadata,
		map[string]map[string]any{notify.SlackReasonBlock: slackfake.TextValue("")}))
	if code != http.StatusOK || !strings.Contains(body, `"reason"`) {
		t.Fatalf("empty reason: %d %s; want an error on the reason block", code, body)
	}
	p.send(t, slackfake.ViewSubmission(slackBob, view.CallbackID, view.PrivateMetadata,
		map[string]map[string]any{notify.SlackReasonBlock: slackfake.TextValue("the canary is red")}))
	m = p.waitMessage(t, id, func(m slackfake.Message) bool {
		return strings.Contains(m.AllText(), "*Rejected* by Bob Builder (slack:T0001/U0002) via slack")
	})
	if !strings.Contains(m.AllText(), "Reason: the canary is red") {
		t.Errorf("message lacks the reason:\n%s", m.AllText())
	}
}

// A gate whose node declares rewind targets offers them in the reject form; the chosen one
// is the rejection's redo_from, and the message says where the run went back to.
func TestSlackRejectCanSendTheRunBackToARewindTarget(t *testing.T) {
	p := startSlackPlane(t, 1)
	a, _ := openRewindGate(t, p.exec, "R-pb", []string{"build", "test"})
	id := a.GetApprovalId()
	m := p.waitMessage(t, id, func(slackfake.Message) bool { return true })
	view := p.pressForModal(t, slackBob, m, notify.SlackActionReject, id)
	var blocks []string
	for _, b := range view.Blocks {
		blocks = append(blocks, fmt.Sprintf("%s optional=%v", b.BlockID, b.Optional))
	}
	if !slices.Equal(blocks, []string{"reason optional=false", "redo_from optional=true"}) {
		t.Fatalf("reject form blocks %v; want the reason and an optional send-back menu", blocks)
	}
	p.send(t, slackfake.ViewSubmission(slackBob, view.CallbackID, view.PrivateMetadata, map[string]map[string]any{
		notify.SlackReasonBlock: slackfake.TextValue("add a test"), notify.SlackRedoBlock: slackfake.Selected("build")}))
	if got := p.approval(t, id); got.Status != store.ApprovalRejected || got.RedoFrom != "build" || got.Reason != "add a test" {
		t.Fatalf("gate = %s, redo_from %q, reason %q; want rejected back to build", got.Status, got.RedoFrom, got.Reason)
	}
	p.waitMessage(t, id, func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "Sent back to build") })
}

// An update whose gate message is not posted yet (its gate.opened delivery failed and waits
// for a retry) fails and is retried, so the gate still has one message, showing its
// current state.
func TestSlackUpdateWaitsForTheGateMessage(t *testing.T) {
	p := startSlackPlane(t, 2)
	p.fake.FailNext("chat.postMessage", "internal_error")
	c := p.exec
	startRun(t, c, "R1")
	a, _ := gate(t, c, "R1", time.Hour)
	id := a.GetApprovalId()
	alice := newClients(p.URL, withBearer(aliceToken))
	if _, err := alice.apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id}); err != nil {
		t.Fatal(err)
	}
	p.waitMessage(t, id, func(m slackfake.Message) bool { return strings.Contains(m.AllText(), "1 of 2: Alice Example (alice)") })
	if n := len(p.fake.TopLevel()); n != 1 {
		t.Fatalf("%d messages; want one", n)
	}
	waitDeliveries(t, p.st, id, "delivered")
	if !strings.Contains(p.log.String(), "not posted yet") && !strings.Contains(p.log.String(), "internal_error") {
		t.Errorf("no failed attempt logged:\n%s", p.log.String())
	}
}

// A replay is recognised on another replica: the request acted on by one control plane,
// sent again to a second one on the same database, answers 200 and changes nothing.
func TestSlackReplayToAnotherReplicaChangesNothing(t *testing.T) {
	a := startSlackPlane(t, 2)
	b := startSlackPlaneWith(t, slackOptions{approvals: 2, db: a.db, fake: a.fake})
	ap, m := a.openSlackGate(t, execToken, "R1", nil)
	id := ap.GetApprovalId()
	req, err := slackfake.NewRequest(a.URL+server.SlackInteractionsPath, slackSecret, time.Now().Unix(),
		slackfake.BlockActions(slackAlice, m.Channel, m.TS, notify.SlackActionApprove, id))
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := req.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("to replica a: %d %s %v", code, body, err)
	}
	req.URL = b.URL + server.SlackInteractionsPath
	if code, body, err := req.Send(http.DefaultClient); err != nil || code != http.StatusOK {
		t.Fatalf("replayed to replica b: %d %s %v; want 200", code, body, err)
	}
	if v := a.approval(t, id).Votes; len(v) != 1 {
		t.Fatalf("votes = %+v; want alice's once", v)
	}
	if !strings.Contains(b.log.String(), "slack interaction replay ignored") {
		t.Fatalf("replica b did not log the replay:\n%s", b.log.String())
	}
}

// Routing decides what the channel gets: with only gate.decided routed to Slack, the gate's
// first event there posts its message (there is no gate.opened to wait for), showing who
// decided.
func TestSlackChannelGetsOnlyTheEventsItsRouteSends(t *testing.T) {
	p := startSlackPlaneWith(t, slackOptions{approvals: 1, routes: "routes:\n  - events: [gate.decided]\n    channels: [ops-slack]\n"})
	startRun(t, p.exec, "R1")
	a, _ := gate(t, p.exec, "R1", time.Hour)
	id := a.GetApprovalId()
	bob := newClients(p.URL, withBearer(bobToken))
	if _, err := bob.apps.Approve(context.Background(), &rbookv1.ApproveRequest{ApprovalId: id, Reason: "fine"}); err != nil {
		t.Fatal(err)
	}
	m := p.waitMessage(t, id, func(m slackfake.Message) bool {
		return strings.Contains(m.AllText(), "*Approved* by Bob Builder (bob) via rpc")
	})
	if m.Updates != 0 || len(p.fake.Messages()) != 1 {
		t.Fatalf("messages %+v; want the one posted at the decision, never updated", p.fake.Messages())
	}
}
