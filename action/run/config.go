package run

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/action/github"
)

// Config is a run's configuration, resolved once from flags and environment before anything
// else happens; every step of the pipeline reads it from here.
type Config struct {
	// ControlPlane is the control plane in one spelling (NormURLs): a URL or a comma list of
	// replicas, "off" for none, "" for the embedded one. From says where it came from
	// ("--control-plane" or "RBOOK_CONTROL_PLANE"), for messages.
	ControlPlane, From string
	// Flag is --control-plane as given (or the state file's, for a resumed run that reports to
	// it), repeated in hints.
	Flag string
	// Timeout bounds the control-plane calls (--control-plane-timeout); Lease is the run's
	// lease (--control-plane-lease).
	Timeout, Lease time.Duration
	// Auth is how the executor authenticates to its control plane.
	Auth Auth
	// Embedded is this folder's embedded control plane (nil: none can start).
	Embedded *Embedded
	// invalid is why ControlPlane is not a control-plane value (Resolve's CheckURLs; nil: it
	// is): a run refuses to start with it, a delivery that needs the configured control
	// plane fails with it.
	invalid error
}

// Resolve fills c.ControlPlane and c.From from flag, else $RBOOK_CONTROL_PLANE, and checks it
// (CheckURLs), once: the error, which says what to write instead, is kept for the pipeline
// too, so a caller may leave the refusal to it.
func (c *Config) Resolve(flag string) error {
	c.Flag = flag
	c.ControlPlane, c.From = ControlPlaneFrom(flag)
	c.invalid = CheckURLs(c.ControlPlane, c.From)
	return c.invalid
}

// Embedded is this folder's embedded control plane (the caller wires it: the executor never
// imports the control plane).
type Embedded struct {
	// Start starts it in this process and returns its URL and the func that stops it; "" when
	// another process serves this folder's database (a line on errw says so).
	Start func(ctx context.Context, errw io.Writer) (string, func(), error)
	// URLFile is where another process that serves it left its address; DB names its
	// database in messages.
	URLFile, DB string
}

// CheckURLs checks a control-plane value (--control-plane, $RBOOK_CONTROL_PLANE,
// the Action's control-plane input): one URL or several separated by commas, tried in order
// and moved through on failure (docs/control-plane.md, "Several control-plane URLs"). Spaces around items are trimmed; an empty
// item, an item without http:// or https:// and a host, or more than cpclient.MaxURLs items is
// refused with an error naming from and the item. "" and "off" pass.
func CheckURLs(u, from string) error {
	if u == "" || u == "off" {
		return nil
	}
	if _, err := cpclient.SplitURLs(u); err != nil {
		return fmt.Errorf("%s %v", from, err)
	}
	return nil
}

// ControlPlaneFrom is the URL a run or delivery would use from flag or $RBOOK_CONTROL_PLANE,
// and where it came from, for CheckURLs.
func ControlPlaneFrom(flag string) (u, from string) {
	if flag != "" {
		return NormURLs(flag), "--control-plane"
	}
	return NormURLs(os.Getenv("RBOOK_CONTROL_PLANE")), "RBOOK_CONTROL_PLANE"
}

// NormURLs is a valid control-plane list in one spelling: its URLs joined by commas,
// without spaces or trailing slashes (what the state file records and a printed
// "--control-plane …" hint repeats, so a shell takes it as one word). Anything else ("",
// "off", a list CheckURLs refuses) is returned as it is.
func NormURLs(u string) string {
	if u == "" || u == "off" {
		return u
	}
	urls, err := cpclient.SplitURLs(u)
	if err != nil {
		return u
	}
	return strings.Join(urls, ",")
}

// How an executor authenticates to its control plane: --control-plane-auth (default
// $RBOOK_CONTROL_PLANE_AUTH, else auto) and --oidc-audience (default $RBOOK_OIDC_AUDIENCE,
// else the control-plane URL; the Action's input oidc-audience).
const (
	AuthAuto  = "auto"  // RBOOK_TOKEN if set, else OIDC in a job that may request a token, else none
	AuthToken = "token" // RBOOK_TOKEN, required
	AuthOIDC  = "oidc"  // a GitHub Actions OIDC token, required
	AuthNone  = "none"  // no Authorization header
)

