package e2e

// Playbook runs that are about processes (a DAG overlapping, an inject loop killed and
// resumed, a policy that needs a human), each proved with
// the built binary against a real `rbook serve` on 127.0.0.1, reading the control plane back
// (GetRun over the Connect client, and the SQLite rows read-only).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rbookhq/rbook-action/action/cpclient"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// nodeSpan is one execution of a node as the control plane recorded it: the times and seqs
// of its step_started and step_finished transitions.
type nodeSpan struct {
	start, end       time.Time
	startSeq, endSeq int64
	status           string
}

// nodeSpans collects every execution of every node from a run's recorded transitions, in
// order. A step_finished without a step_started (a when-skipped or not-run node) is a span
// with zero start.
func nodeSpans(resp *rbookv1.GetRunResponse) map[string][]nodeSpan {
	spans := map[string][]nodeSpan{}
	open := map[string]int{}
	for _, tr := range resp.GetTransitions() {
		name := tr.GetStepName()
		switch tr.GetKind() {
		case rbookv1.TransitionKind_TRANSITION_KIND_STEP_STARTED:
			spans[name] = append(spans[name], nodeSpan{start: tr.GetTime().AsTime(), startSeq: tr.GetSeq()})
			open[name] = len(spans[name]) - 1
		case rbookv1.TransitionKind_TRANSITION_KIND_STEP_FINISHED:
			i, ok := open[name]
			if !ok {
				spans[name] = append(spans[name], nodeSpan{})
				i = len(spans[name]) - 1
			}
			delete(open, name)
			spans[name][i].end, spans[name][i].endSeq = tr.GetTime().AsTime(), tr.GetSeq()
			spans[name][i].status = tr.GetEvidence().GetStatus().String()
		}
	}
	return spans
}

// openCPDB opens the control plane's SQLite file read-only (the server keeps serving it).
func openCPDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestDiamondBranchesOverlap: a → b, a → c, b+c → d, where b and c each
// create a marker and wait (bounded) for the other's, so both pass only if they ran at the
// same time; with the default concurrency the control plane's recorded transitions show b's
// and c's [step_started, step_finished] intervals overlapping, and d started once, after both
// finished.
func TestDiamondBranchesOverlap(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	// testdata/playbooks/diamond.cantbook: each branch waits at most 30 s (600 × 50 ms) for its
	// sibling's marker, then fails.
	writeFixture(t, filepath.Join(dir, "diamond.cantbook"), "playbooks", "diamond.cantbook")
	out, code := run2(t, dir, "playbook", "run", "diamond.cantbook", "--control-plane", url)
	if code != 0 {
		t.Fatalf("diamond: exit %d\n%s", code, out)
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "diamond.playbook.state.json"))
	resp := getRun(t, url, st.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	spans := nodeSpans(resp)
	for _, n := range []string{"a", "b", "c", "d"} {
		if len(spans[n]) != 1 || spans[n][0].startSeq == 0 || spans[n][0].status != "STEP_STATUS_PASS" {
			t.Fatalf("node %s executions on the control plane: %+v, want one PASS", n, spans[n])
		}
		if got := strings.Count(readFile(t, filepath.Join(dir, n+".count")), "ran"); got != 1 {
			t.Errorf("node %s ran %d times, want 1", n, got)
		}
	}
	a, b, c, d := spans["a"][0], spans["b"][0], spans["c"][0], spans["d"][0]
	if b.startSeq < a.endSeq || c.startSeq < a.endSeq {
		t.Errorf("b (started seq %d) or c (started seq %d) started before a finished (seq %d)", b.startSeq, c.startSeq, a.endSeq)
	}
	// Overlap, by the recorded order and by the recorded times: each started before the
	// other finished.
	if !(b.startSeq < c.endSeq && c.startSeq < b.endSeq) {
		t.Errorf("b [seq %d, %d] and c [seq %d, %d] do not overlap", b.startSeq, b.endSeq, c.startSeq, c.endSeq)
	}
	if !(b.start.Before(c.end) && c.start.Before(b.end)) {
		t.Errorf("b [%s, %s] and c [%s, %s] do not overlap in time", b.start, b.end, c.start, c.end)
	}
	if d.startSeq < max(b.endSeq, c.endSeq) || d.start.Before(b.end) || d.start.Before(c.end) {
		t.Errorf("d started (seq %d, %s) before b (seq %d, %s) and c (seq %d, %s) both finished", d.startSeq, d.start, b.endSeq, b.end, c.endSeq, c.end)
	}
	if ic := resp.GetRun().GetPlaybook().GetIterationCounts(); ic["b"] != 1 || ic["c"] != 1 || ic["d"] != 1 {
		t.Errorf("control plane iteration_counts %v", ic)
	}
}

