package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBackupHoldsEveryTransitionCommittedBeforeItWhileWritesGoOn(t *testing.T) {
	skipOnPostgres(t, "PostgreSQL is backed up with pg_dump (cmd/rbook/e2e)")
	s, path := openTest(t)
	ctx := context.Background()
	mustStart(t, s, newRun("busy"))
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := int64(1); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.RecordTransition(ctx, tr("busy", seq), fence1); err != nil {
				t.Errorf("record #%d: %v", seq, err)
				return
			}
			acked.Store(seq)
		}
	}()
	for acked.Load() < 20 {
		if _, err := s.RecordTransition(ctx, Transition{}, fence1); err == nil {
			t.Fatal("an empty transition was accepted")
		}
	}
	before := acked.Load()
	dst := filepath.Join(t.TempDir(), "backup.db")
	info, err := BackupSQLite(ctx, path, dst)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("BackupSQLite: %v", err)
	}
	if info.Runs != 1 || info.Transitions < before {
		t.Fatalf("backup holds %d runs, %d transitions; want 1 run and at least the %d acknowledged before it started", info.Runs, info.Transitions, before)
	}
	ms, _ := loadMigrations(dialectSQLite)
	if info.SchemaVersion != len(ms) {
		t.Errorf("backup schema version %d, want %d", info.SchemaVersion, len(ms))
	}
	// The copy is one file: no WAL beside it.
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(dst + suffix); err == nil {
			t.Errorf("%s left beside the backup", dst+suffix)
		}
	}
	// Opened as a database, it has the run with every transition up to its last seq.
	b, err := Open(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run, ts, err := b.GetRun(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if run.LastSeq < before || int64(len(ts)) != run.LastSeq {
		t.Errorf("restored run: last seq %d with %d transitions, want at least %d and one per seq", run.LastSeq, len(ts), before)
	}
}

func TestBackupNeverReplacesAFile(t *testing.T) {
	skipOnPostgres(t, "SQLite backups")
	_, path := openTest(t)
	dst := filepath.Join(t.TempDir(), "taken.db")
	if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := BackupSQLite(context.Background(), path, dst); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("backup over an existing file: %v, want a refusal saying it exists", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "keep me" {
		t.Errorf("the existing file now holds %q", got)
	}
}

func TestBackupOfAPostgresDatabaseSaysToUsePgDump(t *testing.T) {
	_, err := BackupSQLite(context.Background(), "postgres://u@h/db", filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, ErrPostgresBackup) || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("BackupSQLite(postgres) = %v, want ErrPostgresBackup naming pg_dump", err)
	}
}

// backupOf makes a checked backup of a new database holding run id.
func backupOf(t *testing.T, id string) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(context.Background(), filepath.Join(dir, "src.db"))
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, newRun(id))
	mustRecord(t, s, tr(id, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "backup.db")
	if _, err := BackupSQLite(context.Background(), filepath.Join(dir, "src.db"), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestRestoreReplacesTheDatabaseAndKeepsTheOldOne(t *testing.T) {
	skipOnPostgres(t, "SQLite restores")
	ctx := context.Background()
	backup := backupOf(t, "from-backup")
	target := filepath.Join(t.TempDir(), "cp.db")
	s, err := Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, s, newRun("before"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := RestoreSQLite(ctx, backup, target)
	if err != nil {
		t.Fatalf("RestoreSQLite: %v", err)
	}
	if info.Runs != 1 || info.Transitions != 1 || !info.Kept {
		t.Errorf("restored %d runs, %d transitions, previous kept %v; want 1, 1 and kept", info.Runs, info.Transitions, info.Kept)
	}
	for file, want := range map[string]string{target: "from-backup", target + ".before-restore": "before"} {
		r, err := Open(ctx, file)
		if err != nil {
			t.Fatal(err)
		}
		page, err := r.ListRuns(ctx, RunFilter{})
		r.Close()
		if err != nil || len(page.Runs) != 1 || page.Runs[0].RunID != want {
			t.Errorf("%s holds %+v (%v), want run %s", file, page.Runs, err, want)
		}
	}
	// A second restore would replace the only copy of the database before the first one:
	// it is refused and changes nothing.
	before, err := os.ReadFile(target + ".before-restore")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreSQLite(ctx, backupOf(t, "second"), target); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "nothing was replaced") || !strings.Contains(err.Error(), ".before-restore is left from an earlier restore") {
		t.Fatalf("second restore: %v, want a refusal naming the earlier restore's copy", err)
	}
	if after, err := os.ReadFile(target + ".before-restore"); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the earlier restore's copy changed (%v)", err)
	}
	r, err := Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if page, err := r.ListRuns(ctx, RunFilter{}); err != nil || len(page.Runs) != 1 || page.Runs[0].RunID != "from-backup" {
		t.Errorf("after the refused restore %s holds %+v (%v), want run from-backup", target, page.Runs, err)
	}
}

func TestRestoreChecksTheBackupBeforeReplacingAnything(t *testing.T) {
	skipOnPostgres(t, "SQLite restores")
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (x TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	newer := backupOf(t, "n")
	db, err = sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, '0999_future.sql', 'x')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	corrupt := backupOf(t, "c")
	corruptPage(t, corrupt)

	target := filepath.Join(dir, "cp.db")
	if err := os.WriteFile(target, []byte("the live database"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, file, want string }{
		{"not SQLite", garbage, "cannot be read as a SQLite database"},
		{"not rbook", other, "not an rbook control-plane database"},
		{"newer schema", newer, "knows versions up to"},
		{"corrupt", corrupt, "integrity|malformed"},
		{"missing", filepath.Join(dir, "nope.db"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RestoreSQLite(ctx, c.file, target)
			if err == nil || !containsAny(err.Error(), strings.Split(c.want, "|")) || !strings.Contains(err.Error(), "not restored") {
				t.Fatalf("RestoreSQLite(%s) = %v, want a refusal containing %q", c.name, err, c.want)
			}
			if got, _ := os.ReadFile(target); string(got) != "the live database" {
				t.Errorf("target changed to %q", got)
			}
			if _, err := os.Stat(target + ".before-restore"); err == nil {
				t.Error("a .before-restore copy was made for a refused restore")
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// corruptPage overwrites the middle of the last page of the SQLite file path (a table's
// b-tree page, not the header), so integrity_check fails while the file still opens.
func corruptPage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if len(b) < 3*page {
		t.Fatalf("%s is only %d bytes", path, len(b))
	}
	for i := len(b) - page; i < len(b)-page+64; i++ {
		b[i] = 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPendingMigrationsListsWhatOpenWouldApply(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t, "cp.db")
	d := dialectSQLite
	if testOnPostgres() {
		d = dialectPostgres
	}
	ms, err := loadMigrations(d)
	if err != nil {
		t.Fatal(err)
	}
	latest := len(ms)
	if !testOnPostgres() {
		version, pending, err := PendingMigrations(ctx, dsn)
		if err != nil || version != 0 || len(pending) != latest {
			t.Fatalf("a missing file: version %d, %d pending, %v; want 0 and all %d", version, len(pending), err, latest)
		}
		if _, err := os.Stat(dsn); err == nil {
			t.Fatal("PendingMigrations created the database file")
		}
	}
	migrateOnly(t, dsn, latest-2)
	version, pending, err := PendingMigrations(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	want := []Migration{{latest - 1, ms[latest-2].name}, {latest, ms[latest-1].name}}
	if version != latest-2 || fmt.Sprint(pending) != fmt.Sprint(want) {
		t.Fatalf("PendingMigrations = %d, %v; want %d, %v", version, pending, latest-2, want)
	}
	// Listing changed nothing: the same is pending again.
	if v, again, _ := PendingMigrations(ctx, dsn); v != version || len(again) != 2 {
		t.Fatalf("second listing: %d, %v", v, again)
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if from, to := s.Migrated(); from != latest-2 || to != latest {
		t.Errorf("Open migrated %d → %d, want %d → %d", from, to, latest-2, latest)
	}
	s.Close()
	if v, none, err := PendingMigrations(ctx, dsn); err != nil || v != latest || len(none) != 0 {
		t.Errorf("after Open: %d, %v, %v; want %d and nothing pending", v, none, err, latest)
	}
}

// Rolling upgrade (docs/backup.md, "Upgrades and migrations"): an older replica (one
// migration behind) keeps recording while a newer one migrates the shared database, and
// once restarted it refuses the newer schema with a message naming both versions.
func TestAnOlderReplicaKeepsServingWhileANewerOneMigratesThenRefusesOnRestart(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t, "cp.db")
	ms, _ := loadMigrations(dialectSQLite)
	latest := len(ms)
	if latest-1 < chainSchemaVersion {
		t.Skipf("a replica one migration behind (schema %d) lacks the hash chain's columns (migration %d), which this store's statements use; the test runs once a later migration exists", latest-1, chainSchemaVersion)
	}
	older, err := Open(ctx, dsn, WithMaxSchemaVersion(latest-1))
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	mustStart(t, older, newRun("rolling"))
	mustRecord(t, older, tr("rolling", 1))

	// The older replica records while the newer one opens (and migrates) the database.
	recorded := make(chan error, 1)
	go func() {
		for seq := int64(2); seq <= 40; seq++ {
			if _, err := older.RecordTransition(ctx, tr("rolling", seq), fence1); err != nil {
				recorded <- fmt.Errorf("older replica, #%d: %w", seq, err)
				return
			}
		}
		recorded <- nil
	}()
	newer, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("newer replica: %v", err)
	}
	defer newer.Close()
	if from, to := newer.Migrated(); from != latest-1 || to != latest {
		t.Errorf("newer replica migrated %d → %d, want %d → %d", from, to, latest-1, latest)
	}
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
	// Both serve the same run after the migration.
	mustRecord(t, older, tr("rolling", 41))
	if _, err := newer.RecordTransition(ctx, tr("rolling", 42), fence1); err != nil {
		t.Fatalf("newer replica: %v", err)
	}
	if _, ts, err := older.GetRun(ctx, "rolling"); err != nil || len(ts) != 42 {
		t.Fatalf("older replica reads %d transitions (%v), want 42", len(ts), err)
	}
	// Restarted, the older replica refuses the schema it does not know.
	older.Close()
	_, err = Open(ctx, dsn, WithMaxSchemaVersion(latest-1))
	if !errors.Is(err, ErrSchemaNewer) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("older replica restart: %v, want ErrSchemaNewer", err)
	}
	for _, want := range []string{fmt.Sprintf("schema version %d", latest), fmt.Sprintf("versions up to %d", latest-1), "run that rbook"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}
