package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// noticeLine is a GateNotification as the tests compare it.
func noticeLine(n *rbookv1.GateNotification) string {
	return fmt.Sprintf("%s %s/%s %s %d", n.GetType(), n.GetChannel(), n.GetChannelKind(), n.GetStatus(), n.GetAttempts())
}

// GetApproval and WatchApproval say that a gate escalated, at which step and when, and list
// the notifications about it with their delivery status; a failing receiver's error is shown
// without its address (docs/notifications.md, "On the gate").
func TestGetApprovalShowsEscalationAndDeliveryStatus(t *testing.T) {
	hooks := newHookReceiver(t)
	text := fmt.Sprintf(`channels:
  - {name: hooks, kind: webhook, url: %q, secret_env: HOOK_SECRET}
  - {name: dead, kind: webhook, url: "http://127.0.0.1:1/hook?sig=secret", secret_env: HOOK_SECRET}
routes:
  - events: [gate.opened]
    channels: [hooks, dead]
    escalate:
      - {after: 200ms, channels: [hooks]}
`, hooks.srv.URL)
	cfg, err := notify.ParseConfig([]byte(text), "notify.yaml", func(string) (string, bool) { return hookSecret, true })
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, filepath.Join(t.TempDir(), "cp.db"))
	c := serveNotifying(t, st, "", server.NotifyOptions{Config: cfg, RetryBase: time.Hour}, nil)
	startRun(t, c, "R1")
	a, _ := gate(t, c, "R1", time.Hour)
	id := a.GetApprovalId()
	hooks.waitFor(t, "gate.opened:"+id, "gate.escalated:"+id+":1")

	want := []string{"gate.opened dead/webhook pending 1", "gate.opened hooks/webhook delivered 0", "gate.escalated hooks/webhook delivered 0"}
	changed, cancel := subscribeNotifications(st)
	defer cancel()
	deadline := time.After(30 * time.Second)
	var got *rbookv1.Approval
	for {
		res, err := c.apps.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
		if err != nil {
			t.Fatal(err)
		}
		got = res.GetApproval()
		var lines []string
		for _, n := range got.GetNotifications() {
			lines = append(lines, noticeLine(n))
		}
		if strings.Join(lines, "; ") == strings.Join(want, "; ") {
			break
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond): // delivery records publish no change
		case <-deadline:
			t.Fatalf("notifications = %v, want %v", lines, want)
		}
	}
	if got.GetEscalations() != 1 || got.GetEscalatedAt() == nil || got.GetEscalatedAt().AsTime().Before(time.Now().Add(-time.Minute)) {
		t.Errorf("escalations %d at %v, want 1 just now", got.GetEscalations(), got.GetEscalatedAt())
	}
	dead := got.GetNotifications()[0]
	if e := dead.GetLastError(); e == "" || strings.Contains(e, "127.0.0.1") || strings.Contains(e, "sig=") || dead.GetDeliveredAt() != nil {
		t.Errorf("the failing delivery's error %q shows the receiver, or it has a delivery time", e)
	}
	if d := got.GetNotifications()[1]; d.GetEventId() != "gate.opened:"+id || d.GetDeliveredAt() == nil || d.GetLastError() != "" {
		t.Errorf("delivered notification = %v", d)
	}
	_, w := watchApproval(t, c, id)
	if w.GetEscalations() != 1 || len(w.GetNotifications()) != 3 {
		t.Errorf("WatchApproval's first message: escalations %d, %d notifications; want 1 and 3", w.GetEscalations(), len(w.GetNotifications()))
	}
	list, err := c.apps.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: "R1"})
	if err != nil || len(list.GetApprovals()) != 1 || len(list.GetApprovals()[0].GetNotifications()) != 0 {
		t.Errorf("ListApprovals = %v, %v; want the gate without its notifications", list, err)
	}
}

// A delivery error shown to a gate's readers keeps what went wrong and hides the receiver:
// URLs, email addresses, host:port and IP addresses.
func TestPublicDeliveryErrorHidesReceivers(t *testing.T) {
	for in, want := range map[string]string{
		"POST failed: dial tcp 10.1.2.3:8443: connect: connection refused":              "POST failed: dial tcp <address>: connect: connection refused",
		"SMTP smtp.example.com:587: 550 5.1.1 <bob@example.com>: mailbox unavailable":   "SMTP <address>: 550 5.1.1 <<address>>: mailbox unavailable",
		"receiver answered 404 Not Found: no route https://hooks.example.com/x?sig=abc": "receiver answered 404 Not Found: no route <url>",
		"POST failed: dial tcp [::1]:9: connect: connection refused":                    "POST failed: dial tcp <address>: connect: connection refused",
		"receiver answered 503 Service Unavailable: try later":                          "receiver answered 503 Service Unavailable: try later",
	} {
		if got := server.PublicError(in); got != want {
			t.Errorf("PublicError(%q) = %q, want %q", in, got, want)
		}
	}
	if got := server.PublicError(strings.Repeat("x", 1000)); len(got) > 310 {
		t.Errorf("a long error is %d bytes, want it cut", len(got))
	}
}