// TestInjectIntoEndsAtIterationCapThenKillResume: (1) a node that always
// fails with on_failure.inject_into (max_iterations 3) ends the run failed with
// iteration_cap_exceeded after exactly 3 executions of it (and 3 of the injection target:
// once as a dependency, twice injected), as the marker files, the control plane's
// iteration_counts and playbook_runs.error_context say; (2) kill -9 during a slow node after
// an earlier node was recorded, then rbook playbook run again: it resumes (RESUMING), asks for
// --rerun-node for the node in unknown state, and with it finishes the run on the control
// plane without running the recorded node again (its marker count stays 1).
func TestInjectIntoEndsAtIterationCapThenKillResume(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	url := serveCP(t, dir)
	// Node fix passes; node broken, after it, always fails and injects into fix, at most 3 times.
	writeFixture(t, filepath.Join(dir, "inject.cantbook"), "playbooks", "inject.cantbook")
	out, code := run2(t, dir, "playbook", "run", "inject.cantbook", "--control-plane", url)
	if code != 1 || !strings.Contains(out, "iteration_cap_exceeded") {
		t.Fatalf("inject: exit %d, want 1 naming iteration_cap_exceeded\n%s", code, out)
	}
	for f, want := range map[string]int{"fix.count": 3, "broken.count": 3} {
		if n := strings.Count(readFile(t, filepath.Join(dir, f)), "ran"); n != want {
			t.Errorf("%s: %d executions, want %d", f, n, want)
		}
	}
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "inject.playbook.state.json"))
	resp := getRun(t, url, st.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_FAILED)
	if ic := resp.GetRun().GetPlaybook().GetIterationCounts(); ic["broken"] != 3 || ic["fix"] != 3 {
		t.Errorf("control plane iteration_counts %v, want broken 3, fix 3", ic)
	}
	if n := len(nodeSpans(resp)["broken"]); n != 3 {
		t.Errorf("control plane holds %d executions of broken, want 3", n)
	}
	var status, errCtx string
	if err := openCPDB(t, filepath.Join(dir, "cp.db")).QueryRow(`SELECT status, COALESCE(error_context, '') FROM playbook_runs WHERE run_id = ?`, st.RunID).Scan(&status, &errCtx); err != nil {
		t.Fatal(err)
	}
	var ec map[string]any
	if err := json.Unmarshal([]byte(errCtx), &ec); err != nil || status != "failed" || ec["node"] != "broken" || !strings.Contains(fmt.Sprint(ec["message"]), "(iteration_cap_exceeded)") {
		t.Errorf("playbook_runs: status %q, error_context %s (%v); want failed at broken with iteration_cap_exceeded", status, errCtx, err)
	}

	// (2) kill -9 mid-run, then the same command again.
	writeSlowPlaybook(t, dir)
	args := []string{"playbook", "run", "slow.cantbook", "--control-plane", url}
	p := start(t, dir, args...)
	killInSlowNode(t, p, dir)
	statePath := filepath.Join(dir, ".rbook", "slow.playbook.state.json")
	st = readPlaybookRun(t, statePath)
	if len(st.InFlightNodes) != 1 || st.InFlightNodes[0].StepName != "slow" {
		t.Fatalf("after kill -9, in_flight_nodes = %v, want slow", st.InFlightNodes)
	}
	// The control plane may lag behind the state file (its outbox is sent on resume), but the
	// run is not final there.
	if got := getRun(t, url, st.RunID).GetRun().GetStatus(); got != rbookv1.RunStatus_RUN_STATUS_RUNNING {
		t.Fatalf("after kill -9 the control plane has run %s %v, want running", st.RunID, got)
	}
	rerunSlowNode(t, dir, args, st.RunID)
	resp = getRun(t, url, st.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	spans := nodeSpans(resp)
	if len(spans["first"]) != 1 || len(spans["last"]) != 1 {
		t.Errorf("control plane executions: first %d, last %d; want 1 each", len(spans["first"]), len(spans["last"]))
	}
	if ic := resp.GetRun().GetPlaybook().GetIterationCounts(); ic["first"] != 1 || ic["slow"] != 2 || ic["last"] != 1 {
		t.Errorf("control plane iteration_counts %v, want first 1, slow 2, last 1", ic)
	}
}

