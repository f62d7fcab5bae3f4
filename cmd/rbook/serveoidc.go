package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// serveOIDC holds rbook serve's --oidc-config and --public-url (issue 7, item 5).
var serveOIDC struct{ config, publicURL string }

// addServeOIDCFlags registers --oidc-config and --public-url on cmd.
func addServeOIDCFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&serveOIDC.config, "oidc-config", "", "YAML file: GitHub Actions OIDC issuers, audience and the rules that grant executors (see README, OIDC)")
	fs.StringVar(&serveOIDC.publicURL, "public-url", "", "the URL executors reach this control plane at; the default audience of OIDC tokens")
}

// applyServeOIDC loads --oidc-config into cfg.OIDC and returns the words for the
// listening line ("" without OIDC). Errors name the file and line.
func applyServeOIDC(cfg *server.Config) (string, error) {
	if serveOIDC.config == "" {
		return "", nil
	}
	oc, err := auth.LoadOIDCConfig(serveOIDC.config)
	if err != nil {
		return "", err
	}
	if oc.Audience == "" {
		oc.Audience = strings.TrimRight(serveOIDC.publicURL, "/")
	}
	if oc.Audience == "" {
		return "", fmt.Errorf("%s: no audience: set audience: in the file or --public-url (the URL executors use, e.g. https://rbook.example.internal)", serveOIDC.config)
	}
	if cfg.OIDC, err = auth.NewVerifier(*oc); err != nil {
		return "", err
	}
	return fmt.Sprintf("OIDC %s: audience %s, issuers %s, %d rules", serveOIDC.config, oc.Audience, strings.Join(oc.Issuers, " "), len(oc.Rules)), nil
}
