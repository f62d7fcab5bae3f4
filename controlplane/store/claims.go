package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Claims that make work happen once when several control-plane replicas share one database
// (docs/decisions/delivery-claims.md). Each claim is a lease: the claimer acts
// while it lasts and then records the outcome, which ends the claim; a replica that dies
// holding a claim leaves the work to the next one once the lease has passed. Taking a claim
// is one INSERT … ON CONFLICT DO NOTHING or one conditional UPDATE: on PostgreSQL under READ
// COMMITTED a second replica's identical statement waits for the first one's commit and
// then re-checks its WHERE clause against the committed row, so exactly one of them
// changes it. The leases' lengths are the callers' constants: webhook.DeliveryClaimLease
// and server.ProtectionRuleClaimLease.

// DeliveryClaimState is what ClaimGitHubDelivery found (docs/decisions/delivery-claims.md).
type DeliveryClaimState string

// The outcomes of ClaimGitHubDelivery.
const (
	// DeliveryClaimed: the delivery was new; this caller holds its claim and acts on it.
	DeliveryClaimed DeliveryClaimState = "claimed"
	// DeliveryTakenOver: another claimer's lease had passed without the delivery being done
	// (a replica killed after claiming); this caller holds the claim now and acts on it.
	DeliveryTakenOver DeliveryClaimState = "taken_over"
	// DeliveryHeld: another claim's lease is still running (a replica may be acting on it);
	// this caller does not act. Until says when the lease ends.
	DeliveryHeld DeliveryClaimState = "held"
	// DeliveryDone: the delivery was processed; a redelivery changes nothing.
	DeliveryDone DeliveryClaimState = "done"
)

// DeliveryClaim is ClaimGitHubDelivery's answer: the state, the origin of the claim it found
// or took over ("" for a new claim or a row written by RecordGitHubDelivery) and, for
// DeliveryHeld, when that claim's lease ends (for DeliveryClaimed and DeliveryTakenOver: when
// this caller's lease ends).
type DeliveryClaim struct {
	State DeliveryClaimState
	By    string
	Until time.Time
}

// Acting reports whether the caller holds the claim and must act on the delivery.
func (c DeliveryClaim) Acting() bool {
	return c.State == DeliveryClaimed || c.State == DeliveryTakenOver
}

