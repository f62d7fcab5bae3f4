package serveconfig

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/server"
)

// signInFlags are rbook serve's --sign-in-config (docs/console-signin.md).
type signInFlags struct{ config string }

// add registers --sign-in-config on fs.
func (si *signInFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&si.config, "sign-in-config", "", "YAML file: the OIDC and GitHub providers people sign in to the console with, and the rules that give them a role (see docs/console-signin.md); needs --public-url")
}

// apply loads --sign-in-config into cfg.SignIn and returns the words for the
// listening line ("" without a config). It runs after oidcFlags.apply, which sets
// cfg.PublicURL from --public-url. Errors name the file, line and field.
func (si *signInFlags) apply(cfg *server.Config) (string, error) {
	if si.config == "" {
		return "", nil
	}
	sc, err := auth.LoadSignInConfig(si.config)
	if err != nil {
		return "", err
	}
	if cfg.PublicURL == "" {
		return "", fmt.Errorf("--sign-in-config %s needs --public-url: the URL browsers reach this control plane at, which providers redirect back to (register %s/auth/callback/<id> with each provider)", si.config, "https://rbook.example.internal")
	}
	ids := make([]string, len(sc.Providers))
	for i, p := range sc.Providers {
		ids[i] = p.ID
	}
	cfg.SignIn = sc
	return fmt.Sprintf("console sign-in %s: %s, sessions %s", si.config, strings.Join(ids, " "), sc.SessionTTL), nil
}
