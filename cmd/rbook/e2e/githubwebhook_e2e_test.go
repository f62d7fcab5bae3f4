package e2e

// End-to-end tests of rbook serve's GitHub App flags and its webhook:
// a real `rbook serve` process, signed deliveries over HTTP, the fake GitHub for the App.

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

const e2eWebhookSecret = "e2e-webhook-secret-0123456789abcdef"

// writeWebhookSecret writes the webhook secret file (with a trailing newline, as editors do).
func writeWebhookSecret(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(p, []byte(e2eWebhookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func postDelivery(t *testing.T, url string, d ghfake.Delivery, secret string) int {
	t.Helper()
	req, err := d.Request(url, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Rbook serve with the GitHub App flags serves /github/webhook on its port;
// a signed delivery is processed once (a replay is 200 and changes nothing), a bad signature
// is 401, every refusal is logged without the secret, and the delivery is in the database.
func TestServeWebhookEndToEnd(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	gh := ghfake.New(t, 31337)
	secretFile := writeWebhookSecret(t, dir)
	addr := freeAddr(t)
	db := filepath.Join(dir, "cp.db")
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	p := start(t, dir, "serve", "--addr", addr, "--db", db, "--github-app-id", "31337", "--github-app-key", gh.KeyFile,
		"--github-webhook-secret-file", secretFile, "--github-api-url", gh.URL)
	p.waitFor(t, "listening on")
	if out := p.output(); !strings.Contains(out, "GitHub App 31337 at "+gh.URL+", webhook /github/webhook") {
		t.Fatalf("listening line does not name the App:\n%s", out)
	}
	url := "http://" + addr + "/github/webhook"

	d := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghfake.Repository{Owner: "acme", Name: "deploys", ID: 7},
		InstallationID: 77, RunID: 9001, ApproverLogin: "octo-lead", ApproverID: 4242, Comment: "ship it",
		JobRuns: []ghfake.JobRun{{ID: 1, Name: "deploy", Environment: "production"}}})
	if code := postDelivery(t, url, d, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("signed delivery: status %d, want 200\n%s", code, p.output())
	}
	p.waitFor(t, "github webhook processed")
	if code := postDelivery(t, url, d, e2eWebhookSecret); code != http.StatusOK {
		t.Fatalf("replayed delivery: status %d, want 200", code)
	}
	p.waitFor(t, "delivery already processed")
	forged := ghfake.DeploymentReview(ghfake.Review{Action: "approved", Repo: ghfake.Repository{Owner: "acme", Name: "deploys", ID: 7},
		InstallationID: 77, RunID: 9001, ApproverLogin: "mallory", ApproverID: 666})
	if code := postDelivery(t, url, forged, "a-guessed-secret-that-is-wrong"); code != http.StatusUnauthorized {
		t.Fatalf("forged delivery: status %d, want 401", code)
	}
	p.waitFor(t, "signature does not match")
	if resp, err := http.Get(url); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v, want 405", resp, err)
	}
	p.waitFor(t, "method GET not allowed")

	out := p.output()
	if n := strings.Count(out, "github deployment review"); n != 1 {
		t.Fatalf("the log handler ran %d times, want 1:\n%s", n, out)
	}
	for _, leak := range []string{e2eWebhookSecret, "ship it", "BEGIN RSA", ghfake.Sign([]byte(e2eWebhookSecret), d.Body)} {
		if strings.Contains(out, leak) {
			t.Fatalf("serve's output holds %q:\n%s", leak, out)
		}
	}
	st, err := store.OpenReadOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, want := range map[string]bool{d.ID: true, forged.ID: false} {
		if seen, err := st.GitHubDeliverySeen(context.Background(), id); err != nil || seen != want {
			t.Fatalf("delivery %s recorded=%v (%v), want %v", id, seen, err, want)
		}
	}
	// The App client was not needed yet: nothing reached GitHub.
	if n := len(gh.Requests()); n != 0 {
		t.Fatalf("fake GitHub got %d requests, want 0", n)
	}
}

// Without the flags /github/webhook answers 404 (not configured); the
// flags are all or nothing and their errors name the flag or file, never the contents.
func TestServeGitHubFlags(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	t.Setenv("RBOOK_APPROVAL_SECRET", testSecret)
	url := serveCP(t, dir)
	d := ghfake.Delivery{Event: "ping", ID: ghfake.NewDeliveryID(), Body: []byte(`{}`)}
	if code := postDelivery(t, url+"/github/webhook", d, e2eWebhookSecret); code != http.StatusNotFound {
		t.Fatalf("unconfigured webhook: status %d, want 404", code)
	}

	gh := ghfake.New(t, 5)
	secretFile := writeWebhookSecret(t, dir)
	shortSecret := filepath.Join(dir, "short.secret")
	os.WriteFile(shortSecret, []byte("tiny\n"), 0o600)
	notKey := filepath.Join(dir, "not-a-key.pem")
	os.WriteFile(notKey, []byte("top-secret-not-a-pem\n"), 0o600)
	base := []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db")}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--github-app-id", "5"}, "missing --github-app-key, --github-webhook-secret-file"},
		{[]string{"--github-app-key", gh.KeyFile, "--github-webhook-secret-file", secretFile}, "missing --github-app-id"},
		{[]string{"--github-api-url", gh.URL}, "--github-api-url needs --github-app-id"},
		{[]string{"--github-app-id", "-3", "--github-app-key", gh.KeyFile, "--github-webhook-secret-file", secretFile}, "--github-app-id -3"},
		{[]string{"--github-app-id", "5", "--github-app-key", filepath.Join(dir, "missing.pem"), "--github-webhook-secret-file", secretFile},
			"--github-app-key " + filepath.Join(dir, "missing.pem")},
		{[]string{"--github-app-id", "5", "--github-app-key", notKey, "--github-webhook-secret-file", secretFile}, "--github-app-key " + notKey + ": GitHub App private key: no PEM block"},
		{[]string{"--github-app-id", "5", "--github-app-key", gh.KeyFile, "--github-webhook-secret-file", shortSecret},
			"--github-webhook-secret-file " + shortSecret + ": the secret is 4 bytes, need at least 16"},
		{[]string{"--github-app-id", "5", "--github-app-key", gh.KeyFile, "--github-webhook-secret-file", secretFile, "--github-api-url", "ftp://x"},
			"--github-api-url: GitHub API URL \"ftp://x\""},
	}
	for _, c := range cases {
		out, code := run(t, dir, "", append(base, c.args...)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("rbook serve %v: exit %d, output\n%s\nwant exit 2 and %q", c.args, code, out, c.want)
		}
		if bytes.Contains([]byte(out), []byte("top-secret-not-a-pem")) || strings.Contains(out, e2eWebhookSecret) {
			t.Errorf("rbook serve %v printed a file's contents:\n%s", c.args, out)
		}
	}
}
