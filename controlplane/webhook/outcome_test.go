package webhook_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

// Every request reports one outcome with its event (the control plane's metrics count them;
// docs/metrics.md): a forged one, an event rbook ignores, a processed delivery and its
// replay, a handler failure and a handler refusal.
func TestEveryRequestReportsItsOutcome(t *testing.T) {
	var mu sync.Mutex
	var got []string
	f := newFixture(t, webhook.WithOutcome(func(event, outcome string) {
		mu.Lock()
		got = append(got, event+" "+outcome)
		mu.Unlock()
	}))
	d := approved()
	ping := ghfake.Delivery{Event: "ping", ID: ghfake.NewDeliveryID(), Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)}
	steps := []struct {
		name string
		send func() int
		code int
		want string
	}{
		{"forged", func() int { return f.post(t, d, []byte("not-the-webhook-secret-at-all!!"), nil) }, http.StatusUnauthorized, "deployment_review unauthorized"},
		{"ping", func() int { return f.post(t, ping, testWebhookSecret, nil) }, http.StatusOK, "ping ignored"},
		{"processed", func() int { return f.post(t, d, testWebhookSecret, nil) }, http.StatusOK, "deployment_review processed"},
		{"replayed", func() int { return f.post(t, d, testWebhookSecret, nil) }, http.StatusOK, "deployment_review duplicate"},
		{"handler fails", func() int { f.h.fail = 1; return f.post(t, approved(), testWebhookSecret, nil) }, http.StatusInternalServerError, "deployment_review error"},
		{"handler refuses", func() int {
			f.h.fail, f.h.failErr = 1, &webhook.Refusal{Status: http.StatusConflict, Reason: "no gate of this workflow run is open yet"}
			return f.post(t, approved(), testWebhookSecret, nil)
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
		all := strings.Join(got, ", ")
		mu.Unlock()
		if n != i+1 || last != s.want {
			t.Fatalf("%s: outcomes %q, want %d of them ending in %q", s.name, all, i+1, s.want)
		}
	}
}
