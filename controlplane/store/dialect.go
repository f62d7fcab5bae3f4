// How to write a query in this package
//
// Every query is written once, in SQLite's dialect, and runs on both databases: on
// PostgreSQL the driver wrapper below (pgConn) rewrites its text once (pgRewrite, cached by
// pgQuery). So:
//
//   - Use `?` placeholders, never $1. They are numbered in order on PostgreSQL; a `?` inside
//     a quoted string ('…' or "…"), a -- comment or a /* */ comment is left alone.
//   - A row a write request reads and then changes is read with forUpdate(query): FOR UPDATE
//     on PostgreSQL, where another replica may write the same row (docs/decisions/
//     write-conflicts.md); nothing on SQLite, whose single writer already holds the lock.
//   - Keep to SQL both databases share: times and JSON are TEXT (times in formatTime's
//     format), flags are INTEGER 0/1 (Go bools are passed as 0/1 on PostgreSQL too). A
//     construct that must differ is added to pgFragments as an exact SQLite fragment and its
//     PostgreSQL twin, with a case in TestPostgresRewrite (dialect_test.go).
//   - A schema change is a migration with the same NNNN_name.sql in migrations/ and
//     migrations_pg/ (TestMigrationsListTheSameVersionsInBothDialects).
//   - Run the store suite on both: RBOOK_TEST_STORE=postgres with RBOOK_TEST_POSTGRES_URL (see
//     .ci/postgres and docs/decisions/postgres-tests.md).
//
// The reasons are in docs/decisions/store-dialects.md.

package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is the SQL dialect of an open Store (docs/decisions/store-dialects.md). The
// package's queries are written once, in SQLite's dialect with `?` placeholders; on
// PostgreSQL the driver wrapper (pgConn) rewrites each query text once (cached) with
// pgRewrite: placeholders become $n and the few SQLite-only fragments listed in
// pgFragments become their PostgreSQL equivalents.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

// forUpdate marks q, a SELECT inside a write transaction that reads a row the same request
// then changes, as a locking read (docs/decisions/write-conflicts.md): on PostgreSQL it runs
// as q + " FOR UPDATE", so a second replica writing the same run or approval waits for this
// transaction and then reads the committed row; on SQLite it runs as q (the single writer
// holds the database's write lock). q must end where FOR UPDATE may follow (after WHERE and
// ORDER BY).
func forUpdate(q string) string { return q + forUpdateMarker }

// forUpdateMarker is what forUpdate appends: a comment SQLite ignores and pgFragments turns
// into FOR UPDATE. Nothing else in the package writes it.
const forUpdateMarker = " /*rbook:for-update*/"

// votesSQLite and votesPG are the approvals' votes subquery of approvalColumns in each
// dialect: a JSON array of [approver, verdict, reason, at, source, verified, person, input_values] in the order
// the votes were stored (SQLite's rowid; on PostgreSQL, approval_votes.rowid is an identity
// column of the same meaning, migrations_pg/0004).
const (
	votesSQLite = `(SELECT json_group_array(json_array(v.approver, v.verdict, v.reason, v.at, v.source, v.verified, v.person, v.input_values) ORDER BY v.rowid)
	 FROM approval_votes v WHERE v.approval_id = playbook_approvals.approval_id)`
	votesPG = `(SELECT coalesce(json_agg(json_build_array(v.approver, v.verdict, v.reason, v.at, v.source, v.verified, v.person, v.input_values) ORDER BY v.rowid)::text, '[]')
	 FROM approval_votes v WHERE v.approval_id = playbook_approvals.approval_id)`
)

// pgFragments are the SQLite fragments of the package's queries and what PostgreSQL runs
// instead, applied before the placeholders are renumbered.
var pgFragments = []struct{ sqlite, pg string }{
	{votesSQLite, votesPG},
	{forUpdateMarker, " FOR UPDATE"},
	{"PRAGMA data_version", "SELECT 0"},
	{") STRICT", ")"},
}

