package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/tlsfiles/tlstest"
)

// httpsListening is the https:// URL of an `rbook serve` address line.
var httpsListening = regexp.MustCompile(`listening on (https://\S+)`)

// serveHTTPS starts `rbook serve --tls-cert --tls-key` (with extra flags) on addr and the
// database in dir, with a server certificate of ca, and returns it with its URL once it
// listens. The approval secret is the environment's.
func serveHTTPS(t *testing.T, dir, addr string, ca *tlstest.CA, extra ...string) (*proc, string) {
	t.Helper()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Server(t, crt, key)
	p := start(t, dir, append([]string{"serve", "--addr", addr, "--db", filepath.Join(dir, "cp.db"), "--tls-cert", crt, "--tls-key", key}, extra...)...)
	p.waitFor(t, "rbook control plane listening on https://")
	return p, httpsListening.FindStringSubmatch(p.output())[1]
}

// A run reports to an HTTPS control plane whose certificate a private CA signed once
// RBOOK_CA_FILE names that CA, and its gate is approved over HTTPS; without the CA file the
// command fails at once and says to set it.
func TestRunReportsAndIsApprovedOverHTTPS(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	ca := tlstest.NewCA(t, "rbook e2e CA")
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_TOKEN", "")
	t.Setenv("RBOOK_CA_FILE", "")
	srv, url := serveHTTPS(t, dir, "127.0.0.1:0", ca)
	if !strings.Contains(srv.output(), "TLS "+filepath.Join(dir, "tls.crt")+" (reloaded when it changes)") {
		t.Fatalf("the address line does not say TLS is on:\n%s", srv.output())
	}

	out, code := run(t, dir, "", "runs", "--control-plane", url)
	if code == 0 || !strings.Contains(out, "set RBOOK_CA_FILE to that CA's PEM file") {
		t.Fatalf("rbook runs against an untrusted certificate: exit %d\n%s", code, out)
	}

	t.Setenv("RBOOK_CA_FILE", ca.CertFile)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	if out, code := run(t, dir, "", "approve", tok, "--control-plane", url); code != 0 {
		t.Fatalf("rbook approve over HTTPS: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("the run over HTTPS exited %d:\n%s", code, p.output())
	}
	runID := demoRunID.FindString(p.output())
	out, code = run(t, dir, "", "runs", "--control-plane", url)
	if code != 0 || !strings.Contains(out, runID) {
		t.Fatalf("rbook runs over HTTPS: exit %d, want run %s listed\n%s", code, runID, out)
	}
	checkTransitions(t, getRun(t, url, runID), rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
}

// With --tls-client-ca, an executor presenting RBOOK_CLIENT_CERT and RBOOK_CLIENT_KEY of
// that CA starts runs as cert:<common name>; one without a certificate or token, or with a
// certificate of another CA, is refused and told why. An approver still uses its token.
func TestClientCertificateStartsRunsAsItsCommonName(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	serverCA, clientCA, otherCA := tlstest.NewCA(t, "server CA"), tlstest.NewCA(t, "client CA"), tlstest.NewCA(t, "other CA")
	authFile := filepath.Join(dir, "auth.txt")
	const approverToken = "ann-approver-token-0123456789"
	if err := os.WriteFile(authFile, []byte("ann approver "+approverToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_TOKEN", "")
	t.Setenv("RBOOK_CA_FILE", serverCA.CertFile)
	t.Setenv("RBOOK_CLIENT_CERT", "")
	t.Setenv("RBOOK_CLIENT_KEY", "")
	_, url := serveHTTPS(t, dir, "127.0.0.1:0", serverCA, "--tls-client-ca", clientCA.CertFile, "--auth-file", authFile)

	if out, code := run(t, dir, "", "run", "demo", "--control-plane", url); code == 0 || !strings.Contains(out, "E_UNAUTHENTICATED") {
		t.Fatalf("a run without a certificate or token: exit %d\n%s", code, out)
	}
	stranger := otherCA.Client(t, "stranger")
	t.Setenv("RBOOK_CLIENT_CERT", stranger.CertFile)
	t.Setenv("RBOOK_CLIENT_KEY", stranger.KeyFile)
	if out, code := run(t, dir, "", "run", "demo", "--control-plane", url); code == 0 || !strings.Contains(out, "is not accepted") || !strings.Contains(out, "--tls-client-ca") {
		t.Fatalf("a run with a certificate of another CA: exit %d\n%s", code, out)
	}

	bot := clientCA.Client(t, "build-bot")
	t.Setenv("RBOOK_CLIENT_CERT", bot.CertFile)
	t.Setenv("RBOOK_CLIENT_KEY", bot.KeyFile)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	t.Setenv("RBOOK_TOKEN", approverToken)
	if out, code := run(t, dir, "", "approve", tok, "--control-plane", url); code != 0 {
		t.Fatalf("rbook approve with the approver's token: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("the run with a client certificate exited %d:\n%s", code, p.output())
	}
	res, err := cpclient.New(url, approverToken).Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: demoRunID.FindString(p.output())})
	if err != nil || res.GetRun().GetStartedBy() != "cert:build-bot" {
		t.Fatalf("GetRun: started_by %q, %v; want cert:build-bot", res.GetRun().GetStartedBy(), err)
	}
}

// Rotating the approval secret keeps an open gate decidable: a gate opened under secret A is
// approved with its token after the control plane restarted with B and
// RBOOK_APPROVAL_SECRET_PREVIOUS=A, and the run finishes; a control plane started on that
// database with yet another secret is refused and says what to do.
func TestApprovalSecretRotationKeepsAnOpenGateDecidable(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	ca := tlstest.NewCA(t, "rbook e2e CA")
	addr := freeAddr(t)
	const (
		secretA = "e2e-approval-secret-A-0123456789"
		secretB = "e2e-approval-secret-B-0123456789"
		secretC = "e2e-approval-secret-C-0123456789"
	)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	t.Setenv("RBOOK_TOKEN", "")
	t.Setenv("RBOOK_CA_FILE", ca.CertFile)
	t.Setenv("RBOOK_APPROVAL_SECRET", secretA)
	t.Setenv("RBOOK_APPROVAL_SECRET_PREVIOUS", "")
	srv, url := serveHTTPS(t, dir, addr, ca)
	p := start(t, dir, "run", "demo", "--control-plane", url)
	tok := tokenFrom(t, p)
	srv.cmd.Process.Kill()
	srv.wait(t)

	t.Setenv("RBOOK_APPROVAL_SECRET", secretB)
	t.Setenv("RBOOK_APPROVAL_SECRET_PREVIOUS", secretA)
	srv, _ = serveHTTPS(t, dir, addr, ca)
	if !strings.Contains(srv.output(), "approval tokens of the previous secret accepted (RBOOK_APPROVAL_SECRET_PREVIOUS)") {
		t.Fatalf("the address line does not say the previous secret verifies:\n%s", srv.output())
	}
	if out, code := run(t, dir, "", "approve", tok, "--control-plane", url); code != 0 {
		t.Fatalf("approving with a token of the previous secret: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("the run whose gate was approved across the rotation exited %d:\n%s", code, p.output())
	}
	srv.cmd.Process.Kill()
	srv.wait(t)

	t.Setenv("RBOOK_APPROVAL_SECRET", secretC)
	t.Setenv("RBOOK_APPROVAL_SECRET_PREVIOUS", "")
	out, code := run(t, dir, "", "serve", "--addr", addr, "--db", filepath.Join(dir, "cp.db"))
	if code != 2 || !strings.Contains(out, "is not the one this database") || !strings.Contains(out, "RBOOK_APPROVAL_SECRET_PREVIOUS") {
		t.Fatalf("a control plane with another secret: exit %d, want 2 and a refusal saying what to do\n%s", code, out)
	}
	if strings.Contains(out, secretA) || strings.Contains(out, secretB) || strings.Contains(out, secretC) {
		t.Fatalf("the refusal holds a secret:\n%s", out)
	}
}
