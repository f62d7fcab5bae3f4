//go:build linux

package state

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// rewriter makes the FileRecorder's rewrites of the state file (no fsync: the journal backs
// them) cost what changed rather than the whole file (docs/decisions/durability.md, "The
// journal"). Every rewrite still goes through a file under a temp name that is then
// exchanged with the state file (renameat2 RENAME_EXCHANGE), so a reader that opens the state
// file gets one whole version. An exchange rather than a rename over the file: a rename over
// an existing file makes ext4 start writing the new file's data out at once (its
// auto_da_alloc guard for programs that skip the fsync), which costs as much as the
// journal's fdatasync; the exchange leaves the data to the kernel's writeback. The file the exchange moves out, the version before, is
// kept under the temp name instead of removed (the spare), and the next rewrite writes into
// it in place: it already starts with the run id and the evidence entries it held, so only
// the entries added since and the fields after them are written, and the file is cut to the
// new length. Reusing a version some reader may still be reading would hand that reader a
// mix of two versions, so the spare is written in place only under a write lease
// (F_SETLEASE F_WRLCK), which the kernel grants only when no one else has the file open; a
// reader opening it meanwhile waits until the lease is dropped, after the write, and then
// reads the new version whole. When the lease is refused the spare is removed (a reader
// keeps what it opened) and the version is written to a new temp file, as on every other
// system (rewrite_other.go). A file is written into only when it is exactly as this rewriter
// left it (mark.is: one name, same inode, length and times, looked at under the lease, and the
// state file looked at before the exchange that makes it the spare), and only on a file
// system whose leases see every reader (leaseFS); anything else gets a new temp file.
type rewriter struct {
	// keep says to keep the version an exchange moves out as the spare (FileRecorder's
	// ReuseFiles); without it that version is removed, as the rename over it would have.
	keep bool
	// cur is what the state file holds, when this rewriter wrote it; spare is the file
	// under the temp name spare.name, a version this rewriter wrote before.
	cur, spare mark
	// noLease is set when the file system or the kernel does not grant leases here (not a
	// reader's open file), or the file system is not one where a lease sees every reader
	// (leaseFS): every rewrite is then a new temp file. checked says the file system was
	// looked at.
	noLease, checked bool
}

// mark identifies a version of the state file this rewriter wrote, as it left it: the file
// (device and inode), its length, its modification time (which any write moves on and a
// rename leaves alone) and change time (which any write, truncation, change of mode or link
// moves on, a rename too), and its stable start: pre (run id and opening,
// Pack.parts's first part) and the first n bytes of the evidence entries of Pack generation
// gen.
type mark struct {
	ok       bool
	name     string
	dev, ino uint64
	size     int64
	mtime    unix.Timespec
	ctime    unix.Timespec
	gen      uint64
	pre      string
	n        int
}

// is reports whether st is the file m records, unchanged since m was taken: a regular file
// with one name, same device and inode, same length, same modification and change times.
func (m mark) is(st *unix.Stat_t) bool {
	return m.ok && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 && uint64(st.Dev) == m.dev && st.Ino == m.ino &&
		st.Size == m.size && st.Mtim == m.mtime && st.Ctim == m.ctime
}

// leaseFS are the file systems (statfs magic numbers) whose leases see every open of the
// file: local ones. A lease on a network file system (NFS, SMB) or through FUSE knows only
// the opens this kernel makes, so a reader on another machine would not stop the spare
// from being written under it; there every rewrite is a new temp file.
var leaseFS = []uint32{unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC}

// leases reports whether the spare may be written in place in the folder dir: the file
// system is one of leaseFS and no lease was refused for a reason other than a reader.
func (w *rewriter) leases(dir string) bool {
	if !w.checked {
		w.checked = true
		var fs unix.Statfs_t
		w.noLease = unix.Statfs(dir, &fs) != nil || !slices.Contains(leaseFS, uint32(fs.Type))
	}
	return !w.noLease
}

// write makes the state file at path hold the concatenation of parts (Pack.parts of Pack
// generation gen), through the spare when one can be written in place, else through a new
// temp file. Errors name the path; after one, the next write starts from a new temp file.
func (w *rewriter) write(path string, gen uint64, parts [3][]byte) error {
	if w.spare.ok {
		if ok, err := w.inPlace(path, gen, parts); ok || err != nil {
			return err
		}
	}
	return w.fresh(path, gen, parts)
}

