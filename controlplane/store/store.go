// Package store is the control plane's store, on SQLite or PostgreSQL: runs, their
// append-only transitions (with evidence) and approvals (docs/decisions/durability.md). It is
// the only package that speaks SQL, and it imports nothing from action/...
// (ARCHITECTURE.md).
//
// Dialects (docs/decisions/store-dialects.md, docs/decisions/schema-migrations.md, docs/decisions/write-conflicts.md, docs/decisions/change-fanout.md): Open with a postgres:// or postgresql:// DSN
// opens PostgreSQL through database/sql and pgx's stdlib driver; anything else is a SQLite
// file. Both are the same *Store with the same API and errors. Queries are written once in
// SQLite's dialect; on PostgreSQL a driver wrapper rewrites each text once (dialect.go:
// `?` → $n, the votes subquery, FOR UPDATE after the reads a write request changes, no
// PRAGMA, no STRICT). Schemas: migrations/ (SQLite) and migrations_pg/ (PostgreSQL), same
// versions, file names, tables and columns; times are TEXT in formatTime's format and JSON
// is TEXT in both. On PostgreSQL the writer goroutine, group commit and savepoint retry stay
// (one writer connection per replica, READ COMMITTED); rows read and then changed are
// locked FOR UPDATE, because another replica may write the same run; a serialization
// failure, deadlock or unique violation from a concurrent replica re-runs the batch; the
// progress cache lives for one batch only (the batch's runs are locked and read with one
// SELECT … FOR UPDATE in run_id order); the common transitions of a batch are written with
// two statements over arrays instead of two per transition (pgdefer.go); and every batch
// that changed something sends pg_notify('rbook_changes', …) in its transaction (docs/decisions/change-fanout.md,
// notify.go).
//
// The rest of this comment describes SQLite; PostgreSQL's synchronous_commit gives the
// same guarantee that a method that returned nil has its change on disk.
//
// Durability and concurrency: the database runs in WAL mode with synchronous=FULL, so a
// method that returned nil has its change on disk. Every write goes through one writer
// goroutine that owns the single writer connection (_txlock=immediate) and commits whatever
// requests are queued as one transaction (group commit); one bad request fails alone (see
// runBatch). Reads use a separate read-only pool and never wait for the writer. Callers
// therefore never see SQLITE_BUSY from this process.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

const (
	// defaultBusyTimeout bounds how long a connection waits for another process's lock
	// (a second server on the same file, a backup) before SQLITE_BUSY.
	defaultBusyTimeout = 10 * time.Second
	// defaultMaxBatch caps the requests committed in one transaction: large enough to
	// amortise the fsync, small enough to bound one commit's latency.
	defaultMaxBatch = 256
	// writeQueueLen is how many write requests may wait for the writer goroutine.
	writeQueueLen = 1024
	// defaultLinger bounds the writer's wait for a batch to fill (WithLinger). It is well
	// under an fsync, so it adds little latency while it gains whole cohorts.
	defaultLinger = 500 * time.Microsecond
)

// Option configures Open.
type Option func(*config)

type config struct {
	clock       func() time.Time
	readerConns int
	busyTimeout time.Duration
	maxBatch    int
	linger      time.Duration
	// lingerFastCommit is the slowest previous commit after which the writer still lingers.
	lingerFastCommit time.Duration
	onLinger         func() // tests: called when the writer starts to linger
	// maxSchema, when positive, is the newest migration Open applies (WithMaxSchemaVersion).
	maxSchema int
}

// WithClock sets the clock used for timestamps a caller leaves zero (tests).
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithMaxSchemaVersion makes Open behave as an rbook whose newest migration is version n
// (n > 0): it applies migrations up to n only and refuses a database migrated past n with
// ErrSchemaNewer. Tests use it to run an older replica beside a newer one (docs/backup.md,
// "Upgrades and migrations"); 0, the default, is every migration this rbook has.
func WithMaxSchemaVersion(n int) Option { return func(c *config) { c.maxSchema = max(n, 0) } }

// WithReaderConns sets the size of the read-only pool (default 4, minimum 1).
func WithReaderConns(n int) Option { return func(c *config) { c.readerConns = max(n, 1) } }

// WithBusyTimeout sets SQLite's busy_timeout for both pools (default 10 s). It only matters
// when another process holds the file's lock.
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// WithMaxBatch caps the requests per group commit (default 256, minimum 1; 1 disables
// batching, which the benchmarks use as the baseline).
func WithMaxBatch(n int) Option { return func(c *config) { c.maxBatch = max(n, 1) } }

