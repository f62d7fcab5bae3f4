package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// killedBeforeFinalState runs shortRunbook's "k" (deploy d1, rollback r1 skipped, deploy d2)
// to its end, then puts the folder back to what a kill -9 between the evidence write and the
// final state write leaves when the run has no journal (a folder an rbook before the journal
// wrote, or whose journal was lost; with the journal, the run's end is recovered from it:
// action/state's TestJournalSurvivesKillBetweenAppendAndStateWrite): the state file as its
// last write before the end left it (d2 started and in flight, the pack [d1, r1], seq 5) and
// the evidence pack file with d2's entry too. It returns the folder, the state file and the
// evidence file.
func killedBeforeFinalState(t *testing.T) (dir, statePath, evPath string) {
	t.Helper()
	dir = shortRunbook(t)
	if out, code := run(t, dir, "", "run", "k", "--control-plane", "off"); code != 0 {
		t.Fatalf("run k: exit %d\n%s", code, out)
	}
	statePath = filepath.Join(dir, ".rbook", "k.state.json")
	var st map[string]any
	if err := json.Unmarshal([]byte(readFile(t, statePath)), &st); err != nil {
		t.Fatal(err)
	}
	evPath = filepath.Join(dir, ".rbook", st["run_id"].(string)+".evidence.json")
	pack := st["evidence_pack"].([]any)
	if len(pack) != 3 || !strings.Contains(readFile(t, evPath), `"step_name": "d2"`) {
		t.Fatalf("the finished run's pack: %v", pack)
	}
	d2 := pack[2].(map[string]any)
	st["run_status"], st["current_step_index"], st["last_completed_step_index"], st["seq"] = "IN_PROGRESS", 2, 1, 5
	st["last_deploy_name"] = "rbook-deploy-d1-" + strings.Split(st["run_id"].(string), "-")[1]
	st["in_flight"] = map[string]any{"step_index": 2, "step_name": "d2", "step_type": "deploy", "started_utc": d2["timestamp_utc"]}
	st["evidence_pack"] = pack[:2]
	delete(st, "completed_utc")
	delete(st, "chain_head") // as an rbook before the chain wrote it: the run goes on unchained
	data, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(statePath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ".rbook", st["run_id"].(string)+".journal.jsonl")); err != nil {
		t.Fatal(err)
	}
	return dir, statePath, evPath
}

// checkEvidenceIsStatePack fails unless the state file is final (want) and the evidence file
// holds exactly its evidence_pack.
func checkEvidenceIsStatePack(t *testing.T, statePath, evPath, want string) {
	t.Helper()
	var st struct {
		RunStatus    string            `json:"run_status"`
		EvidencePack []json.RawMessage `json:"evidence_pack"`
	}
	if err := json.Unmarshal([]byte(readFile(t, statePath)), &st); err != nil {
		t.Fatal(err)
	}
	var ev []json.RawMessage
	if err := json.Unmarshal([]byte(readFile(t, evPath)), &ev); err != nil {
		t.Fatal(err)
	}
	if st.RunStatus != want || !sameEntries(st.EvidencePack, ev) {
		t.Fatalf("run %s (want %s); evidence file (%d entries) vs state's pack (%d entries):\n%s", st.RunStatus, want, len(ev), len(st.EvidencePack), readFile(t, evPath))
	}
}

// TestEvidenceAheadOfStateIsFinishedEndToEnd: after a kill between the evidence write and the
// final state write, the run is this run's to finish: `rbook run` names the step in unknown
// state (not "state_file_path not writable"), the offered --step-index finishes it, and
// `rbook cancel` ends it instead; either way the evidence file then equals the state's pack.
func TestEvidenceAheadOfStateIsFinishedEndToEnd(t *testing.T) {
	skipShort(t)
	for _, c := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		status string
	}{
		{"go on after the step", []string{"run", "k", "--control-plane", "off", "--step-index", "3"}, "", 0, "COMPLETED"},
		{"run the step again", []string{"run", "k", "--control-plane", "off", "--step-index", "2"}, "", 0, "COMPLETED"},
		{"cancel", []string{"cancel", "k", "--control-plane", "off"}, "yes\n", 3, "CANCELLED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, statePath, evPath := killedBeforeFinalState(t)
			out, code := run(t, dir, "", "run", "k", "--control-plane", "off")
			if code != 2 || !strings.Contains(out, "step in unknown state") || strings.Contains(out, "not writable") {
				t.Fatalf("run after the kill: exit %d; want 2 naming the step in unknown state\n%s", code, out)
			}
			out, code = run(t, dir, c.stdin, c.args...)
			if code != c.code || strings.Contains(out, "not writable") || strings.Contains(out, "another run") {
				t.Fatalf("%v: exit %d, want %d\n%s", c.args, code, c.code, out)
			}
			checkEvidenceIsStatePack(t, statePath, evPath, c.status)
		})
	}
}

