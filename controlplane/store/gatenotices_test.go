package store

import (
	"testing"
	"time"
)

// A gate's notices: how many escalation steps fired and when the last did, and its
// deliveries, oldest event first.
func TestGateNoticesCountEscalationsAndListDeliveries(t *testing.T) {
	t.Parallel()
	clock := &manualClock{t: t0}
	s, ctx := openOutbox(t, newApproval("a1", "R1", "deploy"), WithClock(clock.now))
	if g, err := s.GateNotices(ctx, "a1"); err != nil || g.Escalations != 0 || !g.EscalatedAt.IsZero() || len(g.Deliveries) != 0 {
		t.Fatalf("notices of an unrouted gate = %+v, %v", g, err)
	}
	if err := s.RouteNotificationEvent(ctx, "gate.opened:a1", []string{"hooks"}); err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 2; step++ {
		clock.add(10 * time.Minute)
		e := NotificationEvent{ID: "gate.escalated:a1:" + string(rune('0'+step)), RunID: "R1", ApprovalID: "a1", Data: EventData{RunID: "R1"}}
		if _, err := s.RecordEscalation(ctx, e, []string{"oncall"}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.GateNotices(ctx, "a1")
	if err != nil || g.Escalations != 2 || !g.EscalatedAt.Equal(t0.Add(20*time.Minute)) || len(g.Deliveries) != 3 ||
		g.Deliveries[0].Event.ID != "gate.opened:a1" || g.Deliveries[2].Event.ID != "gate.escalated:a1:2" || g.Deliveries[2].Channel != "oncall" {
		t.Fatalf("notices = %+v, %v; want 2 escalations, the last at 20m, and 3 deliveries", g, err)
	}
}
