package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"
)

// ErrReadOnly: a write on a Store opened with OpenReadOnly.
var ErrReadOnly = errors.New("store: the database is open read-only")

// ErrNoDatabase: OpenReadOnly found no database file at the path; it never creates one
// (a read-only command must not leave an empty database behind).
var ErrNoDatabase = errors.New("store: no database file")

// OpenReadOnly opens an existing database for reading only: `rbook runs`,
// `get` and `approvals` read an embedded control plane's history with it after its run has
// ended. Every read method works as on a Store from Open; every write returns ErrReadOnly.
//
// It never changes anything on disk: no migration (a database whose schema is older or
// newer than this rbook's is refused with ErrInvalidArgument, naming both versions), no
// journal-mode change, and no new files. Which SQLite open it uses depends on what is there:
//   - a -wal file exists (a control plane is serving the file, or one was killed before it
//     checkpointed): mode=ro with query_only, a normal WAL reader. It sees every committed
//     transaction, including those only in the WAL, and never blocks the writer (WAL readers
//     do not); SQLite may add the -shm index beside an existing WAL, never a WAL.
//   - no -wal file: everything committed is in the main file, and a mode=ro connection
//     would create -wal and -shm files and leave them behind. So the file is opened with
//     immutable=1: no locks, no side files. A writer that starts meanwhile is not blocked;
//     its changes stay in its own WAL and are not seen by this Store (reads are a snapshot
//     of the file as it was when the process last checkpointed).
//
// A postgres:// or postgresql:// DSN (docs/decisions/store-dialects.md) opens a read-only pool on that
// database instead: its sessions are default_transaction_read_only, its read transactions
// REPEATABLE READ, and the schema must be exactly this rbook's, as for a file.
//
// Errors: ErrNoDatabase when path does not exist, ErrInvalidArgument for a bad path or a
// schema this rbook cannot read, otherwise the SQLite error.
func OpenReadOnly(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{clock: time.Now, readerConns: 2, busyTimeout: defaultBusyTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if err := CheckDSN(path); err != nil {
		return nil, err // nothing is created for a refused value (dsn.go says why)
	}
	if IsPostgresDSN(path) {
		return openPostgresReadOnly(ctx, pgConnString(path), cfg)
	}
	abs, err := databasePath(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s", ErrNoDatabase, path)
	} else if err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalidArgument, path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.busyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	q.Set("mode", "ro")
	if _, err := os.Stat(abs + "-wal"); errors.Is(err, fs.ErrNotExist) {
		q.Set("immutable", "1")
	}
	reader, err := sql.Open("sqlite", fileURI(abs, q))
	if err != nil {
		return nil, err
	}
	setReaderPool(reader, cfg.readerConns)
	if err := checkSchema(ctx, reader, dialectSQLite, path); err != nil {
		reader.Close()
		return nil, err
	}
	return newReadOnlyStore(cfg, dialectSQLite, "", reader), nil
}

// newReadOnlyStore is the Store OpenReadOnly returns for either dialect
// (docs/decisions/store-dialects.md): only reader, readOnly set, no writer goroutine (done is already
// closed) and no subscribers. origin is "" for a SQLite file, which has no listener.
func newReadOnlyStore(cfg config, d dialect, origin string, reader *sql.DB) *Store {
	s := &Store{cfg: cfg, dialect: d, origin: origin, reader: reader, readOnly: true,
		closing: make(chan struct{}), done: make(chan struct{})}
	close(s.done) // there is no writer goroutine to wait for
	s.subs.Store(&[]*subscriber{})
	return s
}

// checkSchema refuses a database whose schema version is not exactly this rbook's: a
// read-only open cannot migrate an older one, and a newer one may mean something else.
func checkSchema(ctx context.Context, db *sql.DB, d dialect, path string) error {
	ms, err := loadMigrations(d)
	if err != nil {
		return err
	}
	var version int
	err = db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&version)
	if isUndefinedTable(err) {
		return fmt.Errorf("%w: %s is not an rbook control-plane database (no schema_migrations table)", ErrInvalidArgument, path)
	}
	if err != nil {
		return fmt.Errorf("store: read schema version of %s: %w", path, err)
	}
	switch latest := len(ms); {
	case version > latest:
		return fmt.Errorf("%s: %w", path, schemaNewerError(version, latest))
	case version < latest:
		return fmt.Errorf("%w: %s has schema version %d, older than this rbook's %d; a read-only open does not migrate it (rbook serve --db %s does)", ErrInvalidArgument, path, version, latest, path)
	}
	return nil
}

// ReadOnly reports whether the Store was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }
