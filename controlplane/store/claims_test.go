package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// manualClock is a store clock the test moves by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A webhook delivery's claim is a
// lease. Claimed and not finished (its replica died), a redelivery within the lease is held
// and the delivery is not "seen"; past the lease the next claim takes it over; finished, it
// is a duplicate. Runs on the suite's backend (SQLite, or PostgreSQL with
// RBOOK_TEST_STORE=postgres).
func TestWebhookClaimExpiresAndIsTakenOver(t *testing.T) {
	clock := &manualClock{t: t0}
	dead, dsn := openTest(t, WithClock(clock.now)) // the replica that claims and dies
	ctx := context.Background()
	const lease = 2 * time.Minute
	d := GitHubDelivery{ID: "5f3c1a2e-0000-11f0-8000-000000000001", Event: "deployment_review", Action: "approved"}

	c, err := dead.ClaimGitHubDelivery(ctx, d, lease)
	if err != nil || c.State != DeliveryClaimed || !c.Acting() || !c.Until.Equal(t0.Add(lease)) {
		t.Fatalf("first claim = %+v, %v; want claimed until %s", c, err, t0.Add(lease))
	}
	if seen, err := dead.GitHubDeliverySeen(ctx, d.ID); err != nil || seen {
		t.Fatalf("seen after a claim only = %v, %v; want false (not processed)", seen, err)
	}
	// A second replica on the same database: its origin differs.
	other, err := Open(ctx, dsn, WithClock(clock.now))
	if err != nil {
		t.Fatalf("Open a second store: %v", err)
	}
	t.Cleanup(func() { other.Close() })

	// Within the lease: held by the first claimer, whatever the caller.
	clock.add(lease - time.Second)
	for name, s := range map[string]*Store{"the claimer": dead, "another replica": other} {
		c, err := s.ClaimGitHubDelivery(ctx, d, lease)
		if err != nil || c.State != DeliveryHeld || c.Acting() || c.By != dead.origin || !c.Until.Equal(t0.Add(lease)) {
			t.Fatalf("claim by %s within the lease = %+v, %v; want held by %s until %s", name, c, err, dead.origin, t0.Add(lease))
		}
	}
	// Past the lease: taken over by the other replica, once; the dead one's claim is gone.
	clock.add(time.Second)
	taken := t0.Add(lease).Add(lease)
	c, err = other.ClaimGitHubDelivery(ctx, d, lease)
	if err != nil || c.State != DeliveryTakenOver || !c.Acting() || c.By != dead.origin || !c.Until.Equal(taken) {
		t.Fatalf("claim past the lease = %+v, %v; want taken over from %s, until %s", c, err, dead.origin, taken)
	}
	if c, err := dead.ClaimGitHubDelivery(ctx, d, lease); err != nil || c.State != DeliveryHeld || c.By != other.origin {
		t.Fatalf("claim by the old claimer after the takeover = %+v, %v; want held by %s", c, err, other.origin)
	}
	if ok, err := dead.FinishGitHubDelivery(ctx, d.ID); err != nil || ok {
		t.Fatalf("finish by the old claimer = %v, %v; want false (no longer its claim)", ok, err)
	}
	if ok, err := dead.ReleaseGitHubDelivery(ctx, d.ID); err != nil || ok {
		t.Fatalf("release by the old claimer = %v, %v; want false (no longer its claim)", ok, err)
	}
	finished := clock.now()
	if ok, err := other.FinishGitHubDelivery(ctx, d.ID); err != nil || !ok {
		t.Fatalf("finish by the holder = %v, %v; want true", ok, err)
	}
	// Done: a duplicate for everyone, forever (past any lease), and seen.
	clock.add(10 * lease)
	for name, s := range map[string]*Store{"the old claimer": dead, "the holder": other} {
		if c, err := s.ClaimGitHubDelivery(ctx, d, lease); err != nil || c.State != DeliveryDone || c.Acting() {
			t.Fatalf("claim by %s after done = %+v, %v; want done", name, c, err)
		}
		if seen, err := s.GitHubDeliverySeen(ctx, d.ID); err != nil || !seen {
			t.Fatalf("seen by %s after done = %v, %v; want true", name, seen, err)
		}
	}
	if ok, err := other.ReleaseGitHubDelivery(ctx, d.ID); err != nil || ok {
		t.Fatalf("release of a done delivery = %v, %v; want false (kept)", ok, err)
	}
	var status, by, until, processed string
	if err := dead.reader.QueryRowContext(ctx, `SELECT status, claimed_by, claimed_until, processed_at FROM github_deliveries WHERE delivery_id = ?`, d.ID).
		Scan(&status, &by, &until, &processed); err != nil {
		t.Fatal(err)
	}
	if status != "done" || by != other.origin || until != formatTime(taken) || processed != formatTime(finished) {
		t.Fatalf("row = %s by %s until %s processed %s; want done by %s until %s processed %s", status, by, until, processed,
			other.origin, formatTime(taken), formatTime(finished))
	}

	// A released claim (the Handler failed) is claimable again at once, by anyone.
	d2 := GitHubDelivery{ID: "5f3c1a2e-0000-11f0-8000-000000000002", Event: "deployment_protection_rule", Action: "requested"}
	if c, err := dead.ClaimGitHubDelivery(ctx, d2, lease); err != nil || c.State != DeliveryClaimed {
		t.Fatalf("claim d2 = %+v, %v", c, err)
	}
	if ok, err := other.ReleaseGitHubDelivery(ctx, d2.ID); err != nil || ok {
		t.Fatalf("release of another store's claim = %v, %v; want false", ok, err)
	}
	if ok, err := dead.ReleaseGitHubDelivery(ctx, d2.ID); err != nil || !ok {
		t.Fatalf("release by the claimer = %v, %v; want true", ok, err)
	}
	if c, err := other.ClaimGitHubDelivery(ctx, d2, lease); err != nil || c.State != DeliveryClaimed || c.By != "" {
		t.Fatalf("claim after a release = %+v, %v; want a new claim", c, err)
	}
	// A row written by RecordGitHubDelivery (before migration 0011, or by that API) is done.
	if ok, err := other.RecordGitHubDelivery(ctx, GitHubDelivery{ID: "d3", Event: "ping"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if c, err := dead.ClaimGitHubDelivery(ctx, GitHubDelivery{ID: "d3", Event: "ping"}, lease); err != nil || c.State != DeliveryDone {
		t.Fatalf("claim of a recorded delivery = %+v, %v; want done", c, err)
	}
	for _, lease := range []time.Duration{0, -time.Second} {
		if _, err := dead.ClaimGitHubDelivery(ctx, d, lease); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("claim with lease %s = %v, want ErrInvalidArgument", lease, err)
		}
	}
	if _, err := dead.ClaimGitHubDelivery(ctx, GitHubDelivery{ID: "x"}, lease); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("claim without an event = %v, want ErrInvalidArgument", err)
	}
}

