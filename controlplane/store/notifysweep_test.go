package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// deliveryKeys lists "event/channel state" of every notification delivery, oldest first.
func deliveryKeys(t *testing.T, s *Store) []string {
	t.Helper()
	list, err := s.ListNotificationDeliveries(context.Background(), NotificationDeliveryFilter{Limit: MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range list {
		out = append(out, d.Event.ID+"/"+d.Channel+" "+d.State())
	}
	return out
}

// The retention sweep deletes delivered and given-up rows older than its cut-off, in
// bounded batches, and then the events left without deliveries; a pending delivery, an
// unrouted event and every row about a gate that still waits are kept
// (docs/notifications.md, "Retention").
func TestNotificationSweepDeletesOnlyOldFinishedRows(t *testing.T) {
	t.Parallel()
	clock := &manualClock{t: t0}
	s, ctx := openOutbox(t, newApproval("a1", "R1", "deploy"), WithClock(clock.now))
	mustCreateApproval(t, s, newApproval("a2", "R1", "verify"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.RouteNotificationEvent(ctx, "gate.opened:a1", []string{"hooks", "mail"}))
	must(s.RouteNotificationEvent(ctx, "gate.opened:a2", []string{"hooks"}))
	must(s.NotificationDelivered(ctx, "gate.opened:a1", "hooks", "", t0.Add(time.Minute)))
	must(s.GiveUpNotification(ctx, "gate.opened:a1", "mail", "gave up after 3 attempts: 550", t0.Add(2*time.Minute)))
	must(s.NotificationDelivered(ctx, "gate.opened:a2", "hooks", "", t0.Add(time.Minute)))
	clock.add(3 * time.Minute)
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: clock.now()}); err != nil {
		t.Fatal(err)
	}
	must(s.RouteNotificationEvent(ctx, "gate.decided:a1", []string{"hooks"})) // its delivery is still pending
	before := []string{"gate.opened:a1/hooks delivered", "gate.opened:a1/mail given_up", "gate.opened:a2/hooks delivered", "gate.decided:a1/hooks pending"}
	if got := deliveryKeys(t, s); !slices.Equal(got, before) {
		t.Fatalf("deliveries before the sweep = %v, want %v", got, before)
	}

	if n, err := s.SweepNotifications(ctx, t0.Add(90*time.Second), 10); err != nil || n != (SweptNotifications{Deliveries: 1}) {
		t.Fatalf("sweep of rows before 90s = %+v, %v; want the delivery done at 1m only", n, err)
	}
	if n, err := s.SweepNotifications(ctx, t0.Add(time.Hour), 1); err != nil || n != (SweptNotifications{Deliveries: 1, Events: 1}) {
		t.Fatalf("sweep with a batch of 1 = %+v, %v; want one delivery and the event it freed", n, err)
	}
	if n, err := s.SweepNotifications(ctx, t0.Add(time.Hour), 10); err != nil || n != (SweptNotifications{}) {
		t.Fatalf("sweep after everything old went = %+v, %v; want nothing", n, err)
	}
	want := []string{"gate.opened:a2/hooks delivered", "gate.decided:a1/hooks pending"}
	if got := deliveryKeys(t, s); !slices.Equal(got, want) {
		t.Errorf("deliveries after the sweep = %v, want %v (pending, and the waiting gate's)", got, want)
	}
	if got := eventIDs(t, s); !slices.Equal(got, []string{"gate.decided:a1", "gate.opened:a2"}) {
		t.Errorf("events after the sweep = %v", got)
	}
	if pending, err := s.PendingGateOpenings(ctx); err != nil || len(pending) != 1 || pending[0].Opened.ID != "gate.opened:a2" {
		t.Errorf("the waiting gate's opening = %+v, %v; want it kept for its escalation", pending, err)
	}
}
