//go:build !linux

package state

// rewriter writes the FileRecorder's rewrites of the state file (no fsync: the journal backs
// them) as whole new temp files renamed over it. Linux reuses the version before instead
// (rewrite_linux.go); elsewhere there is no lease to tell whether a reader still has it open.
type rewriter struct{ keep bool }

// write makes the state file at path hold the concatenation of parts (gen is for Linux's
// reuse). Errors name the path.
func (w *rewriter) write(path string, _ uint64, parts [3][]byte) error {
	return writeFileAtomic(path, false, parts[:]...)
}

// close has nothing to remove here.
func (w *rewriter) close() {}
