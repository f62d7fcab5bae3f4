package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rbookhq/rbook-action/internal/lazyregexp"
)

// SymlinkError refuses a state file path that goes through a symbolic link: a linked
// `.rbook` folder, state folder or state file would move the run's record out
// of the working directory that state_file_path is confined to.
type SymlinkError struct {
	// StatePath is the state file path as given (the runbook's state_file_path).
	StatePath string
	// Link is the component of StatePath that is a symbolic link, and Target what it points to.
	Link, Target string
}

func (e *SymlinkError) Error() string {
	return fmt.Sprintf("ABORT: state_file_path %s goes through the symbolic link %s (→ %s); the run's state must stay inside the working directory, so rbook does not follow links there. Replace %s with a real folder or file and run again",
		e.StatePath, e.Link, e.Target, e.Link)
}

// CheckPath refuses a state file path through which state could leave the working directory
// (SymlinkError says why). For a relative path (every runbook's state_file_path is one) each
// existing component is checked, from the working directory down to the state file; for an
// absolute path (library and test use) only the state file itself. It returns a
// *SymlinkError for a symbolic link, an error naming the path when a folder component is not
// a folder, and nil when the path is clean. Components that do not exist yet are fine: rbook
// creates them as real folders.
func CheckPath(statePath string) error {
	clean := filepath.Clean(statePath)
	parts := strings.Split(clean, string(filepath.Separator))
	first := 0
	if filepath.IsAbs(clean) {
		first = len(parts) - 1
	}
	for i := first; i < len(parts); i++ {
		p := strings.Join(parts[:i+1], string(filepath.Separator))
		if p == "" || parts[i] == "." {
			continue
		}
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if isLink(info.Mode()) {
			target, _ := os.Readlink(p)
			return &SymlinkError{StatePath: statePath, Link: p, Target: target}
		}
		if i < len(parts)-1 && !info.IsDir() {
			return fmt.Errorf("state_file_path %s: %s is not a folder", statePath, p)
		}
	}
	return nil
}

// TempPattern matches the temp files WriteFileAtomic creates: ".<name>.tmp-<digits>", where
// <name> is the file being written (os.CreateTemp puts decimal digits for the "*").
var TempPattern = lazyregexp.New(`^\.(.+)\.tmp-[0-9]+$`)

// RemoveStaleTemps removes the temp files that an interrupted atomic write (WriteFileAtomic
// killed between creating and renaming its temp file) left beside the locked state file, and
// returns the paths it removed. Only regular files that match TempPattern
// for a file this lock guards — the state file, its cancel request, and the evidence packs of
// runbook runbookName — and that were last modified before this lock was taken are removed:
// an executor of another state file in the same folder may be writing its own temp file right
// now, and files of any other name are never touched. The first error that is not "already
// gone" is returned with the paths removed so far.
func (l *Lock) RemoveStaleTemps(runbookName string) ([]string, error) {
	dir, base := filepath.Dir(l.statePath), filepath.Base(l.statePath)
	evidence := regexp.MustCompile(`^RBOOK-[0-9]{8}-` + regexp.QuoteMeta(runbookName) + `-[0-9a-f]{8}(\.[0-9]+)?` + regexp.QuoteMeta(EvidenceSuffix) + `$`)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		m := TempPattern.FindStringSubmatch(e.Name())
		if m == nil || (m[1] != base && m[1] != base+".cancel" && !evidence.MatchString(m[1])) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := os.Lstat(p)
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(l.since) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("remove stale temp file %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
