package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// A control plane killed (SIGKILL) after a gate's event was committed and its delivery
// failed, but before it was delivered: the next `rbook serve` on the same database
// delivers it, and every event reaches the receiver exactly once.
func TestKilledControlPlaneDeliversCommittedEventsAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rbook serve processes")
	}
	rcv := newHookReceiver(t)
	rcv.down = true
	t.Setenv("HOOK_SECRET", hookSecret)
	cfg := filepath.Join(t.TempDir(), "notify.yaml")
	text := fmt.Sprintf("channels:\n  - name: hooks\n    kind: webhook\n    url: %s\n    secret_env: HOOK_SECRET\ndefault:\n  channels: [hooks]\n", rcv.srv.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, "--notify-config", cfg)
	c := newClients(first.URL)
	startRun(t, c, "R1")
	a, tok := gate(t, c, "R1", time.Hour)
	opened := "gate.opened:" + a.GetApprovalId()
	// Kill it once the failed attempt is recorded (its claim ended): the event is
	// committed and owed, not delivered.
	waitForFailedDelivery(t, first)
	killAndRecover(t, first, rcv)

	second := startServe(t, "--notify-config", cfg, "--db", first.DB)
	rcv.waitFor(t, opened)
	c = newClients(second.URL)
	if _, err := c.apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Approver: "zed", Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	rcv.waitFor(t, "gate.decided:"+a.GetApprovalId())
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.accepted[opened] != 1 || rcv.accepted["gate.decided:"+a.GetApprovalId()] != 1 || rcv.badSig != 0 || len(rcv.accepted) != 2 {
		t.Fatalf("accepted %v (%d bad signatures), want each of the gate's two events once", rcv.accepted, rcv.badSig)
	}
}

// Two `rbook serve` replicas on one PostgreSQL database share one outbox: events committed
// through either replica while the receiver is down are owed, not lost, when one replica is
// killed (SIGKILL) before delivering them; the survivor and the restarted replica then
// deliver every event, and the claim makes each reach the receiver exactly once (a
// delivery the killed replica had claimed waits for NotificationClaimLease to pass).
func TestTwoReplicasDeliverEveryEventOnceAcrossAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rbook serve processes")
	}
	rcv := newHookReceiver(t)
	rcv.down = true
	t.Setenv("HOOK_SECRET", hookSecret)
	cfg := filepath.Join(t.TempDir(), "notify.yaml")
	text := fmt.Sprintf("channels:\n  - name: hooks\n    kind: webhook\n    url: %s\n    secret_env: HOOK_SECRET\ndefault:\n  channels: [hooks]\n", rcv.srv.URL)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b, dsn := startReplicas(t, "--notify-config", cfg)
	replicas := []clients{newClients(a.URL), newClients(b.URL)}
	const gates = 6
	var want []string
	tokens := make([]string, gates)
	for i := range gates {
		c := replicas[i%2]
		run := fmt.Sprintf("R%d", i)
		startRun(t, c, run)
		ap, tok := gate(t, c, run, time.Hour)
		tokens[i] = tok
		want = append(want, "gate.opened:"+ap.GetApprovalId(), "gate.decided:"+ap.GetApprovalId())
	}
	// Both replicas have tried and failed: every event is committed and owed.
	waitForFailedDelivery(t, a)
	waitForFailedDelivery(t, b)
	killAndRecover(t, a, rcv)
	a2 := startServeDir(t, t.TempDir(), "--db", dsn, "--notify-config", cfg)
	replicas[0] = newClients(a2.URL)
	for i, tok := range tokens {
		if _, err := replicas[i%2].apps.Approve(context.Background(), &rbookv1.ApproveRequest{Token: tok, Approver: "zed", Reason: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	// A delivery the killed replica had claimed waits for its claim to lapse.
	rcv.waitForWithin(t, server.NotificationClaimLease+45*time.Second, want...)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.badSig != 0 || len(rcv.accepted) != len(want) {
		t.Fatalf("accepted %d distinct events (%d bad signatures), want %d: %v", len(rcv.accepted), rcv.badSig, len(want), rcv.accepted)
	}
	for _, id := range want {
		if rcv.accepted[id] != 1 {
			t.Errorf("%s accepted %d times, want once", id, rcv.accepted[id])
		}
	}
}

// waitForFailedDelivery waits (at most 30 s) until p logged a failed delivery attempt: its
// event is committed and owed, and the attempt's claim ended.
func waitForFailedDelivery(t *testing.T, p *serveProc) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.Stderr.String(), "notification delivery failed; retrying") {
		select {
		case <-p.Stderr.Changed():
		case <-deadline:
			t.Fatalf("no failed attempt logged; stderr:\n%s", p.Stderr.String())
		}
	}
}

// killAndRecover kills p (SIGKILL), waits for it to exit, and brings the receiver back up.
func killAndRecover(t *testing.T, p *serveProc, rcv *hookReceiver) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	rcv.mu.Lock()
	rcv.down = false
	rcv.mu.Unlock()
}
