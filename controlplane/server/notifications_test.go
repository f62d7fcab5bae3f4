package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/people"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// hookSecret is the receivers' Standard Webhooks signing secret.
var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("notification-test-secret-0123456789"))

// hookReceiver is a webhook receiver as the Standard Webhooks specification expects one to
// be written: it verifies each request with the specification's own Go library, answers
// 503 to the first failFirst requests (or to all while down), and de-duplicates on
// webhook-id (a redelivery of an accepted event is answered 200 and counted).
type hookReceiver struct {
	srv       *httptest.Server
	wh        *standardwebhooks.Webhook
	mu        sync.Mutex
	failFirst int
	down      bool
	requests  map[string]int // every request per webhook-id
	accepted  map[string]int // accepted (2xx) requests per webhook-id
	bodies    map[string]notify.WebhookBody
	order     []string // ids in the order first accepted
	badSig    int
	arrived   chan string // each newly accepted id
	// hold, when set before the first request, makes every request wait until it is
	// closed (a receiver that hangs).
	hold chan struct{}
}

func newHookReceiver(t testing.TB) *hookReceiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{wh: wh, requests: map[string]int{}, accepted: map[string]int{}, bodies: map[string]notify.WebhookBody{},
		arrived: make(chan string, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[id]++
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.badSig++
		http.Error(w, "bad signature: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if r.down || r.failFirst > 0 {
		r.failFirst--
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	r.accepted[id]++
	if r.accepted[id] > 1 {
		w.WriteHeader(http.StatusOK) // a duplicate: already processed
		return
	}
	var b notify.WebhookBody
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.bodies[id] = b
	r.order = append(r.order, id)
	w.WriteHeader(http.StatusNoContent)
	r.arrived <- id
}

// waitFor waits until every id in ids was accepted, at most 30 s.
func (r *hookReceiver) waitFor(t testing.TB, ids ...string) {
	t.Helper()
	r.waitForWithin(t, 30*time.Second, ids...)
}

// waitForWithin waits until every id in ids was accepted, at most d.
func (r *hookReceiver) waitForWithin(t testing.TB, d time.Duration, ids ...string) {
	t.Helper()
	deadline := time.After(d)
	for {
		r.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return r.accepted[id] > 0 })
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-r.arrived:
		case <-deadline:
			t.Fatalf("receiver never got %v (got %v)", missing, r.order)
		}
	}
}

