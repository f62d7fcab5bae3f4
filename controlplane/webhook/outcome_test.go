package webhook_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

// Every request reports one outcome with its event (the control plane's metrics count them;
// docs/metrics.md): a forged one, an event rbook ignores, a processed delivery and its
// replay, a handler failure and a handler refusal.
func TestEveryRequestReportsItsOutcome(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var got []string
	h := &recorder{}
	ep, err := webhook.New(testWebhookSecret, st, h, slog.New(slog.DiscardHandler), webhook.WithOutcome(func(event, outcome string) {
		mu.Lock()
		got = append(got, event+" "+outcome)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	post := func(d ghfake.Delivery, secret []byte) int {
		req, err := d.Request(srv.URL+webhook.Path, secret)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	d := approved()
	ping := ghfake.Delivery{Event: "ping", ID: ghfake.NewDeliveryID(), Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)}
	steps := []struct {
		name string
		send func() int
		code int
		want string
	}{
		{"forged", func() int { return post(d, []byte("not-the-webhook-secret-at-all!!")) }, http.StatusUnauthorized, "deployment_review unauthorized"},
		{"ping", func() int { return post(ping, testWebhookSecret) }, http.StatusOK, "ping ignored"},
		{"processed", func() int { return post(d, testWebhookSecret) }, http.StatusOK, "deployment_review processed"},
		{"replayed", func() int { return post(d, testWebhookSecret) }, http.StatusOK, "deployment_review duplicate"},
		{"handler fails", func() int { h.fail = 1; return post(approved(), testWebhookSecret) }, http.StatusInternalServerError, "deployment_review error"},
		{"handler refuses", func() int {
			h.fail, h.failErr = 1, &webhook.Refusal{Status: http.StatusConflict, Reason: "no gate of this workflow run is open yet"}
			return post(approved(), testWebhookSecret)
		}, http.StatusConflict, "deployment_review refused"},
	}
	for i, s := range steps {
		if code := s.send(); code != s.code {
			t.Fatalf("%s: status %d, want %d", s.name, code, s.code)
		}
		mu.Lock()
		n, last := len(got), ""
		if n > 0 {
			last = got[n-1]
		}
		mu.Unlock()
		if n != i+1 || last != s.want {
			t.Fatalf("%s: outcomes %q, want %d of them ending in %q", s.name, strings.Join(got, ", "), i+1, s.want)
		}
	}
}
