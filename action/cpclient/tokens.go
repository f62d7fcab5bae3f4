package cpclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/gen/rbook/v1/rbookv1connect"
)

// TokenSource gives the bearer token for one request to the control plane (docs/control-plane.md, "OIDC":
// a GitHub OIDC token is fetched per connection and refreshed before it expires). Token is
// called before every unary call and every stream; it must be safe for concurrent use. An
// error that has a Temporary() method returning true is retried like a network failure;
// any other error is a definite refusal (the run halts saying why).
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a fixed bearer token (RBOOK_TOKEN, an auth-file line).
type StaticToken string

// Token returns the token itself.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// JWTRefreshBefore is how long before a cached JWT's exp JWTSource fetches a new one: GitHub's
// OIDC tokens live about 5 to 10 minutes, a run longer, and one attempt of a call at most
// DefaultAttemptTimeout, so a token sent is never within a minute of expiring.
const JWTRefreshBefore = time.Minute

// jwtNoExpCache is how long JWTSource keeps a token whose exp it cannot read.
const jwtNoExpCache = 30 * time.Second

// JWTSource caches the JWT that Fetch returns until JWTRefreshBefore its exp (read from the
// token's payload without verifying it: the control plane verifies), then fetches again. It
// never logs or wraps the token into an error.
type JWTSource struct {
	// Fetch gets a fresh token (e.g. github.IDToken with the audience).
	Fetch func(ctx context.Context) (string, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu    sync.Mutex
	tok   string
	until time.Time
}

// Token returns the cached token, or fetches a new one when it is missing or near its exp.
func (s *JWTSource) Token(ctx context.Context) (string, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != "" && now().Before(s.until) {
		return s.tok, nil
	}
	tok, err := s.Fetch(ctx)
	if err != nil {
		return "", err
	}
	if tok == "" {
		return "", errors.New("the OIDC token endpoint returned an empty token")
	}
	until := now().Add(jwtNoExpCache)
	if exp, ok := jwtExpiry(tok); ok {
		until = exp.Add(-JWTRefreshBefore)
	}
	s.tok, s.until = tok, until
	return tok, nil
}

// jwtExpiry reads the exp claim of a JWT without verifying it.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var c struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return time.Time{}, false
	}
	secs, err := c.Exp.Int64()
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}

// NewWithTokenSource is New with the bearer token from ts per call (nil: no Authorization
// header): Token is asked before every unary request and as every stream opens, so a token
// that expires (JWTSource) is replaced while a run lasts (docs/control-plane.md, "OIDC").
func NewWithTokenSource(baseURL string, ts TokenSource) *Client {
	eps := newEndpoints(baseURL)
	c := &Client{credentialed: ts != nil, eps: eps}
	c.URL = strings.Join(c.URLs(), ",")
	interceptors := []connect.Interceptor{traceInterceptor{}, failoverInterceptor{c}}
	if ts != nil {
		interceptors = append(interceptors, tokenInterceptor{ts})
	}
	opts := []connect.ClientOption{connect.WithInterceptors(interceptors...)}
	hc := router{c}
	c.Runs = rbookv1connect.NewRunServiceClient(hc, eps[0].url, opts...)
	c.Approvals = rbookv1connect.NewApprovalServiceClient(hc, eps[0].url, opts...)
	return c
}

// tokenSourceError marks a token source's failure inside the connect error tokenError
// makes: the control plane was never asked, so it is no reason to move to another URL.
type tokenSourceError struct{ err error }

func (e *tokenSourceError) Error() string { return e.err.Error() }
func (e *tokenSourceError) Unwrap() error { return e.err }

// tokenError is a token source's failure as the retry loop sees it: Unavailable (retried)
// when the source says it is temporary, else Unauthenticated (a definite refusal).
func tokenError(err error) error {
	var t interface{ Temporary() bool }
	code := connect.CodeUnauthenticated
	if errors.As(err, &t) && t.Temporary() {
		code = connect.CodeUnavailable
	}
	return connect.NewError(code, fmt.Errorf("could not get a bearer token for the control plane: %w", &tokenSourceError{err}))
}

type tokenInterceptor struct{ ts TokenSource }

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		tok, err := t.ts.Token(ctx)
		if err != nil {
			return nil, tokenError(err)
		}
		req.Header().Set("Authorization", "Bearer "+tok)
		return next(ctx, req)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		tok, err := t.ts.Token(ctx)
		if err != nil {
			return &failedStream{StreamingClientConn: next(ctx, spec), err: tokenError(err)}
		}
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+tok)
		return conn
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// failedStream is a stream that could not get its token: it sends nothing and every Send and
// Receive fails with err (the stream is never opened on the wire).
type failedStream struct {
	connect.StreamingClientConn
	err error
}

func (f *failedStream) Send(any) error       { return f.err }
func (f *failedStream) Receive(any) error    { return f.err }
func (f *failedStream) CloseRequest() error  { return nil }
func (f *failedStream) CloseResponse() error { return nil }
