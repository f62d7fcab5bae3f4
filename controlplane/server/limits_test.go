package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/metrics"
	"github.com/rbookhq/rbook-action/controlplane/server"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/internal/buildinfo"
)

// newLimitedServer is newInProcess with limits; tests call its ServeHTTP with the client
// address they need.
func newLimitedServer(t *testing.T, limits server.Limits, opts server.Options) *server.Server {
	t.Helper()
	opts.Limits = &limits
	h := newInProcess(t, opts)
	t.Cleanup(func() { h.Close() })
	return h
}

// limitedRequest is one request of an endpoint's family.
type limitedRequest struct {
	name, method, path, body string
	endpoint                 string // its label in rbook_http_requests_refused_total
	browser                  bool   // sent by a browser: Origin and Sec-Fetch-* headers, as the console sends them
}

func (lr limitedRequest) send(h http.Handler, remote string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(lr.method, lr.path, strings.NewReader(lr.body))
	r.RemoteAddr = remote
	if lr.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if lr.browser {
		r.Header.Set("Origin", "http://"+r.Host)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Sec-Fetch-Mode", "cors")
	}
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// authFor is an Authenticator with one approver, so that /auth/ is served.
func authFor(t *testing.T) *server.Authenticator {
	t.Helper()
	a, err := server.ParseAuth(strings.NewReader("alice approver tok-alice-0123456789abcdef\n"), "auth.txt")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Past its endpoint's rate a client gets 429 with a Retry-After of when its next token comes;
// another client is unaffected; the RPCs of executors, the CLI and other API clients (no
// Origin header) are not limited by address.
func TestClientOverTheRateGets429WithRetryAfter(t *testing.T) {
	three := server.Rate{N: 3, Per: time.Minute}
	m := metrics.New(buildinfo.Version{Version: "test"})
	h := newLimitedServer(t, server.Limits{Webhook: three, Slack: three, SignIn: three, Console: three}, server.Options{Auth: authFor(t), Metrics: m})
	for i, lr := range []limitedRequest{
		{name: "GitHub webhook", endpoint: "webhook", method: "POST", path: webhook.Path, body: "{}"},
		{name: "Slack interactions", endpoint: "slack", method: "POST", path: server.SlackInteractionsPath, body: "{}"},
		{name: "sign-in", endpoint: "signin", method: "GET", path: "/auth/login/okta"},
		{name: "console page", endpoint: "console", method: "GET", path: "/approvals/A-1"},
		{name: "console RPC from a browser", endpoint: "console", method: "POST", path: "/rbook.v1.IdentityService/WhoAmI", body: "{}", browser: true},
	} {
		// Each family its own client: the console's pages and its RPCs share one bucket.
		client := fmt.Sprintf("192.0.2.%d", 10+i)
		t.Run(lr.name, func(t *testing.T) {
			for i := range 3 {
				if w := lr.send(h, client+":4000", nil); w.Code == http.StatusTooManyRequests {
					t.Fatalf("request %d of 3 refused: %d %s", i+1, w.Code, w.Body)
				}
			}
			w := lr.send(h, client+":4001", nil)
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("4th request: %d %s, want 429", w.Code, w.Body)
			}
			// One token every 20 s: the next comes in at most 20 s.
			if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || s < 1 || s > 20 {
				t.Errorf("Retry-After %q, want 1 to 20 seconds", w.Header().Get("Retry-After"))
			}
			if !strings.Contains(w.Body.String(), "limit 3/m") {
				t.Errorf("429 body %q does not say the limit", w.Body)
			}
			// Each refusal is counted (the console's page and RPC share the endpoint's series).
			want := 1.0
			if lr.name == "console RPC from a browser" {
				want = 2
			}
			if got := metricValue(t, m, "rbook_http_requests_refused_total", map[string]string{"endpoint": lr.endpoint, "reason": "rate"}); got != want {
				t.Errorf("rbook_http_requests_refused_total{endpoint=%q,reason=\"rate\"} = %v, want %v", lr.endpoint, got, want)
			}
			if w := lr.send(h, "198.51.100.20:4000", nil); w.Code == http.StatusTooManyRequests {
				t.Errorf("another client refused: %d %s", w.Code, w.Body)
			}
		})
	}
	t.Run("executor RPC", func(t *testing.T) {
		lr := limitedRequest{method: "POST", path: "/rbook.v1.IdentityService/WhoAmI", body: "{}"}
		nodeFetch := http.Header{"Sec-Fetch-Mode": {"cors"}} // Node's fetch sends it, without Origin
		for i := range 10 {
			if w := lr.send(h, "192.0.2.10:4000", map[bool]http.Header{true: nodeFetch}[i%2 == 0]); w.Code != http.StatusOK {
				t.Fatalf("executor call %d: %d %s, want 200 (executors are not limited by address)", i+1, w.Code, w.Body)
			}
		}
	})
}

// A body over its endpoint's cap is refused with 413: at once from Content-Length, or when
// the handler reads past it (a chunked body).
func TestOversizedBodyGets413(t *testing.T) {
	h := newLimitedServer(t, server.DefaultLimits(), server.Options{Auth: authFor(t)})
	for _, tc := range []struct {
		name, path string
		size       int
		chunked    bool
	}{
		{"webhook over 1 MiB", webhook.Path, webhook.MaxBodyBytes + 1, false},
		{"Slack over 1 MiB", server.SlackInteractionsPath, 1<<20 + 1, false},
		{"sign-in over 16 KiB", "/auth/token", 16<<10 + 1, false},
		{"token sign-in over 8 KiB, chunked", "/auth/token", 9 << 10, true},
		{"console over 64 KiB", "/", 64<<10 + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"token":"` + strings.Repeat("x", tc.size-12) + `"}`
			r := httptest.NewRequest("POST", tc.path, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.RemoteAddr = "192.0.2.30:5000"
			if tc.chunked {
				r.ContentLength = -1
				r.Body = io.NopCloser(strings.NewReader(body))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("%d-byte body: %d %s, want 413", len(body), w.Code, w.Body)
			}
		})
	}
}

// Refusals are counted each time and logged once per client, endpoint and reason a minute,
// with the client's address and the limit, never the request.
func TestRefusalsAreLoggedOncePerClientPerMinute(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newLimitedServer(t, server.Limits{Webhook: server.Rate{N: 1, Per: time.Hour}}, server.Options{Logger: logger})
	lr := limitedRequest{method: "POST", path: webhook.Path, body: `{"secret":"do-not-log"}`}
	for range 11 {
		lr.send(h, "192.0.2.40:6000", nil)
	}
	lr.send(h, "198.51.100.40:6000", nil)
	lr.send(h, "198.51.100.40:6000", nil)
	var warned, counted []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec["msg"] {
		case "request refused":
			warned = append(warned, rec)
		case "refused request counted":
			counted = append(counted, rec)
		}
	}
	if len(counted) != 11 {
		t.Errorf("%d refusals counted, want 11 (10 + 1)", len(counted))
	}
	if len(warned) != 2 {
		t.Fatalf("%d refusals logged, want 2 (once per client):\n%s", len(warned), logs.String())
	}
	for i, client := range []string{"192.0.2.40", "198.51.100.40"} {
		w := warned[i]
		if w["client"] != client || w["endpoint"] != "webhook" || w["reason"] != "rate" || w["limit"] != "1/h" || w["level"] != "WARN" {
			t.Errorf("log %d = %v, want client %s, webhook, rate, 1/h", i, w, client)
		}
	}
	if strings.Contains(logs.String(), "do-not-log") {
		t.Error("a refusal logged the request body")
	}
}

// X-Forwarded-For names the client only when the peer is a trusted proxy: the right-most
// address that is not a trusted proxy, so a client cannot pick its own bucket by prepending
// addresses; an untrusted peer's header is ignored. IPv6 clients share their /64's bucket.
func TestTrustedProxyForwardedForNamesTheClient(t *testing.T) {
	h := newLimitedServer(t, server.Limits{
		Webhook:        server.Rate{N: 1, Per: time.Hour},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}, server.Options{})
	lr := limitedRequest{method: "POST", path: webhook.Path}
	xff := func(v ...string) http.Header { return http.Header{"X-Forwarded-For": v} }
	for i, step := range []struct {
		remote  string
		header  http.Header
		refused bool
	}{
		{"10.0.0.5:1", xff("203.0.113.9"), false},
		{"10.0.0.6:1", xff("203.0.113.9"), true}, // same client through another proxy
		{"10.0.0.5:1", xff("203.0.113.10"), false},
		{"10.0.0.5:1", xff("198.51.100.1, 203.0.113.11", "10.0.0.7"), false}, // two proxies
		{"10.0.0.5:1", xff("203.0.113.11"), true},
		{"10.0.0.5:1", xff("192.0.2.99, 203.0.113.11"), true}, // a prepended address changes nothing
		{"10.0.0.5:1", nil, false},                            // no header: the proxy itself
		{"192.0.2.50:1", xff("203.0.113.12"), false},
		{"192.0.2.50:1", xff("203.0.113.13"), true}, // an untrusted peer's header is ignored
		{"[2001:db8:1:2::1]:1", nil, false},
		{"[2001:db8:1:2::ffff]:1", nil, true}, // the same /64
		{"[2001:db8:1:3::1]:1", nil, false},
	} {
		w := lr.send(h, step.remote, step.header)
		if got := w.Code == http.StatusTooManyRequests; got != step.refused {
			t.Errorf("step %d (%s, X-Forwarded-For %v): refused %v, want %v", i, step.remote, step.header["X-Forwarded-For"], got, step.refused)
		}
	}
}

// Rates read as the flags take them and print back the same.
func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want server.Rate
		err  string
	}{
		{"20/s", server.Rate{N: 20, Per: time.Second}, ""},
		{"30/m", server.Rate{N: 30, Per: time.Minute}, ""},
		{"600/h", server.Rate{N: 600, Per: time.Hour}, ""},
		{"off", server.Rate{}, ""},
		{"0/s", server.Rate{}, "N must be 1 to 1000000"},
		{"2000000/s", server.Rate{}, "N must be 1 to 1000000"},
		{"20", server.Rate{}, "want N/s, N/m or N/h"},
		{"20/d", server.Rate{}, "want N/s, N/m or N/h"},
		{"fast", server.Rate{}, "want N/s, N/m or N/h"},
	} {
		got, err := server.ParseRate(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want || got.String() != tc.in):
			t.Errorf("ParseRate(%q) = %v (%q), %v; want %v", tc.in, got, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseRate(%q) error %v, want %q", tc.in, err, tc.err)
		}
	}
}