// TestRefusedCommandsLeaveTheFolderEmpty: a command refused before it records anything
// leaves a folder without state as it found it: no .rbook folder, no lock file.
func TestRefusedCommandsLeaveTheFolderEmpty(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	playbook, err := filepath.Glob(filepath.Join(dir, "runbooks", "*.cantbook"))
	if err != nil || len(playbook) == 0 {
		t.Fatalf("no playbook among the shipped runbooks: %v", err)
	}
	before := treeOf(t, dir)
	for _, args := range [][]string{
		{"run", "demo", "--step-index", "999", "--control-plane", "off"},
		{"run", "demo", "--step-index", "-1", "--control-plane", "off"},
		{"run", "demo", "--step-index", "6", "--control-plane", "off"}, // 6 only resumes after the last step
		{"run", "demo", "--take-over", "--control-plane", "off"},
		{"resume", "demo", "--control-plane", "off"},
		{"rollback", "demo"},
		{"cancel", "demo", "--control-plane", "off"},
		{"playbook", "run", playbook[0], "--rerun-node", "nope", "--control-plane", "off"},
	} {
		out, code := run(t, dir, "", args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (refused)\n%s", args, code, out)
		}
		if after := treeOf(t, dir); after != before {
			t.Fatalf("%v changed the folder:\nbefore:\n%s\nafter:\n%s\n%s", args, before, after, out)
		}
	}
}

// TestRunFinishedElsewhereStartsANewRunHere: a run paused in folder A and resumed to its end in
// folder B is COMPLETED on the control plane; `rbook run` in folder A (its state file still says
// IN_PROGRESS) takes the control plane's record into that state file, keeps it as the
// specification's .prev-<run_id> file and starts a new run, without ever suggesting a cancel. The
// kept file equals folder B's and its evidence file equals its pack. Copies of folder A asked to
// cancel or resume the run say there is nothing to do and take the record too.
func TestRunFinishedElsewhereStartsANewRunHere(t *testing.T) {
	skipShort(t)
	cpDir := t.TempDir()
	url := pauseServe(t, cpDir)
	dirA, runID, id := pauseAtGate(t, url)
	// Two more copies of the paused folder, as two more jobs that kept its state file.
	copies := map[string]string{}
	for _, name := range []string{"cancel", "resume"} {
		copies[name] = filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(copies[name], os.DirFS(dirA)); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := runAs(t, cpDir, pauseAliceToken, "approve", id, "--control-plane", url); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	dirB := workdir(t)
	envB, _ := runnerEnv(t, dirB, "2")
	if out, code := rbookIn(t, dirB, envB, "resume", "demo", "--run-id", runID, "--control-plane", url); code != 0 {
		t.Fatalf("resume in B: exit %d\n%s", code, out)
	}
	envA, _ := runnerEnv(t, dirA, "3")
	out, code := rbookIn(t, dirA, envA, "run", "demo", "--control-plane", url, "--gate-mode", "pause")
	if code != 0 || !strings.Contains(out, "was finished elsewhere") || strings.Contains(strings.ToLower(out), "rbook cancel") {
		t.Fatalf("run in A after B finished the run: exit %d, want 0 (a new run, paused at its gate)\n%s", code, out)
	}
	prev := filepath.Join(dirA, ".rbook", "demo.state.json.prev-"+runID)
	kept := readStateAt(t, prev)
	fromB := readState(t, dirB)
	if kept.RunStatus != "COMPLETED" || kept.steps() != fromB.steps() || kept.Seq != fromB.Seq || len(kept.Outbox) != 0 {
		t.Fatalf("kept state: %s %q seq %d outbox %d; want B's COMPLETED %q seq %d", kept.RunStatus, kept.steps(), kept.Seq, len(kept.Outbox), fromB.steps(), fromB.Seq)
	}
	checkEvidenceIsStatePack(t, prev, filepath.Join(dirA, ".rbook", runID+".evidence.json"), "COMPLETED")
	if now := readState(t, dirA); now.RunID == runID || now.RunStatus != "IN_PROGRESS" {
		t.Fatalf("folder A's new run: %s %s; want a new id, IN_PROGRESS", now.RunID, now.RunStatus)
	}
	// A copy asked to cancel says there is nothing to cancel and takes the record; one asked
	// to resume says there is nothing to resume and takes it too.
	for name, want := range map[string]struct {
		args  []string
		stdin string
		code  int
		msg   string
	}{
		"cancel": {[]string{"cancel", "demo", "--control-plane", url}, "yes\n", 2, "there is nothing to cancel"},
		"resume": {[]string{"resume", "demo", "--control-plane", url}, "", 1, "there is nothing to resume"},
	} {
		dir := copies[name]
		cmd := exec.Command(rbookBin, want.args...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(want.stdin)
		cmd.Env = append(os.Environ(), envA...)
		out, code := combinedExit(t, cmd)
		if code != want.code || !strings.Contains(out, "was finished elsewhere") || !strings.Contains(out, want.msg) {
			t.Errorf("%s in a copy of folder A: exit %d, want %d and %q\n%s", name, code, want.code, want.msg, out)
		}
		if st := readState(t, dir); st.RunStatus != "COMPLETED" || st.steps() != fromB.steps() {
			t.Errorf("%s: the copy's state is %s %q; want B's COMPLETED %q", name, st.RunStatus, st.steps(), fromB.steps())
		}
	}
	// rbook resume in folder B again: nothing to resume, and B's state stays final.
	if out, code := rbookIn(t, dirB, envB, "resume", "demo", "--run-id", runID, "--control-plane", url); code == 0 || strings.Contains(strings.ToLower(out), "cancel") {
		t.Fatalf("resume of a finished run: exit %d\n%s", code, out)
	}
}

// treeOf lists every file and folder under dir with its size, one a line, in walk order.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, info.IsDir(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
