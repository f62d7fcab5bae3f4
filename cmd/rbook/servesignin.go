package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// serveSignIn holds rbook serve's --sign-in-config (docs/console-signin.md).
var serveSignIn struct{ config string }

// addServeSignInFlags registers --sign-in-config on cmd.
func addServeSignInFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&serveSignIn.config, "sign-in-config", "", "YAML file: the OIDC and GitHub providers people sign in to the console with, and the rules that give them a role (see docs/console-signin.md); needs --public-url")
}

// applyServeSignIn loads --sign-in-config into cfg.SignIn and returns the words for the
// listening line ("" without a config). It runs after applyServeOIDC, which sets
// cfg.PublicURL from --public-url. Errors name the file, line and field.
func applyServeSignIn(cfg *server.Config) (string, error) {
	if serveSignIn.config == "" {
		return "", nil
	}
	sc, err := auth.LoadSignInConfig(serveSignIn.config)
	if err != nil {
		return "", err
	}
	if cfg.PublicURL == "" {
		return "", fmt.Errorf("--sign-in-config %s needs --public-url: the URL browsers reach this control plane at, which providers redirect back to (register %s/auth/callback/<id> with each provider)", serveSignIn.config, "https://rbook.example.internal")
	}
	ids := make([]string, len(sc.Providers))
	for i, p := range sc.Providers {
		ids[i] = p.ID
	}
	cfg.SignIn = sc
	return fmt.Sprintf("console sign-in %s: %s, sessions %s", serveSignIn.config, strings.Join(ids, " "), sc.SessionTTL), nil
}
