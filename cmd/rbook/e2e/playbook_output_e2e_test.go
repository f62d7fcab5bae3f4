//go:build unix

package e2e

// What a person sees of a playbook run: progress and status blocks say node,
// a gate the policy passes does not say the run is paused and says its reason once, and the
// final report says Playbook with the playbook status words. Runbook output is unchanged
// (docs/spec/runbooks.md, "Output contract"; TestDemoApproved holds them).

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	pipeline "github.com/rbookhq/rbook-action/action/run"

	"github.com/rbookhq/rbook-action/action/engine"
	"github.com/rbookhq/rbook-action/action/report"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// TestPlaybookMarkdownOutputSaysNode: the fanout demo piped (Markdown output):
// "▶ node 2/9 · deterministic 'lint'" progress lines (no "step … (index n)"), "### ✅ Node 2/9 ·
// lint" status blocks, the auto-passed gate's decision line once with its reason once and no
// "is paused" line, and the report "# Playbook Execution Report" with Playbook, Nodes,
// Playbook hash and the status word succeeded.
func TestPlaybookMarkdownOutputSaysNode(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	out, code := run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off")
	if code != 0 {
		t.Fatalf("fanout: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"\n▶ node 2/9 · deterministic 'lint' · timeout 300s · elapsed ",
		"\n### ✅ Node 2/9 · lint (deterministic) · PASS\n",
		"\n### ⏭️ Node 7/9 · nightly-notes (deterministic) · SKIPPED\n",
		"\nGate 'ship-check' auto-passed by policy rule default-read-only: only read-only or QA commands, no agentic node\n",
		"\n# Playbook Execution Report\n",
		"\n| Playbook | fanout-demo (`runbooks/fanout.cantbook`) |\n",
		"\n| Status | **succeeded** |\n",
		"\n| Nodes | 9 in the playbook: 8 passed, 0 failed, 0 timed out, 1 skipped, 0 not run |\n",
		"\n| Playbook hash | `",
		"\n## Nodes\n\n| # | Node | Type | Status | At |\n",
		"\n## Playbook graph\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"▶ step ", "(index ", "### ✅ Step", "# Runbook Execution Report", "| Runbook |", "**COMPLETED**", "is paused at approval node", "approved by policy via policy"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	line := regexp.MustCompile(`(?m)^Gate 'ship-check' .*$`).FindAllString(out, -1)
	if len(line) != 1 || strings.Count(line[0], "only read-only or QA commands") != 1 {
		t.Errorf("the gate's decision lines %q: want one, with the policy's reason once", line)
	}
}

// TestPlaybookTextLinesSayNode: -o json prints the text lines on stderr, as on a
// terminal: "✓ node 2 of 9  lint  deterministic  PASS", the auto-passed gate's line names the
// rule, and no "⏸ … paused" line for it.
func TestPlaybookTextLinesSayNode(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	out, code := run2(t, dir, "playbook", "run", "runbooks/fanout.cantbook", "--control-plane", "off", "-o", "json")
	if code != 0 {
		t.Fatalf("fanout -o json: exit %d\n%s", code, out)
	}
	for _, re := range []string{
		`(?m)^✓ node 2 of 9  lint +deterministic  PASS +\d+(\.\d+)?m?s$`,
		`(?m)^✓ node 8 of 9  ship-check +approval +PASS +\d+(\.\d+)?m?s  auto-passed by policy rule default-read-only$`,
		`(?m)^↷ node 7 of 9  nightly-notes +deterministic  SKIPPED .*skipped: when package.channel`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks a line matching %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "step 2 of 9") || strings.Contains(out, "⏸") {
		t.Errorf("output says step or paused:\n%s", out)
	}
}

// TestHumanGateSaysPaused: a gate that needs a person (release.cantbook's
// review guards an agentic node, which no default rule auto-passes) says the run is paused, once, at the
// node; a person's decision line is the usual "approved by … via …".
func TestHumanGateSaysPaused(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	out, code := run(t, dir, "yes\n", "playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3", "--control-plane", "off")
	if code != 0 {
		t.Fatalf("release: exit %d\n%s", code, out)
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "release-cut.playbook.state.json"))
	if n := strings.Count(out, "Run "+st.RunID+" is paused at approval node 'review'.\n"); n != 1 {
		t.Errorf("the paused line appears %d times, want 1:\n%s", n, out)
	}
	if !regexp.MustCompile(`(?m)^Gate 'review' approved by \S+ via terminal; policy: a person decides \(no auto-pass rule matched\)$`).MatchString(out) {
		t.Errorf("decision line:\n%s", out)
	}
}

// TestReportKeepsRunbookWords: the same report data renders the specification's runbook
// report byte-for-byte (ReportHeading, Runbook, Steps, the state file's status) unless
// Playbook is set, and a node status block says Node only when Node is set.
func TestReportKeepsRunbookWords(t *testing.T) {
	skipShort(t)
	rend, err := report.New("")
	if err != nil {
		t.Fatal(err)
	}
	d := report.Report{RunID: "R1", RunbookName: "demo", RunbookPath: "runbooks/demo.yaml", RunStatus: engine.RunCompleted, StartedUTC: "s", TotalSteps: 1,
		SchemaHash8: "abcd1234", RunbookHash: "ff", Steps: []report.StepRef{{Name: "a", Type: "check"}}}
	rb, err := rend.RenderReport(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rb, report.ReportHeading+"\n") || !strings.Contains(rb, "| Runbook | demo (`runbooks/demo.yaml`) |\n| Status | **COMPLETED** |") || !strings.Contains(rb, "| Runbook hash | `ff` |") || strings.Contains(rb, "Playbook") {
		t.Errorf("runbook report:\n%s", rb)
	}
	d.Playbook, d.StatusWord = true, "succeeded"
	pb, err := rend.RenderReport(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pb, report.PlaybookReportHeading+"\n") || !strings.Contains(pb, "| Playbook | demo (`runbooks/demo.yaml`) |\n| Status | **succeeded** |") || !strings.Contains(pb, "| Playbook hash | `ff` |") || strings.Contains(pb, "Runbook") {
		t.Errorf("playbook report:\n%s", pb)
	}
	ss := report.StepStatus{RunID: "R1", Number: 1, Count: 1, Entry: engine.Evidence{StepName: "a", Type: "check", Status: engine.StatusPass}}
	if s, _ := rend.RenderStepStatus(ss); !strings.HasPrefix(s, "### ✅ Step 1/1 · a (check) · PASS\n") {
		t.Errorf("runbook step status %q", s)
	}
	ss.Node = true
	if s, _ := rend.RenderStepStatus(ss); !strings.HasPrefix(s, "### ✅ Node 1/1 · a (check) · PASS\n") {
		t.Errorf("node status %q", s)
	}
	// An override of the playbook report must keep its heading.
	tdir := t.TempDir()
	os.MkdirAll(filepath.Join(tdir, "templates"), 0o755)
	os.WriteFile(filepath.Join(tdir, report.PlaybookReportFile), []byte("# Runbook Execution Report\n"), 0o600)
	if _, err := report.New(tdir); err == nil || !strings.Contains(err.Error(), report.PlaybookReportHeading) {
		t.Errorf("an override without the playbook heading: %v", err)
	}
}

// TestGitHubPostFinishesAKilledPlaybookRun: the Action's post step (`rbook github post
// --playbook FILE`) does for a playbook run what it does for a runbook run: a run killed
// (kill -9) while its approval node waits has its outbox delivered, run_interrupted recorded
// on the control plane and its pending approval withdrawn (cancelled, decided_by_source
// interrupted), so its token no longer approves; post again withdraws nothing; the resumed run
// opens the node again, and post after the final run has nothing to withdraw. A playbook
// whose run never started has no run to finish.
func TestGitHubPostFinishesAKilledPlaybookRun(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	out, code := run2(t, dir, "github", "post", "--playbook", "runbooks/release.cantbook", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "no run to finish: "+filepath.Join(".rbook", "release-cut.playbook.state.json")+" does not exist") {
		t.Fatalf("post before any run: exit %d\n%s", code, out)
	}
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "runbooks/release.cantbook", "--input", "version=1.2.3", "--control-plane", url)
	p.waitFor(t, "rbook playbook approve ")
	tok := playbookApproveLine.FindStringSubmatch(p.output())[1]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "release-cut.playbook.state.json"))
	pending := approvalsOf(t, url, st.RunID)
	if len(pending) != 1 || pending[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || pending[0].GetStepName() != "review" {
		t.Fatalf("before post: %v", pending)
	}
	id := pending[0].GetApprovalId()
	out, code = run2(t, dir, "github", "post", "--playbook", "runbooks/release.cantbook", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "Withdrawn approval "+id+" (gate 'review' of run "+st.RunID+")\n") ||
		!strings.Contains(out, "Resume it with: rbook playbook run runbooks/release.cantbook") || strings.Contains(out, tok) {
		t.Fatalf("rbook github post --playbook: exit %d\n%s", code, out)
	}
	if a := approvalsOf(t, url, st.RunID)[0]; a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_CANCELLED || a.GetDecidedBySource() != "interrupted" {
		t.Fatalf("the approval after post: %v", a)
	}
	ts := getRun(t, url, st.RunID).GetTransitions()
	if last := ts[len(ts)-1]; last.GetKind() != rbookv1.TransitionKind_TRANSITION_KIND_RUN_INTERRUPTED || last.GetStepName() != "review" || last.GetMessage() != pipeline.PostInterruptedMessage {
		t.Fatalf("last transition on the control plane: %v", last)
	}
	if after := readPlaybookState(t, filepath.Join(dir, ".rbook", "release-cut.playbook.state.json")); after.Interrupted == nil || len(after.Outbox) != 0 {
		t.Fatalf("state after post: interrupted %v, outbox %d", after.Interrupted, len(after.Outbox))
	}
	if out, code := run2(t, dir, "playbook", "approve", tok, "--control-plane", url); code == 0 {
		t.Fatalf("the withdrawn node's token still approves:\n%s", out)
	}
	out, code = run2(t, dir, "github", "post", "--playbook", "runbooks/release.cantbook", "--control-plane", url)
	if code != 0 || strings.Contains(out, "Withdrawn approval") || !strings.Contains(out, "; 0 pending approval(s) withdrawn") {
		t.Fatalf("post again: exit %d\n%s", code, out)
	}
	if n := len(getRun(t, url, st.RunID).GetTransitions()); n != len(ts) {
		t.Fatalf("post again recorded %d more transitions", n-len(ts))
	}
	out, code = run(t, dir, "yes\n", "playbook", "run", "runbooks/release.cantbook", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "RESUMING run "+st.RunID) {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if all := approvalsOf(t, url, st.RunID); len(all) != 2 || all[0].GetApprovalId() == id || all[0].GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED {
		t.Fatalf("after resume: %v", all)
	}
	if ic := getRun(t, url, st.RunID).GetRun().GetPlaybook().GetIterationCounts(); ic["build"] != 1 || ic["test"] != 1 || ic["publish"] != 1 {
		t.Errorf("iteration_counts after the resume %v: a recorded node ran again", ic)
	}
	out, code = run2(t, dir, "github", "post", "--playbook", "runbooks/release.cantbook", "--control-plane", url)
	if code != 0 || !strings.Contains(out, "is succeeded; nothing to withdraw") {
		t.Fatalf("post after the final run: exit %d\n%s", code, out)
	}
}
