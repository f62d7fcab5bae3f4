package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sethvargo/go-githubactions"
)

// The environment a job with `permissions: id-token: write` gets from the runner (GitHub,
// "About security hardening with OpenID Connect").
const (
	EnvIDTokenRequestURL   = "ACTIONS_ID_TOKEN_REQUEST_URL"
	EnvIDTokenRequestToken = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
)

// CanRequestIDToken reports whether getenv has both variables a job needs to request an OIDC
// token (the job has `permissions: id-token: write`).
func CanRequestIDToken(getenv func(string) string) bool {
	return getenv(EnvIDTokenRequestURL) != "" && getenv(EnvIDTokenRequestToken) != ""
}

// IDTokenError is a failed OIDC token request. It never holds the token or the request
// token. Temporary is true for failures that may pass (network, HTTP 429 and 5xx), so the
// control-plane client retries them (cpclient.TokenSource).
type IDTokenError struct {
	Err       error
	temporary bool
}

func (e *IDTokenError) Error() string {
	return "request a GitHub Actions OIDC token: " + e.Err.Error()
}

func (e *IDTokenError) Unwrap() error { return e.Err }

// Temporary reports whether the request may succeed if made again.
func (e *IDTokenError) Temporary() bool { return e.temporary }

// IDToken requests an OIDC token for audience from the runner (go-githubactions GetIDToken:
// GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=… with the request token as bearer; docs/control-plane.md, "OIDC"). getenv reads the environment (os.Getenv). Errors: *IDTokenError (variables missing,
// the request failed, an empty answer).
func IDToken(ctx context.Context, getenv func(string) string, audience string) (string, error) {
	a := githubactions.New(githubactions.WithGetenv(getenv))
	tok, err := a.GetIDToken(ctx, audience)
	if err != nil {
		var missing *githubactions.EnvMissingError
		var failed *githubactions.RequestFailedError
		switch {
		case errors.As(err, &missing):
			return "", &IDTokenError{Err: fmt.Errorf("%s is not set: give the job `permissions: id-token: write`", missing.Name)}
		case errors.As(err, &failed):
			return "", &IDTokenError{Err: fmt.Errorf("the runner answered HTTP %d", failed.StatusCode),
				temporary: failed.StatusCode == http.StatusTooManyRequests || failed.StatusCode >= 500}
		default:
			return "", &IDTokenError{Err: err, temporary: true}
		}
	}
	if tok == "" {
		return "", &IDTokenError{Err: errors.New("the runner returned an empty token")}
	}
	return tok, nil
}
