package store

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// TestPostgresRewrite is the table of what pgRewrite does to a query written in SQLite's
// dialect: `?` outside quotes and comments numbered in order, and each SQLite-only fragment
// of pgFragments replaced by its PostgreSQL twin (dialect.go, "How to write a query in this
// package").
func TestPostgresRewrite(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no placeholder", "SELECT 1", "SELECT 1"},
		{"placeholders numbered in order", "SELECT a FROM t WHERE b = ? AND c IN (?, ?)",
			"SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)"},
		{"? in a single-quoted string", "SELECT '?' || a FROM t WHERE b = ?",
			"SELECT '?' || a FROM t WHERE b = $1"},
		{"? in a double-quoted identifier", `SELECT "a?" FROM t WHERE b = ?`,
			`SELECT "a?" FROM t WHERE b = $1`},
		{"doubled quote inside a string", "SELECT 'it''s ?' WHERE a = ?",
			"SELECT 'it''s ?' WHERE a = $1"},
		{"? in a line comment", "SELECT a -- why?\nFROM t WHERE b = ?",
			"SELECT a -- why?\nFROM t WHERE b = $1"},
		{"line comment at the end", "SELECT a FROM t WHERE b = ? -- last?",
			"SELECT a FROM t WHERE b = $1 -- last?"},
		{"? in a block comment", "SELECT a /* b = ? */ FROM t WHERE b = ?",
			"SELECT a /* b = ? */ FROM t WHERE b = $1"},
		{"unterminated string left as is", "SELECT ? || 'open ?",
			"SELECT $1 || 'open ?"},
		{"unterminated block comment left as is", "SELECT ? /* open ?",
			"SELECT $1 /* open ?"},
		{"a dash alone is not a comment", "SELECT a - ? FROM t",
			"SELECT a - $1 FROM t"},
		{"forUpdate becomes FOR UPDATE", forUpdate("SELECT a FROM t WHERE b = ?"),
			"SELECT a FROM t WHERE b = $1 FOR UPDATE"},
		{"the votes subquery", "SELECT a, " + votesSQLite + " FROM playbook_approvals WHERE approval_id = ?",
			"SELECT a, " + votesPG + " FROM playbook_approvals WHERE approval_id = $1"},
		{"PRAGMA data_version", "PRAGMA data_version", "SELECT 0"},
		{"STRICT tables", "CREATE TABLE t (a TEXT) STRICT", "CREATE TABLE t (a TEXT)"},
		{"ANY(?) keeps its parentheses", "SELECT a FROM t WHERE b = ANY(?)",
			"SELECT a FROM t WHERE b = ANY($1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pgRewrite(tc.in); got != tc.want {
				t.Errorf("pgRewrite(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := pgQuery(tc.in); got != tc.want {
				t.Errorf("pgQuery(%q) (cached) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestPostgresRewriteCoversEveryFragment: every entry of pgFragments is a distinct, non-empty
// SQLite fragment that rewrites to exactly its PostgreSQL twin, and forUpdate's marker is one
// of them (TestPostgresRewrite has a case per fragment inside a query).
func TestPostgresRewriteCoversEveryFragment(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range pgFragments {
		if f.sqlite == "" || seen[f.sqlite] {
			t.Errorf("fragment %q is empty or listed twice", f.sqlite)
		}
		seen[f.sqlite] = true
		if got := pgRewrite(f.sqlite); got != f.pg {
			t.Errorf("pgRewrite(%q) = %q, want %q", f.sqlite, got, f.pg)
		}
	}
	if got := pgRewrite(forUpdate("")); got != " FOR UPDATE" {
		t.Errorf("forUpdate's marker rewrites to %q, want \" FOR UPDATE\"", got)
	}
}

// TestMigrationsListTheSameVersionsInBothDialects: migrations/ (SQLite) and migrations_pg/
// (PostgreSQL) hold the same NNNN_name.sql files, so schema_migrations means the same on both
// (docs/decisions/schema-migrations.md). A migration added to one directory only fails here.
func TestMigrationsListTheSameVersionsInBothDialects(t *testing.T) {
	names := func(dir string) []string {
		t.Helper()
		entries, err := fs.ReadDir(migrationFiles, dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	sqliteFiles, pgFiles := names("migrations"), names("migrations_pg")
	if len(sqliteFiles) == 0 {
		t.Fatal("no SQLite migrations embedded")
	}
	for _, n := range sqliteFiles {
		if !slices.Contains(pgFiles, n) {
			t.Errorf("migrations/%s has no twin in migrations_pg/", n)
		}
	}
	for _, n := range pgFiles {
		if !slices.Contains(sqliteFiles, n) {
			t.Errorf("migrations_pg/%s has no twin in migrations/", n)
		}
	}
	for _, d := range []dialect{dialectSQLite, dialectPostgres} {
		ms, err := loadMigrations(d)
		if err != nil {
			t.Fatalf("%s: %v", migrationDir(d), err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.name)
		}
		if strings.Join(got, ",") != strings.Join(sqliteFiles, ",") {
			t.Errorf("%s loads %v, want versions 1..%d in order: %v", migrationDir(d), got, len(sqliteFiles), sqliteFiles)
		}
	}
}
