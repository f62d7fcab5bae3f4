package store

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
)

// SecretAgreement is what CheckSecret found (migration 0019; docs/tls.md, "Rotating the
// approval secret").
type SecretAgreement string

// CheckSecret's outcomes.
const (
	// SecretRecorded: the database held no value for the secret (a new database, or the first
	// start of a version that keeps one): the current one is recorded.
	SecretRecorded SecretAgreement = "recorded"
	// SecretAgrees: the current secret is the recorded one.
	SecretAgrees SecretAgreement = "agrees"
	// SecretRotated: the previous secret given is the recorded one: the current one is
	// recorded in its place, and the old one kept as the rotation's previous.
	SecretRotated SecretAgreement = "rotated"
	// SecretRotationPending: a replica not yet rotated, while a rotation is under way: its
	// current secret is the recorded previous one and its previous the recorded current one
	// (it signs with the old secret and verifies the new: docs/tls.md's procedure for
	// several replicas). Nothing is changed.
	SecretRotationPending SecretAgreement = "rotation pending"
	// SecretReplaced: the recorded value was replaced on request (CheckSecret with replace).
	SecretReplaced SecretAgreement = "replaced"
)

// CheckSecret's refusals.
var (
	// ErrSecretDisagrees: the secret a replica starts with matches neither value the database
	// records for it.
	ErrSecretDisagrees = errors.New("store: the secret disagrees with the one the database records")
	// ErrSecretRetired: the replica signs with the secret a completed rotation replaced.
	ErrSecretRetired = errors.New("store: the secret was rotated out")
)

// CheckSecret compares a secret's key-check values with the ones the database records for
// name and records the outcome, in one write transaction (a replica starting at the same time
// waits for it). current and previous are key-check values (64 lowercase hex characters,
// never the secrets themselves); previous is "" when the replica has no previous secret.
// With replace the current value is recorded whatever was there (an operator who lost the
// old secret). Values are compared in constant time. A replica with no previous secret whose
// current one is recorded completes a rotation: from then on the replaced secret is refused
// as a current one. Errors: ErrSecretDisagrees, ErrSecretRetired (with nothing changed), ErrInvalidArgument for a malformed value, ErrReadOnly, ErrClosed,
// storage errors.
func (s *Store) CheckSecret(ctx context.Context, name, current, previous string, replace bool) (SecretAgreement, error) {
	if len(current) != 64 || previous != "" && len(previous) != 64 {
		return "", fmt.Errorf("%w: a key-check value is 64 hex characters", ErrInvalidArgument)
	}
	if err := checkText("secret name", name, true, MaxIDBytes); err != nil {
		return "", err
	}
	var out SecretAgreement
	err := s.write(ctx, func(w *writeTx) error {
		now := formatTime(s.now())
		res, err := w.execSQL(`INSERT INTO secret_checks (name, current_check, previous_check, updated_at) VALUES (?, ?, '', ?)
			ON CONFLICT (name) DO NOTHING`, name, current, now)
		if err != nil {
			return fmt.Errorf("store: record secret check: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			out = SecretRecorded
			return nil
		}
		// Lock the row (PostgreSQL; SQLite's writer is already alone), then read it.
		if _, err := w.execSQL(`UPDATE secret_checks SET name = name WHERE name = ?`, name); err != nil {
			return fmt.Errorf("store: read secret check: %w", err)
		}
		var storedCur, storedPrev string
		var retired int
		if err := w.readRow(`SELECT current_check, previous_check, previous_retired FROM secret_checks WHERE name = ?`, name).
			Scan(&storedCur, &storedPrev, &retired); err != nil {
			return fmt.Errorf("store: read secret check: %w", err)
		}
		eq := func(a, b string) bool {
			return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
		}
		set := func(cur, prev string, o SecretAgreement) error {
			if _, err := w.execSQL(`UPDATE secret_checks SET current_check = ?, previous_check = ?, previous_retired = 0, updated_at = ? WHERE name = ?`,
				cur, prev, now, name); err != nil {
				return fmt.Errorf("store: record secret check: %w", err)
			}
			out = o
			return nil
		}
		switch {
		case eq(current, storedCur):
			out = SecretAgrees
			if previous == "" && storedPrev != "" && retired == 0 {
				// A replica without the previous secret: the rotation is complete.
				if _, err := w.execSQL(`UPDATE secret_checks SET previous_retired = 1, updated_at = ? WHERE name = ?`, now, name); err != nil {
					return fmt.Errorf("store: record secret check: %w", err)
				}
			}
			return nil
		case eq(current, storedPrev) && eq(previous, storedCur):
			// Never a rotation back to the secret that was rotated out.
			if retired == 0 {
				out = SecretRotationPending
				return nil
			}
			if replace {
				return set(current, "", SecretReplaced)
			}
			return ErrSecretRetired
		case eq(previous, storedCur):
			return set(current, storedCur, SecretRotated)
		case replace:
			return set(current, "", SecretReplaced)
		}
		return ErrSecretDisagrees
	})
	if err != nil {
		return "", err
	}
	return out, nil
}
