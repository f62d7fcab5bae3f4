package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migrations are numbered SQL files, NNNN_name.sql, applied in order, each in its own
// transaction together with its schema_migrations row. A dozen lines of runner instead of
// goose: no extra module, and the files stay plain SQL that goose could adopt later.
//
// PostgreSQL's are in migrations_pg/, with the same versions and file names (docs/decisions/schema-migrations.md), so schema_migrations means the same in both.
//
//go:embed migrations/*.sql migrations_pg/*.sql
var migrationFiles embed.FS

// pgMigrationLock is the pg_advisory_lock key migrate holds on PostgreSQL (docs/decisions/schema-migrations.md), so two
// replicas starting at once apply each migration once.
const pgMigrationLock = 7234298711

type migration struct {
	version int
	name    string
	sql     string
}

// migrationDir is where d's migrations are embedded.
func migrationDir(d dialect) string {
	if d == dialectPostgres {
		return "migrations_pg"
	}
	return "migrations"
}

func loadMigrations(d dialect) ([]migration, error) {
	dir := migrationDir(d)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("store: migration file %q is not NNNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("store: migration %q: expected version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// ErrSchemaNewer is returned (wrapped, with ErrInvalidArgument) by Open and the admin
// functions for a database whose schema version is newer than the newest migration this
// rbook has: a newer rbook migrated it, and this one refuses it rather than misread it
// (docs/backup.md, "Upgrades and migrations").
var ErrSchemaNewer = errors.New("database schema is newer than this rbook")

// schemaNewerError is ErrSchemaNewer for a database at version have and a binary whose newest
// migration is known, with what to do next.
func schemaNewerError(have, known int) error {
	return fmt.Errorf("%w: %w: the database is at schema version %d and this rbook knows versions up to %d; "+
		"a newer rbook migrated it: run that rbook (or a newer one) on it, or restore a backup taken before the upgrade (docs/backup.md, \"Upgrades and migrations\")",
		ErrInvalidArgument, ErrSchemaNewer, have, known)
}

// migrator is what migrate runs on: the writer pool (SQLite) or one connection (PostgreSQL).
type migrator interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies the pending migrations. Each runs in an IMMEDIATE transaction that
// re-reads the applied version, so two processes opening one file cannot apply a
// migration twice. On PostgreSQL the whole run holds pg_advisory_lock(pgMigrationLock) on
// one connection, so two replicas starting at once apply each migration once (docs/decisions/schema-migrations.md). A
// database migrated by a newer rbook is refused, not downgraded, in both dialects.
//
// It returns the schema version before and after (equal when nothing was pending), which
// Store.Migrated reports (`rbook serve` says once that it migrated).
func migrate(ctx context.Context, db *sql.DB, d dialect, clock func() time.Time, maxVersion int) (from, to int, err error) {
	ms, err := loadMigrations(d)
	if err != nil {
		return 0, 0, err
	}
	if maxVersion > 0 && maxVersion < len(ms) {
		ms = ms[:maxVersion] // an older rbook (WithMaxSchemaVersion)
	}
	if d != dialectPostgres {
		return migrateOn(ctx, db, ms, clock)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("store: migrations: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", int64(pgMigrationLock)); err != nil {
		return 0, 0, fmt.Errorf("store: migrations: take the advisory lock: %w", err)
	}
	from, to, err = migrateOn(ctx, conn, ms, clock)
	// The unlock uses a fresh context: ctx may be the reason migrateOn failed.
	if _, uerr := conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", int64(pgMigrationLock)); uerr != nil && err == nil {
		err = fmt.Errorf("store: migrations: release the advisory lock: %w", uerr)
	}
	return from, to, err
}

// migrateOn applies ms on db and returns the schema version before and after.
func migrateOn(ctx context.Context, db migrator, ms []migration, clock func() time.Time) (from, to int, err error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	) STRICT`); err != nil {
		return 0, 0, fmt.Errorf("store: create schema_migrations: %w", err)
	}
	version := func() (int, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("store: read schema version: %w", err)
		}
		defer tx.Rollback() //nolint:errcheck // read only
		var v int
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
			return 0, fmt.Errorf("store: read schema version: %w", err)
		}
		return v, nil
	}
	if from, err = version(); err != nil {
		return 0, 0, err
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, len(ms), clock); err != nil {
			return from, 0, err
		}
	}
	to, err = version()
	return from, to, err
}

func applyMigration(ctx context.Context, db migrator, m migration, latest int, clock func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var current int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	if current > latest {
		return schemaNewerError(current, latest)
	}
	if current >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
		m.version, m.name, formatTime(clock().UTC())); err != nil {
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migration %s: commit: %w", m.name, err)
	}
	return nil
}
