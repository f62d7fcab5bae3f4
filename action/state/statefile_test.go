package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/internal/wine"
)

// wineSymlinks is why a test skips its symbolic links under Wine.
const wineSymlinks = "Wine's CreateSymbolicLinkW reports success but leaves nothing that Lstat or Open can find, so no symbolic link can be made"

// readEvidenceFile decodes an evidence pack file, failing the test when it is absent or not a
// JSON array.
func readEvidenceFile(t *testing.T, p string) []engine.Evidence {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("evidence pack file: %v", err)
	}
	var ev []engine.Evidence
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("evidence pack file %s is not a JSON array: %v\n%s", p, err, data)
	}
	return ev
}

// The evidence pack is written before the state write that makes the run
// final, and a failed evidence write keeps the state from turning final.
func TestEvidenceBeforeFinalState(t *testing.T) {
	t.Run("final write carries its evidence pack", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		st := writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
		ev := EvidencePath(p, st.RunID)
		if _, err := os.Stat(ev); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an unfinished run already has an evidence pack file: %v", err)
		}
		r := &FileRecorder{Path: p, State: st}
		err := r.Record(t.Context(), engine.Transition{Kind: engine.TransitionRunFinished, Seq: st.Seq + 1, StepIndex: -1, RunStatus: engine.RunCompleted,
			Evidence: &engine.Evidence{StepName: "CANCEL", Type: "cancel", Status: engine.StatusPass, TimestampUTC: "t"}})
		if err != nil {
			t.Fatal(err)
		}
		back, err := Read(p)
		if err != nil || back.RunStatus != engine.RunCompleted {
			t.Fatalf("state: %v %+v", err, back)
		}
		got := readEvidenceFile(t, ev)
		if len(got) != 2 || got[0].StepName != "check-pre" || got[1].StepName != "CANCEL" {
			t.Fatalf("evidence file %+v, want the state's 2 entries", got)
		}
		// A later write of the final state with more entries (rbook rollback on a finished
		// run) rewrites the pack first.
		more := finished(1, "deploy-app", "deploy", "PASS")
		more.Seq, more.RunStatus = st.Seq+1, ""
		if err := r.Record(t.Context(), more); err != nil {
			t.Fatal(err)
		}
		if got := readEvidenceFile(t, ev); len(got) != 3 {
			t.Fatalf("after one more entry the file has %d entries, want 3", len(got))
		}
	})
	t.Run("no final state when the evidence cannot be written", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.json")
		st := writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
		// A folder where the evidence file should go: no write can replace it.
		os.MkdirAll(filepath.Join(EvidencePath(p, st.RunID), "x"), 0o755)
		r := &FileRecorder{Path: p, State: st}
		err := r.Record(t.Context(), engine.Transition{Kind: engine.TransitionRunFinished, Seq: st.Seq + 1, StepIndex: -1, RunStatus: engine.RunFailed})
		var nw *NotWritableError
		if !errors.As(err, &nw) {
			t.Fatalf("err %v, want *NotWritableError", err)
		}
		back, err := Read(p)
		if err != nil || back.RunStatus != engine.RunInProgress {
			t.Fatalf("the state turned %v without its evidence pack (%v)", back.RunStatus, err)
		}
	})
}

// A final run whose evidence pack file is missing gets it rebuilt from the
// state file; an existing file is never replaced; an unfinished run has none yet.
func TestEvidenceRebuiltWhenMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	st := writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
	if path, rebuilt, err := EnsureEvidence(p, st); path != "" || rebuilt || err != nil {
		t.Fatalf("unfinished run: %q %v %v", path, rebuilt, err)
	}
	r := &FileRecorder{Path: p, State: st}
	if err := r.Record(t.Context(), engine.Transition{Kind: engine.TransitionRunFinished, Seq: st.Seq + 1, StepIndex: -1, RunStatus: engine.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	ev := EvidencePath(p, st.RunID)
	os.Remove(ev)
	path, rebuilt, err := EnsureEvidence(p, st)
	if err != nil || !rebuilt || path != ev {
		t.Fatalf("EnsureEvidence: %q %v %v", path, rebuilt, err)
	}
	if got := readEvidenceFile(t, ev); len(got) != 1 || got[0].StepName != "check-pre" {
		t.Fatalf("rebuilt pack %+v", got)
	}
	os.WriteFile(ev, []byte("[]\n"), 0o600)
	if _, rebuilt, err := EnsureEvidence(p, st); rebuilt || err != nil {
		t.Fatalf("an existing file was replaced: %v %v", rebuilt, err)
	}
	if data, _ := os.ReadFile(ev); string(data) != "[]\n" {
		t.Fatalf("existing file changed to %s", data)
	}

	// The next run in the folder (Open) rebuilds the previous final run's missing pack.
	os.Remove(ev)
	o, err := Open(testPlan(), p, OpenOptions{Now: clock})
	if err != nil || o.PrevPath == "" {
		t.Fatalf("Open: %v %+v", err, o)
	}
	if got := readEvidenceFile(t, ev); len(got) != 1 {
		t.Fatalf("Open rebuilt %d entries, want 1", len(got))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*.tmp-*")); len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
}

// A symbolic link anywhere in state_file_path (the .rbook folder, a
// folder below it, the state file, its lock file) is refused with an ABORT naming the link,
// and nothing is written where it points.
func TestSymlinkedStateDir(t *testing.T) {
	wine.Skip(t, wineSymlinks)
	outside := t.TempDir()
	work := t.TempDir()
	t.Chdir(work)
	link := func(t *testing.T, name string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.Symlink(outside, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Join(work, strings.Split(name, "/")[0])) })
	}
	cases := []struct {
		name, statePath, link string
		setup                 func(t *testing.T)
	}{
		{"linked .rbook", ".rbook/demo.state.json", ".rbook", func(t *testing.T) { link(t, ".rbook") }},
		{"linked folder below .rbook", ".rbook/runs/demo.state.json", ".rbook/runs", func(t *testing.T) { link(t, ".rbook/runs") }},
		{"linked state file", ".rbook/demo.state.json", ".rbook/demo.state.json", func(t *testing.T) {
			link(t, ".rbook/demo.state.json")
		}},
		{"linked lock file", ".rbook/demo.state.json", ".rbook/demo.state.json.lock", func(t *testing.T) {
			link(t, ".rbook/demo.state.json.lock")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			_, err := Acquire(c.statePath, "run")
			var se *SymlinkError
			if !errors.As(err, &se) || se.Link != c.link || se.Target != outside {
				t.Fatalf("Acquire: %v, want a *SymlinkError for %s", err, c.link)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "ABORT: state_file_path "+c.statePath+" goes through the symbolic link "+c.link) || !strings.Contains(msg, "inside the working directory") {
				t.Errorf("message %q", msg)
			}
			if c.link != ".rbook/demo.state.json.lock" {
				if _, err := Read(c.statePath); !errors.As(err, &se) {
					t.Errorf("Read: %v, want a *SymlinkError", err)
				}
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("state was written through the link: %v", entries)
			}
		})
	}
	// A real folder is fine, and so is a state path whose folders do not exist yet.
	for _, p := range []string{".rbook/demo.state.json", "new/a/b/demo.state.json", "demo.state.json"} {
		l, err := Acquire(p, "run")
		if err != nil {
			t.Fatalf("Acquire(%s): %v", p, err)
		}
		l.Release()
	}
}

