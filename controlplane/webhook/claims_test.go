package webhook_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/store"
	"github.com/rbookhq/rbook-action/controlplane/webhook"
	"github.com/rbookhq/rbook-action/controlplane/webhook/ghfake"
)

// heldSignal is the store as the endpoint's Deliveries, signalling each claim it finds held.
type heldSignal struct {
	*store.Store
	held chan struct{}
}

func (h *heldSignal) ClaimGitHubDelivery(ctx context.Context, d store.GitHubDelivery, lease time.Duration) (store.DeliveryClaim, error) {
	c, err := h.Store.ClaimGitHubDelivery(ctx, d, lease)
	if err == nil && c.State == store.DeliveryHeld {
		select {
		case h.held <- struct{}{}:
		default:
		}
	}
	return c, err
}

// stepClock is a store clock the test moves by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// One SQLite file, a control plane killed after claiming a
// delivery (its Store "dead" claimed and never finished) and the control plane that runs
// after it. A redelivery within the claim's lease is answered 409 and not acted on; past
// the lease it is taken over and acted on once; then it is a duplicate. A claim finished
// while the endpoint waits for it answers 200 without acting.
func TestEndpointTakesOverAnExpiredClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.db")
	clock := &stepClock{t: time.Date(2026, 5, 12, 10, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.Open(ctx, path, store.WithClock(clock.now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	dead, st := open(), open()
	f := &fixture{st: st, h: &recorder{}, log: &lockedBuffer{}}
	deliveries := &heldSignal{Store: st, held: make(chan struct{}, 1)}
	const lease = time.Minute
	endpoints := map[bool]*webhook.Endpoint{} // by whether it waits for a held claim
	for _, wait := range []bool{false, true} {
		opts := []webhook.Option{webhook.WithClaimLease(lease)}
		if !wait {
			opts = append(opts, webhook.WithClaimWait(0))
		}
		ep, err := webhook.New(testWebhookSecret, deliveries, f.h, slog.New(slog.NewTextHandler(f.log, nil)), opts...)
		if err != nil {
			t.Fatal(err)
		}
		endpoints[wait] = ep
	}
	var current atomic.Pointer[webhook.Endpoint]
	current.Store(endpoints[false])
	mux := http.NewServeMux()
	mux.Handle(webhook.Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	post := func(d ghfake.Delivery) int { t.Helper(); return f.post(t, d, testWebhookSecret, nil) }

	d := approved()
	if c, err := dead.ClaimGitHubDelivery(ctx, store.GitHubDelivery{ID: d.ID, Event: d.Event, Action: "approved"}, webhook.DeliveryClaimLease); err != nil || !c.Acting() {
		t.Fatalf("the dead control plane's claim: %+v, %v", c, err)
	}
	if code := post(d); code != http.StatusConflict || f.h.calls() != 0 {
		t.Fatalf("redelivery within the lease: %d, %d handler calls; want 409, 0", code, f.h.calls())
	}
	if !strings.Contains(f.log.String(), "delivery being processed by another control-plane replica") {
		t.Fatalf("the 409 was not logged with its reason:\n%s", f.log)
	}
	clock.add(webhook.DeliveryClaimLease) // the dead one's lease (not the endpoint's) has passed
	if code := post(d); code != http.StatusOK || f.h.calls() != 1 {
		t.Fatalf("redelivery past the lease: %d, %d handler calls; want 200, 1", code, f.h.calls())
	}
	if !strings.Contains(f.log.String(), "taking over the expired claim of a delivery") || !f.seen(t, d.ID) {
		t.Fatalf("takeover not logged or delivery not done (seen=%v):\n%s", f.seen(t, d.ID), f.log)
	}
	clock.add(10 * lease)
	if code := post(d); code != http.StatusOK || f.h.calls() != 1 {
		t.Fatalf("redelivery after processing: %d, %d handler calls; want 200, 1 (a duplicate)", code, f.h.calls())
	}

	// Waiting for a held claim: the holder finishes meanwhile, so the copy is a duplicate.
	current.Store(endpoints[true])
	d2 := approved()
	d2.ID = "5f3c1a2e-0000-11f0-8000-0000000000d2"
	if c, err := dead.ClaimGitHubDelivery(ctx, store.GitHubDelivery{ID: d2.ID, Event: d2.Event, Action: "approved"}, lease); err != nil || !c.Acting() {
		t.Fatalf("claim d2: %+v, %v", c, err)
	}
	for len(deliveries.held) > 0 {
		<-deliveries.held
	}
	answered := make(chan int, 1)
	go func() {
		req, _ := d2.Request(f.srv.URL+webhook.Path, testWebhookSecret)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-deliveries.held // the copy found the claim held and waits
	if ok, err := dead.FinishGitHubDelivery(ctx, d2.ID); err != nil || !ok {
		t.Fatalf("finish d2: %v, %v", ok, err)
	}
	if code := <-answered; code != http.StatusOK || f.h.calls() != 1 {
		t.Fatalf("the waiting copy answered %d with %d handler calls; want 200 and still 1", code, f.h.calls())
	}
}
