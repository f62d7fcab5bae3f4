package main

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
	saved, savedURL := serveSignIn, serveOIDC.publicURL
	t.Cleanup(func() { serveSignIn, serveOIDC.publicURL = saved, savedURL })
	serveSignIn.config, serveOIDC.publicURL = file, ""
	var cfg server.Config
	if _, err := applyServeOIDC(&cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := applyServeSignIn(&cfg); err == nil || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "/auth/callback/") {
		t.Fatalf("without --public-url: err = %v, want it to ask for --public-url and name the callback path", err)
	}
	serveOIDC.publicURL = "https://rbook.example.internal/"
	if _, err := applyServeOIDC(&cfg); err != nil {
		t.Fatal(err)
	}
	mode, err := applyServeSignIn(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SignIn == nil || cfg.PublicURL != "https://rbook.example.internal" || !strings.Contains(mode, "okta") {
		t.Errorf("options = SignIn %v, PublicURL %q, mode %q; want the config, the URL without its slash, and okta named", cfg.SignIn, cfg.PublicURL, mode)
	}
}
