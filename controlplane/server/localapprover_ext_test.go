package server_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestLocalApproverKeyDecidesByIDAsUnverified: a control plane without auth that holds a
// local approver key (the embedded one of rbook run) refuses approval by id without the key,
// or with another one, naming the key and the folder; with it, the vote is recorded as
// unverified:<the given name> with its reason.
func TestLocalApproverKeyDecidesByIDAsUnverified(t *testing.T) {
	key := "local-approver-key-of-this-folder-0123456789"
	r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "cp.db"),
		Options: server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler), LocalApprover: []byte(key)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h2cTransport.CloseIdleConnections(); r.Close() })
	c := newClients(r.URL())
	startRun(t, c, "R-local")
	a, _ := gate(t, c, "R-local", time.Hour)
	req := &rbookv1.ApproveRequest{ApprovalId: a.GetApprovalId(), Approver: "alice", Reason: "checked the canary"}
	_, err = c.apps.Approve(context.Background(), req)
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	if !strings.Contains(err.Error(), "local approver key") {
		t.Errorf("refusal without the key: %v, want it to name the local approver key", err)
	}
	_, err = newClients(r.URL(), withBearer(key+"x")).apps.Approve(context.Background(), req)
	wantCode(t, err, connect.CodeUnauthenticated, "E_UNAUTHENTICATED")
	res, err := newClients(r.URL(), withBearer(key)).apps.Approve(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetApproval(); got.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || got.GetApprover() != "unverified:alice" || got.GetReason() != "checked the canary" {
		t.Errorf("approval = %v, want APPROVED by unverified:alice with the reason", got)
	}
}
