package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// openOutbox opens a store with the notification outbox on, starts run R1 and opens gate na.
func openOutbox(t *testing.T, na NewApproval, opts ...Option) (*Store, context.Context) {
	t.Helper()
	s, _ := openTest(t, opts...)
	s.EnableNotificationOutbox()
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, na)
	return s, context.Background()
}

// eventIDs lists the ids of every notification event, in id order.
func eventIDs(t *testing.T, s *Store) []string {
	t.Helper()
	return queryStrings(t, s, `SELECT event_id FROM notification_events ORDER BY event_id`)
}

// A gate's life writes one event per change, each committed with the change: opened (with
// its prompt, deadline and M-of-N need), a vote, the decision (who, channel, reason); the
// run's end writes its event. A vote the policy refuses writes none, and the same change
// reported again keeps one event (stable ids).
func TestNotificationEventsCommitWithTheirGateChanges(t *testing.T) {
	t.Parallel()
	na := newApproval("a1", "R1", "deploy")
	na.ApprovalsRequired = 2
	s, ctx := openOutbox(t, na)
	if got := eventIDs(t, s); !slices.Equal(got, []string{"gate.opened:a1"}) {
		t.Fatalf("after opening: events %v, want gate.opened:a1", got)
	}
	at := t0.Add(2 * time.Minute)
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "eve", At: at,
		Authorize: func(Approval, RunStarter) error { return errors.New("not allowed") }}); err == nil {
		t.Fatal("refused vote succeeded")
	}
	if got := eventIDs(t, s); len(got) != 1 {
		t.Fatalf("after a refused vote: events %v, want only the opening", got)
	}
	for _, who := range []string{"bob", "bob", "carol"} {
		if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: who, Reason: "ok",
			Source: "rpc", At: at, Verified: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CancelRun(ctx, "R1", "alice", "done here", at); err != nil {
		t.Fatal(err)
	}
	want := []string{"gate.decided:a1", "gate.opened:a1", "run.cancelled:R1", "vote.cast:a1:1"}
	if got := eventIDs(t, s); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	evs, err := s.UnroutedNotificationEvents(ctx, 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("unrouted = %d events, %v", len(evs), err)
	}
	byID := map[string]NotificationEvent{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	opened := byID["gate.opened:a1"].Data
	if opened.Runbook != "demo" || opened.StartedBy != "alice" || opened.Gate == nil || opened.Gate.Prompt != "Deploy to prod?" ||
		opened.Gate.Deadline != "2026-05-12T11:00:00Z" || opened.Gate.ApprovalsRequired != 2 || opened.Gate.Status != "pending" {
		t.Errorf("gate.opened data = %+v gate %+v", opened, opened.Gate)
	}
	vote := byID["vote.cast:a1:1"].Data.Gate
	if vote.Vote == nil || vote.Vote.Approver != "bob" || vote.Vote.Channel != "rpc" || vote.Approvals != 1 {
		t.Errorf("vote.cast gate = %+v", vote)
	}
	decided := byID["gate.decided:a1"].Data.Gate
	if decided.Status != "approved" || decided.DecidedBy != "bob, carol" || decided.Channel != "rpc" || decided.Reason != "ok" || decided.Approvals != 2 {
		t.Errorf("gate.decided gate = %+v", decided)
	}
	if d := byID["run.cancelled:R1"].Data; d.Status != "cancelled" || d.Runbook != "demo" {
		t.Errorf("run.cancelled data = %+v", d)
	}
}

// A gate change whose event cannot be written does not commit: the change and its
// notification are one transaction.
func TestGateChangeRollsBackWhenItsEventCannotBeWritten(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	s.EnableNotificationOutbox()
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	if _, err := s.writer.ExecContext(ctx, `ALTER TABLE notification_events RENAME TO notification_events_gone`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateApproval(ctx, newApproval("a1", "R1", "deploy")); err == nil {
		t.Fatal("CreateApproval succeeded without its event")
	}
	if _, err := s.GetApproval(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetApproval after the failed write = %v, want ErrNotFound (rolled back)", err)
	}
}

// Without EnableNotificationOutbox nothing is recorded, and transitions that do not end a
// run never are.
func TestNotificationOutboxRecordsNothingUnlessEnabled(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, newApproval("a1", "R1", "deploy"))
	s.EnableNotificationOutbox()
	if _, err := s.RecordTransition(ctx, tr("R1", 1), fence1); err != nil {
		t.Fatal(err)
	}
	if got := eventIDs(t, s); len(got) != 0 {
		t.Fatalf("events %v, want none", got)
	}
}

// Routing writes one delivery per channel; a claim holds a delivery against a second
// replica until its lease passes; a failure schedules the next attempt; a given-up delivery
// shows with its reason and is never due again; a delivered one records the provider's id.
func TestNotificationDeliveriesAreClaimedRetriedAndGivenUp(t *testing.T) {
	t.Parallel()
	clock := &manualClock{t: t0}
	s, dsn := openTest(t, WithClock(clock.now))
	s.EnableNotificationOutbox()
	ctx := context.Background()
	mustStart(t, s, newRun("R1"))
	mustCreateApproval(t, s, newApproval("a1", "R1", "deploy"))
	if err := s.RouteNotificationEvent(ctx, "gate.opened:a1", []string{"hooks", "teams"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RouteNotificationEvent(ctx, "gate.opened:a1", []string{"hooks"}); err != nil { // another replica
		t.Fatal(err)
	}
	if evs, err := s.UnroutedNotificationEvents(ctx, 10); err != nil || len(evs) != 0 {
		t.Fatalf("unrouted after routing = %v, %v", evs, err)
	}
	now := t0.Add(time.Minute)
	for _, ch := range []string{"hooks", "teams"} {
		due, err := s.DueNotificationDeliveries(ctx, now, ch, 10)
		if err != nil || len(due) != 1 || due[0].Channel != ch || due[0].Event.Data.Gate.Node != "deploy" {
			t.Fatalf("due to %s = %+v, %v", ch, due, err)
		}
	}
	other, err := Open(ctx, dsn, WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	lease := now.Add(2 * time.Minute)
	if n, ok, err := s.ClaimNotificationDelivery(ctx, "gate.opened:a1", "hooks", now, lease); err != nil || !ok || n != 0 {
		t.Fatalf("first claim = %d, %v, %v", n, ok, err)
	}
	if _, ok, err := other.ClaimNotificationDelivery(ctx, "gate.opened:a1", "hooks", now, lease); err != nil || ok {
		t.Fatalf("second replica's claim during the lease = %v, %v; want refused", ok, err)
	}
	if err := s.NotificationAttemptFailed(ctx, "gate.opened:a1", "hooks", "503 from receiver", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := other.ClaimNotificationDelivery(ctx, "gate.opened:a1", "hooks", now, lease); ok {
		t.Fatal("claimed before the back-off passed")
	}
	if n, ok, err := other.ClaimNotificationDelivery(ctx, "gate.opened:a1", "hooks", now.Add(time.Second), lease); err != nil || !ok || n != 1 {
		t.Fatalf("claim after the back-off = %d, %v, %v; want 1 attempt so far", n, ok, err)
	}
	if err := other.NotificationDelivered(ctx, "gate.opened:a1", "hooks", "msg-1", now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.ClaimNotificationDelivery(ctx, "gate.opened:a1", "hooks", lease, lease.Add(time.Minute)); ok {
		t.Fatal("a delivered notification was claimed again")
	}
	if err := s.GiveUpNotification(ctx, "gate.opened:a1", "teams", "gave up after 1 attempt: 400", now); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListNotificationDeliveries(ctx, NotificationDeliveryFilter{ApprovalID: "a1"})
	if err != nil || len(list) != 2 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if d := list[0]; d.State() != "delivered" || d.ProviderMessageID != "msg-1" || d.Attempts != 1 {
		t.Errorf("hooks delivery = %+v (%s)", d, d.State())
	}
	if d := list[1]; d.State() != "given_up" || d.GivenUpReason != "gave up after 1 attempt: 400" || d.Attempts != 1 {
		t.Errorf("teams delivery = %+v (%s)", d, d.State())
	}
	if gaveUp, err := s.ListNotificationDeliveries(ctx, NotificationDeliveryFilter{State: "given_up"}); err != nil || len(gaveUp) != 1 {
		t.Errorf("given-up filter = %+v, %v", gaveUp, err)
	}
	for _, ch := range []string{"hooks", "teams"} {
		if due, err := s.DueNotificationDeliveries(ctx, lease.Add(time.Hour), ch, 10); err != nil || len(due) != 0 {
			t.Errorf("due to %s at the end = %+v, %v; want none", ch, due, err)
		}
	}
	if _, err := s.ListNotificationDeliveries(ctx, NotificationDeliveryFilter{State: "lost"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unknown state = %v", err)
	}
}

// An escalation step is written once, with its deliveries, and only while its gate waits;
// the pending gates list how many steps already fired.
func TestEscalationIsRecordedOnceWhileTheGateWaits(t *testing.T) {
	t.Parallel()
	s, ctx := openOutbox(t, newApproval("a1", "R1", "deploy"))
	pending, err := s.PendingGateOpenings(ctx)
	if err != nil || len(pending) != 1 || pending[0].Opened.ID != "gate.opened:a1" || pending[0].Escalated != 0 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	e := NotificationEvent{ID: "gate.escalated:a1:1", RunID: "R1", ApprovalID: "a1", Data: pending[0].Opened.Data}
	for i, want := range []bool{true, false} {
		if wrote, err := s.RecordEscalation(ctx, e, []string{"oncall"}); err != nil || wrote != want {
			t.Fatalf("RecordEscalation #%d = %v, %v; want %v", i+1, wrote, err, want)
		}
	}
	if pending, _ := s.PendingGateOpenings(ctx); len(pending) != 1 || pending[0].Escalated != 1 {
		t.Fatalf("pending after one step = %+v", pending)
	}
	if due, err := s.DueNotificationDeliveries(ctx, t0.Add(time.Hour), "oncall", 10); err != nil || len(due) != 1 ||
		due[0].Event.Kind != EventGateEscalated {
		t.Fatalf("due = %+v, %v; want the escalation to oncall", due, err)
	}
	if n, err := s.GiveUpOtherChannels(ctx, []string{"hooks"}, "channel oncall was removed from the notification config"); err != nil || n != 1 {
		t.Fatalf("GiveUpOtherChannels = %d, %v; want the oncall delivery", n, err)
	}
	if gone, _ := s.ListNotificationDeliveries(ctx, NotificationDeliveryFilter{State: "given_up"}); len(gone) != 1 || gone[0].Channel != "oncall" {
		t.Fatalf("given up = %+v", gone)
	}
	if _, err := s.DecideApproval(ctx, Decision{ApprovalID: "a1", Verdict: ApprovalApproved, Approver: "bob", At: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.ID = "gate.escalated:a1:2"
	if wrote, err := s.RecordEscalation(ctx, e, []string{"oncall"}); err != nil || wrote {
		t.Fatalf("RecordEscalation of a decided gate = %v, %v; want nothing written", wrote, err)
	}
	if pending, _ := s.PendingGateOpenings(ctx); len(pending) != 0 {
		t.Fatalf("pending after the decision = %+v", pending)
	}
}
