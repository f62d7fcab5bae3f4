package serveconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/server"
)

// TestSignInConfigNeedsAPublicURL: --sign-in-config without --public-url is refused with a
// message naming both (providers redirect back to the public URL); with it, the config and
// the URL reach the server's options.
func TestSignInConfigNeedsAPublicURL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "signin.yaml")
	yml := "providers:\n  - id: okta\n    kind: oidc\n    issuer: https://example.okta.com\n    client_id: c\n    rules:\n      - role: viewer\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	var o oidcFlags
	si := signInFlags{config: file}
	var cfg server.Config
	if _, err := o.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := si.apply(&cfg); err == nil || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "/auth/callback/") {
		t.Fatalf("without --public-url: err = %v, want it to ask for --public-url and name the callback path", err)
	}
	o.publicURL = "https://rbook.example.internal/"
	if _, err := o.apply(&cfg); err != nil {
		t.Fatal(err)
	}
	mode, err := si.apply(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SignIn == nil || cfg.PublicURL != "https://rbook.example.internal" || !strings.Contains(mode, "okta") {
		t.Errorf("options = SignIn %v, PublicURL %q, mode %q; want the config, the URL without its slash, and okta named", cfg.SignIn, cfg.PublicURL, mode)
	}
}
