package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
)

// How an executor authenticates to its control plane (issue 7, item 5): --control-plane-auth
// (default $RBOOK_CONTROL_PLANE_AUTH, else auto) and --oidc-audience (default
// $RBOOK_OIDC_AUDIENCE, else the control-plane URL; the Action's input oidc-audience).
const (
	cpAuthAuto  = "auto"  // RBOOK_TOKEN if set, else OIDC in a job that may request a token, else none
	cpAuthToken = "token" // RBOOK_TOKEN, required
	cpAuthOIDC  = "oidc"  // a GitHub Actions OIDC token, required
	cpAuthNone  = "none"  // no Authorization header
)

// cpAuth holds the run command's --control-plane-auth and --oidc-audience ("" = from the
// environment, see cpAuthMode and cpAuthAudience).
var cpAuth struct{ mode, audience string }

// addControlPlaneAuthFlags registers --control-plane-auth and --oidc-audience on cmd.
func addControlPlaneAuthFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&cpAuth.mode, "control-plane-auth", "", "how to authenticate to the control plane: auto (default: $RBOOK_TOKEN if set, "+
		"else a GitHub OIDC token in a job with \"permissions: id-token: write\", else none), token, oidc or none; default $RBOOK_CONTROL_PLANE_AUTH")
	fs.StringVar(&cpAuth.audience, "oidc-audience", "", "audience of the GitHub OIDC token (default $RBOOK_OIDC_AUDIENCE, else the control-plane URL)")
}

// cpAuthMode is the effective --control-plane-auth.
func cpAuthMode() (string, error) {
	m := cpAuth.mode
	if m == "" {
		m = os.Getenv("RBOOK_CONTROL_PLANE_AUTH")
	}
	if m == "" {
		return cpAuthAuto, nil
	}
	switch m = strings.ToLower(m); m {
	case cpAuthAuto, cpAuthToken, cpAuthOIDC, cpAuthNone:
		return m, nil
	}
	return "", fmt.Errorf("--control-plane-auth (RBOOK_CONTROL_PLANE_AUTH) is %q: want auto, token, oidc or none", m)
}

// cpAuthAudience is the OIDC audience for the control plane at url: --oidc-audience, else
// $RBOOK_OIDC_AUDIENCE, else the URL — the first one of a list of replicas (D10-6), which
// all verify the one audience.
func cpAuthAudience(url string) string {
	if cpAuth.audience != "" {
		return cpAuth.audience
	}
	if a := os.Getenv("RBOOK_OIDC_AUDIENCE"); a != "" {
		return a
	}
	if urls, err := cpclient.SplitURLs(url); err == nil {
		return urls[0]
	}
	return strings.TrimRight(url, "/")
}

// cpProgress is where a control-plane client says it moved to the next URL
// (cpclient.MoveNotice; D10-6): stderr, with the run's other progress lines.
var cpProgress io.Writer = os.Stderr

// newCPClient is the executor's client for the control plane at url (one URL or a comma
// list of replicas, moved through on failure with a progress line; D10-6), authenticated as
// cpAuthMode says. An embedded control plane (no auth) never gets an OIDC token in auto
// mode: requesting one would only add a dependency on the runner's token service. Errors: a
// bad mode, token mode without RBOOK_TOKEN, oidc mode outside a job that may request a token.
func newCPClient(url string, embedded bool) (c *cpclient.Client, err error) {
	defer func() {
		if c != nil {
			c.Progress = cpProgress
		}
	}()
	mode, err := cpAuthMode()
	if err != nil {
		return nil, err
	}
	tok := os.Getenv("RBOOK_TOKEN")
	switch {
	case mode == cpAuthAuto && tok != "", mode == cpAuthAuto && embedded:
		return cpclient.New(url, tok), nil
	case mode == cpAuthAuto && github.CanRequestIDToken(os.Getenv):
		mode = cpAuthOIDC
	case mode == cpAuthAuto:
		return cpclient.New(url, ""), nil
	}
	switch mode {
	case cpAuthToken:
		if tok == "" {
			return nil, fmt.Errorf("--control-plane-auth token needs RBOOK_TOKEN (a token of the control plane's auth file)")
		}
		return cpclient.New(url, tok), nil
	case cpAuthNone:
		return cpclient.New(url, ""), nil
	}
	if !github.CanRequestIDToken(os.Getenv) {
		return nil, fmt.Errorf("--control-plane-auth oidc needs a GitHub Actions job with `permissions: id-token: write` (%s and %s are not set)",
			github.EnvIDTokenRequestURL, github.EnvIDTokenRequestToken)
	}
	audience := cpAuthAudience(url)
	src := &cpclient.JWTSource{Fetch: func(ctx context.Context) (string, error) {
		return github.IDToken(ctx, os.Getenv, audience)
	}}
	return cpclient.NewWithTokenSource(url, src), nil
}
