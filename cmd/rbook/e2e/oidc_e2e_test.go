package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// End to end with real processes: `rbook serve --oidc-config` trusts a local
// issuer; `rbook run demo` in a simulated job with `permissions: id-token: write` (the
// ACTIONS_ID_TOKEN_* variables point at a fake runner token endpoint) and no RBOOK_TOKEN
// authenticates with an OIDC token for its audience, runs to the gate, an auth-file approver
// approves it, the run completes, and GetRun shows the job that started it. The same job
// asking for the default audience (the control-plane URL) is refused, saying why.
func TestOIDCEndToEnd(t *testing.T) {
	skipShort(t)
	const audience = "https://rbook.example.internal"
	dir := workdir(t)
	iss := authtest.NewIssuer(t)
	te := authtest.NewTokenEndpoint(t, iss, nil)
	cfgPath := filepath.Join(dir, "oidc.yaml")
	writeTestFile(t, cfgPath, []byte("issuers: ["+iss.URL+"]\ninsecure_http_issuers: true\naudience: "+audience+"\nrules:\n"+
		"  - repository: owner/repo\n    ref: refs/heads/main\n    environment: production\n"))
	authPath := filepath.Join(dir, "auth.txt")
	writeTestFile(t, authPath, []byte("alice approver appr-token-0123456789\ngrafana viewer view-token-0123456789\n"))
	url := serveCP(t, dir, "--oidc-config", cfgPath, "--auth-file", authPath)
	for _, kv := range te.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("RBOOK_TOKEN", "")
	t.Setenv("RBOOK_CONTROL_PLANE_AUTH", "")
	t.Setenv("RBOOK_OIDC_AUDIENCE", "")
	t.Setenv("RBOOK_SHOW_TOKEN", "1")

	p := start(t, dir, "run", "demo", "--control-plane", url, "--oidc-audience", audience)
	tok := tokenFrom(t, p)
	approve := exec.Command(rbookBin, "approve", tok, "--control-plane", url, "--reason", "ship it")
	approve.Dir, approve.Env = dir, append(os.Environ(), "RBOOK_TOKEN=appr-token-0123456789")
	if out, err := approve.CombinedOutput(); err != nil || !strings.Contains(string(out), "approved") {
		t.Fatalf("rbook approve: %v\n%s", err, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("rbook run exited %d:\n%s", code, p.output())
	}
	if n := te.Requests.Load(); n < 1 {
		t.Fatalf("the token endpoint minted %d tokens", n)
	}
	if got := te.LastAudience.Load(); got != audience {
		t.Errorf("the executor asked for audience %v, want %s", got, audience)
	}
	s := readState(t, dir)
	resp, err := cpclient.New(url, "view-token-0123456789").Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: s.RunID})
	if err != nil {
		t.Fatal(err)
	}
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	run := resp.GetRun()
	job := run.GetStartedByJob()
	if run.GetStartedBy() != "oidc:owner/repo@refs/heads/main" || job.GetActor() != "octocat" || job.GetRepository() != "owner/repo" ||
		job.GetRunId() != "1234567890" || job.GetRunAttempt() != "2" || job.GetEnvironment() != "production" ||
		job.GetSha() != "0123456789abcdef0123456789abcdef01234567" || job.GetWorkflowRef() != "owner/repo/.github/workflows/deploy.yml@refs/heads/main" {
		t.Errorf("started_by %q, started_by_job %v", run.GetStartedBy(), job)
	}
	// No OIDC token in the output or the state file: its JOSE header {"alg":"RS256",… is
	// base64url eyJhbGciOiJSUzI1NiI… (the approval token printed for RBOOK_SHOW_TOKEN has none).
	const jwtHeader = "eyJhbGciOiJSUzI1NiI"
	if strings.Contains(p.output(), jwtHeader) || strings.Contains(readFile(t, filepath.Join(dir, ".rbook", "demo.state.json")), jwtHeader) {
		t.Errorf("an OIDC token reached the output or the state file")
	}

	// Without --oidc-audience the token is for the control-plane URL, which this server does
	// not accept: refused at once (exit 2), naming both audiences.
	os.Remove(filepath.Join(dir, ".rbook", "demo.state.json"))
	p2 := start(t, dir, "run", "demo", "--control-plane", url)
	if code := p2.wait(t); code != 2 || !strings.Contains(p2.output(), "E_UNAUTHENTICATED") ||
		!strings.Contains(p2.output(), `is for audience "`+url+`", not this control plane's "`+audience+`"`) {
		t.Fatalf("wrong audience: exit %d\n%s", code, p2.output())
	}
}
