package main

import (
	"fmt"
	"strings"

	pipeline "github.com/rbookhq/rbook-action/action/run"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// serveOIDC holds rbook serve's --oidc-config and --public-url (docs/control-plane.md, "OIDC").
var serveOIDC struct{ config, publicURL string }

// addServeOIDCFlags registers --oidc-config and --public-url on cmd.
func addServeOIDCFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&serveOIDC.config, "oidc-config", "", "YAML file: GitHub Actions OIDC issuers, audience and the rules that grant executors (see docs/control-plane.md, OIDC)")
	fs.StringVar(&serveOIDC.publicURL, "public-url", "", "the http(s) URL people and executors reach this control plane at: gates link to their page under it (URL/approvals/ID); the default audience of OIDC tokens")
}

// applyServeOIDC loads --oidc-config into cfg.OIDC and returns the words for the
// listening line ("" without OIDC). Errors name the file and line.
// --public-url needs a scheme and host, as executors' --control-plane does: a bare
// "127.0.0.1:7070" would be taken and no token's audience could match it.
func applyServeOIDC(cfg *server.Config) (string, error) {
	if serveOIDC.publicURL == "off" {
		return "", fmt.Errorf("--public-url %q is not a URL: give the http:// or https:// URL executors reach this control plane at", serveOIDC.publicURL)
	}
	if err := pipeline.CheckURL(serveOIDC.publicURL, "--public-url"); err != nil {
		return "", err
	}
	pub, err := consolelink.ParsePublicURL(serveOIDC.publicURL, "--public-url")
	if err != nil {
		return "", err
	}
	cfg.PublicURL = pub // the console's links (docs/console-links.md)
	if serveOIDC.config == "" {
		return "", nil
	}
	oc, err := auth.LoadOIDCConfig(serveOIDC.config)
	if err != nil {
		return "", err
	}
	if oc.Audience == "" {
		oc.Audience = pub
	}
	if oc.Audience == "" {
		return "", fmt.Errorf("%s: no audience: set audience: in the file or --public-url (the URL executors use, e.g. https://rbook.example.internal)", serveOIDC.config)
	}
	if cfg.OIDC, err = auth.NewVerifier(*oc); err != nil {
		return "", err
	}
	return fmt.Sprintf("OIDC %s: audience %s, issuers %s, %s", serveOIDC.config, oc.Audience, strings.Join(oc.Issuers, " "), yamlerr.Plural(len(oc.Rules), "rule", "rules")), nil
}
