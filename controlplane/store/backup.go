package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/internal/atomicfile"
)

// Backup, restore and migrations for operators (`rbook admin`; docs/backup.md). A SQLite
// database is copied online with VACUUM INTO on a read connection of its own: it reads one
// consistent snapshot (WAL mode lets the serving process keep writing meanwhile) and writes
// a compact, self-contained file. PostgreSQL is backed up with pg_dump (docs/backup.md).

// ErrPostgresBackup is returned by BackupSQLite and RestoreSQLite for a PostgreSQL DSN: its
// backups are pg_dump's and pg_restore's (docs/backup.md, "PostgreSQL").
var ErrPostgresBackup = errors.New("a PostgreSQL database is backed up with pg_dump and restored with pg_restore (docs/backup.md, \"PostgreSQL\")")

// BackupInfo describes a checked SQLite database file: its schema version and how many runs
// and transitions it holds.
type BackupInfo struct {
	SchemaVersion int
	Runs          int64
	Transitions   int64
	// Kept is set by RestoreSQLite when the database it replaced was kept as
	// target+".before-restore" (false: there was none).
	Kept bool
}

// Migration is one schema migration: its version and file name (NNNN_name.sql).
type Migration struct {
	Version int
	Name    string
}

// BackupSQLite writes a consistent copy of the SQLite database dbPath to dst while other
// processes (a serving `rbook serve`) keep using it: VACUUM INTO a temporary file beside dst
// on a read connection of its own, then the copy is switched to a single file (no WAL),
// checked (CheckBackup) and fsynced, and only then linked to dst. dst must not exist.
// Errors: ErrPostgresBackup for a PostgreSQL DSN; ErrInvalidArgument for an existing dst, a
// missing database or a copy that fails its check (wrapped); SQLite and file errors.
func BackupSQLite(ctx context.Context, dbPath, dst string) (BackupInfo, error) {
	if IsPostgresDSN(dbPath) {
		return BackupInfo{}, ErrPostgresBackup
	}
	src, err := databasePath(dbPath)
	if err != nil {
		return BackupInfo{}, err
	}
	if _, err := os.Stat(src); err != nil {
		return BackupInfo{}, fmt.Errorf("%w: database %s: %v", ErrInvalidArgument, dbPath, err)
	}
	if _, err := os.Lstat(dst); err == nil {
		return BackupInfo{}, fmt.Errorf("%w: %s exists; a backup never replaces a file: give a new name", ErrInvalidArgument, dst)
	}
	absDst, err := filepath.Abs(dst)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%w: backup file %q: %v", ErrInvalidArgument, dst, err)
	}
	dir := filepath.Dir(absDst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w", dst, err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // after the link below, dst keeps the copy
	if err := vacuumInto(ctx, src, tmpName); err != nil {
		return BackupInfo{}, err
	}
	info, err := finishCopy(ctx, tmpName)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: the copy failed its check: %w", dst, err)
	}
	if err := os.Link(tmpName, absDst); errors.Is(err, fs.ErrExist) {
		return BackupInfo{}, fmt.Errorf("%w: %s exists; a backup never replaces a file: give a new name", ErrInvalidArgument, dst)
	} else if err != nil {
		// A file system without hard links: a rename, after the existence check above.
		if err := os.Rename(tmpName, absDst); err != nil {
			return BackupInfo{}, fmt.Errorf("backup %s: %w", dst, err)
		}
	}
	return info, atomicfile.SyncDir(dir)
}

// vacuumInto runs VACUUM INTO dst on a read-only connection to the database file src.
func vacuumInto(ctx context.Context, src, dst string) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", defaultBusyTimeout.Milliseconds()))
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", fileURI(src, q))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("store: copy %s: %w", src, err)
	}
	return nil
}

// finishCopy makes the SQLite file path self-contained (journal_mode DELETE), checks it
// (checkDatabase) and fsyncs it.
func finishCopy(ctx context.Context, path string) (BackupInfo, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(DELETE)")
	db, err := sql.Open("sqlite", fileURI(path, q))
	if err != nil {
		return BackupInfo{}, err
	}
	db.SetMaxOpenConns(1)
	info, err := checkDatabase(ctx, db, path)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return BackupInfo{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return BackupInfo{}, err
	}
	defer f.Close()
	return info, f.Sync()
}

