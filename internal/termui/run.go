package termui

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rbookhq/rbook-action/action/state"
)

// CheckReportPath refuses a --report FILE that cannot be written: its folder must exist and
// FILE must not be a folder.
func CheckReportPath(p string) error {
	if p == "" {
		return nil
	}
	if info, err := os.Stat(p); err == nil && info.IsDir() {
		return fmt.Errorf("--report %s: is a folder; name a file", p)
	}
	dir := filepath.Dir(p)
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--report %s: folder %s does not exist", p, dir)
	}
	if err != nil {
		return fmt.Errorf("--report %s: %w", p, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("--report %s: %s is not a folder", p, dir)
	}
	return nil
}

// InterruptedText says that a signal stopped the run st, that nothing is final, and how to
// go on: resume and cancel are the commands that resume or end it, statePath its state file;
// msg (else the state's interruption reason) says why. In-flight steps or nodes name the
// flags the resume asks for.
func InterruptedText(st *state.State, msg, resume, cancel, statePath string) string {
	why := msg
	if why == "" && st.Interrupted != nil {
		why = st.Interrupted.Reason
	}
	s := fmt.Sprintf("Run %s was interrupted (%s). It is not finished: its state is kept in %s and the run can be resumed: %s (or end it: %s).",
		st.RunID, why, statePath, resume, cancel)
	if st.Kind == state.KindPlaybook {
		if len(st.InFlightNodes) > 0 {
			s += fmt.Sprintf(" %d node(s) were in flight (%s), so the resume asks you to choose --rerun-node or --skip-node for each.", len(st.InFlightNodes), inFlightNames(st.InFlightNodes))
		}
	} else if f := st.InFlight; f != nil {
		s += fmt.Sprintf(" The %s step '%s' was in flight, so the resume asks you to choose --step-index %d (run it again) or %d (go on after it).", f.StepType, f.StepName, f.StepIndex, f.StepIndex+1)
	}
	return s
}

// inFlightNames lists the ids of in-flight playbook nodes, comma separated.
func inFlightNames(fs []state.InFlight) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.StepName
	}
	return strings.Join(names, ", ")
}
