package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/notify"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// The delivery loop deletes the notification rows delivered longer ago than the config's
// retention, and keeps what is still pending or about a gate that waits
// (docs/notifications.md, "Retention").
func TestOutboxLoopDeletesNotificationsPastTheirRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.db")
	ctx := context.Background()
	past := time.Now().Add(-48 * time.Hour)
	old, err := store.Open(ctx, path, store.WithClock(func() time.Time { return past }))
	if err != nil {
		t.Fatal(err)
	}
	old.EnableNotificationOutbox()
	if _, _, err := old.StartRun(ctx, store.NewRun{RunID: "R1", PlaybookName: "demo", PlaybookHash: strings.Repeat("a", 64),
		SchemaHash8: "0123abcd", TotalSteps: 2, StartedBy: "alice", StartedAt: past, OwnerIDHash: store.OwnerIDHash(testOwner)}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"ap-1", "ap-2"} {
		if _, _, err := old.CreateApproval(ctx, store.NewApproval{ApprovalID: id, RunID: "R1", NodeID: "approve-" + id, StepIndex: 1,
			TokenHash: strings.Repeat(string(rune('b'+i)), 64), RequestedAt: past, Deadline: time.Now().Add(time.Hour), PlanDigest: strings.Repeat("a", 64)}); err != nil {
			t.Fatal(err)
		}
		if err := old.RouteNotificationEvent(ctx, "gate.opened:"+id, []string{"hooks"}); err != nil {
			t.Fatal(err)
		}
		if err := old.NotificationDelivered(ctx, "gate.opened:"+id, "hooks", "", past.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.DecideApproval(ctx, store.Decision{ApprovalID: "ap-1", Verdict: store.ApprovalApproved, Approver: "bob", At: past.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	rcv := newHookReceiver(t)
	cfg, err := notify.ParseConfig([]byte(fmt.Sprintf("retention: 1h\nchannels:\n  - {name: hooks, kind: webhook, url: %q, secret_env: HOOK_SECRET}\ndefault:\n  channels: [hooks]\n",
		rcv.srv.URL)), "notify.yaml", func(string) (string, bool) { return hookSecret, true })
	if err != nil || cfg.Retention != time.Hour {
		t.Fatalf("config = %+v, %v", cfg, err)
	}
	st := openStore(t, path)
	serveNotifying(t, st, "", server.NotifyOptions{Config: cfg}, nil)
	rcv.waitFor(t, "gate.decided:ap-1") // routed and delivered now, so kept
	want := []string{"gate.decided:ap-1/hooks delivered", "gate.opened:ap-2/hooks delivered"}
	deadline := time.After(30 * time.Second)
	for {
		list, err := st.ListNotificationDeliveries(ctx, store.NotificationDeliveryFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range list {
			got = append(got, d.Event.ID+"/"+d.Channel+" "+d.State())
		}
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-time.After(20 * time.Millisecond): // deletes publish no change
		case <-deadline:
			t.Fatalf("deliveries = %v, want %v (the decided gate's old opening deleted)", got, want)
		}
	}
}