// WithLinger sets how long the writer may wait for more requests to join a batch when fewer
// are queued than the previous batch held (default 500 µs; 0 never waits). See writeLoop.
func WithLinger(d time.Duration) Option { return func(c *config) { c.linger = max(d, 0) } }

// Store is an open database. Its methods are safe for concurrent use.
type Store struct {
	cfg     config
	dialect dialect // dialectSQLite or dialectPostgres (dialect.go)
	// origin is a random id of this opened Store, named in its change notifications on
	// PostgreSQL (docs/decisions/change-fanout.md), so its listener can skip its own.
	origin string
	// notifications is whether writes record notification events (EnableNotificationOutbox).
	notifications atomic.Bool
	// pgWriter is the writer pool's connector on PostgreSQL (nil on SQLite): it counts the
	// server errors that abort a transaction (writer.go, attempt).
	pgWriter *pgConnector
	writer   *sql.DB // MaxOpenConns(1); used only by Open (migrations) and the writer goroutine
	reader   *sql.DB // read-only pool
	stmts    *writeStmts
	// readOnly: opened with OpenReadOnly; writer and stmts are nil and writes fail.
	readOnly bool

	queue   chan *writeReq
	mu      sync.RWMutex // guards closed against senders racing Close
	closed  bool
	closing chan struct{}
	done    chan struct{}

	subsMu sync.Mutex
	subs   atomic.Pointer[[]*subscriber]

	cache   progressCache // writer goroutine only
	objects objectCache   // writer goroutine only

	// fan serialises publish and, on PostgreSQL, runs the change listener (pglisten.go).
	fan fanout

	commits, requests, failedCommits, lingers, safeRetries atomic.Uint64
	commitNanos                                            atomic.Int64
	progressReads, savepoints                              atomic.Uint64 // run-row reads by RecordTransition, SAVEPOINTs (tests)
	conflictRetries                                        atomic.Uint64 // PostgreSQL batches run again after a conflict (docs/decisions/write-conflicts.md)

	// schemaFrom and schemaTo are the schema versions before and after Open's migrations
	// (Migrated); health is the database reachability cache (health.go).
	schemaFrom, schemaTo int
	health               reachability
}

// Open opens (creating if needed) the SQLite database at path, applies pending migrations
// and starts the writer goroutine. path is a file path; ":memory:" is refused because the
// reader pool must share the file. Errors: ErrInvalidArgument for a bad path or a database
// migrated by a newer rbook; otherwise the SQLite error.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{clock: time.Now, readerConns: 4, busyTimeout: defaultBusyTimeout, maxBatch: defaultMaxBatch,
		linger: defaultLinger, lingerFastCommit: defaultLingerFastCommit}
	for _, o := range opts {
		o(&cfg)
	}
	if err := CheckDSN(path); err != nil {
		return nil, err // nothing is created for a refused value (dsn.go says why)
	}
	if IsPostgresDSN(path) {
		return openPostgres(ctx, pgConnString(path), cfg)
	}
	abs, err := databasePath(path)
	if err != nil {
		return nil, err
	}
	busyMS := cfg.busyTimeout.Milliseconds()

	// busy_timeout comes first so that the journal_mode change cannot fail with SQLITE_BUSY
	// while another process is opening the same file (docs/decisions/durability.md).
	writerQuery := url.Values{}
	writerQuery.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMS))
	writerQuery.Add("_pragma", "journal_mode(WAL)")
	writerQuery.Add("_pragma", "synchronous(FULL)")
	writerQuery.Add("_pragma", "foreign_keys(1)")
	writerQuery.Set("_txlock", "immediate")
	writer, err := sql.Open("sqlite", fileURI(abs, writerQuery))
	if err != nil {
		return nil, err
	}
	setWriterPool(writer)
	from, to, err := migrate(ctx, writer, dialectSQLite, cfg.clock, cfg.maxSchema)
	if err != nil {
		writer.Close()
		return nil, err
	}

	readerQuery := url.Values{}
	readerQuery.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMS))
	readerQuery.Add("_pragma", "query_only(1)")
	readerQuery.Set("mode", "ro")
	reader, err := sql.Open("sqlite", fileURI(abs, readerQuery))
	if err != nil {
		writer.Close()
		return nil, err
	}
	setReaderPool(reader, cfg.readerConns)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, err
	}

	s, err := start(ctx, cfg, dialectSQLite, writer, reader, nil)
	if err == nil {
		s.schemaFrom, s.schemaTo = from, to
	}
	return s, err
}

