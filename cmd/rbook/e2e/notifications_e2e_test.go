package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// `rbook notifications` shows, from a control plane's database, each delivery's state, and
// for a given-up one the reason; -o json carries the same; a bad --state is refused.
func TestNotificationsCommandShowsGivenUpDeliveriesAndWhy(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "cp.db")
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	st.EnableNotificationOutbox()
	now := time.Now()
	if _, _, err := st.StartRun(ctx, store.NewRun{RunID: "R1", PlaybookName: "deploy-web", PlaybookHash: strings.Repeat("a", 64),
		SchemaHash8: "0123abcd", TotalSteps: 2, StartedBy: "alice", StartedAt: now, OwnerIDHash: store.OwnerIDHash("owner-0123456789")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateApproval(ctx, store.NewApproval{ApprovalID: "ap-1", RunID: "R1", NodeID: "approve", StepIndex: 1,
		TokenHash: strings.Repeat("b", 64), RequestedAt: now, Deadline: now.Add(time.Hour), PlanDigest: strings.Repeat("a", 64)}); err != nil {
		t.Fatal(err)
	}
	escalated, err := st.RecordEscalation(ctx, store.NotificationEvent{ID: "gate.escalated:ap-1:1", Kind: store.EventGateEscalated, RunID: "R1",
		ApprovalID: "ap-1", Data: store.EventData{RunID: "R1", Runbook: "deploy-web"}}, []string{"hooks"})
	if err != nil || !escalated {
		t.Fatalf("RecordEscalation = %v, %v", escalated, err)
	}
	for _, step := range []error{
		st.RouteNotificationEvent(ctx, "gate.opened:ap-1", []string{"hooks", "mail"}),
		st.NotificationDelivered(ctx, "gate.opened:ap-1", "hooks", "", now),
		st.GiveUpNotification(ctx, "gate.opened:ap-1", "mail", "gave up after 3 failed attempts (the receiver refused it): SMTP 550", now),
		st.Close(),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	out, code := run(t, dir, "", "notifications", "--db", db, "--state", "given_up")
	if code != 0 || !strings.Contains(out, "EVENT") || !strings.Contains(out, "gate.opened:ap-1") || !strings.Contains(out, "given_up") ||
		!strings.Contains(out, "SMTP 550") || strings.Contains(out, "hooks") {
		t.Fatalf("rbook notifications --state given_up (exit %d):\n%s", code, out)
	}
	out, code = run(t, dir, "", "notifications", "--db", db, "--approval", "ap-1")
	if code != 0 || !strings.HasPrefix(out, "Gate ap-1 escalated (step 1) at ") || !strings.Contains(out, "gate.escalated:ap-1:1") {
		t.Fatalf("rbook notifications --approval ap-1 (exit %d):\n%s", code, out)
	}
	out, code = run(t, dir, "", "notifications", "--db", db, "--run", "R1", "-o", "json")
	var lines []notify.DeliveryLine
	if err := json.Unmarshal([]byte(out), &lines); code != 0 || err != nil || len(lines) != 3 || lines[0].Channel != "hooks" ||
		lines[0].State != "delivered" || lines[1].State != "given_up" || lines[1].Attempts != 1 {
		t.Fatalf("-o json (exit %d, %v):\n%s", code, err, out)
	}
	out, code = run(t, dir, "", "notifications", "--db", db, "--state", "lost")
	if code != 2 || !strings.Contains(out, "pending, delivered or given_up") {
		t.Fatalf("bad --state (exit %d):\n%s", code, out)
	}
}