// Two replicas taking over one expired claim at the same moment:
// exactly one gets it (the conditional UPDATE), the other sees it held.
func TestPGWebhookClaimTakeoverOnce(t *testing.T) {
	t.Parallel()
	dsn := newPGDatabase(t)
	ctx := context.Background()
	clock := &manualClock{t: t0}
	stores := make([]*Store, 3)
	for i := range stores {
		s, err := Open(ctx, dsn, WithClock(clock.now))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	const lease = time.Minute
	for round := range 20 {
		d := GitHubDelivery{ID: fmt.Sprintf("race-%d", round), Event: "deployment_review", Action: "approved"}
		if c, err := stores[0].ClaimGitHubDelivery(ctx, d, lease); err != nil || c.State != DeliveryClaimed {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		clock.add(lease)
		var wg sync.WaitGroup
		got := make([]DeliveryClaim, 2)
		errs := make([]error, 2)
		for i := range got {
			wg.Add(1)
			go func() { defer wg.Done(); got[i], errs[i] = stores[1+i].ClaimGitHubDelivery(ctx, d, lease) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: takeovers failed: %v, %v", round, errs[0], errs[1])
		}
		if got[0].Acting() == got[1].Acting() {
			t.Fatalf("round %d: takeovers = %+v and %+v; want exactly one acting", round, got[0], got[1])
		}
		for _, c := range got {
			if !c.Acting() && c.State != DeliveryHeld {
				t.Fatalf("round %d: the losing takeover = %+v, want held", round, c)
			}
		}
	}
}
