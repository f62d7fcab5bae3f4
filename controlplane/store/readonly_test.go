package store

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// dirFiles lists the file names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// fileSnapshot is the bytes of every file in dir.
func fileSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, n := range dirFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		m[n] = string(b)
	}
	return m
}

// TestReadOnlyOpen: a database left by a closed control plane is read without
// creating a WAL or changing a byte; a writer opening meanwhile is not blocked; writes are
// refused; no database, a non-rbook file and an older schema are refused, not created or
// migrated.
func TestReadOnlyOpen(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "files, -wal/-shm side files and immutable opens; PostgreSQL's read-only store is TestPGReadOnlyStore")
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "controlplane.db")
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, w, newRun("R1"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if names := dirFiles(t, dir); !slices.Equal(names, []string{"controlplane.db"}) {
		t.Fatalf("after Close: %v", names)
	}

	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() = false")
	}
	run, trs, err := ro.GetRun(ctx, "R1")
	if err != nil || run.RunID != "R1" || run.PlaybookName != "demo" || len(trs) != 0 {
		t.Fatalf("GetRun = %+v %v %v", run, trs, err)
	}
	page, err := ro.ListRuns(ctx, RunFilter{})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	if _, _, err := ro.StartRun(ctx, newRun("R2")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("StartRun on a read-only store = %v, want ErrReadOnly", err)
	}

	// A writer (a new embedded control plane) opens, writes and closes while the read-only
	// store is open: it is not blocked.
	w2, err := Open(ctx, path, WithBusyTimeout(2*time.Second))
	if err != nil {
		t.Fatalf("writer Open beside a read-only store: %v", err)
	}
	mustStart(t, w2, newRun("R2"))
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if names := dirFiles(t, dir); !slices.Equal(names, []string{"controlplane.db"}) {
		t.Fatalf("files after the read-only store closed: %v (want no -wal or -shm)", names)
	}

	// Read-only again, without a writer: nothing on disk changes.
	before := fileSnapshot(t, dir)
	ro, err = OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if page, err := ro.ListRuns(ctx, RunFilter{}); err != nil || len(page.Runs) != 2 {
		t.Fatalf("ListRuns after the writer = %+v, %v", page, err)
	}
	ro.Close()
	after := fileSnapshot(t, dir)
	if len(after) != len(before) || after["controlplane.db"] != before["controlplane.db"] {
		t.Fatalf("a read-only open changed the folder: before %d files, after %v", len(before), dirFiles(t, dir))
	}

	// Refusals: no file (and none is created), an older schema, a file that is no rbook
	// database.
	missing := filepath.Join(dir, "none.db")
	if _, err := OpenReadOnly(ctx, missing); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s", missing)
	}
	other := filepath.Join(dir, "other.db")
	o, err := Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	// An older schema: version 1 only.
	old := filepath.Join(dir, "old.db")
	copyFile(t, other, old)
	downgradeToSchema1(t, ctx, old)
	if _, err := OpenReadOnly(ctx, old); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("older schema: %v, want ErrInvalidArgument (no migration)", err)
	}
	notRbook := filepath.Join(dir, "empty.db")
	os.WriteFile(notRbook, nil, 0o600)
	if _, err := OpenReadOnly(ctx, notRbook); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty file: %v, want ErrInvalidArgument", err)
	}
}

// TestReadOnlyOpenSeesTheWALOfAKilledWriter: a control plane killed before it
// checkpointed leaves its last commits in the -wal file; a read-only open sees them, and a
// writer serving the file meanwhile keeps writing.
func TestReadOnlyOpenSeesTheWALOfAKilledWriter(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "a copied WAL file of a killed writer; PostgreSQL's kill -9 is TestCrashSafetyKill9, its read-only store TestPGReadOnlyStore")
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "controlplane.db")
	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mustStart(t, w, newRun("R1"))
	// The live files, as kill -9 leaves them: the main file, its -wal and -shm.
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no WAL while the writer is open: %v", err)
	}
	crashed := filepath.Join(t.TempDir(), "controlplane.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		copyFile(t, path+suffix, crashed+suffix)
	}
	ro, err := OpenReadOnly(ctx, crashed)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ro.GetRun(ctx, "R1"); err != nil {
		t.Fatalf("run committed to the WAL only: %v", err)
	}
	ro.Close()

	// Beside the live writer: it reads, and the writer's next commit is not blocked.
	ro, err = OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, _, err := ro.GetRun(ctx, "R1"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := w.StartRun(wctx, newRun("R2")); err != nil {
		t.Fatalf("writer blocked by a read-only reader: %v", err)
	}
	if _, _, err := ro.GetRun(ctx, "R2"); err != nil {
		t.Fatalf("the WAL reader does not see the writer's new commit: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
