package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Session is one console sign-in (migration 0013; docs/console-signin.md, "Sessions"): a
// person signed in from a browser. The session id the cookie carries is never stored; the
// row is keyed by IDHash, the hex SHA-256 of that id.
type Session struct {
	// IDHash is the lowercase hex SHA-256 of the session id (64 characters).
	IDHash string
	// Identity is what decisions are recorded under ("alice", "github:octocat", "oidc:…").
	Identity string
	// DisplayName is a name to show; "" when the provider gave none.
	DisplayName string
	// Role is "approver" or "viewer": a session never executes runs.
	Role string
	// Groups are names a gate policy's "group:<name>" matches; nil when none.
	Groups []string
	// GitHubLogin is the person's GitHub login, for four-eyes; "" when unknown.
	GitHubLogin string
	// Method is how the person signed in: "oidc", "github" or "token".
	Method string
	// Provider is the configured sign-in provider's id ("" for token sign-in).
	Provider string
	// CreatedAt is when the session began; ExpiresAt when it ends (absolute).
	CreatedAt, ExpiresAt time.Time
	// RevokedAt is when sign-out ended it; zero while it was not.
	RevokedAt time.Time
}

// Active reports whether the session may be used at now: not revoked and not expired.
func (s Session) Active(now time.Time) bool {
	return s.RevokedAt.IsZero() && now.Before(s.ExpiresAt)
}

// CreateSession stores a new session, durably before it returns. Errors: ErrInvalidArgument
// for an IDHash that is not 64 hex characters, a role other than approver or viewer, an
// empty identity or method, a zero ExpiresAt, or text over MaxIDBytes; ErrReadOnly,
// ErrClosed; the database's error (a duplicate IDHash among them).
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	if err := validateSession(sess); err != nil {
		return err
	}
	created := sess.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`INSERT INTO console_sessions (id_hash, identity, display_name, role, group_names, github_login,
			method, provider, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.IDHash, sess.Identity, sess.DisplayName, sess.Role, strings.Join(sess.Groups, ","), sess.GitHubLogin,
			sess.Method, sess.Provider, formatTime(created), formatTime(sess.ExpiresAt))
		return err
	})
}

func validateSession(sess Session) error {
	if len(sess.IDHash) != 64 || strings.Trim(sess.IDHash, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: session id hash must be 64 lowercase hex characters", ErrInvalidArgument)
	}
	if sess.Role != "approver" && sess.Role != "viewer" {
		return fmt.Errorf("%w: session role %q is not approver or viewer", ErrInvalidArgument, sess.Role)
	}
	if sess.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: session has no expiry", ErrInvalidArgument)
	}
	for _, f := range []struct {
		name, v  string
		required bool
	}{{"identity", sess.Identity, true}, {"display name", sess.DisplayName, false}, {"groups", strings.Join(sess.Groups, ","), false},
		{"github login", sess.GitHubLogin, false}, {"method", sess.Method, true}, {"provider", sess.Provider, false}} {
		if err := checkText("session "+f.name, f.v, f.required, MaxIDBytes); err != nil {
			return err
		}
	}
	return nil
}

// GetSession returns the session whose id hashes to idHash, revoked or expired ones too
// (the caller checks Session.Active). Errors: ErrNotFound; the database's error.
func (s *Store) GetSession(ctx context.Context, idHash string) (Session, error) {
	var (
		sess                         Session
		groups                       string
		created, expires, revokedRaw sql.NullString
	)
	err := s.reader.QueryRowContext(ctx, `SELECT id_hash, identity, display_name, role, group_names, github_login, method, provider,
		created_at, expires_at, revoked_at FROM console_sessions WHERE id_hash = ?`, idHash).Scan(
		&sess.IDHash, &sess.Identity, &sess.DisplayName, &sess.Role, &groups, &sess.GitHubLogin, &sess.Method, &sess.Provider,
		&created, &expires, &revokedRaw)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("store: read session: %w", err)
	}
	if groups != "" {
		sess.Groups = strings.Split(groups, ",")
	}
	if sess.CreatedAt, err = parseTime("created_at", created); err != nil {
		return Session{}, err
	}
	if sess.ExpiresAt, err = parseTime("expires_at", expires); err != nil {
		return Session{}, err
	}
	if sess.RevokedAt, err = parseTime("revoked_at", revokedRaw); err != nil {
		return Session{}, err
	}
	return sess, nil
}

// RevokeSession ends the session whose id hashes to idHash (sign-out), durably before it
// returns; revoking an unknown or already revoked session is not an error (sign-out twice
// ends nothing more). Errors: ErrReadOnly, ErrClosed; the database's error.
func (s *Store) RevokeSession(ctx context.Context, idHash string) error {
	at := formatTime(s.now())
	return s.write(ctx, func(w *writeTx) error {
		_, err := w.execSQL(`UPDATE console_sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL`, at, idHash)
		return err
	})
}

// SweepSessions deletes the sessions that expired before now, and the revoked ones, and
// returns how many it deleted. Errors: ErrReadOnly, ErrClosed; the database's error.
func (s *Store) SweepSessions(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.execSQL(`DELETE FROM console_sessions WHERE expires_at <= ? OR revoked_at IS NOT NULL`, formatTime(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
