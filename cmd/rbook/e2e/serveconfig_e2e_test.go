package e2e

// End-to-end tests of `rbook serve --config` and the limits of the public endpoints
// (docs/serve-config.md), against the real binary.

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A served control plane takes its settings from the --config file: the auth file it names
// turns token sign-in on, and its sign-in rate refuses the third attempt in a minute with
// 429 and Retry-After, while another endpoint answers as usual.
func TestServeTakesItsSettingsFromTheConfigFile(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.txt")
	if err := os.WriteFile(auth, []byte("alice approver tok-alice-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(cfg, []byte("auth-file: "+auth+"\nrate-limit-signin: 2/m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := serveCP(t, dir, "--config", cfg)
	signIn := func() *http.Response {
		t.Helper()
		resp, err := http.Post(url+"/auth/token", "application/json", strings.NewReader(`{"token":"not-a-token"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 2 {
		if resp := signIn(); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("sign-in %d with a wrong token: %s, want 401 (token sign-in from the file's auth file)", i+1, resp.Status)
		}
	}
	resp := signIn()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third sign-in in a minute: %s, want 429 (rate-limit-signin: 2/m)", resp.Status)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
		t.Errorf("Retry-After %q, want 1 to 30 seconds (a token every 30 s)", resp.Header.Get("Retry-After"))
	}
	page, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Errorf("the console page: %s, want 200 (another endpoint, its own bucket)", page.Status)
	}
}