// A state file with a key twice in one object, at any depth, is corrupt.
func TestDuplicateJSONKeysMakeStateCorrupt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	writeRun(t, p, finished(0, "check-pre", "check", "PASS"))
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(p, good); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	for name, c := range map[string]struct{ from, to, where string }{
		"top level":       {`"run_status": "IN_PROGRESS",`, `"run_status": "COMPLETED", "run_status": "IN_PROGRESS",`, `"run_status" at run_status`},
		"case folded":     {`"run_status": "IN_PROGRESS",`, `"run_status": "IN_PROGRESS", "RUN_STATUS": "COMPLETED",`, `"RUN_STATUS" at RUN_STATUS (it also appears as "run_status"`},
		"evidence entry":  {`"status": "PASS",`, `"status": "FAIL", "status": "PASS",`, `at evidence_pack[0].status`},
		"nested in value": {`"seq": 2,`, `"seq": 2, "interrupted": {"at_utc": "a", "reason": "x", "reason": "y"},`, `at interrupted.reason`},
	} {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(string(good), c.from, c.to, 1)
			if bad == string(good) {
				t.Fatalf("%q not in the state file:\n%s", c.from, good)
			}
			os.WriteFile(p, []byte(bad), 0o600)
			_, err := Open(testPlan(), p, OpenOptions{Now: clock})
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "duplicate key") || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("err %v, want a *CorruptError naming %s", err, c.where)
			}
			if after, _ := os.ReadFile(p); string(after) != bad {
				t.Errorf("the refused file was changed")
			}
		})
	}
}

// The next run removes the temp files an interrupted atomic write left in
// the folder — only rbook's own temp names for files its lock guards, and only older ones.
func TestStaleTempsCleaned(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "demo.state.json")
	old := time.Now().Add(-time.Hour)
	mk := func(name string, mtime time.Time) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(f, mtime, mtime)
		return f
	}
	stale := []string{
		mk(".demo.state.json.tmp-123456", old),
		mk(".demo.state.json.cancel.tmp-42", old),
		mk(".RBOOK-20260512-demo-a1b2c3d4.evidence.json.tmp-7", old),
		mk(".RBOOK-20260512-demo-a1b2c3d4.3.evidence.json.tmp-8", old),
	}
	kept := []string{
		mk(".prod.state.json.tmp-99", old),                           // another state file's: its own lock guards it
		mk(".RBOOK-20260512-prod-a1b2c3d4.evidence.json.tmp-9", old), // another runbook's evidence
		mk(".demo.state.json.tmp-abc", old),                          // not os.CreateTemp's digits
		mk("demo.state.json.tmp-1", old),                             // no leading dot
		mk("notes.txt", old),
		mk(".demo.state.json.tmp-555", time.Now().Add(time.Hour)), // newer than the lock
	}
	os.Mkdir(filepath.Join(dir, ".demo.state.json.tmp-77"), 0o755) // a folder, not a temp file
	kept = append(kept, filepath.Join(dir, ".demo.state.json.tmp-77"))
	target := mk("target", old)
	kept = append(kept, target)
	if v, underWine := wine.Version(); underWine {
		t.Logf("no symbolic link among the temp names under Wine %s: %s", v, wineSymlinks)
	} else {
		os.Symlink(target, filepath.Join(dir, ".demo.state.json.tmp-88")) // a link, not a temp file
		kept = append(kept, filepath.Join(dir, ".demo.state.json.tmp-88"))
	}

	l, err := Acquire(p, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Open(testPlan(), p, OpenOptions{Now: clock, Lock: l}); err != nil {
		t.Fatal(err)
	}
	for _, f := range stale {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temp %s not removed (%v)", filepath.Base(f), err)
		}
	}
	for _, f := range kept {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(f), err)
		}
	}
	// RemoveStaleTemps reports what it removed; a second pass finds nothing.
	again, err := l.RemoveStaleTemps("demo")
	if err != nil || len(again) != 0 {
		t.Errorf("second pass: %v %v", again, err)
	}
}