// notifyConfig is a config sending every event to one webhook channel at url.
func notifyConfig(t testing.TB, url string) *notify.Config {
	t.Helper()
	text := fmt.Sprintf("channels:\n  - name: hooks\n    kind: webhook\n    url: %s\n    secret_env: HOOK_SECRET\ndefault:\n  channels: [hooks]\n", url)
	c, err := notify.ParseConfig([]byte(text), "notify.yaml", func(k string) (string, bool) { return hookSecret, k == "HOOK_SECRET" })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveNotifying serves a control plane over st with notifications to the receiver at url
// (or as o.Config says, when set) and returns its clients.
func serveNotifying(t testing.TB, st *store.Store, url string, o server.NotifyOptions, log *slog.Logger) clients {
	t.Helper()
	if o.Config == nil {
		o.Config = notifyConfig(t, url)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := server.New(st, server.Options{Secret: []byte(testSecret), Logger: log, Notify: &o, PublicURL: "https://rbook.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return newClients(serveHandler(t, h))
}

// serveNotifyConfig serves a control plane on a fresh database with the notification
// config text (every secret_env is hookSecret) and returns its clients.
func serveNotifyConfig(t testing.TB, text string) clients {
	t.Helper()
	cfg, err := notify.ParseConfig([]byte(text), "notify.yaml", func(string) (string, bool) { return hookSecret, true })
	if err != nil {
		t.Fatal(err)
	}
	return serveNotifying(t, openStore(t, filepath.Join(t.TempDir(), "cp.db")), "", server.NotifyOptions{Config: cfg}, nil)
}

// serveToReceiver serves a control plane on a fresh database that sends every event to a new
// webhook receiver, and returns the receiver, the database and the control plane's clients.
func serveToReceiver(t testing.TB) (*hookReceiver, *store.Store, clients) {
	t.Helper()
	rcv := newHookReceiver(t)
	st := openStore(t, filepath.Join(t.TempDir(), "cp.db"))
	return rcv, st, serveNotifying(t, st, rcv.srv.URL, server.NotifyOptions{}, nil)
}

func openStore(t testing.TB, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A gate's life and its run's end reach the webhook receiver once each, signed so the
// Standard Webhooks library verifies them, with the gate's page, prompt, deadline and
// M-of-N need on the opening and who decided, through which channel and why on the decision.
func TestWebhookReceiverGetsEachGateAndRunEventOnceSigned(t *testing.T) {
	rcv, _, c := serveToReceiver(t)
	ctx := context.Background()
	startRun(t, c, "R1")
	a, tok := gate(t, c, "R1", time.Hour)
	id := a.GetApprovalId()
	rcv.waitFor(t, "gate.opened:"+id)
	if _, err := c.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: "zed", Reason: "looks right"}); err != nil {
		t.Fatal(err)
	}
	record(t, c, transition("R1", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	record(t, c, transition("R1", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))
	rcv.waitFor(t, "gate.decided:"+id, "run.finished:R1")

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if want := []string{"gate.opened:" + id, "gate.decided:" + id, "run.finished:R1"}; !slices.Equal(rcv.order, want) || rcv.badSig != 0 {
		t.Fatalf("receiver got %v (%d bad signatures), want %v", rcv.order, rcv.badSig, want)
	}
	for id, n := range rcv.requests {
		if n != 1 {
			t.Errorf("%s was posted %d times, want once", id, n)
		}
	}
	opened := rcv.bodies["gate.opened:"+id]
	g := opened.Data.Gate
	if opened.Type != "gate.opened" || opened.Data.Runbook != "demo" || opened.Data.RunID != "R1" || g == nil || g.Prompt != "Deploy?" ||
		g.Deadline == "" || g.ApprovalsRequired != 1 || g.ApprovalURL != "https://rbook.example.com/approvals/"+id {
		t.Errorf("gate.opened body = %+v gate %+v", opened, g)
	}
	decided := rcv.bodies["gate.decided:"+id].Data.Gate
	if decided == nil || decided.Status != "approved" || decided.DecidedBy != "unverified:zed" || decided.Channel != "rpc" || decided.Reason != "looks right" {
		t.Errorf("gate.decided gate = %+v", decided)
	}
	if fin := rcv.bodies["run.finished:R1"]; fin.Data.Status != "succeeded" || fin.Data.Gate != nil {
		t.Errorf("run.finished body = %+v", fin)
	}
}

// A receiver that fails twice gets the event on the third attempt, with the same
// webhook-id each time (so it can de-duplicate), and the delivery records two failures.
func TestNotificationIsRetriedWithBackOffUntilTheReceiverTakesIt(t *testing.T) {
	rcv := newHookReceiver(t)
	rcv.failFirst = 2
	st := openStore(t, filepath.Join(t.TempDir(), "cp.db"))
	c := serveNotifying(t, st, rcv.srv.URL, server.NotifyOptions{RetryBase: 10 * time.Millisecond}, nil)
	startRun(t, c, "R1")
	a, _ := gate(t, c, "R1", time.Hour)
	ev := "gate.opened:" + a.GetApprovalId()
	rcv.waitFor(t, ev)
	rcv.mu.Lock()
	if rcv.requests[ev] != 3 || rcv.accepted[ev] != 1 {
		t.Errorf("requests for %s = %d (accepted %d), want 3 with the same id, 1 accepted", ev, rcv.requests[ev], rcv.accepted[ev])
	}
	rcv.mu.Unlock()
	list := waitDeliveries(t, st, a.GetApprovalId(), "delivered")
	if d := list[0]; d.Attempts != 2 || d.Channel != "hooks" || d.LastError != "" {
		t.Errorf("delivery = %+v, want 2 failed attempts before it was delivered", d)
	}
}

// waitDeliveries waits until every delivery of the gate's events is in state and returns them.
func waitDeliveries(t testing.TB, st *store.Store, approvalID, state string) []store.NotificationDelivery {
	t.Helper()
	ch, cancel := subscribeNotifications(st)
	defer cancel()
	deadline := time.After(30 * time.Second)
	for {
		list, err := st.ListNotificationDeliveries(context.Background(), store.NotificationDeliveryFilter{ApprovalID: approvalID})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 && !slices.ContainsFunc(list, func(d store.NotificationDelivery) bool { return d.State() != state }) {
			return list
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond): // delivery records publish no change
		case <-deadline:
			t.Fatalf("deliveries of %s never all %s: %+v", approvalID, state, list)
		}
	}
}

func subscribeNotifications(st *store.Store) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	unsub := st.Subscribe(func(store.Change) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	return ch, unsub
}

// A receiver that never takes the event: the delivery is given up after the bound, with a
// log line at error level and the reason visible in the store's delivery list.
func TestNotificationIsGivenUpAfterTheBoundAndShowsWhy(t *testing.T) {
	rcv := newHookReceiver(t)
	rcv.down = true
	var logs syncBuffer
	st := openStore(t, filepath.Join(t.TempDir(), "cp.db"))
	c := serveNotifying(t, st, rcv.srv.URL, server.NotifyOptions{RetryBase: 5 * time.Millisecond, MaxAttempts: 4},
		slog.New(slog.NewTextHandler(&logs, nil)))
	startRun(t, c, "R1")
	a, _ := gate(t, c, "R1", time.Hour)
	list := waitDeliveries(t, st, a.GetApprovalId(), "given_up")
	d := list[0]
	if d.Attempts != 4 || !strings.Contains(d.GivenUpReason, "gave up after 4 failed attempts") || !strings.Contains(d.GivenUpReason, "503") {
		t.Errorf("given-up delivery = %+v", d)
	}
	rcv.mu.Lock()
	if n := rcv.requests["gate.opened:"+a.GetApprovalId()]; n != 4 {
		t.Errorf("receiver saw %d attempts, want 4", n)
	}
	rcv.mu.Unlock()
	if out := logs.String(); !strings.Contains(out, "level=ERROR msg=\"notification delivery given up\"") || strings.Contains(out, "whsec_") {
		t.Errorf("log has no give-up line (or leaks the secret):\n%s", out)
	}
}

// An event committed by a control plane that died before delivering it is delivered by
// the next one to start on the database.
func TestEventCommittedBeforeARestartIsDeliveredAfterIt(t *testing.T) {
	rcv := newHookReceiver(t)
	path := filepath.Join(t.TempDir(), "cp.db")
	ctx := context.Background()
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	st.EnableNotificationOutbox() // as a notifying control plane does, whose loop then dies
	if _, _, err := st.StartRun(ctx, store.NewRun{RunID: "R1", PlaybookName: "demo", PlaybookHash: digest("plan"),
		SchemaHash8: "0123abcd", TotalSteps: 2, StartedBy: "tester", StartedAt: time.Now(), OwnerIDHash: store.OwnerIDHash(testOwner)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateApproval(ctx, store.NewApproval{ApprovalID: "ap-1", RunID: "R1", NodeID: "approve", StepIndex: 1,
		TokenHash: digest("tok"), RequestedAt: time.Now(), Deadline: time.Now().Add(time.Hour), PlanDigest: digest("plan"), Prompt: "Deploy?"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	serveNotifying(t, openStore(t, path), rcv.srv.URL, server.NotifyOptions{}, nil)
	rcv.waitFor(t, "gate.opened:ap-1")
}

// Two control planes on one PostgreSQL database, both notifying the same receiver: every
// event of gates opened and decided through either is posted once in all (the delivery
// claim), none lost.
func TestTwoReplicasDeliverEachEventOnce(t *testing.T) {
	dsn := newPGDatabase(t)
	rcv := newHookReceiver(t)
	stA, stB := openStore(t, dsn), openStore(t, dsn)
	a := serveNotifying(t, stA, rcv.srv.URL, server.NotifyOptions{}, nil)
	b := serveNotifying(t, stB, rcv.srv.URL, server.NotifyOptions{}, nil)
	ctx := context.Background()
	var want []string
	for i := range 8 {
		open, decide := a, b
		if i%2 == 1 {
			open, decide = b, a
		}
		run := fmt.Sprintf("R%d", i)
		startRun(t, open, run)
		ap, tok := gate(t, open, run, time.Hour)
		if _, err := decide.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: tok, Approver: "zed", Reason: "ok"}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "gate.opened:"+ap.GetApprovalId(), "gate.decided:"+ap.GetApprovalId())
	}
	rcv.waitFor(t, want...)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.requests) != len(want) || rcv.badSig != 0 {
		t.Fatalf("receiver got %d distinct events (%d bad signatures), want %d", len(rcv.requests), rcv.badSig, len(want))
	}
	for id, n := range rcv.requests {
		if n != 1 {
			t.Errorf("%s was posted %d times, want once across both replicas", id, n)
		}
	}
}

// A gate still pending after each escalation step's delay is announced to that step's
// channel once per step, saying it escalated; a decided gate escalates no further.
func TestEscalationFiresOncePerStepWhileTheGateWaits(t *testing.T) {
	hooks, oncall := newHookReceiver(t), newHookReceiver(t)
	text := fmt.Sprintf(`channels:
  - {name: hooks, kind: webhook, url: %q, secret_env: HOOK_SECRET}
  - {name: oncall, kind: webhook, url: %q, secret_env: HOOK_SECRET}
routes:
  - events: [gate.opened, gate.decided]
    channels: [hooks]
    escalate:
      - {after: 300ms, channels: [oncall]}
      - {after: 600ms, channels: [oncall]}
      - {after: 1h, channels: [oncall]}
`, hooks.srv.URL, oncall.srv.URL)
	c := serveNotifyConfig(t, text)
	startRun(t, c, "R1")
	a, tok := gate(t, c, "R1", 2*time.Hour)
	id := a.GetApprovalId()
	hooks.waitFor(t, "gate.opened:"+id)
	oncall.waitFor(t, "gate.escalated:"+id+":1", "gate.escalated:"+id+":2")
	if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Approver: "zed"}); err != nil {
		t.Fatal(err)
	}
	hooks.waitFor(t, "gate.decided:"+id)
	oncall.mu.Lock()
	defer oncall.mu.Unlock()
	if want := []string{"gate.escalated:" + id + ":1", "gate.escalated:" + id + ":2"}; !slices.Equal(oncall.order, want) {
		t.Fatalf("oncall got %v, want %v", oncall.order, want)
	}
	for id, n := range oncall.requests {
		if n != 1 {
			t.Errorf("%s posted %d times, want once", id, n)
		}
	}
	e := oncall.bodies["gate.escalated:"+id+":2"]
	if e.Type != "gate.escalated" || e.Data.Gate == nil || e.Data.Gate.Escalation == nil || e.Data.Gate.Escalation.Step != 2 ||
		e.Data.Gate.Escalation.After != "600ms" || e.Data.Gate.ApprovalURL == "" || e.Data.Gate.Status != "pending" {
		t.Errorf("escalation body = %+v gate %+v", e, e.Data.Gate)
	}
}

// A receiver that hangs does not hold up the other channels: each channel is delivered on
// its own.
func TestHangingReceiverDoesNotDelayOtherChannels(t *testing.T) {
	hooks, stuck := newHookReceiver(t), newHookReceiver(t)
	stuck.hold = make(chan struct{})
	defer close(stuck.hold) // before the receivers close (cleanups run after)
	text := fmt.Sprintf(`channels:
  - {name: stuck, kind: webhook, url: %q, secret_env: HOOK_SECRET}
  - {name: hooks, kind: webhook, url: %q, secret_env: HOOK_SECRET}
default:
  channels: [stuck, hooks]
`, stuck.srv.URL, hooks.srv.URL)
	c := serveNotifyConfig(t, text)
	startRun(t, c, "R1")
	a, _ := gate(t, c, "R1", time.Hour)
	hooks.waitFor(t, "gate.opened:"+a.GetApprovalId())
}

// The requester's address is their identity when it is an email address.
func TestRequesterEmailIsAnEmailIdentity(t *testing.T) {
	for identity, want := range map[string]string{"alice@example.com": "alice@example.com", "email:bob@example.com": "bob@example.com",
		"github:octocat": "", "alice": "", "unverified:eve@example.com": "", "Eve <eve@example.com>": ""} {
		if got := server.RequesterEmailOf(identity); got != want {
			t.Errorf("RequesterEmailOf(%q) = %q, want %q", identity, got, want)
		}
	}
}

// A run started through a person's other identity (an auth-file token, a GitHub job) mails the
// decision to that person's address in the people directory; without a person, only an
// identity that is itself an address has one.
func TestRequesterEmailIsThePersonsAddress(t *testing.T) {
	dir, err := people.Parse([]byte(`people:
  - id: carol
    name: Carol Ops
    identities: [carol, "github:carol-gh", "email:carol@example.com"]
  - id: dave
    identities: [dave]
`), "people.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(openStore(t, filepath.Join(t.TempDir(), "cp.db")), server.Options{Secret: []byte(testSecret), People: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for identity, want := range map[string]string{
		"carol":            "carol@example.com",
		"github:carol-gh":  "carol@example.com",
		"dave":             "",
		"erin@example.com": "erin@example.com",
		"unverified:carol": "",
		"github:someone":   "",
	} {
		if got := s.RequesterEmail(identity); got != want {
			t.Errorf("RequesterEmail(%q) = %q, want %q", identity, got, want)
		}
	}
}

// Every way a gate closes without a decision and every way a run ends reaches the webhook
// receiver once, verified by the Standard Webhooks library, under its stable id
// (docs/notifications.md, "Events"): a gate whose deadline passes (gate.expired), a gate
// withdrawn because its run was cancelled while it waited (gate.withdrawn, with
// run.cancelled) or because the job running it was interrupted (gate.withdrawn alone), a
// failed run (run.failed) and a successful one (run.finished).
func TestWebhookReceiverGetsEveryClosingAndEndingEventOnceByItsStableID(t *testing.T) {
	rcv, st, c := serveToReceiver(t)
	ctx := context.Background()

	startRun(t, c, "R-expire")
	exp, _ := gate(t, c, "R-expire", 1500*time.Millisecond)
	startRun(t, c, "R-cancel")
	wd, _ := gate(t, c, "R-cancel", time.Hour)
	if _, err := c.runs.CancelRun(ctx, &rbookv1.CancelRunRequest{RunId: "R-cancel", Reason: "change freeze"}); err != nil {
		t.Fatal(err)
	}
	startRun(t, c, "R-int")
	gone, _ := gate(t, c, "R-int", time.Hour)
	record(t, c, &rbookv1.Transition{RunId: "R-int", Seq: 1, Time: timestamppb.Now(), Kind: rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED,
		RunStatus: rbookv1.RunStatus_RUN_STATUS_RUNNING, StepIndex: 1, StepName: "approve", StepType: "confirm", Message: "SIGTERM"})
	startRun(t, c, "R-fail")
	record(t, c, transition("R-fail", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	record(t, c, transition("R-fail", 2, rbookv1.RunStatus_RUN_STATUS_FAILED))
	startRun(t, c, "R-ok")
	record(t, c, transition("R-ok", 1, rbookv1.RunStatus_RUN_STATUS_UNSPECIFIED))
	record(t, c, transition("R-ok", 2, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED))

	timedOut := store.TimedOutReason(exp.GetRequestedAt().AsTime(), exp.GetDeadline().AsTime())
	// want is each event the receiver must get: its type, run, and the gate's status,
	// who closed it, through which channel and why (no gate: a run event with its status).
	type gateWant struct{ status, by, channel, reason string }
	want := map[string]struct {
		kind, run, status string
		gate              *gateWant
	}{
		"gate.opened:" + exp.GetApprovalId():     {"gate.opened", "R-expire", "", &gateWant{"pending", "", "", ""}},
		"gate.expired:" + exp.GetApprovalId():    {"gate.expired", "R-expire", "", &gateWant{"rejected", "system", "deadline", timedOut}},
		"gate.opened:" + wd.GetApprovalId():      {"gate.opened", "R-cancel", "", &gateWant{"pending", "", "", ""}},
		"gate.withdrawn:" + wd.GetApprovalId():   {"gate.withdrawn", "R-cancel", "", &gateWant{"cancelled", "anonymous", "cancel-run", "change freeze"}},
		"gate.opened:" + gone.GetApprovalId():    {"gate.opened", "R-int", "", &gateWant{"pending", "", "", ""}},
		"gate.withdrawn:" + gone.GetApprovalId(): {"gate.withdrawn", "R-int", "", &gateWant{"cancelled", "system", "interrupted", "withdrawn: the job running the run was interrupted"}},
		"run.cancelled:R-cancel":                 {"run.cancelled", "R-cancel", "cancelled", nil},
		"run.failed:R-fail":                      {"run.failed", "R-fail", "failed", nil},
		"run.finished:R-ok":                      {"run.finished", "R-ok", "succeeded", nil},
	}
	ids := slices.Collect(maps.Keys(want))
	rcv.waitFor(t, ids...)
	// Every delivery the loop routed is done: nothing more will reach the receiver.
	deliveries := waitDeliveries(t, st, "", "delivered")

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.badSig != 0 || len(rcv.requests) != len(want) || len(deliveries) != len(want) {
		t.Fatalf("receiver got %v (%d bad signatures) from %d deliveries; want exactly %v", rcv.order, rcv.badSig, len(deliveries), ids)
	}
	for id, w := range want {
		if n := rcv.requests[id]; n != 1 {
			t.Errorf("%s was posted %d times, want once", id, n)
		}
		b := rcv.bodies[id]
		if b.Type != w.kind || b.Data.RunID != w.run || b.Data.Runbook != "demo" || b.Data.Status != w.status {
			t.Errorf("%s: type %q run %q runbook %q status %q; want %q %q demo %q", id, b.Type, b.Data.RunID, b.Data.Runbook, b.Data.Status, w.kind, w.run, w.status)
		}
		g := b.Data.Gate
		switch {
		case w.gate == nil && g != nil:
			t.Errorf("%s: a run event carries a gate %+v", id, g)
		case w.gate == nil:
		case g == nil:
			t.Errorf("%s: no gate in the body", id)
		case g.ApprovalID == "" || !strings.HasSuffix(id, ":"+g.ApprovalID) || g.Node != "approve" || g.Prompt != "Deploy?" ||
			g.Status != w.gate.status || g.DecidedBy != w.gate.by || g.Channel != w.gate.channel || g.Reason != w.gate.reason ||
			g.ApprovalURL != "https://rbook.example.com/approvals/"+g.ApprovalID:
			t.Errorf("%s: gate %+v; want status %q decided by %q via %q: %q", id, g, w.gate.status, w.gate.by, w.gate.channel, w.gate.reason)
		}
	}
}
