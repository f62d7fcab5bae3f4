package cpclient_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// fakeJWT is an unsigned JWT whose payload carries exp (JWTSource reads only that).
func fakeJWT(n int, exp time.Time) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d,"n":%d}`, exp.Unix(), n)))
	return "eyJhbGciOiJSUzI1NiJ9." + payload + ".c2ln"
}

// The OIDC token is cached per connection and fetched again
// JWTRefreshBefore its exp, so a run longer than a token's life keeps authenticating; every
// request carries the current token in its Authorization header.
func TestJWTSourceRefreshesBeforeExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	fetches := 0
	src := &cpclient.JWTSource{
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Fetch: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			fetches++
			return fakeJWT(fetches, now.Add(5*time.Minute)), nil
		},
	}
	var seen []string
	srv := h2cServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/proto") // an empty ListRunsResponse
	}))
	defer srv.Close()
	c := cpclient.NewWithTokenSource(srv.URL, src)
	call := func() {
		t.Helper()
		if _, err := c.Runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	call()
	advance(3 * time.Minute)
	call() // 2 minutes left: the cached token
	advance(90 * time.Second)
	call() // 30 s left, under JWTRefreshBefore: a new one
	mu.Lock()
	defer mu.Unlock()
	if fetches != 2 || len(seen) != 3 {
		t.Fatalf("fetches %d, requests %d; want 2 and 3", fetches, len(seen))
	}
	start := now.Add(-(3*time.Minute + 90*time.Second))
	want := []string{"Bearer " + fakeJWT(1, start.Add(5*time.Minute)), "Bearer " + fakeJWT(1, start.Add(5*time.Minute)), "Bearer " + fakeJWT(2, now.Add(5*time.Minute))}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d: Authorization %q, want %q", i, seen[i], want[i])
		}
	}
}

// h2cServer is an httptest server that speaks h2c, as rbook serve does.
func h2cServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	return srv
}

type tempErr struct{}

func (tempErr) Error() string   { return "the runner's token service is busy" }
func (tempErr) Temporary() bool { return true }

// A token source's temporary failure is retried (Unavailable); any other is
// a definite refusal (Unauthenticated) that halts the run at once.
func TestTokenSourceFailures(t *testing.T) {
	srv := h2cServer(http.NotFoundHandler())
	defer srv.Close()
	for _, tc := range []struct {
		err       error
		code      connect.Code
		retryable bool
	}{{tempErr{}, connect.CodeUnavailable, true}, {errors.New("no id-token permission"), connect.CodeUnauthenticated, false}} {
		c := cpclient.NewWithTokenSource(srv.URL, &cpclient.JWTSource{Fetch: func(context.Context) (string, error) { return "", tc.err }})
		_, err := c.Runs.ListRuns(context.Background(), &rbookv1.ListRunsRequest{})
		if connect.CodeOf(err) != tc.code || cpclient.Retryable(err) != tc.retryable {
			t.Errorf("%v: code %s retryable %v, want %s %v", tc.err, connect.CodeOf(err), cpclient.Retryable(err), tc.code, tc.retryable)
		}
	}
}
