package planview

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rbookhq/rbook-action/action/runbook"
)

// RunbookTarget is the folder and runbook name of rbook plan's runbook argument arg, taken as
// `rbook validate` takes it: a path ending in .yaml is that file (its folder holds its values
// and MCP config, as --dir would), anything else a runbook name in dir.
func RunbookTarget(dir, arg string) (runbookDir, name string) {
	if strings.HasSuffix(arg, ".yaml") && !strings.HasSuffix(arg, ".values.yaml") {
		return filepath.Dir(arg), strings.TrimSuffix(filepath.Base(arg), ".yaml")
	}
	return dir, arg
}

// MissingPlaybook is the error for playbook file that does not exist: it lists the playbooks
// in dir (where runbook names are looked up) and the path to give, as a missing runbook's
// error lists the runbooks there; "" when file exists.
func MissingPlaybook(dir, file string) string {
	if _, err := os.Stat(file); err == nil || !os.IsNotExist(err) {
		return ""
	}
	msg := file + ": playbook file not found"
	found, _ := filepath.Glob(filepath.Join(dir, "*"+runbook.PlaybookExt))
	if len(found) == 0 {
		return msg + "; give the .cantbook's path (there are no playbooks in " + dir + ")"
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = filepath.Base(f)
	}
	msg += fmt.Sprintf("; playbooks in %s: %s", dir, strings.Join(names, ", "))
	if p := filepath.Join(dir, filepath.Base(file)); p != file && slices.Contains(found, p) {
		msg += fmt.Sprintf(" (give its path: rbook plan %s)", p)
	}
	return msg
}
