package state

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// The rewrites that reuse the state file's version before last (rewrite_linux.go): only
// Linux has the write lease that makes that safe.

// needLeases skips a test that needs the spare written in place when the temp folder's file
// system is not one where the rewriter does that (leaseFS).
func needLeases(t *testing.T) {
	t.Helper()
	var w rewriter
	if !w.leases(t.TempDir()) {
		t.Skip("the temp folder's file system is not one where rbook writes the state file in place (leaseFS: ext4, XFS, Btrfs, tmpfs); set TMPDIR to a folder on one to run this test")
	}
}

// inode is the inode number of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestRewritesWriteIntoTheVersionBeforeLast: on Linux, with no reader in the way, each
// rewrite after the first two writes into the file the previous exchange moved out, so the
// state file alternates between two files (two inodes), while staying byte for byte the
// State; the older one is kept under a temp name during the run and removed at its end.
func TestRewritesWriteIntoTheVersionBeforeLast(t *testing.T) {
	needLeases(t)
	path := filepath.Join(t.TempDir(), "demo.state.json")
	var seen []uint64
	spares := 0
	runChain(t, path, deployChain(12), func(s runbook.Step) {
		seen = append(seen, inode(t, path))
		if s.Index >= 2 {
			spares += len(temps(t, path))
		}
	})
	for i := 3; i < len(seen); i++ {
		if seen[i] != seen[i-2] || seen[i] == seen[i-1] {
			t.Fatalf("the state file's inode by step: %v; want two files taking turns from step 1 on", seen)
		}
	}
	if spares != 10 {
		t.Errorf("a spare was beside the state file at %d of the steps 2-11, want all 10", spares)
	}
	if left := temps(t, path); len(left) != 0 {
		t.Fatalf("temp files left behind after the run: %v", left)
	}
}

// TestASpareReplacedUnderItsNameIsLeftAlone: a file put under the spare's temp name (not the
// file the rewriter wrote there) is never written into; the run writes a new temp file
// instead and leaves that file as it found it.
func TestASpareReplacedUnderItsNameIsLeftAlone(t *testing.T) {
	needLeases(t)
	path := filepath.Join(t.TempDir(), "demo.state.json")
	var planted string
	const content = "not the rewriter's file\n"
	runChain(t, path, deployChain(8), func(s runbook.Step) {
		if s.Index != 3 {
			return
		}
		sp := temps(t, path)
		if len(sp) != 1 {
			t.Fatalf("temp files beside the state file at step 3: %v, want the one spare", sp)
		}
		planted = sp[0]
		other := filepath.Join(filepath.Dir(path), "other")
		if err := os.WriteFile(other, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, planted); err != nil {
			t.Fatal(err)
		}
	})
	got, err := os.ReadFile(planted)
	if err != nil {
		t.Fatalf("the file put under the spare's name: %v", err)
	}
	if string(got) != content {
		t.Fatalf("the file put under the spare's name was written into: %q", got)
	}
}

// TestRewritesThatShrinkCutTheReusedFile: a version shorter than the file it is written into
// (the outbox emptied by acknowledgements) leaves no bytes of the longer one behind.
func TestRewritesThatShrinkCutTheReusedFile(t *testing.T) {
	needLeases(t)
	path := filepath.Join(t.TempDir(), "demo.state.json")
	var size5 int64
	var ino5 uint64
	fr := runChainWith(t, path, deployChain(9), chainOpts{keepOutbox: true}, func(fr *FileRecorder, s runbook.Step) {
		switch s.Index {
		case 5:
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			size5, ino5 = info.Size(), inode(t, path)
			fr.Ack(fr.State.Seq) // the next rewrite drops the outbox the file holds
		case 7:
			disk, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := new(Pack).Encode(fr.State); !bytes.Equal(disk, want) {
				t.Fatalf("at step 7 the state file is not the State:\n%s\n----\n%s", disk, want)
			}
			if int64(len(disk)) >= size5 {
				t.Fatalf("at step 7 the file is %d bytes, not shorter than the %d at step 5", len(disk), size5)
			}
			if inode(t, path) != ino5 {
				t.Errorf("step 7's version was not written into step 5's file")
			}
		}
	})
	if len(fr.State.Outbox) == 0 {
		t.Fatal("the outbox is empty: nothing was kept to acknowledge")
	}
}

// TestAStateFileChangedByAnotherIsNeverWrittenInto: a rewrite reuses only a file exactly as
// this run left it. When someone else cuts the spare short, writes over it (same length),
// puts a symbolic link under its name, gives it a second name (a hard link), or does the
// same to the state file itself, the next
// rewrite writes a new temp file instead of writing into a file whose bytes it no longer
// knows: the state file is the State again at every step after, and a file a link points at,
// or that a second name keeps, is never written.
func TestAStateFileChangedByAnotherIsNeverWrittenInto(t *testing.T) {
	needLeases(t)
	symlinkTo := func(t *testing.T, victim, at string) {
		t.Helper()
		link := at + ".link"
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(link, at); err != nil {
			t.Fatal(err)
		}
	}
	// overwrite writes over file's bytes, keeping its length, until its change time moves on:
	// the clock the kernel stamps it with ticks every few milliseconds, and a write in the
	// same tick leaves it as it was.
	overwrite := func(t *testing.T, file string) {
		t.Helper()
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		junk := bytes.Repeat([]byte("x"), int(st.Size))
		for was := st.Ctim; st.Ctim == was; {
			if _, err := f.WriteAt(junk, 0); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, path, spare, victim string)
	}{
		{"the spare cut short", func(t *testing.T, _, spare, _ string) {
			if err := os.Truncate(spare, 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"the spare written over, same length", func(t *testing.T, _, spare, _ string) { overwrite(t, spare) }},
		{"the spare swapped for a symbolic link", func(t *testing.T, _, spare, victim string) { symlinkTo(t, victim, spare) }},
		{"the spare given a second name", func(t *testing.T, _, spare, victim string) {
			if err := os.Remove(victim); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(spare, victim); err != nil {
				t.Fatal(err)
			}
		}},
		{"the state file cut short", func(t *testing.T, path, _, _ string) {
			if err := os.Truncate(path, 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"the state file written over, same length", func(t *testing.T, path, _, _ string) { overwrite(t, path) }},
		{"the state file swapped for a symbolic link", func(t *testing.T, path, _, victim string) { symlinkTo(t, victim, path) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "demo.state.json")
			const untouched = "a file of someone else's\n"
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte(untouched), 0o600); err != nil {
				t.Fatal(err)
			}
			var victimWas []byte
			runChainWith(t, path, deployChain(10), chainOpts{}, func(fr *FileRecorder, s runbook.Step) {
				switch {
				case s.Index == 3:
					sp := temps(t, path)
					if len(sp) != 1 {
						t.Fatalf("temp files beside the state file at step 3: %v, want the one spare", sp)
					}
					tc.change(t, path, sp[0], victim)
					var err error
					if victimWas, err = os.ReadFile(victim); err != nil {
						t.Fatal(err)
					}
				case s.Index > 3:
					disk, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					if want, _ := new(Pack).Encode(fr.State); !bytes.Equal(disk, want) {
						t.Fatalf("at step %d the state file is not the State:\n%q", s.Index, disk)
					}
				}
			})
			if got, err := os.ReadFile(victim); err != nil || !bytes.Equal(got, victimWas) {
				t.Fatalf("the file a link points at, or the spare's second name, was written: %q, %v", got, err)
			}
		})
	}
}
