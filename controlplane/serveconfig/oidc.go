package serveconfig

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rbookhq/rbook-action/controlplane/auth"
	"github.com/rbookhq/rbook-action/controlplane/consolelink"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/yamlerr"
)

// oidcFlags are rbook serve's --oidc-config and --public-url (docs/control-plane.md, "OIDC").
type oidcFlags struct{ config, publicURL string }

// add registers --oidc-config and --public-url on fs.
func (o *oidcFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&o.config, "oidc-config", "", "YAML file: GitHub Actions OIDC issuers, audience and the rules that grant executors (see docs/control-plane.md, OIDC)")
	fs.StringVar(&o.publicURL, "public-url", "", "the http(s) URL people and executors reach this control plane at: gates link to their page under it (URL/approvals/ID); the default audience of OIDC tokens")
}

// apply loads --oidc-config into cfg.OIDC and returns the words for the
// listening line ("" without OIDC). Errors name the file and line.
// --public-url needs a scheme and host, as executors' --control-plane does: a bare
// "127.0.0.1:7070" would be taken and no token's audience could match it.
func (o *oidcFlags) apply(cfg *server.Config) (string, error) {
	if o.publicURL == "off" {
		return "", fmt.Errorf("--public-url %q is not a URL: give the http:// or https:// URL executors reach this control plane at", o.publicURL)
	}
	if err := checkURL(o.publicURL, "--public-url"); err != nil {
		return "", err
	}
	pub, err := consolelink.ParsePublicURL(o.publicURL, "--public-url")
	if err != nil {
		return "", err
	}
	cfg.PublicURL = pub // the console's links (docs/console-links.md)
	if o.config == "" {
		return "", nil
	}
	oc, err := auth.LoadOIDCConfig(o.config)
	if err != nil {
		return "", err
	}
	if oc.Audience == "" {
		oc.Audience = pub
	}
	if oc.Audience == "" {
		return "", fmt.Errorf("%s: no audience: set audience: in the file or --public-url (the URL executors use, e.g. https://rbook.example.internal)", o.config)
	}
	if cfg.OIDC, err = auth.NewVerifier(*oc); err != nil {
		return "", err
	}
	return fmt.Sprintf("OIDC %s: audience %s, issuers %s, %s", o.config, oc.Audience, strings.Join(oc.Issuers, " "), yamlerr.Plural(len(oc.Rules), "rule", "rules")), nil
}

// checkURL refuses a --public-url that no executor could reach: it needs the scheme http://
// or https:// and a host ('127.0.0.1:7070', grpcurl's spelling, has neither). "" and "off"
// pass. from names the flag; the error says what to write instead.
func checkURL(u, from string) error {
	if u == "" || u == "off" {
		return nil
	}
	p, err := url.Parse(u)
	if err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" {
		return nil
	}
	hint := "http://" + DefaultAddr
	if !strings.Contains(u, "://") {
		hint = "http://" + u
	}
	return fmt.Errorf("%s %q is not a control plane URL: give its scheme (http:// or https://) and host, as in %s", from, u, hint)
}