// setWriterPool makes db the single writer connection both dialects use (docs/decisions/durability.md,
// docs/decisions/store-dialects.md): one open connection, kept idle, never recycled by age or idleness.
func setWriterPool(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// setReaderPool sizes a reader pool to n open connections, all of which may stay idle
// (cfg.readerConns, option WithReaderConns).
func setReaderPool(db *sql.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
}

// start prepares the writer's statements, builds the Store and starts its writer goroutine.
// On an error it closes both pools.
func start(ctx context.Context, cfg config, d dialect, writer, reader *sql.DB, pgw *pgConnector) (*Store, error) {
	stmts, err := prepareWriteStmts(ctx, writer, d)
	if err != nil {
		reader.Close()
		writer.Close()
		return nil, err
	}
	s := &Store{
		cfg:      cfg,
		dialect:  d,
		origin:   newOrigin(),
		pgWriter: pgw,
		writer:   writer,
		reader:   reader,
		stmts:    stmts,
		queue:    make(chan *writeReq, writeQueueLen),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.subs.Store(&[]*subscriber{})
	go s.writeLoop()
	return s, nil
}

// fileURI builds a SQLite URI filename so that paths with '?', '#' or '%' stay intact.
// databasePath is path made absolute; an empty path or ":memory:" is ErrInvalidArgument (the
// writer and the reader pool must share one file).
func databasePath(path string) (string, error) {
	if path == "" || path == ":memory:" {
		return "", fmt.Errorf("%w: database path %q: need a file path", ErrInvalidArgument, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: database path %q: %v", ErrInvalidArgument, path, err)
	}
	return abs, nil
}

func fileURI(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// Close finishes the queued writes, stops the writer goroutine and closes both pools.
// Later calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.closing)
	<-s.done
	s.stopListener()
	if s.readOnly {
		return s.reader.Close()
	}
	err := s.stmts.close()
	// Readers first: the writer's close checkpoints and removes the WAL.
	err = errors.Join(err, s.reader.Close(), s.writer.Close())
	return err
}

// WriterStats counts the writer goroutine's work since Open.
type WriterStats struct {
	// Commits is the number of committed group transactions.
	Commits uint64
	// Requests is the number of write requests executed (successful or not).
	Requests uint64
	// FailedCommits is the number of group transactions whose COMMIT failed.
	FailedCommits uint64
	// Lingers is the number of batches for which the writer waited for more requests.
	Lingers uint64
	// SafeRetries is the number of batches run a second time with a savepoint per request,
	// because a request failed after writing or with a storage error.
	SafeRetries uint64
	// CommitTime is the time spent in successful COMMITs (WAL writes and fsync);
	// CommitTime/Commits is the mean commit latency.
	CommitTime time.Duration
}

// Stats reports the writer's counters; Requests/Commits is the mean batch size.
func (s *Store) Stats() WriterStats {
	return WriterStats{Commits: s.commits.Load(), Requests: s.requests.Load(), FailedCommits: s.failedCommits.Load(),
		Lingers: s.lingers.Load(), SafeRetries: s.safeRetries.Load(), CommitTime: time.Duration(s.commitNanos.Load())}
}

// now is the store clock in UTC.
func (s *Store) now() time.Time { return s.cfg.clock().UTC() }

// subscriber wraps a callback so unsubscribe can find it by identity.
type subscriber struct{ fn func(Change) }

// Subscribe registers fn to be called after every commit that changed something, with what
// it changed, in commit order, before the writers of that commit get their results. fn runs
// on the writer goroutine: it must return quickly (hand off to a buffered channel) and must
// not call Store write methods, or it deadlocks the writer. The returned func unsubscribes.
func (s *Store) Subscribe(fn func(Change)) (unsubscribe func()) {
	sub := &subscriber{fn: fn}
	s.subsMu.Lock()
	old := *s.subs.Load()
	next := append(append(make([]*subscriber, 0, len(old)+1), old...), sub)
	s.subs.Store(&next)
	s.subsMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.subsMu.Lock()
			defer s.subsMu.Unlock()
			cur := *s.subs.Load()
			next := make([]*subscriber, 0, len(cur))
			for _, x := range cur {
				if x != sub {
					next = append(next, x)
				}
			}
			s.subs.Store(&next)
		})
	}
}