// TestPolicyGitPushNeedsHumanAndIsInEvidence: rbook serve --playbook-policy
// FILE whose first rule auto-approves everything: a gate guarding a deterministic node that
// runs `git push origin main` (a stub git in the playbook's bin/ that only records its args)
// still waits for a human — the approval is pending, its policy says require-human and names
// default-git-push; approved by a person, the node's evidence output and the approval row
// carry the decision (rule, reason, auto_passed 0) and the stub saw the push. A rule that
// fails to evaluate, on another server, makes a read-only gate the defaults would pass wait
// for a human too, saying which rule failed.
func TestPolicyGitPushNeedsHumanAndIsInEvidence(t *testing.T) {
	skipShort(t)
	dir := playbookWorkdir(t)
	pb := filepath.Join(dir, "pb")
	if err := os.MkdirAll(filepath.Join(pb, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(pb, "bin", "git"), []byte("#!/bin/sh\necho \"$@\" >> git.args\necho '{\"pushed\": true}'\n"))
	if err := os.Chmod(filepath.Join(pb, "bin", "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Approval node ship, then git push origin main; allow-all.yaml's one rule auto-approves
	// every gate.
	writeFixture(t, filepath.Join(pb, "push.cantbook"), "playbooks", "push.cantbook")
	writeFixture(t, filepath.Join(dir, "allow-all.yaml"), "policy", "allow-all.yaml")
	url := serveCP(t, dir, "--playbook-policy", filepath.Join(dir, "allow-all.yaml"))
	t.Setenv("RBOOK_SHOW_TOKEN", "1")
	p := start(t, dir, "playbook", "run", "pb/push.cantbook", "--control-plane", url)
	p.waitFor(t, "rbook playbook approve ")
	tok := playbookApproveLine.FindStringSubmatch(p.output())[1]
	st := readPlaybookState(t, filepath.Join(dir, ".rbook", "push.playbook.state.json"))
	c := cpclient.New(url, "")
	aps, err := c.Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: st.RunID})
	if err != nil || len(aps.GetApprovals()) != 1 {
		t.Fatalf("approvals of run %s: %v %v", st.RunID, aps.GetApprovals(), err)
	}
	a := aps.GetApprovals()[0]
	pol := a.GetPolicy()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || a.GetAutoPassed() || pol.GetAutoPassed() ||
		pol.GetAction() != "require-human" || pol.GetRule() != "default-git-push" {
		t.Fatalf("the git push gate: status %v auto_passed %v policy %+v; want pending, require-human by default-git-push", a.GetStatus(), a.GetAutoPassed(), pol)
	}
	if got := getRun(t, url, st.RunID).GetRun().GetStatus(); got != rbookv1.RunStatus_RUN_STATUS_PAUSED {
		t.Errorf("run at the gate is %v, want paused", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "git.args")); !os.IsNotExist(err) {
		t.Fatalf("git ran before the gate was decided: %v", err)
	}
	if out, code := run2(t, dir, "playbook", "approve", tok, "--control-plane", url, "--reason", "release day"); code != 0 {
		t.Fatalf("rbook playbook approve: exit %d\n%s", code, out)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("run exit %d after the approval\n%s", code, p.output())
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "git.args"))); got != "push origin main" {
		t.Errorf("the stub git got %q, want push origin main", got)
	}
	resp := getRun(t, url, st.RunID)
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	var ev map[string]any
	for _, tr := range resp.GetTransitions() {
		if e := tr.GetEvidence(); e != nil && e.GetStepName() == "ship" {
			if err := json.Unmarshal([]byte(e.GetOutput()), &ev); err != nil {
				t.Fatalf("ship's evidence output %q: %v", e.GetOutput(), err)
			}
		}
	}
	if ev["approved"] != true || ev["auto_passed"] != false || ev["rule"] != "default-git-push" || !strings.Contains(ev["reason"].(string), "release day") {
		t.Errorf("ship's evidence output %v lacks the human decision and the policy's rule", ev)
	}
	var status, approver, src, policyJSON string
	var auto int
	if err := openCPDB(t, filepath.Join(dir, "cp.db")).QueryRow(`SELECT status, auto_passed, COALESCE(approver, ''), COALESCE(decided_by_source, ''), COALESCE(policy_json, '') FROM playbook_approvals WHERE run_id = ? AND node_id = 'ship'`, st.RunID).
		Scan(&status, &auto, &approver, &src, &policyJSON); err != nil {
		t.Fatal(err)
	}
	var rowPolicy map[string]any
	json.Unmarshal([]byte(policyJSON), &rowPolicy)
	if status != "approved" || auto != 0 || src == "policy" || rowPolicy["rule"] != "default-git-push" || rowPolicy["action"] != "require-human" || rowPolicy["auto_passed"] == true ||
		!strings.Contains(rowPolicy["reason"].(string), "git push") {
		t.Errorf("playbook_approvals row: status %q auto_passed %d approver %q source %q policy %s", status, auto, approver, src, policyJSON)
	}

	// A rule that fails to evaluate (bindings has no key nope) requires a human, even for a
	// gate the default rules would pass (approval node check guards only pnpm run lint).
	// broken-rule.yaml's one rule reads bindings.nope.deeper.
	writeFixture(t, filepath.Join(pb, "lint.cantbook"), "playbooks", "lint.cantbook")
	writeFixture(t, filepath.Join(dir, "broken.yaml"), "policy", "broken-rule.yaml")
	dir2 := t.TempDir()
	url2 := serveCP(t, dir2, "--playbook-policy", filepath.Join(dir, "broken.yaml"))
	p2 := start(t, dir, "playbook", "run", "pb/lint.cantbook", "--control-plane", url2)
	p2.waitFor(t, "rbook playbook approve ")
	st2 := readPlaybookState(t, filepath.Join(dir, ".rbook", "lint.playbook.state.json"))
	aps, err = cpclient.New(url2, "").Approvals.ListApprovals(context.Background(), &rbookv1.ListApprovalsRequest{RunId: st2.RunID})
	if err != nil || len(aps.GetApprovals()) != 1 {
		t.Fatalf("approvals of run %s: %v %v", st2.RunID, aps.GetApprovals(), err)
	}
	a = aps.GetApprovals()[0]
	pol = a.GetPolicy()
	if a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_PENDING || pol.GetAutoPassed() || pol.GetAction() != "require-human" ||
		pol.GetRule() != "broken-rule" || !strings.Contains(pol.GetReason(), "failed to evaluate") {
		t.Errorf("the gate behind a failing rule: status %v policy %+v; want pending, require-human naming broken-rule", a.GetStatus(), pol)
	}
}
