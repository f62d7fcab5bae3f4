package store

// What Open takes as a PostgreSQL DSN, what it
// refuses, that a password is never printed, the connection errors' single cause and next
// step, and the migration versions Open reports.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDSNSchemesAndForms: schemes in any letter case and libpq keyword/value strings are
// PostgreSQL; another scheme is refused, naming only the scheme and listing what is
// accepted; a path stays a path; the password is redacted in every form.
func TestDSNSchemesAndForms(t *testing.T) {
	for dsn, pg := range map[string]bool{
		"postgres://u:s3cret@h/db":                true,
		"POSTGRES://u:s3cret@h/db":                true,
		"PostgreSQL://u@h/db":                     true,
		"host=h dbname=db user=u password=s3cret": true,
		"host = h  password='s3 cret' dbname=db":  true,
		"dbname=rbook":                            true,
		"postgress://u:s3cret@h/db":               false,
		"/var/lib/rbook/cp.db":                    false,
		".rbook/controlplane.db":                  false,
		"weird=thing.db":                          false, // no libpq key
		"host=x.db and more":                      false, // not all key=value
		`C:\rbook\cp.db`:                          false,
	} {
		if got := IsPostgresDSN(dsn); got != pg {
			t.Errorf("IsPostgresDSN(%q) = %v, want %v", dsn, got, pg)
		}
	}
	for _, bad := range []string{"postgress://u:s3cret@h/db", "mysql://u:s3cret@h/db", "file:///tmp/x.db", "HTTP://h"} {
		err := CheckDSN(bad)
		if !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), "s3cret") ||
			!strings.Contains(err.Error(), "give a SQLite file path, a postgres://… or postgresql://… URL, or a PostgreSQL key=value string") {
			t.Errorf("CheckDSN(%q) = %v; want ErrInvalidArgument listing what is accepted, without the password", bad, err)
		}
	}
	for _, ok := range []string{"cp.db", "POSTGRES://u@h/db", "host=h dbname=db"} {
		if err := CheckDSN(ok); err != nil {
			t.Errorf("CheckDSN(%q) = %v, want nil", ok, err)
		}
	}
	for dsn, want := range map[string]string{
		"POSTGRES://u:s3cret@h/db":                  "postgres://u:xxxxx@h/db",
		"host=h password=s3cret dbname=db":          "host=h password=xxxxx dbname=db",
		"host=h PASSWORD = 's3 \\' cret' dbname=db": "host=h PASSWORD = xxxxx dbname=db",
		"postgress://u:s3cret@h/db":                 "postgress://u:xxxxx@h/db",
		"postgres://h/db?sslpassword=s3cret":        "postgres://h/db?sslpassword=xxxxx",
		"host=h sslpassword=s3cret dbname=db":       "host=h sslpassword=xxxxx dbname=db",
		"/var/lib/rbook/cp.db":                      "/var/lib/rbook/cp.db",
	} {
		if got := RedactDSN(dsn); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// TestRefusedDSNCreatesNothing: Open and OpenReadOnly of a value with an
// unknown scheme fail with ErrInvalidArgument and leave the working folder empty (before,
// a SQLite file and folders named after the DSN were made).
func TestRefusedDSNCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, dsn := range []string{"postgress://u:s3cret@h/db", "mysql://u:s3cret@h:3306/db"} {
		if _, err := Open(context.Background(), dsn); !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("Open(%q) = %v; want ErrInvalidArgument without the password", dsn, err)
		}
		if _, err := OpenReadOnly(context.Background(), dsn); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("OpenReadOnly(%q) = %v; want ErrInvalidArgument", dsn, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused DSN created %d entries in the working folder (first %q)", len(ents), ents[0].Name())
	}
}

