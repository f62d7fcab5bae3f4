package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
)

// Backends of the conformance suite: RBOOK_TEST_STORE picks the
// backend every test's shared opener (openTest, testDSN) uses: "sqlite" (default) or
// "postgres", which needs RBOOK_TEST_POSTGRES_URL (see .ci/postgres) and gives each test a
// fresh database.

// pgSkipMessage is the skip message (docs/decisions/postgres-tests.md) for a PostgreSQL test
// without a server.
const pgSkipMessage = "set RBOOK_TEST_POSTGRES_URL (see .ci/postgres) to run this PostgreSQL test"

// testOnPostgres reports whether the suite runs against PostgreSQL (RBOOK_TEST_STORE=postgres).
func testOnPostgres() bool { return os.Getenv("RBOOK_TEST_STORE") == "postgres" }

// skipOnPostgres skips a test that is about SQLite itself when the suite runs on PostgreSQL.
func skipOnPostgres(t testing.TB, why string) {
	t.Helper()
	if testOnPostgres() {
		t.Skip("sqlite only: " + why)
	}
}

// testDSN is a fresh database for one test: a file path in t.TempDir() on SQLite, or on
// PostgreSQL a new database rbook_t_<random> created from RBOOK_TEST_POSTGRES_URL and
// dropped WITH (FORCE) at cleanup.
func testDSN(t testing.TB, name string) string {
	t.Helper()
	if !testOnPostgres() {
		return t.TempDir() + "/" + name
	}
	return newPGDatabase(t)
}

// newPGDatabase creates a fresh PostgreSQL database for t and returns its DSN; it
// skips t with pgSkipMessage when RBOOK_TEST_POSTGRES_URL is unset.
func newPGDatabase(t testing.TB) string {
	t.Helper()
	return newPGDatabaseWith(t, "")
}

// newPGDatabaseWith is newPGDatabase with extra CREATE DATABASE options (e.g. a locale).
func newPGDatabaseWith(t testing.TB, options string) string {
	t.Helper()
	base := os.Getenv("RBOOK_TEST_POSTGRES_URL")
	if base == "" {
		if testOnPostgres() {
			t.Fatal("RBOOK_TEST_STORE=postgres needs RBOOK_TEST_POSTGRES_URL (see .ci/postgres)")
		}
		t.Skip(pgSkipMessage)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "rbook_t_" + hex.EncodeToString(b[:])
	admin, _, err := openPGPool(base, false)
	if err != nil {
		t.Fatalf("open %s: %v", RedactDSN(base), err)
	}
	admin.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		admin.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// rawPG opens a plain connection pool on dsn for a test to inspect or change the database
// behind the store's back.
func rawPG(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, _, err := openPGPool(dsn, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