// inPlace writes parts into the spare and exchanges it with the state file. ok false with a
// nil error means the spare could not be used and was dropped: it is not the file this
// rewriter left under that name (a symbolic link, another file: left alone), someone changed
// it (removed), or a reader has it open (removed: the reader keeps what it opened). The
// caller then writes a new temp file.
func (w *rewriter) inPlace(path string, gen uint64, parts [3][]byte) (ok bool, err error) {
	sp := w.spare
	w.spare = mark{}
	fd, err := unix.Open(sp.name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Gone, a symbolic link (ELOOP: left alone), or this process out of descriptors:
		// the spare itself is removed, not kept past the run.
		var st unix.Stat_t
		if unix.Lstat(sp.name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && uint64(st.Dev) == sp.dev && st.Ino == sp.ino {
			os.Remove(sp.name)
		}
		return false, nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint64(st.Dev) != sp.dev || st.Ino != sp.ino {
		unix.Close(fd) // not the file written under that name: leave it (RemoveStaleTemps)
		return false, nil
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		unix.Close(fd)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EBUSY) {
			w.noLease = true // not someone reading: this system grants no leases here
		}
		os.Remove(sp.name) // a reader keeps the version it opened
		return false, nil
	}
	// Under the lease no one else can open the file; whoever had it open had to close it
	// first. Looked at again now: whatever was done to it before is final.
	if unix.Fstat(fd, &st) != nil || !sp.is(&st) {
		unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
		unix.Close(fd)
		os.Remove(sp.name) // ours, changed by another: its bytes are no longer what sp says
		return false, nil
	}
	err = writeFrom(fd, reusable(sp, gen, parts), parts)
	size := int64(len(parts[0]) + len(parts[1]) + len(parts[2]))
	if err == nil && size < sp.size {
		err = ftruncate(fd, size)
	}
	unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	unix.Close(fd)
	next := mark{ok: true, dev: sp.dev, ino: sp.ino, size: size, gen: gen, pre: string(parts[0]), n: len(parts[1])}
	if err == nil {
		err = w.replace(sp.name, path, next)
	}
	if err != nil {
		os.Remove(sp.name)
		w.cur = mark{}
		return true, &os.PathError{Op: "write", Path: path, Err: err}
	}
	return true, nil
}

// fresh writes parts to a new temp file and exchanges it with the state file (renamed over
// it where there is none, or the file system cannot exchange).
func (w *rewriter) fresh(path string, gen uint64, parts [3][]byte) error {
	tmp, err := writeTemp(path, false, parts[:]...)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(tmp, &st); err != nil {
		os.Remove(tmp)
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	next := mark{ok: true, dev: uint64(st.Dev), ino: st.Ino, size: st.Size, gen: gen, pre: string(parts[0]), n: len(parts[1])}
	if err := w.replace(tmp, path, next); err != nil {
		os.Remove(tmp)
		w.cur = mark{}
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

// replace exchanges the file under the temp name tmp, which holds next, with the state file
// at path, and records that tmp now names the version before: the spare when it is the file
// this rewriter wrote, unchanged (looked at before the exchange and after it), else removed,
// as a rename over it would have (a file of unknown make is never written into). Where there
// is no state file yet, or the file system cannot exchange, tmp is renamed over path.
func (w *rewriter) replace(tmp, path string, next mark) error {
	var before unix.Stat_t
	ours := w.cur.ok && unix.Lstat(path, &before) == nil && w.cur.is(&before)
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		spare := w.cur
		w.cur = settled(path, next)
		var st unix.Stat_t
		if ours && w.keep && w.leases(filepath.Dir(path)) && unix.Lstat(tmp, &st) == nil {
			// The exchange moved its change time on; its modification time still tells a
			// write since it was looked at before the exchange.
			spare.name, spare.ctime = tmp, st.Ctim
			if spare.is(&st) {
				w.spare = spare
				return nil
			}
		}
		os.Remove(tmp)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		w.cur = settled(path, next)
	default:
		return err
	}
	return nil
}

// settled is next as the state file at path holds it now that it is in place (its change
// times as the write and the exchange or rename left them); no mark when path is not
// next's file.
func settled(path string, next mark) mark {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return mark{}
	}
	next.mtime, next.ctime = st.Mtim, st.Ctim
	if !next.is(&st) {
		return mark{}
	}
	return next
}

// close removes the spare: the run is done with the state file for now.
func (w *rewriter) close() {
	if w.spare.ok {
		os.Remove(w.spare.name)
	}
	w.spare = mark{}
}

// reusable is how many bytes at the start of the spare sp already hold what parts would
// write there: the run id and opening, and the evidence entries it holds, when they are
// those of the same Pack generation (entries only grow within one); 0 otherwise.
func reusable(sp mark, gen uint64, parts [3][]byte) int {
	if sp.gen != gen || sp.pre != string(parts[0]) || sp.n > len(parts[1]) {
		return 0
	}
	return len(parts[0]) + sp.n
}

// writeFrom writes the concatenation of parts into fd from byte offset from on, at the same
// offsets.
func writeFrom(fd int, from int, parts [3][]byte) error {
	at := 0
	for _, p := range parts {
		if end := at + len(p); end > from {
			skip := max(from-at, 0)
			if err := pwriteAll(fd, p[skip:], int64(at+skip)); err != nil {
				return err
			}
		}
		at += len(p)
	}
	return nil
}

// pwriteAll writes b at offset off, however many calls it takes.
func pwriteAll(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// ftruncate cuts fd to size bytes.
func ftruncate(fd int, size int64) error {
	for {
		if err := unix.Ftruncate(fd, size); err != unix.EINTR {
			return err
		}
	}
}