// ClaimGitHubDelivery takes webhook delivery d for processing, for lease from the store's
// clock: it inserts the delivery's row as 'claimed' by this Store's origin (migration 0011)
// or, when a claim of it exists whose lease has passed without it being done, takes that
// claim over with one conditional UPDATE … RETURNING, so of two replicas taking over at once
// exactly one gets it. A claim whose lease is running is DeliveryHeld, a done delivery
// DeliveryDone (a duplicate: nothing to do). The caller that holds the claim acts, then
// calls FinishGitHubDelivery (or ReleaseGitHubDelivery when acting failed); a replica that
// dies holding it leaves the delivery to the next replica that receives it once the lease
// has passed (docs/decisions/delivery-claims.md: "claim first, then act"). Errors: ErrInvalidArgument for an empty or
// over-long id, event or action (each at most MaxIDBytes) or a lease that is not positive;
// ErrReadOnly, ErrClosed; storage errors.
func (s *Store) ClaimGitHubDelivery(ctx context.Context, d GitHubDelivery, lease time.Duration) (DeliveryClaim, error) {
	if err := validateDelivery(d); err != nil {
		return DeliveryClaim{}, err
	}
	if lease <= 0 {
		return DeliveryClaim{}, fmt.Errorf("%w: github delivery %q: claim lease %s is not positive", ErrInvalidArgument, d.ID, lease)
	}
	var out DeliveryClaim
	err := s.write(ctx, func(w *writeTx) error {
		now := s.now()
		until := now.Add(lease)
		res, err := w.execSQL(`INSERT INTO github_deliveries
			(delivery_id, event, action, processed_at, status, claimed_by, claimed_at, claimed_until)
			VALUES (?, ?, ?, ?, 'claimed', ?, ?, ?) ON CONFLICT (delivery_id) DO NOTHING`,
			d.ID, d.Event, d.Action, formatTime(now), s.origin, formatTime(now), formatTime(until))
		if err != nil {
			return fmt.Errorf("store: claim github delivery: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			out = DeliveryClaim{State: DeliveryClaimed, Until: until}
			return err
		}
		// The row exists: done, held, or a claim whose lease has passed.
		cur, err := w.deliveryClaim(d.ID)
		if err != nil || cur.State == DeliveryDone || cur.Until.After(now) {
			out = cur
			return err
		}
		// Take the expired claim over: a compare-and-set on the claim just read. On
		// PostgreSQL a concurrent takeover waits for this row lock and then re-checks the
		// WHERE clause against the committed row (claimed_by/claimed_until changed): no row.
		var got string
		err = w.readRow(`UPDATE github_deliveries SET claimed_by = ?, claimed_at = ?, claimed_until = ?, processed_at = ?
			WHERE delivery_id = ? AND status = 'claimed' AND claimed_by = ? AND claimed_until = ? AND claimed_until <= ?
			RETURNING claimed_until`,
			s.origin, formatTime(now), formatTime(until), formatTime(now),
			d.ID, cur.By, formatTime(cur.Until), formatTime(now)).Scan(&got)
		switch {
		case err == nil:
			w.wrote = true
			out = DeliveryClaim{State: DeliveryTakenOver, By: cur.By, Until: until}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("store: take over github delivery claim: %w", err)
		}
		// Another replica took it over (or finished it) first.
		out, err = w.deliveryClaim(d.ID)
		return err
	})
	if err != nil {
		return DeliveryClaim{}, err
	}
	return out, nil
}

// ClaimProtectionRule takes the protection rule ruleID for one delivery attempt, with a
// lease that ends at until: it succeeds (true) only when the rule still has work (a run attempt to learn, a
// status report or a verdict to send) and no attempt is scheduled after now, and it moves
// the rule's next attempt to until, so no other replica's delivery loop lists it meanwhile
// (docs/decisions/delivery-claims.md: a GitHub verdict is posted by one replica). Recording the attempt's outcome
// (MarkProtectionRuleReported, MarkProtectionRuleVerdictSent, ProtectionRuleAttemptFailed,
// GiveUpProtectionRule, SetProtectionRuleAttempt) ends the claim; a replica that dies
// holding it leaves the rule to the others once the lease has passed. Errors: ErrInvalidArgument
// for an until not after now; ErrReadOnly, ErrClosed; storage errors.
func (s *Store) ClaimProtectionRule(ctx context.Context, ruleID string, now, until time.Time) (bool, error) {
	if !until.After(now) {
		return false, fmt.Errorf("%w: protection rule claim until %s is not after %s", ErrInvalidArgument,
			formatTime(until), formatTime(now))
	}
	return s.writeOneRow(ctx, "claim protection rule", func(w *writeTx) (sql.Result, error) {
		return w.execSQL(`UPDATE github_protection_rules SET next_attempt_at = ?
			WHERE rule_id = ? AND `+ruleHasWork+` AND (next_attempt_at IS NULL OR next_attempt_at <= ?)`,
			formatTime(until), ruleID, formatTime(now))
	})
}

// deliveryClaim reads delivery id's row as a DeliveryClaim: DeliveryDone, or DeliveryHeld
// with its claimer and lease end (whether or not that has passed).
func (w *writeTx) deliveryClaim(id string) (DeliveryClaim, error) {
	var status string
	var by, until sql.NullString
	if err := w.readRow(`SELECT status, claimed_by, claimed_until FROM github_deliveries WHERE delivery_id = ?`, id).
		Scan(&status, &by, &until); err != nil {
		return DeliveryClaim{}, fmt.Errorf("store: read github delivery claim: %w", err)
	}
	if status == string(DeliveryDone) {
		return DeliveryClaim{State: DeliveryDone, By: by.String}, nil
	}
	t, err := parseTime("github_deliveries.claimed_until", until)
	return DeliveryClaim{State: DeliveryHeld, By: by.String, Until: t}, err
}

// FinishGitHubDelivery marks delivery id done once this Store's claim on it (taken by
// ClaimGitHubDelivery) has had its effect: a redelivery is then a duplicate. The webhook
// endpoint calls it right after its Handler succeeded (the Handler's writes are separate
// transactions; should the process die between the two, the lease expires and a redelivery
// acts again, which the Handler's idempotence makes harmless). It reports false, changing
// nothing, when this Store no longer holds the claim (its lease passed and another replica
// took it over; that replica finishes it). Errors: ErrInvalidArgument for an empty or
// over-long id; ErrReadOnly, ErrClosed; storage errors.
func (s *Store) FinishGitHubDelivery(ctx context.Context, id string) (bool, error) {
	if err := validateDeliveryID(id); err != nil {
		return false, err
	}
	return s.writeOneRow(ctx, "finish github delivery", func(w *writeTx) (sql.Result, error) {
		return w.execSQL(`UPDATE github_deliveries SET status = 'done', processed_at = ?
			WHERE delivery_id = ? AND status = 'claimed' AND claimed_by = ?`, formatTime(s.now()), id, s.origin)
	})
}

// ReleaseGitHubDelivery gives back this Store's claim on delivery id (taken by
// ClaimGitHubDelivery) when acting on it failed, by deleting the claimed row, so a
// redelivery (to any replica) is processed again at once rather than after the lease. A
// done delivery, or a claim another replica took over, is left alone. It reports whether a
// claim was removed. Errors: ErrInvalidArgument for an empty or over-long id; ErrReadOnly,
// ErrClosed; storage errors.
func (s *Store) ReleaseGitHubDelivery(ctx context.Context, id string) (bool, error) {
	if err := validateDeliveryID(id); err != nil {
		return false, err
	}
	return s.writeOneRow(ctx, "release github delivery", func(w *writeTx) (sql.Result, error) {
		return w.execSQL(`DELETE FROM github_deliveries WHERE delivery_id = ? AND status = 'claimed' AND claimed_by = ?`,
			id, s.origin)
	})
}

// writeOneRow runs exec (one UPDATE or DELETE) in a write transaction and reports whether it
// changed exactly one row: the claim, finish and release of a delivery or a protection rule
// (docs/decisions/delivery-claims.md),
// which succeed only for the replica whose condition still holds. An exec error is wrapped
// as "store: <what>: …"; ErrReadOnly, ErrClosed and storage errors come back as s.write's.
func (s *Store) writeOneRow(ctx context.Context, what string, exec func(w *writeTx) (sql.Result, error)) (bool, error) {
	var one bool
	err := s.write(ctx, func(w *writeTx) error {
		res, err := exec(w)
		if err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		n, err := res.RowsAffected()
		one = err == nil && n == 1
		return err
	})
	return one, err
}
