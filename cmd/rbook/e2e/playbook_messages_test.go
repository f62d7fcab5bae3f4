package e2e

// What the playbook runtime tells a person: end-to-end tests with the built binary.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/rbookhq/rbook-action/action/engine"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

var playbookRunIDRe = regexp.MustCompile(`^RBOOK-\d{8}-fanout-demo-[0-9a-f]{8}$`)

// TestPlaybookRunIDsUnique: two runs of one playbook on one day in one
// folder with different --state-file get different run ids (random, not the schema hash),
// and each keeps its own evidence pack.
func TestPlaybookRunIDsUnique(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	var ids []string
	for _, sf := range []string{".rbook/a.json", ".rbook/b.json"} {
		out, code := run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off", "--state-file", sf)
		if code != 0 {
			t.Fatalf("run with --state-file %s: exit %d\n%s", sf, code, out)
		}
		st := readPlaybookState(t, filepath.Join(dir, sf))
		if !playbookRunIDRe.MatchString(st.RunID) {
			t.Errorf("run id %q is not RBOOK-YYYYMMDD-fanout-demo-<8 hex>", st.RunID)
		}
		if strings.HasSuffix(st.RunID, "-"+st.SchemaHash8) {
			t.Errorf("run id %q ends in the schema hash %s", st.RunID, st.SchemaHash8)
		}
		ids = append(ids, st.RunID)
	}
	if ids[0] == ids[1] {
		t.Fatalf("both runs got run id %s", ids[0])
	}
	for i, id := range ids {
		var pack []engine.Evidence
		data := readFile(t, filepath.Join(dir, ".rbook", id+".evidence.json"))
		if err := json.Unmarshal([]byte(data), &pack); err != nil || len(pack) == 0 {
			t.Fatalf("evidence pack of run %d (%s): %v (%d entries)", i, id, err, len(pack))
		}
	}
	// The second run's prepare ran attempts 3 and 4 of the demo counter; the first run's
	// pack still records attempts 1 and 2: it was not overwritten.
	if a := readFile(t, filepath.Join(dir, ".rbook", ids[0]+".evidence.json")); !strings.Contains(a, `\"attempt\":2`) || strings.Contains(a, `\"attempt\":4`) {
		t.Errorf("first run's evidence pack is not its own:\n%s", a)
	}
}

// TestRunbookEvidenceNotOverwritten: a runbook with the same
// runbook_name but another state_file_path in the same folder gets the run id with a
// suffix (.2, docs/decisions/run-ids.md) instead of overwriting the first run's evidence pack.
func TestRunbookEvidenceNotOverwritten(t *testing.T) {
	skipShort(t)
	dir := workdir(t)
	rb := filepath.Join(dir, "runbooks")
	src := readFile(t, filepath.Join(rb, "demo.yaml"))
	writeTestFile(t, filepath.Join(rb, "demo2.yaml"), []byte(strings.Replace(src, "state_file_path: .rbook/demo.state.json", "state_file_path: .rbook/demo2.state.json", 1)))
	for _, f := range []string{"values.yaml", "mcp.json"} {
		writeTestFile(t, filepath.Join(rb, "demo2."+f), []byte(readFile(t, filepath.Join(rb, "demo."+f))))
	}
	if out, code := run(t, dir, "yes\n", "run", "demo", "--control-plane", "off"); code != 0 {
		t.Fatalf("run demo: exit %d\n%s", code, out)
	}
	first := readStateAt(t, filepath.Join(dir, ".rbook", "demo.state.json"))
	evPath := filepath.Join(dir, ".rbook", first.RunID+".evidence.json")
	before := readFile(t, evPath)
	if out, code := run(t, dir, "no\n", "run", "demo2", "--control-plane", "off"); code != 1 {
		t.Fatalf("run demo2 (rejected): exit %d\n%s", code, out)
	}
	second := readStateAt(t, filepath.Join(dir, ".rbook", "demo2.state.json"))
	if second.RunID != first.RunID+".2" {
		t.Errorf("second run id %q, want %q", second.RunID, first.RunID+".2")
	}
	if after := readFile(t, evPath); after != before {
		t.Errorf("the first run's evidence pack %s was overwritten:\n%s", evPath, after)
	}
	if _, err := os.Stat(filepath.Join(dir, ".rbook", second.RunID+".evidence.json")); err != nil {
		t.Errorf("second run's evidence pack: %v", err)
	}
}

// checkPlaybookCancelled asserts a playbook run cancelled at node review: CANCELLED, the
// CANCEL audit entry without deployment text, publish recorded not run.
func checkPlaybookCancelled(t *testing.T, statePath, by string) {
	t.Helper()
	st := readPlaybookState(t, statePath)
	if st.RunStatus != engine.RunCancelled {
		t.Fatalf("run status %s, want CANCELLED", st.RunStatus)
	}
	last := st.EvidencePack[len(st.EvidencePack)-1]
	if last.StepName != "CANCEL" || last.Type != "cancel" || !strings.HasPrefix(last.Output, "cancelled by "+by) ||
		!strings.HasSuffix(last.Output, "at node 'review'") || strings.Contains(last.Output, "deploy") ||
		strings.HasPrefix(last.Output, "cancelled by cancel ") || strings.HasPrefix(last.Output, "cancelled by  ") {
		t.Errorf("last evidence entry %+v", last)
	}
	for _, e := range st.EvidencePack {
		if e.StepName == "publish" && (e.Status != engine.StatusSkipped || e.Output != "not run: the run was cancelled at node 'review'") {
			t.Errorf("publish: %s %q", e.Status, e.Output)
		}
	}
}

// TestCancelTypedAtPlaybookGate: "cancel" typed at an approval node ends
// the run CANCELLED (exit 3) with the playbook's CANCEL entry, without a control plane and
// with the embedded one.
func TestCancelTypedAtPlaybookGate(t *testing.T) {
	skipShort(t)
	for _, cp := range []string{"off", ""} {
		t.Run("control-plane="+cp, func(t *testing.T) {
			dir := playbookWorkdir(t)
			args := []string{"playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3"}
			if cp != "" {
				args = append(args, "--control-plane", cp)
			}
			p := start(t, dir, args...)
			p.waitFor(t, "approval 'review'")
			p.stdin.Write([]byte("cancel\n"))
			p.waitFor(t, "Type yes to cancel the run") // the cancel is confirmed, as a runbook's is
			p.stdin.Write([]byte("yes\n"))
			if code := p.wait(t); code != exitCancelled {
				t.Fatalf("exit %d, want 3\n%s", code, p.output())
			}
			if strings.Count(p.output(), "Type yes (or confirm)") > 1 {
				t.Errorf("the gate asked again after cancel:\n%s", p.output())
			}
			checkPlaybookCancelled(t, filepath.Join(dir, ".rbook", "release-cut.playbook.state.json"), "")
		})
	}
}

// TestPlaybookCancelCommandWhilePaused: on a separate control
// plane, the printed approve line names it (--control-plane URL); rbook playbook cancel
// RUN_ID while the run is paused ends it cancelled there and the run's process exits 3.
func TestPlaybookCancelCommandWhilePaused(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3", "--control-plane", url)
	p.waitFor(t, "rbook playbook reject ")
	if !regexp.MustCompile(`rbook playbook approve \S+ --control-plane ` + regexp.QuoteMeta(url) + `\n`).MatchString(p.output()) {
		t.Errorf("the approve line does not name the control plane %s:\n%s", url, p.output())
	}
	statePath := filepath.Join(dir, ".rbook", "release-cut.playbook.state.json")
	st := readPlaybookState(t, statePath)
	out, code := run2(t, dir, "playbook", "cancel", st.RunID, "--control-plane", url)
	if code != exitCancelled {
		t.Fatalf("rbook playbook cancel: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != exitCancelled {
		t.Fatalf("the run's process exited %d, want 3\n%s", code, p.output())
	}
	checkPlaybookCancelled(t, statePath, "the control plane")
	if r := getRun(t, url, st.RunID).GetRun(); r.GetStatus() != rbookv1.RunStatus_RUN_STATUS_CANCELLED {
		t.Errorf("control plane status %v", r.GetStatus())
	}
}

// TestEmbeddedApproveLineSaysWhere: with the embedded control plane the
// approve line says it works from this folder while the run waits (its URL dies with it).
func TestEmbeddedApproveLineSaysWhere(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3")
	p.waitFor(t, "rbook playbook reject ")
	if !strings.Contains(p.output(), "From another terminal in this folder, while this run waits") {
		t.Errorf("embedded approve line:\n%s", p.output())
	}
	tok := playbookApproveLine.FindStringSubmatch(p.output())[1]
	if out, code := run2(t, dir, "playbook", "approve", tok); code != 0 {
		t.Fatalf("the printed command, pasted in this folder: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
}

var resumeHintRe = regexp.MustCompile(`can be resumed: (rbook playbook run [^(]*?) \(its inputs are read from the state file\) \(or end it: ([^)]*)\)`)

// TestInterruptHintIsCopyPasteable: after Ctrl-C the resume command names
// the non-default --state-file and says the inputs come from the state file, and pasted as it
// is it resumes the run; without a control plane the end hint does not offer rbook playbook
// cancel; with a separate one it names the real run id and the control plane.
func TestInterruptHintIsCopyPasteable(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	args := []string{"playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3", "--control-plane", "off", "--state-file", ".rbook/mine.json"}
	p := start(t, dir, args...)
	p.waitFor(t, "approval 'review'")
	p.cmd.Process.Signal(syscall.SIGINT)
	p.wait(t)
	m := resumeHintRe.FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no resume hint:\n%s", p.output())
	}
	if m[1] != "rbook playbook run runbooks/release.cantbook --state-file .rbook/mine.json --control-plane off" {
		t.Errorf("resume command %q", m[1])
	}
	if strings.Contains(m[2], "rbook playbook cancel") || !strings.Contains(m[2], "move .rbook/mine.json aside") {
		t.Errorf("end hint without a control plane: %q", m[2])
	}
	// Paste it: it resumes the same run (inputs from the state file) and finishes.
	id := readPlaybookState(t, filepath.Join(dir, ".rbook", "mine.json")).RunID
	words := strings.Fields(m[1])
	cmd := exec.Command(rbookBin, words[1:]...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader("yes\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RESUMING run "+id) {
		t.Fatalf("the pasted resume command: %v\n%s", err, out)
	}

	url := serveCP(t, dir)
	p = start(t, dir, "playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3", "--control-plane", url)
	p.waitFor(t, "approval 'review'")
	p.cmd.Process.Signal(syscall.SIGINT)
	p.wait(t)
	id = readPlaybookState(t, filepath.Join(dir, ".rbook", "release-cut.playbook.state.json")).RunID
	if m = resumeHintRe.FindStringSubmatch(p.output()); m == nil || m[2] != "rbook playbook cancel "+id+" --control-plane "+url {
		t.Fatalf("end hint with a control plane: %q\n%s", m, p.output())
	}
}

// TestRetryHandlerLineAndCleanGit: the fanout demo prints the retry
// handler's message when it fires, and leaves git status clean (its counter is under .rbook/).
func TestRetryHandlerLineAndCleanGit(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeTestFile(t, filepath.Join(dir, ".gitignore"), []byte(readFile(t, filepath.Join("..", "..", "..", ".gitignore"))))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "demo")
	out, code := run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off")
	if code != 0 {
		t.Fatalf("fanout demo: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "↻ prepare failed; handler retry: prepare failed on its first attempt (the demo tool is flaky on purpose); retrying\n") {
		t.Errorf("no retry line:\n%s", out)
	}
	if s := git("status", "--porcelain", "--untracked-files=all"); s != "" {
		t.Errorf("git status after the demo:\n%s", s)
	}
}

// TestRunbookCommandsNamePlaybooks: rbook validate and rbook run given a
// playbook (by extension, or a .yaml with top-level nodes) say to use rbook playbook.
func TestRunbookCommandsNamePlaybooks(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	writeTestFile(t, filepath.Join(dir, "runbooks", "fan.yaml"), []byte(readFile(t, filepath.Join(dir, "runbooks", "fanout.cantbook"))))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "runbooks/release.cantbook"}, "runbooks/release.cantbook is a playbook (.cantbook), not a runbook: use rbook playbook validate runbooks/release.cantbook"},
		{[]string{"run", "runbooks/release.cantbook"}, "runbooks/release.cantbook is a playbook (.cantbook), not a runbook: use rbook playbook run runbooks/release.cantbook"},
		{[]string{"run", "fan"}, "runbooks/fan.yaml is a playbook (.cantbook), not a runbook: use rbook playbook run runbooks/fan.yaml"},
		{[]string{"validate", "runbooks/fan.yaml"}, "use rbook playbook validate runbooks/fan.yaml"},
	} {
		out, code := run2(t, dir, tc.args...)
		if code != exitAborted || !strings.Contains(out, tc.want) || strings.Contains(out, "runbook_name") {
			t.Errorf("rbook %v: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	// Without arguments, validate checks the runbooks and skips the playbook among them.
	if out, _ := run2(t, dir, "validate"); !strings.Contains(out, "runbooks/fan.yaml: skipped (a playbook") || strings.Contains(out, "fan.yaml: ok") || !strings.Contains(out, "of 4 runbooks") {
		t.Errorf("rbook validate:\n%s", out)
	}
}

// TestMissingBindingListsKeys: a template naming a key a node's output
// lacks fails naming the keys it has.
func TestMissingBindingListsKeys(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	// Node detect echoes hello; node use, after it, templates {{ detect.nokey }}.
	writeFixture(t, filepath.Join(dir, "nokey.cantbook"), "playbooks", "nokey.cantbook")
	out, code := run2(t, dir, "playbook", "run", "nokey.cantbook", "--control-plane", "off")
	if code != exitFailed || !strings.Contains(out, `template variable \"detect.nokey\" has no binding (detect has: exit_code, stdout)`) &&
		!strings.Contains(out, `template variable "detect.nokey" has no binding (detect has: exit_code, stdout)`) {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// TestContinueNamesNotRunNodes: a continue handler keeps the run
// succeeding, and its final message and the report's outcome line name the failed node and
// every node that did not run because of it.
func TestContinueNamesNotRunNodes(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	// Node optional fails; after depends on it and later on after; other stands alone; the
	// handler on optional-failed is continue, with the message "optional is optional".
	writeFixture(t, filepath.Join(dir, "cont.cantbook"), "playbooks", "cont.cantbook")
	out, code := run2(t, dir, "playbook", "run", "cont.cantbook", "--control-plane", "off", "--report", "r.md")
	want := "completed, but 1 node(s) failed and the run went on (error handler continue): 'optional' (node_failed): optional is optional; not run because of it: 'after', 'later'"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 0 and %q:\n%s", code, want, out)
	}
	if rep := readFile(t, filepath.Join(dir, "r.md")); !strings.Contains(rep, "**Outcome:** "+want) {
		t.Errorf("report's outcome line lacks %q:\n%s", want, rep)
	}
}
