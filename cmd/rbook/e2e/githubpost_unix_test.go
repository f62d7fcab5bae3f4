//go:build unix

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestGitHubPostAuthenticatesWithOIDC: in a job that authenticates with a GitHub
// OIDC token (no RBOOK_TOKEN), the post step must reach the control plane the same way the
// run did: a run killed at its gate gets its approval withdrawn, not "unauthenticated".
func TestGitHubPostAuthenticatesWithOIDC(t *testing.T) {
	skipShort(t)
	const audience = "https://rbook.example.internal"
	dir := workdir(t)
	iss := authtest.NewIssuer(t)
	te := authtest.NewTokenEndpoint(t, iss, nil)
	cfgPath := filepath.Join(dir, "oidc.yaml")
	writeTestFile(t, cfgPath, []byte("issuers: ["+iss.URL+"]\ninsecure_http_issuers: true\naudience: "+audience+"\nrules:\n  - repository: owner/repo\n"))
	authPath := filepath.Join(dir, "auth.txt")
	writeTestFile(t, authPath, []byte("grafana viewer view-token-0123456789\n"))
	url := serveCP(t, dir, "--oidc-config", cfgPath, "--auth-file", authPath)
	for _, kv := range te.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("RBOOK_TOKEN", "")
	t.Setenv("RBOOK_CONTROL_PLANE_AUTH", "")
	t.Setenv("RBOOK_OIDC_AUDIENCE", audience) // as the Action passes its oidc-audience input
	t.Setenv("RBOOK_SHOW_TOKEN", "1")

	p := start(t, dir, "run", "demo", "--control-plane", url)
	tokenFrom(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	s := readState(t, dir)
	viewer := cpclient.New(url, "view-token-0123456789")
	list, err := viewer.Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: s.RunID})
	if err != nil || len(list.GetApprovals()) != 1 {
		t.Fatalf("approvals before post: %v, %v", list, err)
	}
	id := list.GetApprovals()[0].GetApprovalId()
	out, code := run(t, dir, "", "github", "post", "demo", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Withdrawn approval "+id) {
		t.Fatalf("rbook github post with OIDC: exit %d\n%s", code, out)
	}
	got, err := viewer.Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if err != nil || got.GetApproval().GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED {
		t.Fatalf("after post: %v, %v", got, err)
	}
}

// TestGitHubPostWithTheControlPlaneDown: the post step of a job whose control
// plane is down exits non-zero saying so, keeps the state file (the run is not recorded
// interrupted behind the control plane's back), and a later post, once the control plane is
// back, finishes the job's business.
func TestGitHubPostWithTheControlPlaneDown(t *testing.T) {
	skipShort(t)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	dir := workdir(t)
	srv := startServe(t, dir)
	p := start(t, dir, "run", "demo", "--control-plane", srv.url())
	tokenFrom(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	before := readFile(t, filepath.Join(dir, ".rbook", "demo.state.json"))
	srv.kill()
	out, code := run(t, dir, "", "github", "post", "demo", "--control-plane", srv.url(), "--control-plane-timeout", "2s")
	if code != 2 || !strings.Contains(out, "rbook github post: ") || !strings.Contains(out, srv.url()) || !strings.Contains(out, "unavailable") {
		t.Fatalf("post with the control plane down: exit %d\n%s", code, out)
	}
	if after := readFile(t, filepath.Join(dir, ".rbook", "demo.state.json")); after != before {
		t.Errorf("the state file changed while the control plane was down:\n%s\n---\n%s", before, after)
	}
	if err := srv.restart(); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, dir, "", "github", "post", "demo", "--control-plane", srv.url())
	if code != 0 || !strings.Contains(out, "Withdrawn approval ") {
		t.Fatalf("post once the control plane is back: exit %d\n%s", code, out)
	}
}
