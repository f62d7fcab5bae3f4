package server_test

// Approval.approval_url: the gate's page on the console (docs/console-links.md) in every
// response that carries an Approval, built from the control plane's public URL.

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/server"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Every Approval-carrying RPC (RequestApproval, WatchApproval, GetApproval, ListApprovals,
// Approve, Reject) fills approval_url with <public URL>/approvals/<approval id> when the
// control plane has a public URL — rbook serve --public-url (trailing slash trimmed, path
// prefix kept), or the embedded control plane's own loopback address — and leaves it empty
// without one.
func TestEveryApprovalCarriesItsPageURL(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T) (url, base string)
	}{
		{"rbook serve --public-url", func(t *testing.T) (string, string) {
			p := startServe(t, "--public-url", "https://rbook.example.com/ops/")
			return p.URL, "https://rbook.example.com/ops"
		}},
		{"rbook serve without --public-url", func(t *testing.T) (string, string) {
			return startServe(t).URL, ""
		}},
		{"listener as public URL", func(t *testing.T) (string, string) {
			r, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "cp.db"),
				PublicURLIsListener: true, Options: server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				h2cTransport.CloseIdleConnections()
				r.Close()
			})
			if !strings.HasPrefix(r.URL(), "http://127.0.0.1:") {
				t.Fatalf("URL %q", r.URL())
			}
			return r.URL(), r.URL()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, base := c.start(t)
			cl := newClients(url)
			ctx := context.Background()
			want := func(rpc string, a *rbookv1.Approval) {
				t.Helper()
				w := ""
				if base != "" {
					w = base + "/approvals/" + a.GetApprovalId()
				}
				if a.GetApprovalId() == "" || a.GetApprovalUrl() != w {
					t.Errorf("%s: approval %q has approval_url %q, want %q", rpc, a.GetApprovalId(), a.GetApprovalUrl(), w)
				}
			}

			startRun(t, cl, "R-link-approve")
			opened, token := gate(t, cl, "R-link-approve", time.Hour)
			want("RequestApproval", opened)
			stream, first := watchApproval(t, cl, opened.GetApprovalId())
			want("WatchApproval (first message)", first)
			got, err := cl.apps.GetApproval(ctx, &rbookv1.GetApprovalRequest{ApprovalId: opened.GetApprovalId()})
			if err != nil {
				t.Fatal(err)
			}
			want("GetApproval", got.GetApproval())
			approved, err := cl.apps.Approve(ctx, &rbookv1.ApproveRequest{Token: token, Approver: "alice", Reason: "ok"})
			if err != nil {
				t.Fatal(err)
			}
			want("Approve", approved.GetApproval())
			last := lastApproval(t, stream)
			if last.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
				t.Errorf("WatchApproval ended with %v", last.GetStatus())
			}
			want("WatchApproval (decided)", last)

			startRun(t, cl, "R-link-reject")
			opened2, token2 := gate(t, cl, "R-link-reject", time.Hour)
			rejected, err := cl.apps.Reject(ctx, &rbookv1.RejectRequest{Token: token2, Approver: "bob", Reason: "not today"})
			if err != nil {
				t.Fatal(err)
			}
			want("Reject", rejected.GetApproval())

			list, err := cl.apps.ListApprovals(ctx, &rbookv1.ListApprovalsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(list.GetApprovals()); n != 2 {
				t.Fatalf("ListApprovals: %d approvals, want 2", n)
			}
			ids := map[string]bool{}
			for _, a := range list.GetApprovals() {
				want("ListApprovals", a)
				ids[a.GetApprovalId()] = true
			}
			if !ids[opened.GetApprovalId()] || !ids[opened2.GetApprovalId()] {
				t.Errorf("ListApprovals: ids %v, want %s and %s", ids, opened.GetApprovalId(), opened2.GetApprovalId())
			}
		})
	}
}

// A public URL the server cannot build links on is refused when the server is made, with the
// reason; rbook serve refuses it by its flag name (cmd/rbook).
func TestServerRefusesAPublicURLWithAQuery(t *testing.T) {
	_, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "cp.db"),
		Options: server.Options{Secret: []byte(testSecret), Logger: slog.New(slog.DiscardHandler), PublicURL: "https://rbook.example.com/?x=1"}})
	if err == nil || !strings.Contains(err.Error(), `public URL "https://rbook.example.com/?x=1" has a query`) {
		t.Fatalf("Start with a public URL with a query: %v", err)
	}
}
