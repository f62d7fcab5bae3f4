package e2e

// End-to-end tests of the state folder: no final run without its evidence pack, and the
// folder's odd shapes (symlinked state folders, --templates, stale temp files), driving the
// built binary.

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/state"
)

// shortRunbook writes runbook "k" (deploy, rollback — skipped in forward flow —, deploy) with
// no check steps, so it needs no MCP server and ends within milliseconds. It returns the
// working directory.
//
// The binary is built with -race, whose runtime sleeps a second before exiting; these tests
// run it many times, so they turn that sleep off.
func shortRunbook(t *testing.T) string {
	t.Helper()
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	dir := t.TempDir()
	rb := filepath.Join(dir, "runbooks")
	os.Mkdir(rb, 0o755)
	yaml := string(fixture(t, "runbooks", "k.yaml"))
	for name, content := range map[string]string{"k.yaml": yaml, "k.values.yaml": "x: 1\n"} {
		if err := os.WriteFile(filepath.Join(rb, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rawState is the part of a state file these tests compare: the status, the in-flight step
// and the evidence entries as raw JSON.
type rawState struct {
	RunID     string `json:"run_id"`
	RunStatus string `json:"run_status"`
	InFlight  *struct {
		StepIndex int `json:"step_index"`
	} `json:"in_flight"`
	EvidencePack []json.RawMessage `json:"evidence_pack"`
}

func readRawState(t *testing.T, path string) (rawState, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return rawState{}, false
	}
	var s rawState
	if err != nil || json.Unmarshal(data, &s) != nil {
		t.Fatalf("state file %s unreadable or not JSON: %v\n%s", path, err, data)
	}
	return s, true
}

// sameEntries decodes two evidence packs and compares them entry by entry.
func sameEntries(a, b []json.RawMessage) bool {
	dec := func(rs []json.RawMessage) []map[string]any {
		out := make([]map[string]any, len(rs))
		for i, r := range rs {
			json.Unmarshal(r, &out[i])
		}
		return out
	}
	return len(a) == len(b) && reflect.DeepEqual(dec(a), dec(b))
}

// End to end: kill -9 the executor at random points around the end of a
// short runbook; whenever the state file it leaves says the run is final, the run's evidence
// pack file exists and holds the same entries. The check is made before anything else runs
// in the folder (the next `rbook run` would rebuild a missing pack).
func TestKillAroundTheEndKeepsEvidence(t *testing.T) {
	skipShort(t)
	dir := shortRunbook(t)
	statePath := filepath.Join(dir, ".rbook", "k.state.json")
	// Kill points: a random delay after one of these events. "ended" is printed once the
	// run's last transition is in its journal (the state file's final write and the pack
	// before it follow: the kills land around them), "d2" when the last step has started, ""
	// right after the start.
	triggers := []string{"ended COMPLETED", "deploy 'd2'", ""}
	const cycles = 24
	finals, ended, killed := 0, 0, 0
	for i := 0; i < cycles; i++ {
		args := []string{"run", "k", "--control-plane", "off"}
		// The run as the journal has it, as `rbook status` reads it: the state file can be a
		// step behind (its rewrite overlaps the step, and the kill may land before it is done).
		if s, err := state.ReadCurrent(statePath); err == nil && s.RunStatus == engine.RunInProgress && s.InFlight != nil {
			// A deploy killed mid-flight: as an operator would, choose to go on after it.
			args = append(args, "--step-index", strconv.Itoa(s.InFlight.StepIndex+1))
		}
		p := start(t, dir, args...)
		trigger := triggers[i%len(triggers)]
		if trigger != "" {
			p.waitForOrExit(t, trigger)
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the random kill point
		if p.cmd.Process.Signal(syscall.SIGKILL) == nil {
			killed++
		}
		p.wait(t)
		if strings.Contains(p.output(), "ended COMPLETED") {
			ended++ // the kill came after the run ended in its journal
		}
		s, ok := readRawState(t, statePath)
		if !ok || s.RunStatus == "IN_PROGRESS" {
			continue
		}
		finals++
		evPath := filepath.Join(dir, ".rbook", s.RunID+".evidence.json")
		data, err := os.ReadFile(evPath)
		if err != nil {
			t.Fatalf("cycle %d (kill after %q): the state says %s but there is no evidence pack: %v\n%s", i, trigger, s.RunStatus, err, p.output())
		}
		var ev []json.RawMessage
		if err := json.Unmarshal(data, &ev); err != nil || !sameEntries(ev, s.EvidencePack) {
			t.Fatalf("cycle %d: evidence pack %s differs from the state's %d entries (%v):\n%s", i, evPath, len(s.EvidencePack), err, data)
		}
	}
	if ended < cycles/3 || killed == 0 {
		t.Fatalf("only %d of %d cycles were killed after the run ended in its journal, %d left a final state file (%d killed): the kill points missed the end of the run", ended, cycles, finals, killed)
	}
	t.Logf("%d cycles, %d killed after the run ended in its journal, %d left a final state file, every one with its evidence pack", cycles, ended, finals)
}

// waitForOrExit is waitFor that also accepts the process ending first (a fast run may finish
// before the trigger line is read).
func (p *proc) waitForOrExit(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if strings.Contains(p.output(), s) {
			return
		}
		select {
		case line := <-p.seen:
			if strings.Contains(line, s) {
				return
			}
		case <-p.done:
			return
		case <-deadline:
			t.Fatalf("no %q within 60s:\n%s", s, p.output())
		}
	}
}

// A final run's missing evidence pack is rebuilt from the state file by
// `rbook status` (which says where it is, in text and -o json), `rbook cancel` and the next
// `rbook run` in the folder.
func TestStatusCancelRunRebuildEvidence(t *testing.T) {
	skipShort(t)
	dir := shortRunbook(t)
	statePath := filepath.Join(dir, ".rbook", "k.state.json")
	if out, code := run(t, dir, "", "run", "k", "--control-plane", "off"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	s, _ := readRawState(t, statePath)
	evRel := filepath.Join(".rbook", s.RunID+".evidence.json")
	evPath := filepath.Join(dir, evRel)
	wantPack := func(how string) {
		t.Helper()
		data, err := os.ReadFile(evPath)
		var ev []json.RawMessage
		if err != nil || json.Unmarshal(data, &ev) != nil || !sameEntries(ev, s.EvidencePack) || len(ev) != 3 {
			t.Fatalf("%s: evidence pack %v\n%s", how, err, data)
		}
	}
	wantPack("after the run")

	os.Remove(evPath)
	out, code := run(t, dir, "", "status", "k")
	if code != 0 || !strings.Contains(out, "Evidence pack: "+evRel+"\n") || !strings.Contains(out, "was missing; rebuilt it from the state file: "+evRel) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	wantPack("rebuilt by status")
	out, code = run(t, dir, "", "status", "k")
	if code != 0 || strings.Contains(out, "rebuilt") || !strings.Contains(out, "Evidence pack: "+evRel+"\n") {
		t.Fatalf("second status: exit %d\n%s", code, out)
	}

	os.Remove(evPath)
	cmd := exec.Command(rbookBin, "status", "k", "-o", "json")
	cmd.Dir = dir
	js, err := cmd.Output()
	var st struct {
		RunStatus    string `json:"run_status"`
		EvidencePath string `json:"evidence_path"`
	}
	if err != nil || json.Unmarshal(js, &st) != nil || st.EvidencePath != evRel || st.RunStatus != "COMPLETED" {
		t.Fatalf("status -o json: %v %+v\n%s", err, st, js)
	}
	wantPack("rebuilt by status -o json")

	os.Remove(evPath)
	out, code = run(t, dir, "yes\n", "cancel", "k")
	if code != 2 || !strings.Contains(out, "is already COMPLETED; there is nothing to cancel. Its evidence pack: "+evRel) {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	wantPack("rebuilt by cancel")

	os.Remove(evPath)
	if out, code := run(t, dir, "", "run", "k", "--control-plane", "off"); code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
	wantPack("rebuilt by the next run")
	if _, err := os.Stat(statePath + ".prev-" + s.RunID); err != nil {
		t.Errorf("the previous run's state was not kept: %v", err)
	}

	// While a run is unfinished, status says where its pack will be written.
	s2, _ := readRawState(t, statePath)
	raw, _ := os.ReadFile(statePath)
	os.WriteFile(statePath, []byte(strings.Replace(string(raw), `"run_status": "COMPLETED"`, `"run_status": "IN_PROGRESS"`, 1)), 0o600)
	out, _ = run(t, dir, "", "status", "k")
	if !strings.Contains(out, "Evidence pack: written to .rbook/"+s2.RunID+".evidence.json when the run ends") {
		t.Errorf("status of an unfinished run:\n%s", out)
	}
}

// A `.rbook` that is a symbolic link to a folder outside the working
// directory is refused by run, status and cancel with an ABORT naming it; nothing is written
// through it.
func TestSymlinkedStateDir(t *testing.T) {
	skipShort(t)
	dir := shortRunbook(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, ".rbook")); err != nil {
		t.Fatal(err)
	}
	want := "ABORT: state_file_path .rbook/k.state.json goes through the symbolic link .rbook (→ " + outside + ")"
	for _, args := range [][]string{{"run", "k", "--control-plane", "off"}, {"status", "k"}, {"cancel", "k"}, {"rollback", "k"}} {
		out, code := run(t, dir, "yes\n", args...)
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("rbook %s: exit %d, want 2 and %q:\n%s", strings.Join(args, " "), code, want, out)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("state was written through the link: %v", entries)
	}
}

// --templates naming a folder that does not exist (or a file) is an error
// before anything runs.
func TestTemplatesDirMustExist(t *testing.T) {
	skipShort(t)
	dir := shortRunbook(t)
	os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "k", "--control-plane", "off", "--templates", "nope"}, "templates folder nope (--templates) does not exist"},
		{[]string{"run", "k", "--control-plane", "off", "--templates", "afile"}, "templates folder afile (--templates) is not a folder"},
		{[]string{"status", "k", "--templates", "nope"}, "templates folder nope (--templates) does not exist"},
		{[]string{"cancel", "k", "--templates", "nope"}, "templates folder nope (--templates) does not exist"},
	} {
		out, code := run(t, dir, "", c.args...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("rbook %s: exit %d, want 2 and %q\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook")); !os.IsNotExist(err) {
		t.Errorf("a refused run wrote state: %v", err)
	}
}

// Stale temp files of an interrupted atomic write are removed when the
// next run opens the folder; other files, and other state files' temp files, stay.
func TestStaleTempsCleanedByNextRun(t *testing.T) {
	skipShort(t)
	dir := shortRunbook(t)
	rbook := filepath.Join(dir, ".rbook")
	os.Mkdir(rbook, 0o755)
	old := time.Now().Add(-time.Hour)
	mk := func(name string) string {
		p := filepath.Join(rbook, name)
		os.WriteFile(p, []byte(`{"run_id": "partial`), 0o600)
		os.Chtimes(p, old, old)
		return p
	}
	stale := []string{mk(".k.state.json.tmp-2718281828"), mk(".RBOOK-20260101-k-0123abcd.evidence.json.tmp-31415")}
	kept := []string{mk(".other.state.json.tmp-1"), mk("k.state.json.tmp-1"), mk("notes.tmp-1")}
	if out, code := run(t, dir, "", "run", "k", "--control-plane", "off"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stale %s not removed: %v", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}