// Auth is --control-plane-auth and --oidc-audience as given ("" = from the environment, see
// ResolvedMode and AudienceFor), and where a client says it moved to the next URL.
type Auth struct {
	Mode, Audience string
	// Progress gets a client's line when it moves to the next URL (cpclient.MoveNotice).
	Progress io.Writer
}

// ResolvedMode is the effective --control-plane-auth.
func (a Auth) ResolvedMode() (string, error) {
	m := a.Mode
	if m == "" {
		m = os.Getenv("RBOOK_CONTROL_PLANE_AUTH")
	}
	if m == "" {
		return AuthAuto, nil
	}
	switch m = strings.ToLower(m); m {
	case AuthAuto, AuthToken, AuthOIDC, AuthNone:
		return m, nil
	}
	return "", fmt.Errorf("--control-plane-auth (RBOOK_CONTROL_PLANE_AUTH) is %q: want auto, token, oidc or none", m)
}

// AudienceFor is the OIDC audience for the control plane at url: --oidc-audience, else
// $RBOOK_OIDC_AUDIENCE, else the URL — the first one of a list of replicas, which all verify
// the one audience.
func (a Auth) AudienceFor(url string) string {
	if a.Audience != "" {
		return a.Audience
	}
	if aud := os.Getenv("RBOOK_OIDC_AUDIENCE"); aud != "" {
		return aud
	}
	if urls, err := cpclient.SplitURLs(url); err == nil {
		return urls[0]
	}
	return strings.TrimRight(url, "/")
}

// NewClient is the executor's client for the control plane at url (one URL or a comma
// list of replicas, moved through on failure with a progress line), authenticated as
// ResolvedMode says. An embedded control plane (no auth) never gets an OIDC token in auto
// mode: requesting one would only add a dependency on the runner's token service. Errors: a
// bad mode, the TLS environment of an https:// URL (cpclient.CheckTLS), token mode without
// RBOOK_TOKEN, oidc mode outside a job that may request a token.
func (a Auth) NewClient(url string, embedded bool) (c *cpclient.Client, err error) {
	defer func() {
		if c != nil && a.Progress != nil {
			c.Progress = a.Progress
		}
	}()
	mode, err := a.ResolvedMode()
	if err != nil {
		return nil, err
	}
	if err := cpclient.CheckTLS(url); err != nil {
		return nil, err
	}
	tok := os.Getenv("RBOOK_TOKEN")
	switch {
	case mode == AuthAuto && tok != "", mode == AuthAuto && embedded:
		return cpclient.New(url, tok), nil
	case mode == AuthAuto && github.CanRequestIDToken(os.Getenv):
		mode = AuthOIDC
	case mode == AuthAuto:
		return cpclient.New(url, ""), nil
	}
	switch mode {
	case AuthToken:
		if tok == "" {
			return nil, fmt.Errorf("--control-plane-auth token needs RBOOK_TOKEN (a token of the control plane's auth file)")
		}
		return cpclient.New(url, tok), nil
	case AuthNone:
		return cpclient.New(url, ""), nil
	}
	if !github.CanRequestIDToken(os.Getenv) {
		return nil, fmt.Errorf("--control-plane-auth oidc needs a GitHub Actions job with `permissions: id-token: write` (%s and %s are not set)",
			github.EnvIDTokenRequestURL, github.EnvIDTokenRequestToken)
	}
	audience := a.AudienceFor(url)
	src := &cpclient.JWTSource{Fetch: func(ctx context.Context) (string, error) {
		return github.IDToken(ctx, os.Getenv, audience)
	}}
	return cpclient.NewWithTokenSource(url, src), nil
}

// client is c.Auth.NewClient with calls bounded by c.Timeout.
func (c *Config) client(url string, embedded bool) (*cpclient.Client, error) {
	cl, err := c.Auth.NewClient(url, embedded)
	if err != nil {
		return nil, err
	}
	cl.Deadline = c.Timeout
	return cl, nil
}

// embeddedDB names the embedded control plane's database in messages.
func (c *Config) embeddedDB() string {
	if c.Embedded == nil {
		return ".rbook/controlplane.db"
	}
	return c.Embedded.DB
}
