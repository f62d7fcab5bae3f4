package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres is Open for a postgres:// or postgresql:// DSN (docs/decisions/store-dialects.md):
// one writer connection (the writer goroutine's, READ COMMITTED) on which the migrations run
// under the advisory lock (docs/decisions/schema-migrations.md), and a pool of cfg.readerConns connections whose
// transactions are read-only (default_transaction_read_only) and whose read transactions
// are REPEATABLE READ, the snapshot a SQLite read transaction has. Errors name the DSN
// without its password (redactDSN): ErrInvalidArgument for a DSN pgx cannot parse or a
// database migrated by a newer rbook, otherwise the connection or server error.
func openPostgres(ctx context.Context, dsn string, cfg config) (*Store, error) {
	writer, pgw, err := openPGPool(dsn, false)
	if err != nil {
		return nil, err
	}
	setWriterPool(writer)
	if err := writer.PingContext(ctx); err != nil {
		// A server that is down, a wrong password, a missing database: said as a connection
		// failure with its next step, not as a failed migration (errors a person
		// sees say what to do next).
		writer.Close()
		return nil, pgOpenError(err, dsn)
	}
	from, to, err := migrate(ctx, writer, dialectPostgres, cfg.clock, cfg.maxSchema)
	if err != nil {
		writer.Close()
		return nil, pgOpenError(err, dsn)
	}
	reader, _, err := openPGPool(dsn, true)
	if err != nil {
		writer.Close()
		return nil, err
	}
	setReaderPool(reader, cfg.readerConns)
	if err := reader.PingContext(ctx); err != nil {
		reader.Close()
		writer.Close()
		return nil, pgOpenError(err, dsn)
	}
	s, err := start(ctx, cfg, dialectPostgres, writer, reader, pgw)
	if err == nil {
		s.schemaFrom, s.schemaTo = from, to
		s.startListener(ctx, dsn, s.origin) // change fan-out across replicas (pglisten.go, docs/decisions/change-fanout.md)
	}
	return s, err
}

// DefaultPGConnectTimeout bounds one connection attempt to PostgreSQL (dial, TLS,
// authentication) when the DSN sets no connect_timeout (docs/control-plane.md, "Databases: SQLite and PostgreSQL"): without it a
// server that accepts TCP and never answers (a dead host behind a proxy, a partition) made
// `rbook serve` hang at start with no message, and the writer goroutine hang on its next
// reconnect with every write waiting. A DSN's connect_timeout=N (seconds) overrides it.
const DefaultPGConnectTimeout = 10 * time.Second

// openPGPool opens a database/sql pool over pgx's stdlib driver wrapped in pgConnector
// (dialect.go). readOnly pools set default_transaction_read_only and read REPEATABLE READ.
func openPGPool(dsn string, readOnly bool) (*sql.DB, *pgConnector, error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors may quote the DSN: name it redacted only, with pgx's reason.
		return nil, nil, fmt.Errorf("%w: PostgreSQL DSN %s does not parse: %s", ErrInvalidArgument, RedactDSN(dsn), pgParseReason(err))
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = DefaultPGConnectTimeout
	}
	if readOnly {
		pc.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pc.RuntimeParams["application_name"] = "rbook"
	c := &pgConnector{inner: stdlib.GetConnector(*pc), readRepeatable: readOnly}
	return sql.OpenDB(c), c, nil
}

// openPostgresReadOnly is OpenReadOnly for a PostgreSQL DSN: only the reader pool, whose
// sessions are default_transaction_read_only, so even a write that bypassed ErrReadOnly is
// refused by the server. The schema must be exactly this rbook's (checkSchema).
func openPostgresReadOnly(ctx context.Context, dsn string, cfg config) (*Store, error) {
	reader, _, err := openPGPool(dsn, true)
	if err != nil {
		return nil, err
	}
	setReaderPool(reader, cfg.readerConns)
	if err := checkSchema(ctx, reader, dialectPostgres, RedactDSN(dsn)); err != nil {
		reader.Close()
		return nil, pgOpenError(err, dsn)
	}
	return newReadOnlyStore(cfg, dialectPostgres, newOrigin(), reader), nil
}

// newOrigin is a random 16-hex-digit id for one opened Store (docs/decisions/change-fanout.md).
func newOrigin() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("store: random origin: %v", err)) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// pgParseReason is what pgx.ParseConfig said was wrong with a DSN, without the DSN that its
// error quotes: "invalid port", "invalid connect_timeout (…)", "failed to configure TLS
// (sslmode is invalid)", "failed to parse as URL (invalid percent-encoded token in
// password)" (the error must say what to fix; pgx's reasons name the
// setting, never its value's secret).
func pgParseReason(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "not a PostgreSQL connection string"
	}
	msg := pce.Error()
	i := strings.LastIndex(msg, "`: ")
	if i < 0 {
		return "not a PostgreSQL connection string"
	}
	return msg[i+len("`: "):]
}
