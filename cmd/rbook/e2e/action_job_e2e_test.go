//go:build unix

package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbookhq/rbook-action/action/cpclient"
	"github.com/rbookhq/rbook-action/controlplane/auth/authtest"
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
)

// Bearer tokens of the simulated job's auth file.
const (
	accAliceToken  = "acc-alice-token-0123456789"
	accBobToken    = "acc-bob-token-0123456789"
	accCarolToken  = "acc-carol-token-0123456789" // linked to octocat, the job's actor
	accViewerToken = "acc-viewer-token-0123456789"
)

// As one simulated GitHub job: node runs the Action's main.js (GITHUB_*
// file commands, INPUT_*, a local release server playing the download of the real rbook,
// checked against release.json), which runs the demo against `rbook serve`. The executor
// authenticates with the job's OIDC token from a local issuer (no static secret); the demo's
// checks are answered by an MCP server whose rows carry workflow commands; the gate needs two
// distinct approvers of group sre under the control plane's gate policy. Another process
// decides it with `rbook approve APPROVAL_ID` as alice (the gate keeps waiting: 1 of 2), as
// carol (refused: her GitHub login is the job's actor, who started the run) and as bob (the
// gate opens). The job ends 0; its outputs parse with GitHub's grammar and hold the run's
// values (approved-by names both approvers); the summary has the report and a Mermaid block;
// the log has a group per step and no command from the MCP rows acts; GetRun shows the job
// that started the run; post.js finds the run final.
func TestSimulatedJobGateDecidedByTwoApprovers(t *testing.T) {
	skipShort(t)
	node := nodeBin(t)
	fr := newFakeRelease(t)
	dir := workdir(t)
	hostile := hostileMCP(t, dir)
	os.WriteFile(filepath.Join(dir, "runbooks", "demo.mcp.json"), []byte(readFile(t, hostile)), 0o644)

	const audience = "https://rbook.example.internal"
	iss := authtest.NewIssuer(t)
	te := authtest.NewTokenEndpoint(t, iss, nil) // actor octocat, owner/repo@refs/heads/main
	oidcCfg, authFile, policy := filepath.Join(dir, "oidc.yaml"), filepath.Join(dir, "auth.txt"), filepath.Join(dir, "gates.yaml")
	writeTestFile(t, oidcCfg, []byte("issuers: ["+iss.URL+"]\ninsecure_http_issuers: true\naudience: "+audience+
		"\nrules:\n  - repository: owner/repo\n    ref: refs/heads/main\n"))
	writeTestFile(t, authFile, []byte("alice approver "+accAliceToken+" groups=sre\nbob approver "+accBobToken+" groups=sre\n"+
		"carol approver "+accCarolToken+" groups=sre github=octocat\ngrafana viewer "+accViewerToken+"\n"))
	writeTestFile(t, policy, []byte("rules:\n  - runbook: demo\n    gate: confirm-*\n    approvals: 2\n    approvers: [\"group:sre\"]\n"))
	url := serveCP(t, dir, "--oidc-config", oidcCfg, "--auth-file", authFile, "--gate-policy", policy)

	env := fr.env("INPUT_RUNBOOK=demo", "INPUT_DIR=runbooks", "INPUT_CONTROL-PLANE="+url, "INPUT_CONTROL-PLANE-TOKEN=",
		"INPUT_OIDC-AUDIENCE="+audience, "GITHUB_WORKSPACE="+dir, "GITHUB_ACTOR=octocat",
		"RBOOK_CONTROL_PLANE_AUTH=", "RBOOK_OIDC_AUDIENCE=", "RBOOK_SHOW_TOKEN=")
	env = append(env, te.Env()...)
	job := exec.Command(node, fr.entry("main.js"))
	job.Dir, job.Env = dir, env
	pr, pw, _ := os.Pipe()
	job.Stdout, job.Stderr = pw, pw // one stream, as the runner reads it
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { job.Process.Kill() })

	// Wait for the gate's announcement: "Approval id  a-…".
	var log strings.Builder
	sc := bufio.NewScanner(pr)
	id := ""
	for id == "" && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Approval id") {
			if m := approvalIDLine.FindStringSubmatch(sc.Text()); m != nil {
				id = m[1]
			}
		}
	}
	if id == "" {
		job.Wait()
		t.Fatalf("the job never announced its gate:\n%s", log.String())
	}
	out, code := runAs(t, dir, accAliceToken, "approve", id, "--control-plane", url, "--reason", "canary is green")
	if want := "approval " + id + ": 1 of 2 approvals (alice); waiting for 1 more"; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("alice: exit %d, want %q:\n%s", code, want, out)
	}
	// The job's log says, as the vote arrives, where the gate stands.
	const progress = "gate confirm-rollout: 1 of 2 approvals (alice); waiting for 1 more"
	for !strings.Contains(log.String(), progress) && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(log.String(), progress) {
		t.Fatalf("the job log never said %q:\n%s", progress, log.String())
	}
	done := make(chan struct{})
	go func() {
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	out, code = runAs(t, dir, accCarolToken, "approve", id, "--control-plane", url)
	if code != 1 || !strings.Contains(out, "E_SELF_APPROVAL") {
		t.Fatalf("carol (github=octocat, the job's actor): exit %d, want E_SELF_APPROVAL:\n%s", code, out)
	}
	out, code = runAs(t, dir, accBobToken, "approve", id, "--control-plane", url, "--reason", "ship it")
	if code != 0 || !strings.Contains(out, "approved by alice, bob.") {
		t.Fatalf("bob: exit %d:\n%s", code, out)
	}
	err := job.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the job's output did not end")
	}
	if err != nil {
		t.Fatalf("main.js: %v (want exit 0)\n%s", err, log.String())
	}
	jobLog := log.String()
	st := readState(t, dir)

	// Outputs, with GitHub's grammar.
	outs := parseOutputs(t, readFile(t, fr.path("github_output")))
	want := map[string]string{
		"run-id": st.RunID, "status": "COMPLETED", "report-path": filepath.Join(fr.root, "rbook", "demo.report.md"),
		"evidence-path":    filepath.Join(".rbook", st.RunID+".evidence.json"),
		"attestation-path": "", // its control plane has no signing key
		"approval-id":      id, "approved-by": "alice, bob", "approval-comment": "ship it", "approval-status": "approved",
	}
	for k, w := range want {
		if outs[k] != w {
			t.Errorf("output %s = %q, want %q", k, outs[k], w)
		}
	}
	if rep := readFile(t, want["report-path"]); !strings.Contains(rep, "# Runbook Execution Report") {
		t.Errorf("report-path holds no report:\n%s", rep)
	}

	// The job summary: the gate's announcement, the report and the graph.
	sum := readFile(t, fr.path("summary.md"))
	// At the end the report replaces the gate's announcement; the Gates table has the
	// decision and the Votes table every vote.
	for _, w := range []string{"# Runbook Execution Report", "```mermaid\nflowchart TD\n",
		"| 5 | `confirm-rollout` | " + id + " | approved | alice, bob | ship it |",
		"| `confirm-rollout` | alice | approve | canary is green | yes |", "| `confirm-rollout` | bob | approve | ship it | yes |"} {
		if !strings.Contains(sum, w) {
			t.Errorf("the job summary lacks %q:\n%s", w, sum)
		}
	}
	if strings.Contains(sum, "waits for a decision") || strings.Count(sum, "## Steps") != 1 {
		t.Errorf("the job summary keeps the gate's block or has two ## Steps:\n%s", sum)
	}
	// The announcement: what the gate needs and who may give it, the approver's command, no
	// terminal prompt, and (the executor authenticates with OIDC) no unauthenticated note.
	for _, w := range []string{"  Needs          2 approvals from group:sre; not from whoever started the run\n",
		"  Approve        RBOOK_TOKEN=<your approver token> rbook approve " + id + " --control-plane " + url + "\n"} {
		if !strings.Contains(jobLog, w) {
			t.Errorf("the job log lacks %q:\n%s", w, jobLog)
		}
	}
	if strings.Contains(jobLog, "Type yes") || strings.Contains(jobLog, "  Note ") {
		t.Errorf("the job log has the terminal prompt or the unauthenticated note:\n%s", jobLog)
	}

	// The log as the runner processes it: one group per step, nothing from the MCP rows acts.
	acted, _ := actedCommands(jobLog)
	groups := 0
	for _, c := range acted {
		switch {
		case strings.HasPrefix(c, "add-mask::x"), strings.HasPrefix(c, "add-mask::y"), strings.HasPrefix(c, "error::pwned"):
			t.Errorf("a command from the MCP rows acted: %q", c)
		case strings.HasPrefix(c, "group::step "):
			groups++
		}
	}
	if groups != st.TotalSteps {
		t.Errorf("%d log groups for %d steps:\n%s", groups, st.TotalSteps, jobLog)
	}
	if !strings.Contains(jobLog, "downloaded and verified (SHA-256 ") {
		t.Errorf("main.js did not say it verified the download:\n%s", jobLog)
	}

	// The control plane's record: the job that started the run, both votes.
	c := cpclient.New(url, accViewerToken)
	resp, gerr := c.Runs.GetRun(context.Background(), &rbookv1.GetRunRequest{RunId: st.RunID})
	if gerr != nil {
		t.Fatal(gerr)
	}
	checkTransitions(t, resp, rbookv1.RunStatus_RUN_STATUS_SUCCEEDED)
	if run := resp.GetRun(); run.GetStartedBy() != "oidc:owner/repo@refs/heads/main" || run.GetStartedByJob().GetActor() != "octocat" ||
		run.GetStartedByJob().GetRunId() != "1234567890" {
		t.Errorf("started_by %q, started_by_job %v", run.GetStartedBy(), run.GetStartedByJob())
	}
	ga, gerr := c.Approvals.GetApproval(context.Background(), &rbookv1.GetApprovalRequest{ApprovalId: id})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if a := ga.GetApproval(); a.GetStatus() != rbookv1.ApprovalStatus_APPROVAL_STATUS_APPROVED || a.GetApprovalsRequired() != 2 ||
		len(a.GetVotes()) != 2 || a.GetVotes()[0].GetApprover() != "alice" || a.GetVotes()[1].GetApprover() != "bob" {
		t.Errorf("GetApproval = %v", a)
	}
	if n := te.Requests.Load(); n < 1 {
		t.Errorf("the runner's token endpoint minted %d OIDC tokens", n)
	}
	if strings.Contains(jobLog, "eyJhbGciOiJSUzI1NiI") {
		t.Errorf("an OIDC token reached the job log")
	}

	// post: the run is final, nothing to withdraw.
	post := exec.Command(node, fr.entry("post.js"))
	post.Dir, post.Env = dir, fr.postEnv(t, env)
	pout, perr := post.CombinedOutput()
	if perr != nil || !strings.Contains(string(pout), "run "+st.RunID+" is COMPLETED; nothing to withdraw.") {
		t.Fatalf("post.js: %v\n%s", perr, pout)
	}
}