// pgRewrite turns one query of the package into PostgreSQL's dialect: the fragments of
// pgFragments, then each `?` outside quotes ('…', "…"; a doubled quote inside reads as two
// adjacent strings) and comments (-- to the end of the line, /* to */) becomes $1, $2, …
// in order. An unterminated quote or comment runs to the end of the text unchanged.
func pgRewrite(q string) string {
	for _, f := range pgFragments {
		q = strings.ReplaceAll(q, f.sqlite, f.pg)
	}
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(q[i+1:], c)
			if j < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+j+2])
			i += j + 1
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			j := strings.Index(q[i+2:], "*/")
			if j < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+j+4])
			i += j + 3
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				b.WriteString(q[i:])
				return b.String()
			}
			b.WriteString(q[i : i+j])
			i += j - 1
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rewritten caches pgRewrite per query text; the package has a bounded set of queries
// (dynamic WHERE lists combine a handful of fixed conditions).
var rewritten sync.Map // string -> string

func pgQuery(q string) string {
	if v, ok := rewritten.Load(q); ok {
		return v.(string)
	}
	r := pgRewrite(q)
	rewritten.Store(q, r)
	return r
}

// pgConnector opens pgx stdlib connections wrapped in pgConn. serverErrors counts the
// statements that failed with a server error on its connections: on PostgreSQL such an
// error aborts the transaction, so the writer checks the count around every request
// (writer.go, attempt). readRepeatable makes read-only transactions REPEATABLE READ, the
// snapshot a SQLite read transaction gives (GetRun reads a run and its transitions).
type pgConnector struct {
	inner          driver.Connector
	serverErrors   atomic.Uint64
	readRepeatable bool
}

func (c *pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{Conn: conn.(*stdlib.Conn), owner: c}, nil
}

func (c *pgConnector) Driver() driver.Driver { return c.inner.Driver() }

// pgConn is a pgx stdlib connection that runs the package's queries in PostgreSQL's
// dialect (pgQuery), passes Go bools as 0/1 (the schema keeps SQLite's INTEGER flags) and
// counts server errors.
type pgConn struct {
	*stdlib.Conn
	owner *pgConnector
}

func (c *pgConn) note(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c.owner.serverErrors.Add(1)
	}
	return err
}

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.PrepareContext(ctx, pgQuery(query))
	if err != nil {
		return nil, c.note(err)
	}
	return &pgStmt{Stmt: st.(*stdlib.Stmt), conn: c}, nil
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.ExecContext(ctx, pgQuery(query), args)
	return res, c.note(err)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.QueryContext(ctx, pgQuery(query), args)
	return rows, c.note(err)
}

func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly && c.owner.readRepeatable && opts.Isolation == 0 {
		opts.Isolation = driver.IsolationLevel(sql.LevelRepeatableRead)
	}
	tx, err := c.Conn.BeginTx(ctx, opts)
	return tx, c.note(err)
}

// CheckNamedValue passes bools as 0/1, as modernc's SQLite driver stores them.
func (c *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(boolInt(b))
	}
	return nil
}

// pgStmt is a prepared statement of a pgConn (server errors counted).
type pgStmt struct {
	*stdlib.Stmt
	conn *pgConn
}

func (s *pgStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	res, err := s.Stmt.ExecContext(ctx, args)
	return res, s.conn.note(err)
}

func (s *pgStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.Stmt.QueryContext(ctx, args)
	return rows, s.conn.note(err)
}

// pgCode is err's PostgreSQL SQLSTATE, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isUniqueViolation reports a UNIQUE or PRIMARY KEY violation in either dialect.
func isUniqueViolation(err error) bool {
	if pgCode(err) == "23505" {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isPGRetryable reports the PostgreSQL errors after which a whole write batch is run again
// (docs/decisions/write-conflicts.md): serialization failure (40001) and deadlock (40P01), always (bounded by
// maxConflictRetries); a unique violation (23505) only when unique is set, i.e. on the
// batch's first conflict with it: it may come from a concurrent replica's commit of the same
// key, which the re-run resolves through the idempotent paths (its reads, under FOR UPDATE,
// then see the committed row). A unique violation that happens again is the request's own
// error.
func isPGRetryable(err error, unique bool) bool {
	switch pgCode(err) {
	case "40001", "40P01":
		return true
	case "23505":
		return unique
	}
	return false
}

// isUndefinedTable reports "no such table" in either dialect.
func isUndefinedTable(err error) bool {
	return pgCode(err) == "42P01" || (err != nil && strings.Contains(err.Error(), "no such table"))
}