// CheckBackup checks the SQLite file path without changing it: it is an rbook control-plane
// database (schema_migrations and playbook_runs), PRAGMA integrity_check says ok, and its
// schema version is not newer than this rbook's. Errors: ErrInvalidArgument (wrapped) for a
// file that fails a check, ErrSchemaNewer with it for a newer schema; file errors.
func CheckBackup(ctx context.Context, path string) (BackupInfo, error) {
	abs, err := databasePath(path)
	if err != nil {
		return BackupInfo{}, err
	}
	if _, err := os.Stat(abs); err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", fileURI(abs, q))
	if err != nil {
		return BackupInfo{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return checkDatabase(ctx, db, path)
}

// checkDatabase is CheckBackup's checks on an open SQLite database.
func checkDatabase(ctx context.Context, db *sql.DB, path string) (BackupInfo, error) {
	var info BackupInfo
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('schema_migrations', 'playbook_runs')`).
		Scan(&tables); err != nil {
		return info, fmt.Errorf("%w: %s cannot be read as a SQLite database: %v", ErrInvalidArgument, path, err)
	}
	if tables != 2 {
		return info, fmt.Errorf("%w: %s is not an rbook control-plane database (no schema_migrations and playbook_runs tables)", ErrInvalidArgument, path)
	}
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return info, fmt.Errorf("%w: %s: integrity check: %v", ErrInvalidArgument, path, err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return info, fmt.Errorf("%w: %s: integrity check: %v", ErrInvalidArgument, path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return info, fmt.Errorf("%w: %s: integrity check: %v", ErrInvalidArgument, path, err)
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], "…")
		}
		return info, fmt.Errorf("%w: %s fails SQLite's integrity check: %s", ErrInvalidArgument, path, strings.Join(problems, "; "))
	}
	if err := db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&info.SchemaVersion); err != nil {
		return info, fmt.Errorf("%w: %s: read schema version: %v", ErrInvalidArgument, path, err)
	}
	ms, err := loadMigrations(dialectSQLite)
	if err != nil {
		return info, err
	}
	if info.SchemaVersion > len(ms) {
		return info, fmt.Errorf("%s: %w", path, schemaNewerError(info.SchemaVersion, len(ms)))
	}
	if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM playbook_runs), (SELECT count(*) FROM run_transitions)").
		Scan(&info.Runs, &info.Transitions); err != nil {
		return info, fmt.Errorf("%w: %s: count runs: %v", ErrInvalidArgument, path, err)
	}
	return info, nil
}

// RestoreSQLite replaces the SQLite database target with the backup file: it checks the
// backup first (CheckBackup) and changes nothing when that fails; it checkpoints target (so
// its whole content is in the main file), keeps a copy of it as target+".before-restore"
// (refusing, with nothing changed, when such a copy is left from an earlier restore: it may
// be the only copy of the database as it was before that one), then writes the backup over target atomically (a
// temporary file beside it, fsync, rename) and removes target's stale -wal and -shm files.
// The caller makes sure no process serves target meanwhile (`rbook admin restore` holds its
// serving lock). A missing target is simply created. Errors: ErrPostgresBackup for a
// PostgreSQL DSN; CheckBackup's; SQLite and file errors.
func RestoreSQLite(ctx context.Context, backup, target string) (BackupInfo, error) {
	if IsPostgresDSN(target) || IsPostgresDSN(backup) {
		return BackupInfo{}, ErrPostgresBackup
	}
	info, err := CheckBackup(ctx, backup)
	if err != nil {
		return info, fmt.Errorf("the backup was not restored: %w", err)
	}
	abs, err := databasePath(target)
	if err != nil {
		return info, err
	}
	if _, err := os.Stat(abs); err == nil {
		if _, err := os.Lstat(abs + ".before-restore"); err == nil {
			return info, fmt.Errorf("%w: nothing was replaced: %s.before-restore is left from an earlier restore and may be the only copy of the database before it; move it away (or delete it once you are sure), then restore again", ErrInvalidArgument, abs)
		}
		if err := checkpoint(ctx, abs); err != nil {
			return info, err
		}
		old, err := os.Open(abs)
		if err != nil {
			return info, err
		}
		err = atomicfile.WriteFrom(abs+".before-restore", old, 0o600)
		old.Close()
		if err != nil {
			return info, err
		}
		info.Kept = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return info, err
	}
	in, err := os.Open(backup)
	if err != nil {
		return info, err
	}
	defer in.Close()
	if err := atomicfile.WriteFrom(abs, in, 0o600); err != nil {
		return info, err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(abs + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return info, err
		}
	}
	return info, nil
}

// checkpoint moves everything in the WAL of the SQLite database path into its main file and
// truncates the WAL.
func checkpoint(ctx context.Context, path string) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", defaultBusyTimeout.Milliseconds()))
	db, err := sql.Open("sqlite", fileURI(path, q))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var busy, logFrames, done int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("store: checkpoint %s: %w", path, err)
	}
	if busy != 0 {
		return fmt.Errorf("store: checkpoint %s: the database is in use by another process; stop it first", path)
	}
	return nil
}

// PendingMigrations opens the database dsn (a SQLite file or a PostgreSQL DSN, as Open
// takes) without changing it and returns its schema version and the migrations this rbook
// would apply to it, oldest first. A missing SQLite file is version 0 with every migration
// pending. Errors: ErrSchemaNewer (with ErrInvalidArgument) for a database newer than this
// rbook; CheckDSN's; connection and storage errors.
func PendingMigrations(ctx context.Context, dsn string) (version int, pending []Migration, err error) {
	if err := CheckDSN(dsn); err != nil {
		return 0, nil, err
	}
	d := dialectSQLite
	var db *sql.DB
	if IsPostgresDSN(dsn) {
		d = dialectPostgres
		if db, _, err = openPGPool(pgConnString(dsn), true); err != nil {
			return 0, nil, err
		}
	} else {
		abs, err := databasePath(dsn)
		if err != nil {
			return 0, nil, err
		}
		if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
			return listPending(0, dialectSQLite)
		}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", defaultBusyTimeout.Milliseconds()))
		q.Set("mode", "ro")
		if db, err = sql.Open("sqlite", fileURI(abs, q)); err != nil {
			return 0, nil, err
		}
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&version)
	switch {
	case isUndefinedTable(err):
		version = 0
	case err != nil && d == dialectPostgres:
		return 0, nil, pgOpenError(err, dsn)
	case err != nil:
		return 0, nil, fmt.Errorf("store: read schema version of %s: %w", dsn, err)
	}
	return listPending(version, d)
}

// listPending is the migrations of d after version, or ErrSchemaNewer when version is past
// the newest.
func listPending(version int, d dialect) (int, []Migration, error) {
	ms, err := loadMigrations(d)
	if err != nil {
		return 0, nil, err
	}
	if version > len(ms) {
		return version, nil, schemaNewerError(version, len(ms))
	}
	var out []Migration
	for _, m := range ms[version:] {
		out = append(out, Migration{Version: m.version, Name: m.name})
	}
	return version, out, nil
}
