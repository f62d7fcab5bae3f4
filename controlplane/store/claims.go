package store

import (
	"context"
	"fmt"
	"time"
)

// Claims that make work happen once when several control-plane replicas share one database
// (issue 10, item 2; ISSUE10-DECISIONS D10-5). Each is one conditional UPDATE or DELETE: on
// PostgreSQL under READ COMMITTED a second replica's identical statement waits for the
// first one's commit and then re-checks its WHERE clause against the committed row, so
// exactly one of them changes it.

// ReleaseGitHubDelivery removes the claim RecordGitHubDelivery took on delivery id, so a
// redelivery is processed again: the webhook endpoint claims a delivery before it acts on
// it (D10-5: "claim first, then act") and releases the claim when acting failed. It reports
// whether a row was removed. Errors: ErrInvalidArgument for an empty or over-long id;
// ErrReadOnly, ErrClosed; storage errors.
func (s *Store) ReleaseGitHubDelivery(ctx context.Context, id string) (bool, error) {
	if err := validateDeliveryID(id); err != nil {
		return false, err
	}
	var removed bool
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.execSQL(`DELETE FROM github_deliveries WHERE delivery_id = ?`, id)
		if err != nil {
			return fmt.Errorf("store: release github delivery: %w", err)
		}
		n, err := res.RowsAffected()
		removed = err == nil && n == 1
		return err
	})
	return removed, err
}

// ClaimProtectionRule takes the protection rule ruleID for one delivery attempt until
// until: it succeeds (true) only when the rule still has work (a run attempt to learn, a
// status report or a verdict to send) and no attempt is scheduled after now, and it moves
// the rule's next attempt to until, so no other replica's delivery loop lists it meanwhile
// (D10-5: a GitHub verdict is posted by one replica). Recording the attempt's outcome
// (MarkProtectionRuleReported, MarkProtectionRuleVerdictSent, ProtectionRuleAttemptFailed,
// GiveUpProtectionRule, SetProtectionRuleAttempt) ends the claim; a replica that dies
// holding it leaves the rule to the others once until has passed. Errors: ErrInvalidArgument
// for an until not after now; ErrReadOnly, ErrClosed; storage errors.
func (s *Store) ClaimProtectionRule(ctx context.Context, ruleID string, now, until time.Time) (bool, error) {
	if !until.After(now) {
		return false, fmt.Errorf("%w: protection rule claim until %s is not after %s", ErrInvalidArgument,
			formatTime(until), formatTime(now))
	}
	var claimed bool
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.execSQL(`UPDATE github_protection_rules SET next_attempt_at = ?
			WHERE rule_id = ? AND `+ruleHasWork+` AND (next_attempt_at IS NULL OR next_attempt_at <= ?)`,
			formatTime(until), ruleID, formatTime(now))
		if err != nil {
			return fmt.Errorf("store: claim protection rule: %w", err)
		}
		n, err := res.RowsAffected()
		claimed = err == nil && n == 1
		return err
	})
	return claimed, err
}
