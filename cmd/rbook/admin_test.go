package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/controlplane/embedded"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// rbookIn runs the command tree in-process with args and returns stdout, stderr and the
// exit code.
func rbookIn(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(args)
	code := execute(root, &errw)
	return out.String(), errw.String(), code
}

func TestAdminMigrateDryRunListsPendingMigrationsAndAppliesNothing(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cp.db")
	// This rbook's Open migrates the file to 18 and may then refuse to start on it (its
	// statements use columns of later migrations, such as the hash chain's); the dry run
	// below checks the version the file was left at.
	if st, err := store.Open(context.Background(), db, store.WithMaxSchemaVersion(18)); err == nil {
		st.Close()
	}
	newest := newestMigration(t)
	out, errs, code := rbookIn(t, "admin", "migrate", "--dry-run", "--db", db)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("schema version 18: %d pending", newest-18)) || !strings.Contains(out, "  19  0019_") ||
		!strings.Contains(out, "  20  0020_retention.sql") {
		t.Fatalf("migrate --dry-run: exit %d\n%s%s", code, out, errs)
	}
	if v, pending, err := store.PendingMigrations(context.Background(), db); err != nil || v != 18 || len(pending) != newest-18 {
		t.Fatalf("after --dry-run: version %d, %d pending, %v; want nothing applied", v, len(pending), err)
	}
	out, errs, code = rbookIn(t, "admin", "migrate", "--db", db)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("database schema migrated from version 18 to %d", newest)) {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = rbookIn(t, "admin", "migrate", "--dry-run", "--db", db)
	if !strings.Contains(out, fmt.Sprintf("schema version %d: no migration pending", newest)) {
		t.Fatalf("migrate --dry-run after migrate:\n%s", out)
	}
}

// TestAdminRefusesWhatItCannotDoAndSaysWhatToDo: a backup of PostgreSQL says to use pg_dump
// (docs/backup.md); a restore without --db is a usage error; and a mistyped --db must not
// become a new, empty database that "migrated": migrate (and its --dry-run) refuses a SQLite
// path where no database is, and creates nothing there.
func TestAdminRefusesWhatItCannotDoAndSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		want      []string
		notExists string // a path the refused command must not create
	}{
		{"backup of PostgreSQL", []string{"admin", "backup", filepath.Join(dir, "b.db"), "--db", "postgres://rbook@db.invalid/rbook"},
			exitAborted, []string{"pg_dump", "docs/backup.md"}, filepath.Join(dir, "b.db")},
		{"restore without --db", []string{"admin", "restore", "backup.db"}, exitUsage, []string{"--db FILE is required"}, ""},
		{"migrate a path without a database", []string{"admin", "migrate", "--db", typo},
			exitAborted, []string{"no database there", "give the file rbook serve --db serves"}, typo},
		{"migrate --dry-run a path without a database", []string{"admin", "migrate", "--dry-run", "--db", typo},
			exitAborted, []string{"no database there", "give the file rbook serve --db serves"}, typo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := rbookIn(t, tc.args...)
			if code != tc.code {
				t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errs)
				}
			}
			if tc.notExists == "" {
				return
			}
			if _, err := os.Stat(tc.notExists); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%v created %s (%v)", tc.args, tc.notExists, err)
			}
		})
	}
}

// A restore into a path where no database was says that nothing was replaced, so a --db
// that is not the served file does not pass for a restore.
func TestAdminRestoreIntoAnEmptyPathSaysNothingWasReplaced(t *testing.T) {
	dir := t.TempDir()
	_, backup := backedUpDB(t, dir)
	out, errs, code := rbookIn(t, "admin", "restore", backup, "--db", filepath.Join(dir, "elsewhere.db"))
	if code != 0 || !strings.Contains(out, "no database was there, so nothing was replaced") {
		t.Fatalf("restore into an empty path: exit %d\n%s%s", code, out, errs)
	}
}

// A restore while a control plane serves the database replaces nothing and says what to do:
// stop that server, restore, start it again; not a server's advice to pick another --db.
func TestAdminRestoreWhileServedSaysToStopTheServerFirst(t *testing.T) {
	db, backup := backedUpDB(t, t.TempDir())
	unlock, err := embedded.LockDB(db, time.Second) // the serving control plane
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, errs, code := rbookIn(t, "admin", "restore", backup, "--db", db)
	want := "rbook admin restore: nothing was replaced: another control plane is serving " + db +
		" (an 'rbook serve', or the embedded one of a running 'rbook run'). Stop it (systemctl stop rbook, or end that run), run this restore again, then start it"
	if code != exitAborted || !strings.Contains(errs, want) || strings.Contains(errs, "its own --db") {
		t.Fatalf("restore while served: exit %d\n%s\nwant %q", code, errs, want)
	}
	if _, err := os.Stat(db + ".before-restore"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused restore kept a copy (%v)", err)
	}
}

// backedUpDB makes a new database dir/cp.db and its backup dir/backup.db with rbook admin
// backup, and returns their paths.
func backedUpDB(t *testing.T, dir string) (db, backup string) {
	t.Helper()
	db, backup = filepath.Join(dir, "cp.db"), filepath.Join(dir, "backup.db")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, errs, code := rbookIn(t, "admin", "backup", backup, "--db", db); code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, errs)
	}
	return db, backup
}