// TestMigratedVersions: Open reports the schema versions before and after its
// migrations: 0 → latest on a new database, latest → latest on the next open. SQLite here;
// PostgreSQL (an upper-case scheme, then the same database as a keyword/value string) in
// TestPGMigratedVersionsAndOtherDSNForms.
func TestMigratedVersions(t *testing.T) {
	latest := latestVersion(t, dialectSQLite)
	path := t.TempDir() + "/cp.db"
	for i, want := range [][2]int{{0, latest}, {latest, latest}} {
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if from, to := s.Migrated(); from != want[0] || to != want[1] {
			t.Errorf("open %d: Migrated() = %d, %d; want %d, %d", i+1, from, to, want[0], want[1])
		}
		s.Close()
	}
}

func latestVersion(t *testing.T, d dialect) int {
	t.Helper()
	ms, err := loadMigrations(d)
	if err != nil || len(ms) == 0 {
		t.Fatalf("loadMigrations: %d, %v", len(ms), err)
	}
	return ms[len(ms)-1].version
}

// TestPGMigratedVersionsAndOtherDSNForms: on PostgreSQL, an upper-case scheme
// opens (and migrates 0 → latest), and the same database as a libpq keyword/value string
// opens (latest → latest).
func TestPGMigratedVersionsAndOtherDSNForms(t *testing.T) {
	dsn := newPGDatabase(t)
	latest := latestVersion(t, dialectPostgres)
	upper := "POSTGRES" + strings.TrimPrefix(dsn, "postgres")
	s, err := Open(context.Background(), upper)
	if err != nil {
		t.Fatalf("Open(%s): %v", RedactDSN(upper), err)
	}
	if from, to := s.Migrated(); from != 0 || to != latest {
		t.Errorf("first open: Migrated() = %d, %d; want 0, %d", from, to, latest)
	}
	s.Close()
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", pc.Host, pc.Port, pc.User, pc.Database)
	s, err = Open(context.Background(), kv)
	if err != nil {
		t.Fatalf("Open(%s): %v", kv, err)
	}
	defer s.Close()
	if from, to := s.Migrated(); from != latest || to != latest {
		t.Errorf("second open: Migrated() = %d, %d; want %d, %d", from, to, latest, latest)
	}
}

// TestConnectErrorsSayOneCauseAndTheNextStep: with the default sslmode
// (prefer), a missing database names the server's error once (no "tls error" first) and
// says to create it; a refused port is named once and asks whether PostgreSQL runs there;
// an unknown role says to check the user and password.
func TestConnectErrorsSayOneCauseAndTheNextStep(t *testing.T) {
	base := os.Getenv("RBOOK_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip(pgSkipMessage)
	}
	pc, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	at := fmt.Sprintf("%s:%d", pc.Host, pc.Port)
	for _, tc := range []struct {
		dsn, cause, next string
	}{
		{"postgres://" + pc.User + "@" + at + "/rbook_no_such_db", `database "rbook_no_such_db" does not exist`,
			fmt.Sprintf("; create it: createdb -h %s -p %d -U %s rbook_no_such_db (or CREATE DATABASE rbook_no_such_db)", pc.Host, pc.Port, pc.User)},
		{"postgres://rbook:s3cret@" + closed + "/db", "connection refused", "; is PostgreSQL running on " + closed + "?"},
		{"host=" + pc.Host + fmt.Sprintf(" port=%d", pc.Port) + " user=rbook_nobody password=s3cret dbname=rbook", `role "rbook_nobody" does not exist`,
			"; check the user and password (PGPASSWORD or ~/.pgpass keep it off the command line)"},
	} {
		_, err := Open(ctx, tc.dsn)
		if err == nil {
			t.Fatalf("Open(%s) worked", RedactDSN(tc.dsn))
		}
		msg := err.Error()
		if strings.Count(msg, tc.cause) != 1 || !strings.HasSuffix(msg, tc.next) || strings.Contains(msg, "tls error") || strings.Contains(msg, "s3cret") {
			t.Errorf("Open(%s) = %q; want %q once, ending %q, no TLS error, no password", RedactDSN(tc.dsn), msg, tc.cause, tc.next)
		}
	}
}
