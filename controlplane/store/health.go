package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ReachableTTL is how long Reachable reuses its last answer, so a health check or a burst of
// failing calls never piles load on the database (cached for about a
// second; docs/control-plane.md, "Databases: SQLite and PostgreSQL").
const ReachableTTL = time.Second

// ReachableTimeout bounds the ping behind Reachable.
const ReachableTimeout = 2 * time.Second

// reachability is Reachable's cache: the last ping's time and result. mu is held during a
// ping, so concurrent callers wait for that one ping instead of sending their own.
type reachability struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// Reachable reports whether the database answers: nil, or the ping's error (a SQLite file
// always answers while it can be opened; a PostgreSQL server that is down or unreachable
// does not). One ping with ReachableTimeout at most every ReachableTTL; callers in between
// get the cached answer. ctx's cancellation does not cut the ping short (its values are
// kept), so a caller that went away does not cache a false "unreachable". ErrClosed after
// Close. The health service reports NOT_SERVING while the database is unreachable
// (docs/control-plane.md, "Databases: SQLite and PostgreSQL").
func (s *Store) Reachable(ctx context.Context) error {
	if s.isClosed() {
		return ErrClosed
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < ReachableTTL {
		return h.err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReachableTimeout)
	defer cancel()
	h.err = s.reader.PingContext(pctx)
	h.at = time.Now()
	return h.err
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Migrated is the schema version of the database before and after Open applied its
// migrations (equal when none was pending; from is 0 for a new database). Both dialects;
// 0, 0 for a Store from OpenReadOnly. `rbook serve` says once that it migrated the schema,
// so an operator sees the change.
func (s *Store) Migrated() (from, to int) { return s.schemaFrom, s.schemaTo }

// IsConnectionLost reports whether err is the database connection failing rather than a
// statement or the data: a dial or connect failure, a connection reset or closed under a
// statement, or a PostgreSQL connection-exception / shutdown error (SQLSTATE class 08,
// 57P01-57P03). Such an error is transient for the client (docs/control-plane.md,
// "Databases: SQLite and PostgreSQL": the client retries, or moves to another replica).
func IsConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}

// pgOpenError is an error of opening a PostgreSQL database for a person, saying
// what to do next (docs/control-plane.md, "Databases: SQLite and PostgreSQL"): for a connection failure, only the last attempt's error (pgx tries TLS first
// with sslmode=prefer, so its first error is "server refused TLS connection", and a refused
// dial is reported once per attempt) and the next step: create a missing database, check
// the user and password, or whether PostgreSQL runs on HOST:PORT. The caller names the
// database (redacted; server.Start: "open DSN: …"). Any other error gets the redacted
// database appended, as before.
func pgOpenError(err error, dsn string) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return fmt.Errorf("%w (database %s)", err, RedactDSN(dsn))
	}
	last := ce.Unwrap()
	if j, ok := last.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			last = errs[len(errs)-1]
		}
	}
	host, port, user, db := "", uint16(0), "", ""
	if ce.Config != nil {
		host, port, user, db = ce.Config.Host, ce.Config.Port, ce.Config.User, ce.Config.Database
	}
	var pe *pgconn.PgError
	next := ""
	switch {
	case errors.As(last, &pe) && pe.Code == "3D000":
		next = fmt.Sprintf("create it: createdb -h %s -p %d -U %s %s (or CREATE DATABASE %s)", host, port, user, db, db)
	case errors.As(last, &pe) && (pe.Code == "28P01" || pe.Code == "28000"):
		next = "check the user and password (PGPASSWORD or ~/.pgpass keep it off the command line)"
	case errors.Is(last, syscall.ECONNREFUSED):
		next = fmt.Sprintf("is PostgreSQL running on %s:%d?", host, port)
	}
	if next != "" {
		next = "; " + next
	}
	return fmt.Errorf("store: cannot connect to PostgreSQL: %w%s", last, next)
}
